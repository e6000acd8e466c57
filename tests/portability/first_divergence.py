"""Where a portability scenario's device run first departs from the CPU's: the diagnostic for a failure of
``test_cuda_device.py`` (or of the emulated device's test), to run on the machine with the device.

Both runs record every solver group's state (``state_arrays``, on the host) after every substep; the first substep
at which some array differs by more than ``--threshold`` is printed with its group, array and worst entry, and the
difference over the substeps after it (a jump from rounding to millimetres at one substep is a decision taken
differently; a steady growth is the dynamics amplifying rounding).

    python -m tests.portability.first_divergence NAME [--device cuda|cuda-emulated] [--threshold 1e-9]
"""

from __future__ import annotations

import argparse

import numpy as np

from solver_server.backend import get_backend
from solver_server.emulated_device import emulated_cuda_backend, outside_substep
from solver_server.simulation import Simulation
from solver_server.solvers.der import banded, contact_space
from tests.portability.scenarios import SCENARIOS


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


def first_divergence(reference, device, threshold: float) -> int | None:
    """Index of the first record whose arrays differ by more than ``threshold``, or None."""
    for index, ((_, _, expected), (_, _, got)) in enumerate(zip(reference, device)):
        if any(float(np.abs(expected[key] - got[key]).max(initial=0.0)) > threshold for key in expected):
            return index
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted(SCENARIOS))
    parser.add_argument("--device", default="cuda", choices=("cuda", "cuda-emulated"))
    parser.add_argument("--threshold", type=float, default=1e-9, help="[m] (or the array's unit)")
    args = parser.parse_args(argv)
    # the CPU reference runs the device's algorithms where the CPU has its own (as test_cuda_device.py does)
    banded.FORCE_XP_PATH = True
    contact_space.SEQUENTIAL_ON_CPU = False
    reference = substep_states(args.name, get_backend("cpu"))
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
