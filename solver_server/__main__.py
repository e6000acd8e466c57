"""Command line: ``python -m solver_server --bind tcp://127.0.0.1:5555 --device cpu --log-level INFO``."""

from __future__ import annotations

from .blas_threads import prefer_single_threaded_blas
from .heap_policy import keep_large_arrays_on_the_heap

prefer_single_threaded_blas()   # before anything imports numpy (blas_threads.py)
keep_large_arrays_on_the_heap()   # large solver arrays reuse heap pages (heap_policy.py)

import argparse  # noqa: E402
import ipaddress  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
from urllib.parse import urlsplit  # noqa: E402

from .devices import DEVICES  # noqa: E402
from .server import CLIENT_SILENCE_S, DEFAULT_BIND, DISK_CHECKPOINT_EVERY, SolverServer  # noqa: E402

LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}


def is_loopback(address: str) -> bool:
    """True for ipc:// and inproc:// endpoints and tcp:// endpoints on a loopback interface."""
    scheme, _, rest = address.partition("://")
    if scheme in ("ipc", "inproc"):
        return True
    if scheme != "tcp" or not rest:
        return False
    host = urlsplit(f"//{rest}").hostname or ""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # an interface name or "*": not provably loopback


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m solver_server", description="Tangle solver server")
    parser.add_argument("--bind", default=DEFAULT_BIND, help=f"ZeroMQ endpoint to bind (default {DEFAULT_BIND})")
    parser.add_argument("--device", default="cpu", choices=DEVICES,
                        help="compute device (default cpu; cuda-emulated: the CUDA code paths on the CPU, for testing)")
    parser.add_argument("--max-jobs", type=int, default=4, help="jobs run at the same time (default 4)")
    parser.add_argument(
        "--peer-grace",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds an unreachable client's jobs keep running in case it reconnects (default 30)",
    )
    parser.add_argument(
        "--client-silence",
        type=float,
        default=CLIENT_SILENCE_S,
        metavar="S",
        help="seconds a connected client may stay silent (no ping) before its jobs are freed "
        f"(default {CLIENT_SILENCE_S:g})",
    )
    parser.add_argument(
        "--checkpoint-dir",
        metavar="DIR",
        help="write every job's checkpoints to DIR/<job id>/frame_NNNNNN.npz for crash recovery (docs/reliability.md)",
    )
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=DISK_CHECKPOINT_EVERY,
        metavar="N",
        help=f"frames between disk checkpoints with --checkpoint-dir (default {DISK_CHECKPOINT_EVERY})",
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"), help="stderr log level"
    )
    parser.add_argument(
        "--keys",
        metavar="DIR",
        help="CURVE key folder (server.key_secret + authorized_clients/): encrypt and accept only known clients",
    )
    parser.add_argument(
        "--generate-keys",
        metavar="DIR",
        help="create a server key pair (if missing) and one client key pair in DIR, then exit",
    )
    parser.add_argument("--client-name", default="client", help="name of the client key pair --generate-keys makes")
    parser.add_argument(
        "--warm-kernels",
        action="store_true",
        help="compile (or load from the cache) every solver kernel for --device, print where the cache is, and exit",
    )
    parser.add_argument(
        "--cuda-arch",
        type=int,
        metavar="SM",
        help="with --warm-kernels: compile every kernel ahead of time for this CUDA architecture (90: H100/H200) into "
             "the kernel cache, on this machine, GPU or not, and exit (copy the cache to the GPU servers)",
    )
    parser.add_argument(
        "--parent-pid",
        type=int,
        metavar="PID",
        help="shut down when process PID ends (a local server started by Blender ends with its Blender)",
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="allow binding a non-loopback address without encryption or authentication",
    )
    return parser.parse_args(argv)


def generate_keys_command(directory: str, client_name: str) -> int:
    from protocol.keys import generate_keys, load_public_key

    try:
        paths = generate_keys(directory, client_name)
    except (OSError, RuntimeError) as exc:
        print(f"tangle-solver: {exc}", file=sys.stderr)
        return 1
    server_key = load_public_key(paths["server_public"]).decode("ascii")
    print(f"server public key ({paths['server_public']}): {server_key}")
    print(f"client secret key for the add-on / SolverClient: {paths['client_secret']}")
    print(f"start the server with: python -m solver_server --keys {directory} --bind tcp://0.0.0.0:5555")
    return 0


def compile_for_cuda_command(args) -> int:
    """--warm-kernels --cuda-arch SM: every kernel compiled ahead of time for sm_SM into the kernel cache."""
    if not args.warm_kernels:
        print("tangle-solver: --cuda-arch goes with --warm-kernels (it fills the kernel cache and exits)",
              file=sys.stderr)
        return 2
    if not 50 <= args.cuda_arch <= 200:
        print(f"tangle-solver: --cuda-arch {args.cuda_arch} is not a CUDA architecture (e.g. 90 for an H100)",
              file=sys.stderr)
        return 2
    from .kernel_warmup import compile_for_cuda

    compiled = compile_for_cuda(args.cuda_arch)
    print(f"tangle-solver kernels compiled for sm_{args.cuda_arch} in {compiled['seconds']:.1f} s "
          f"({len(compiled['binaries'])} binaries, cache {compiled['cache']})", file=sys.stderr, flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    log = logging.getLogger("tangle.server")
    if args.generate_keys:
        return generate_keys_command(args.generate_keys, args.client_name)
    if args.cuda_arch is not None:
        return compile_for_cuda_command(args)
    if not is_loopback(args.bind) and not args.keys:
        if not args.insecure:
            print(
                f"tangle-solver: refusing to bind {args.bind}: it is not a loopback address and no --keys were "
                "given; use --keys DIR (CURVE), an SSH tunnel to 127.0.0.1, or --insecure on a trusted network",
                file=sys.stderr,
            )
            return 2
        log.warning("binding %s WITHOUT encryption or authentication (--insecure): anyone who can reach it "
                    "can submit jobs and read results", args.bind)
    if args.max_jobs < 1:
        print("tangle-solver: --max-jobs must be at least 1", file=sys.stderr)
        return 2
    if args.checkpoint_every < 1 or args.client_silence <= 0:
        print("tangle-solver: --checkpoint-every must be at least 1 and --client-silence positive", file=sys.stderr)
        return 2

    running: list[SolverServer] = []   # the server once built, for the parent watch to stop
    if args.parent_pid is not None:
        from .parent_watch import watch_parent

        def parent_ended() -> None:
            if running:
                running[0].stop()
            else:
                os._exit(0)          # still starting (compiling kernels): nothing to shut down

        watch_parent(args.parent_pid, parent_ended)

    from .backend import BackendError
    from .devices import backend_for

    try:
        backend = backend_for(args.device)
    except BackendError as exc:
        print(f"tangle-solver: {exc}", file=sys.stderr)
        return 2
    from .kernel_warmup import warm_kernels

    warp_device = backend.warp_device
    warmed = warm_kernels(warp_device)   # a cached start takes milliseconds; a fresh machine compiles once here
    print(f"tangle-solver kernels ready on {warp_device} in {warmed['seconds']:.2f} s (cache {warmed['cache']})",
          file=sys.stderr, flush=True)
    if args.warm_kernels:
        return 0
    try:
        server = SolverServer(
            args.bind,
            backend,
            max_jobs=args.max_jobs,
            keys_dir=args.keys,
            peer_grace_s=args.peer_grace,
            client_silence_s=args.client_silence,
            checkpoint_dir=args.checkpoint_dir,
            checkpoint_every=args.checkpoint_every,
        )
    except OSError as exc:
        print(f"tangle-solver: {exc}", file=sys.stderr)
        return 1

    running.append(server)

    def request_stop(signum: int, _frame: object) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        server.stop()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    print(f"tangle-solver listening on {server.address} (backend {backend.name})", file=sys.stderr, flush=True)
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
