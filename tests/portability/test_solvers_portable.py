"""Every solver runs on the emulated CUDA device (CuPy-like arrays, CUDA launch layouts) and gives the CPU frames.

A solver that calls numpy on a device array, converts one implicitly, or mixes a host array into device
math raises :class:`~solver_server.emulated_device.PortabilityError` here; see docs/gpu.md.
"""

from __future__ import annotations

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.simulation import Simulation
from tests.portability.scenarios import SCENARIOS, run_frames, use_device_algorithms_on_cpu
from solver_server.emulated_device import DeviceArray, emulated_cuda_backend


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_solver_runs_on_the_emulated_cuda_device_and_matches_cpu(name, monkeypatch):
    use_device_algorithms_on_cpu(monkeypatch.setattr)
    reference = run_frames(name, get_backend("cpu"))
    created_before = DeviceArray.created
    strict = run_frames(name, emulated_cuda_backend())
    assert DeviceArray.created - created_before > 100, f"{name}: the solver did not compute on the strict backend"
    assert max(stats["contacts"] for _, _, stats in strict[1:]) > 0, f"{name}: no contact, collisions untested"
    moved = 0.0
    for (frame, expected, _), (strict_frame, got, stats) in zip(reference, strict):
        assert strict_frame == frame
        for object_id, positions in expected.items():
            assert isinstance(got[object_id], np.ndarray) and got[object_id].dtype == np.float32
            np.testing.assert_allclose(got[object_id], positions, atol=1e-4,
                                       err_msg=f"{name}: {object_id} at frame {frame}")
            moved = max(moved, float(np.abs(positions - reference[0][1][object_id]).max()))
    assert moved > 1e-3, f"{name}: nothing moved, the scenario tests nothing"


@pytest.mark.parametrize("name", ["pd_cloth_jacobi_animated", "pd_softbody", "der", "particles_guides_animated",
                                  "cosserat"])
def test_checkpoint_restore_on_the_emulated_cuda_device(name):
    """state_arrays / load_state_arrays cross the device boundary only through to_host / from_host."""
    backend = emulated_cuda_backend()
    uninterrupted = run_frames(name, backend)
    scene, drive = SCENARIOS[name]()
    first = Simulation(scene, backend)
    first.initial_frame()
    for frame in (2, 3):
        first.advance(drive(frame) if drive else None)
    checkpoint = first.checkpoint()
    for group in checkpoint["groups"].values():
        assert all(isinstance(array, np.ndarray) for array in group.values())
    resumed = Simulation(SCENARIOS[name]()[0], backend)
    resumed.restore(checkpoint)
    for frame in range(4, resumed.frame_end + 1):
        _, positions, _ = resumed.advance(drive(frame) if drive else None)
    for object_id, expected in uninterrupted[-1][1].items():
        np.testing.assert_allclose(positions[object_id], expected, atol=1e-5, err_msg=f"{name}: {object_id}")


@pytest.mark.parametrize("mutation", ["numpy_function", "host_operand"])
def test_a_solver_calling_numpy_on_device_arrays_fails_the_portability_run(monkeypatch, mutation):
    """Mutation check: the same run fails once a solver is made to call numpy or mix in a host array."""
    from solver_server.solvers.particles import solver as particle_solver

    original = particle_solver.ParticleHairSolver._lengths

    def numpy_lengths(self, vectors):
        if mutation == "numpy_function":
            return np.linalg.norm(vectors, axis=-1)                # numpy called on a device array
        return original(self, vectors) + np.zeros(vectors.shape[:-1])  # host array mixed into device math

    monkeypatch.setattr(particle_solver.ParticleHairSolver, "_lengths", numpy_lengths)
    run_frames("particles", get_backend("cpu"))                           # numpy backend: still runs
    with pytest.raises(AssertionError, match="device array|host numpy array"):
        run_frames("particles", emulated_cuda_backend())


def test_the_first_divergence_finder_names_the_substep_where_runs_part(monkeypatch):
    from tests.portability.first_divergence import first_divergence, substep_states

    reference = substep_states("particles", get_backend("cpu"))
    assert first_divergence(reference, substep_states("particles", emulated_cuda_backend()), 1e-12) is None
    moved = [(frame, group, {key: value + (1e-6 if index >= 3 else 0.0) for key, value in arrays.items()})
             for index, (frame, group, arrays) in enumerate(reference)]
    assert first_divergence(reference, moved, 1e-9) == 3
