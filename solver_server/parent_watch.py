"""End the server when the process that started it ends (``--parent-pid``).

A local solver belongs to one Blender session. Blender does not always run its exit handlers (a crash,
``os._exit``, SIGKILL), and then nobody stops the server it started; so the server watches that process
itself and shuts down once it is gone, however it ended.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable

log = logging.getLogger("tangle.server")

POLL_S = 0.5            # [s] between checks of the parent
EXIT_GRACE_S = 5.0      # [s] an orderly shutdown may take before the process exits regardless


def process_alive(pid: int) -> bool:
    """True while the process ``pid`` exists (and, on POSIX, has not yet been reaped)."""
    if pid <= 0:
        return False
    if sys.platform == "win32":
        import ctypes  # noqa: PLC0415

        synchronize, wait_timeout = 0x00100000, 0x00000102
        kernel32 = ctypes.windll.kernel32
        handle = kernel32.OpenProcess(synchronize, False, pid)
        if not handle:
            return False
        try:
            return kernel32.WaitForSingleObject(handle, 0) == wait_timeout
        finally:
            kernel32.CloseHandle(handle)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True            # exists, owned by someone else
    return True


def parent_gone(pid: int, was_parent: bool) -> bool:
    """Whether the watched process ``pid`` has ended. ``was_parent``: it was this process's parent at start;
    then being handed to another parent (POSIX re-parenting when the parent dies, even as an unreaped
    zombie) counts as gone too."""
    if was_parent and sys.platform != "win32" and os.getppid() != pid:
        return True
    return not process_alive(pid)


def watch_parent(pid: int, on_gone: Callable[[], None], poll_s: float = POLL_S) -> threading.Thread:
    """Start a daemon thread that calls ``on_gone()`` once process ``pid`` has ended, then, should the process
    still be running ``EXIT_GRACE_S`` later, ends it with ``os._exit(0)``. Returns the thread."""
    was_parent = sys.platform != "win32" and os.getppid() == pid
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(poll_s):
            if parent_gone(pid, was_parent):
                log.info("the process %d that started this server has ended; shutting down", pid)
                on_gone()
                if not stop.wait(EXIT_GRACE_S):
                    os._exit(0)
                return

    thread = threading.Thread(target=watch, name="tangle-parent-watch", daemon=True)
    thread.start()
    return thread
