"""Frames must not hang on the last bit of a position: a GPU rounds differently from the CPU (fused multiply-adds,
other summation orders), so a contact decision that rounding can flip makes the devices disagree by millimetres.

A point pushed out to its contact reach lies there within rounding; whether it touches at the next query is then
decided by the collider's contact skin, not by that rounding. Checked by moving every hair point 1e-12 m at random
(far below any device's rounding drift over a few frames) and requiring the frames to stay put."""

from __future__ import annotations

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.simulation import Simulation
from tests.portability.scenarios import SCENARIOS, animated_hair

NUDGE = 1e-12      # [m] the random move of every hair point
AGREEMENT = 1e-6   # [m] how far the nudged frames may end from the others: amplification below 1e6


def _hair_frames(build, nudge: float) -> list[np.ndarray]:
    """The hair's frames of the scenario ``build`` makes, every hair point first moved ``nudge`` [m] at random."""
    scene, drive = build()
    rng = np.random.default_rng(7)
    for item in scene["objects"]:
        if item["kind"] == "hair":
            points = np.asarray(item["points"], dtype=np.float64)
            item["points"] = points + nudge * rng.standard_normal(points.shape)
    simulation = Simulation(scene, get_backend("cpu"))
    frames = [simulation.initial_frame()[1]["Hair"]]
    for frame in range(simulation.frame_start + 1, simulation.frame_end + 1):
        frames.append(simulation.advance(drive(frame) if drive else None)[1]["Hair"])
    return [np.asarray(positions, dtype=np.float64) for positions in frames]


@pytest.mark.parametrize("name", ["colliders_cosserat", "colliders_particles", "colliders_der"])
def test_hair_on_primitive_and_mesh_colliders_does_not_depend_on_rounding(name):
    plain, nudged = _hair_frames(SCENARIOS[name], 0.0), _hair_frames(SCENARIOS[name], NUDGE)
    assert float(np.abs(plain[-1] - plain[0]).max()) > 1e-3, f"{name}: the hair did not move"
    for frame, (expected, got) in enumerate(zip(plain, nudged)):
        np.testing.assert_allclose(got, expected, rtol=0.0, atol=AGREEMENT, err_msg=f"{name}: frame {frame}")


def test_guide_hair_rooted_on_an_animated_scalp_does_not_depend_on_rounding(monkeypatch):
    # strands lying on the scalp: the pinned roots lie on it within rounding; a segment from a root did or did not
    # "pass through" the scalp by its last bit, and the edge contact that followed moved the next particle 9 µm
    # (4 mm a frame later)
    from solver_server.solvers.particles import solver as particle_solver

    step = particle_solver.ParticleHairSolver.step
    rng = np.random.default_rng(5)
    disturbed = [False]

    def disturbed_step(self, state_in, state_out, control, contacts, dt):
        stats = step(self, state_in, state_out, control, contacts, dt)
        if not disturbed[0]:
            state_out.positions = state_out.positions + 1e-13 * rng.standard_normal(state_out.positions.shape)
            disturbed[0] = True
        return stats

    lying_on_the_scalp = lambda: animated_hair("particles", lift=0.0)   # noqa: E731
    plain = _hair_frames(lying_on_the_scalp, 0.0)
    monkeypatch.setattr(particle_solver.ParticleHairSolver, "step", disturbed_step)
    nudged = _hair_frames(lying_on_the_scalp, 0.0)
    assert disturbed[0]
    for frame, (expected, got) in enumerate(zip(plain, nudged)):
        np.testing.assert_allclose(got, expected, rtol=0.0, atol=AGREEMENT, err_msg=f"frame {frame}")
