"""Where a portability scenario's device run first departs from the CPU's: the diagnostic for a failure of
``test_cuda_device.py`` (or of the emulated device's test), to run on the machine with the device.

Both runs record every solver group's state (``state_arrays``, on the host) after every substep; the first substep
at which some array differs by more than ``--threshold`` is printed with its group, array and worst entry, and the
difference over the substeps after it (a jump from rounding to millimetres at one substep is a decision taken
differently; a steady growth is the dynamics amplifying rounding).

``--device cpu-fma`` needs no GPU: the "device" is the CPU with Warp's kernels compiled with fused multiply-adds
(clang's ``-ffp-contract=fast``), as CUDA compiles them, in a child process. It reproduced an H200's departure to
the micrometre (``particles_guides_animated``, 4.349 mm at frame 2, docs/gpu.md).

    python -m tests.portability.first_divergence NAME [--device cuda|cuda-emulated|cpu-fma] [--threshold 1e-9]
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile

import numpy as np
import warp as wp

FMA_VARIABLE = "TANGLE_TEST_CPU_FMA"
if os.environ.get(FMA_VARIABLE):
    # before any kernel module loads: the flags are part of the kernel cache key, so these builds stay apart
    wp.config.cpu_compiler_flags = (wp.config.cpu_compiler_flags or "") + " -ffp-contract=fast"

from solver_server.backend import get_backend  # noqa: E402
from solver_server.emulated_device import emulated_cuda_backend, outside_substep  # noqa: E402
from solver_server.simulation import Simulation  # noqa: E402
from tests.portability.scenarios import SCENARIOS, run_frames, use_device_algorithms_on_cpu  # noqa: E402


def substep_states(name: str, backend) -> list[tuple[int, str, dict]]:
    """(frame, group key, {array name: host array}) after every substep of scenario ``name`` on ``backend``."""
    scene, drive = SCENARIOS[name]()
    simulation = Simulation(scene, backend)
    records, frame = [], [simulation.frame_start]
    for group in simulation.groups:
        step = group.step

        def recorded(inputs, step=step, group=group):
            stats = step(inputs)
            with outside_substep():
                arrays = group.state_arrays()
            records.append((frame[0], simulation._group_key(group),
                            {key: np.array(value, dtype=np.float64) for key, value in arrays.items()
                             if np.asarray(value).dtype.kind == "f"}))
            return stats
        group.step = recorded
    simulation.initial_frame()
    for number in range(simulation.frame_start + 1, simulation.frame_end + 1):
        frame[0] = number
        simulation.advance(drive(number) if drive else None)
    return records


def with_fused_multiply_adds(job: str, names: list[str], timeout: float = 900.0):
    """``job`` ("states" of ``names[0]``, or "frames" of every name) computed on the CPU by a child process whose
    kernels are compiled with fused multiply-adds. The child is ended by the timeout if it hangs."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "result.pickle")
        subprocess.run([sys.executable, "-m", "tests.portability.first_divergence", "--child", job, path, *names],
                       env={**os.environ, FMA_VARIABLE: "1"}, check=True, timeout=timeout,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(path, "rb") as handle:
            return pickle.load(handle)


def _child(job: str, path: str, names: list[str]) -> int:
    use_device_algorithms_on_cpu()
    cpu = get_backend("cpu")
    if job == "states":
        result = substep_states(names[0], cpu)
    else:
        result = {name: [positions for _, positions, _ in run_frames(name, cpu)] for name in names}
    with open(path, "wb") as handle:
        pickle.dump(result, handle)
    return 0


def first_divergence(reference, device, threshold: float) -> int | None:
    """Index of the first record whose arrays differ by more than ``threshold``, or None."""
    for index, ((_, _, expected), (_, _, got)) in enumerate(zip(reference, device)):
        if any(float(np.abs(expected[key] - got[key]).max(initial=0.0)) > threshold for key in expected):
            return index
    return None


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        return _child(argv[1], argv[2], argv[3:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted(SCENARIOS))
    parser.add_argument("--device", default="cuda", choices=("cuda", "cuda-emulated", "cpu-fma"))
    parser.add_argument("--threshold", type=float, default=1e-9, help="[m] (or the array's unit)")
    args = parser.parse_args(argv)
    use_device_algorithms_on_cpu()
    reference = substep_states(args.name, get_backend("cpu"))
    if args.device == "cpu-fma":
        device = with_fused_multiply_adds("states", [args.name])
    else:
        device = substep_states(args.name, get_backend("cuda") if args.device == "cuda" else emulated_cuda_backend())
    index = first_divergence(reference, device, args.threshold)
    if index is None:
        print(f"{args.name}: every substep within {args.threshold:g} of the CPU ({len(reference)} substeps)")
        return 0
    frame, group, expected = reference[index]
    got = device[index][2]
    print(f"{args.name}: first departure at substep {index} (frame {frame}, group {group})")
    for key in expected:
        difference = np.abs(expected[key] - got[key])
        if difference.size and difference.max() > args.threshold:
            worst = np.unravel_index(np.argmax(difference), difference.shape)
            print(f"  {key}: largest difference {difference.max():.3e} at {worst}: cpu {expected[key][worst]!r} "
                  f"device {got[key][worst]!r}")
    growth = [max(float(np.abs(reference[k][2][key] - device[k][2][key]).max(initial=0.0)) for key in reference[k][2])
              for k in range(max(0, index - 2), min(len(reference), index + 8))]
    print("  largest difference over substeps", max(0, index - 2), "on:", " ".join(f"{value:.1e}" for value in growth))
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
