"""What one Blender session keeps between operators, panels and the preferences: the local solver server it
started, the bake running now and the solver set-up running now. Every module that needs them reads them
here, so none of those modules imports another to reach its state (this module imports no add-on UI)."""

from __future__ import annotations

import atexit

from .core.local_server import LocalServer, check_interpreter

STARTUP_TIMEOUT_S = 180.0   # [s] the first start on a machine compiles the kernels before listening (~26 s idle)

_local_server: LocalServer | None = None
_active_bake = None          # the BakeSession of the bake running in this session (at most one)
_running_setup = None        # (SolverSetup, progress) of the solver set-up running now


def running_local_server() -> LocalServer | None:
    """The local solver server this session started, while it runs."""
    return _local_server if _local_server is not None and _local_server.running else None


def ensure_local_server(python: str, extra_paths: tuple[str, ...], device: str) -> LocalServer:
    """The local solver server of this session, started now with ``python`` (and ``extra_paths`` on its
    PYTHONPATH, on ``device``) if none runs. Raises LocalServerError when it cannot start."""
    global _local_server
    server = running_local_server()
    if server is not None:
        return server
    check_interpreter(python, extra_paths)
    server = LocalServer(python=python, startup_timeout=STARTUP_TIMEOUT_S, device=device, extra_paths=extra_paths)
    server.start()
    _local_server = server
    return server


def stop_local_server() -> int | None:
    """Stop the server this session started (no-op when none); returns its exit code."""
    global _local_server
    server, _local_server = _local_server, None
    return server.stop() if server is not None else None


atexit.register(stop_local_server)


def active_session():
    """The bake running in this session (a BakeSession), or None once it has finished."""
    return _active_bake if _active_bake is not None and not _active_bake.finished else None


def last_session():
    """The latest bake of this session, finished or not (None before the first)."""
    return _active_bake


def set_active_session(session) -> None:
    global _active_bake
    _active_bake = session


def setup_in_progress():
    """The progress of the solver set-up running now (None when none runs)."""
    return _running_setup[1] if _running_setup is not None else None


def running_setup():
    """(SolverSetup, progress) of the set-up running now, or None."""
    return _running_setup


def set_running_setup(running) -> None:
    global _running_setup
    _running_setup = running


def cancel_running_setup() -> None:
    """Stop a set-up still running (the add-on is being disabled)."""
    if _running_setup is not None:
        _running_setup[0].cancel()
