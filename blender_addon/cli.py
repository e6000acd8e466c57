"""Command line of the add-on, using the ``bpy`` module (no Blender UI):

    python -m blender_addon.cli demo --out out
        start a local solver server, build and bake the demo scene, write out/demo.blend,
        Workbench previews out/preview_NNNN.png and out/contact_sheet.png, stop the server.
    python -m blender_addon.cli bake shot.blend [--address tcp://HOST:PORT | --local-server] [--output baked.blend]
            [--timeout S] [--resume] [--server-key server.key --client-key NAME.key_secret]
        bake a saved .blend (headless farm bake) and save it; exit code 0 when every frame was baked,
        1 on any failure (with a message on stderr), 2 on bad arguments, 130 / 143 when Ctrl-C (SIGINT) /
        SIGTERM cancelled it. Progress: a redrawn bar on a terminal, a line every tenth of the range (or
        10 s) in a log. The file is saved on failure and cancel too (frames baked so far are kept), so
        ``--resume`` on a retry continues where it stopped. A second Ctrl-C stops without waiting for
        the server to confirm the cancel (the frames received are still saved).

Inside a real Blender (the extension installed and enabled), the same bake is the operator
``tangle.farm_bake``; ``--python-exit-code 1`` turns its failure into a non-zero exit code:

    blender -b shot.blend --python-exit-code 1 --python-expr \
        "import bpy; bpy.ops.tangle.farm_bake(address='tcp://gpu-box:5555', resume=True)"
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time
from pathlib import Path

# exit codes of a bake cancelled by a signal (the shell's 128 + signal number)
SIGNAL_EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}


def _load_blender():
    """Import bpy and register the add-on from the source tree (undone by :func:`_unload_blender`)."""
    import bpy

    from . import register

    if not hasattr(bpy.types.Object, "tangle"):
        register()
        _registered_here.append(True)
    return bpy


_registered_here: list[bool] = []


def _unload_blender() -> None:
    """Unregister what :func:`_load_blender` registered: the bpy 4.5 module hangs at interpreter exit
    while any operator class is still registered."""
    if _registered_here:
        from . import unregister

        unregister()
        _registered_here.clear()


class _Clock:
    """Named wall-clock timings printed at the end."""

    def __init__(self):
        self.timings: list[tuple[str, float]] = []
        self._last = time.perf_counter()

    def lap(self, name: str) -> float:
        now = time.perf_counter()
        self.timings.append((name, now - self._last))
        self._last = now
        return self.timings[-1][1]

    def report(self) -> str:
        return "\n".join(f"  {name:<22} {seconds:7.2f} s" for name, seconds in self.timings)


def bake_scene(scene, address: str | None = None, timeout: float | None = None, resume: bool = False,
               server_key: str = "", client_key: str = "", printer=None) -> tuple[int, str]:
    """Bake ``scene`` headless: (exit code 0 / 1, one-line message). Never raises for bake failures.

    address: the server (default: the scene's profile or address); server_key / client_key: CURVE key
    files for it. resume: continue the stored bake after its last baked frame when it is incomplete
    (a complete or absent bake is baked from the start; a bake that cannot be continued is an error).
    printer: the progress output (default: a ProgressPrinter on stdout).
    """
    from .bake_output import load_record
    from .bake_session import START_ERRORS, BakeSession
    from .core.connection import ServerConnection
    from .core.progress_report import ProgressPrinter

    connection = None
    if address or server_key or client_key:
        connection = ServerConnection(address or scene.tangle.server_address, server_key, client_key)
    from_frame = None
    if resume:
        record = load_record(scene)
        if record is not None and record.last_frame is not None and record.last_frame < record.frame_end:
            from_frame = record.last_frame + 1
    printer = printer or ProgressPrinter(sys.stdout, interactive=sys.stdout.isatty())
    try:
        session = BakeSession(scene, timeout=timeout, from_frame=from_frame, connection=connection).start()
    except START_ERRORS as error:
        message = f"tangle: nothing sent, fix the scene or settings first: {error}"
        print(message, file=sys.stderr)
        return 1, message
    with cancel_on_signals(session, printer) as received:
        session.run_blocking(on_frame=printer.frame)
    printer.close()
    outcome = session.outcome     # also after a second signal stopped the wait (a failed outcome)
    where = f" from frame {from_frame}" if from_frame is not None else ""
    message = (f"tangle: bake{where} {outcome.state}: {outcome.frames_baked}/{outcome.frames_total} frames "
               f"in {outcome.elapsed_s:.2f} s" + (f" - {outcome.message}" if outcome.message else ""))
    print(message)
    if received:
        name = signal.Signals(received[0]).name
        print(f"tangle: cancelled by {name}; the {outcome.frames_baked} frames baked so far are kept",
              file=sys.stderr)
        return SIGNAL_EXIT_CODES[received[0]], message
    if outcome.state != "finished":
        print(f"tangle: FAILED ({outcome.state}); the frames baked so far are kept", file=sys.stderr)
    return (0 if outcome.state == "finished" else 1), message


@contextlib.contextmanager
def cancel_on_signals(session, printer):
    """SIGINT and SIGTERM cancel ``session`` (the server stops after its current frame; the frames received
    are kept) instead of killing the process; a second one stops waiting for the server at once. Yields
    the list of signals received. Outside the main thread (no handlers can be set there) nothing changes."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def cancel(number, _frame):
        received.append(number)
        if len(received) == 1:
            printer.message(f"{signal.Signals(number).name}: cancelling after the current frame "
                            "(again to stop at once); the frames baked so far are kept")
            session.cancel()
        else:
            raise KeyboardInterrupt

    previous = {number: signal.signal(number, cancel) for number in SIGNAL_EXIT_CODES}
    try:
        yield received
    except KeyboardInterrupt:
        if not received:
            raise
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def run_demo(out_dir: Path, frames: int, vertices_per_side: int, address: str | None) -> int:
    from .core.local_server import LocalServer
    from .core.progress_report import ProgressPrinter

    clock = _Clock()
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    bpy = _load_blender()
    from . import demo

    clock.lap("load bpy + add-on")
    server = None
    try:
        if address is None:
            server = LocalServer(log_path=out_dir / "server.log")
            address = server.start()
            print(f"tangle demo: solver server at {address} (log {out_dir / 'server.log'})")
        clock.lap("start server")
        scene = demo.build_scene(frames=frames, vertices_per_side=vertices_per_side)
        clock.lap("build scene")
        printer = ProgressPrinter(sys.stdout, interactive=sys.stdout.isatty())
        code, _ = bake_scene(scene, address, printer=printer)
        bake_seconds = clock.lap("bake")
        if code != 0:
            return code
        print(f"tangle demo: {frames} frames (a {vertices_per_side}x{vertices_per_side} cloth, Elastic Rods hair, a "
              f"soft body) in {bake_seconds:.2f} s ({frames / bake_seconds:.1f} frames/s)")
        hindsight = printer.progress.eta_hindsight(0.25) if printer.progress is not None else None
        if hindsight is not None and hindsight[0] is not None:
            estimate, actual = hindsight
            print(f"tangle demo: ETA at 25 % of the frames {estimate:.1f} s, the rest took {actual:.1f} s "
                  f"({100 * (estimate - actual) / actual:+.0f} %)")
    finally:
        if server is not None:
            server.stop()
            clock.lap("stop server")
    blend_path = out_dir / "demo.blend"
    scene.frame_set(scene.frame_start)
    bpy.context.preferences.filepaths.save_version = 0  # no demo.blend1 backup next to it on re-runs
    bpy.ops.wm.save_as_mainfile(filepath=str(blend_path))
    clock.lap("save demo.blend")
    preview_frames = sorted({1, *(round(frames * k / 5) for k in range(1, 6))} - {0})
    previews = demo.render_previews(scene, preview_frames, out_dir)
    clock.lap("render previews")
    sheet = demo.contact_sheet(previews, out_dir / "contact_sheet.png")
    clock.lap("contact sheet")
    print(f"tangle demo: wrote {blend_path}, {len(previews)} previews, {sheet}")
    print("timings:\n" + clock.report())
    return 0


def run_bake(blend: Path, address: str | None, local_server: bool, output: Path | None,
             timeout: float | None, resume: bool = False, server_key: str = "", client_key: str = "") -> int:
    from .core.local_server import LocalServer, LocalServerError

    if not blend.is_file():
        print(f"tangle: {blend} does not exist", file=sys.stderr)
        return 1
    bpy = _load_blender()
    try:
        bpy.ops.wm.open_mainfile(filepath=str(blend.resolve()))
    except RuntimeError as error:
        print(f"tangle: cannot open {blend}: {error}", file=sys.stderr)
        return 1
    scene = bpy.context.scene
    server = LocalServer() if local_server else None
    try:
        if server is not None:
            address = server.start()
        code, _ = bake_scene(scene, address, timeout, resume, server_key, client_key)
    except LocalServerError as error:
        print(f"tangle: the local solver server did not start: {error}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.stop()
    return save_blend(bpy, (output or blend).resolve(), code)


def save_blend(bpy, target: Path, code: int) -> int:
    """Save the baked file (also after a failed bake: the frames so far are kept); a failed save is 1."""
    try:
        bpy.ops.wm.save_as_mainfile(filepath=str(target))
    except RuntimeError as error:
        print(f"tangle: cannot save {target}: {error}", file=sys.stderr)
        return 1
    print(f"tangle: saved {target}")
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m blender_addon.cli", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    demo_parser = commands.add_parser("demo", help="bake and render the demo scene")
    demo_parser.add_argument("--out", type=Path, default=Path("out"), help="output folder (default: out)")
    demo_parser.add_argument("--frames", type=int, default=48, help="frames to bake (default: 48)")
    demo_parser.add_argument("--grid", type=int, default=32, help="cloth vertices per side (default: 32)")
    demo_parser.add_argument("--address", help="use this running server instead of starting a local one")
    bake_parser = commands.add_parser("bake", help="bake a saved .blend headless and save it")
    bake_parser.add_argument("blend", type=Path)
    where = bake_parser.add_mutually_exclusive_group()
    where.add_argument("--address", help="solver server address (default: the one saved in the scene)")
    where.add_argument("--local-server", action="store_true", help="start a local solver server for this bake")
    bake_parser.add_argument("--output", type=Path, help="save here instead of overwriting the input .blend")
    bake_parser.add_argument("--timeout", type=float,
                             help="seconds of server silence before failing (default: the scene's setting)")
    bake_parser.add_argument("--resume", action="store_true",
                             help="continue the stored bake after its last baked frame if it is incomplete "
                                  "(farm retries); else bake from the start")
    bake_parser.add_argument("--server-key", default="", help="the server's public CURVE key file (server.key)")
    bake_parser.add_argument("--client-key", default="", help="this client's CURVE secret key file (NAME.key_secret)")
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            return run_demo(args.out, args.frames, args.grid, args.address)
        return run_bake(args.blend, args.address, args.local_server, args.output, args.timeout, args.resume,
                        args.server_key, args.client_key)
    finally:
        _unload_blender()


if __name__ == "__main__":
    sys.exit(main())
