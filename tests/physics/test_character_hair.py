"""DER hair on a turning character (issue 18's "contact that holds on real characters", for hair): strands
standing out of Suzanne's scalp fall onto the head while it turns 60° and slides 0.3 m over 24 frames.

Suzanne's brow and ears are ridges and overhangs. Vertex CCD used to take a touched triangle's normal with the
side of its plane the vertex started on, also when the vertex only passed beside the triangle's rim: over a
ridge a vertex outside the head starts on the inner side of the far face's plane, and the contact then held it
there, inside the head (3 hair tips ended inside). A rim touch now takes the normal from the nearest mesh point
to the vertex.

The fast models run the same shot with their own defaults: particle hair stays outside; Cosserat strands go
non-finite (a strict xfail, docs/fast_hair.md "Known failure").
"""

from __future__ import annotations

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.sim.errors import SimulationError
from solver_server.simulation import Simulation

from .character_scenes import hair_on_suzanne, turn_and_slide
from .contact_metrics import winding_numbers
from .scenes import run

FRAMES = 24


def _shot(flipped: bool, model: str = "der"):
    built, drive, _, offsets, head_vertices, head_triangles = hair_on_suzanne(FRAMES, flipped=flipped)
    if model != "der":
        built["objects"][0]["params"] = {"model": model}      # the model's own defaults
    frames = run(Simulation(built, get_backend("cpu")), drive)
    positions = np.array([frame[1]["Hair"] for frame in frames], dtype=np.float64)
    free = np.ones(positions.shape[1], bool)
    free[offsets[:-1]] = free[offsets[:-1] + 1] = False              # the clamped roots
    inside = []
    for index, frame in enumerate(positions):
        pose = turn_and_slide(index + 1, FRAMES)
        posed = head_vertices @ pose[:3, :3].T + pose[:3, 3]
        inside.append(int((np.abs(winding_numbers(frame[free], posed, head_triangles)) > 0.5).sum()))
    return positions, inside, [frame[2] for frame in frames[1:]]


@pytest.fixture(scope="module")
def shots():
    return {flipped: _shot(flipped) for flipped in (False, True)}


def test_hair_stays_outside_the_turning_head_with_either_winding(shots):
    positions, inside, stats = shots[False]
    assert np.all(np.isfinite(positions))
    # the surface is two-sided: flipping every triangle changes nothing
    np.testing.assert_allclose(shots[True][0], positions, rtol=0, atol=1e-9)
    assert inside[0] == 0
    # the hair lands on the head and rides with it: contact in every frame after the first, no strand flung off
    assert all(frame_stats["contacts"] > 0 for frame_stats in stats[1:])
    speed = np.linalg.norm(np.diff(positions, axis=0), axis=2).max() * 24.0
    assert speed < 6.0, f"a hair vertex moved at {speed:.1f} m/s"
    # no hair vertex inside the head at any frame (before the rim normal: 3 tips crossed, in frames 7, 11, 18)
    assert max(inside) == 0, inside


def _stays_outside(model: str) -> None:
    positions, inside, _ = _shot(False, model)
    assert np.all(np.isfinite(positions))
    assert max(inside) == 0, inside
    speed = np.linalg.norm(np.diff(positions, axis=0), axis=2).max() * 24.0
    assert speed < 6.0, f"a hair vertex moved at {speed:.1f} m/s"


def test_particle_hair_stays_outside_the_turning_head():
    _stays_outside("particles")


@pytest.mark.xfail(strict=True, raises=SimulationError,
                   reason="session 20: Cosserat strands with their default settings whip to 12-26 m/s as they fall "
                          "over (turn-limited steps down to 0.15 ms) and go non-finite within ~20 substeps of "
                          "touching the mesh, at frame 5; they are stable on the same fall without the head and on "
                          "a sphere. Not yet fixed (docs/fast_hair.md)")
def test_cosserat_hair_stays_outside_the_turning_head():
    _stays_outside("cosserat")
