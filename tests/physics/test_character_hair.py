"""DER hair on a turning character (contact that holds on real characters, for hair): strands
standing out of Suzanne's scalp fall onto the head while it turns 60° and slides 0.3 m over 24 frames.

Suzanne's brow and ears are ridges and overhangs. Vertex CCD used to take a touched triangle's normal with the
side of its plane the vertex started on, also when the vertex only passed beside the triangle's rim: over a
ridge a vertex outside the head starts on the inner side of the far face's plane, and the contact then held it
there, inside the head (3 hair tips ended inside). A rim touch now takes the normal from the nearest mesh point
to the vertex.

The fast models run the same shot with their own defaults, and stay outside too (Cosserat strands went
non-finite until their contact query kept each node's side: docs/fast_hair.md).
"""

from __future__ import annotations

import numpy as np
import pytest

from protocol.checkpoint_files import decode_checkpoint, encode_checkpoint
from solver_server.backend import get_backend
from solver_server.collision.mesh import closest_points_on_triangles
from solver_server.simulation import Simulation

from .character_scenes import hair_on_suzanne, turn_and_slide
from .contact_metrics import winding_numbers
from .scenes import run

FRAMES = 24


def _shot(flipped: bool, model: str = "der", head: bool = True):
    built, drive, _, offsets, head_vertices, head_triangles = hair_on_suzanne(FRAMES, flipped=flipped)
    if model != "der":
        built["objects"][0]["params"] = {"model": model}      # the model's own defaults
    if not head:
        built["objects"] = [spec for spec in built["objects"] if spec["kind"] != "collider"]
    frames = run(Simulation(built, get_backend("cpu")), drive)
    positions = np.array([frame[1]["Hair"] for frame in frames], dtype=np.float64)
    free = np.ones(positions.shape[1], bool)
    free[offsets[:-1]] = free[offsets[:-1] + 1] = False              # the clamped roots
    inside, depth = [], []
    for index, frame in enumerate(positions):
        pose = turn_and_slide(index + 1, FRAMES)
        posed = head_vertices @ pose[:3, :3].T + pose[:3, 3]
        points = frame[free]
        held_in = np.abs(winding_numbers(points, posed, head_triangles)) > 0.5
        inside.append(int(held_in.sum()))
        deepest = 0.0
        if held_in.any():
            _, bary = closest_points_on_triangles(np.repeat(points[held_in], len(head_triangles), axis=0),
                                                  *(np.tile(posed[head_triangles[:, k]], (int(held_in.sum()), 1))
                                                    for k in range(3)))
            surface = np.einsum("nk,nkd->nd", bary, np.tile(posed[head_triangles], (int(held_in.sum()), 1, 1)))
            gaps = np.linalg.norm(surface - np.repeat(points[held_in], len(head_triangles), axis=0), axis=1)
            deepest = float(gaps.reshape(int(held_in.sum()), -1).min(axis=1).max())
        depth.append(deepest)
    return positions, inside, [frame[2] for frame in frames[1:]], depth


@pytest.fixture(scope="module")
def shots():
    return {flipped: _shot(flipped) for flipped in (False, True)}


def test_hair_stays_outside_the_turning_head_with_either_winding(shots):
    positions, inside, stats, _ = shots[False]
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
    positions, inside, _, _ = _shot(False, model)
    assert np.all(np.isfinite(positions))
    assert max(inside) == 0, inside
    speed = np.linalg.norm(np.diff(positions, axis=0), axis=2).max() * 24.0
    assert speed < 6.0, f"a hair vertex moved at {speed:.1f} m/s"


def test_particle_hair_stays_outside_the_turning_head():
    _stays_outside("particles")


def test_cosserat_hair_stays_outside_the_turning_head():
    """The strands must stay finite past frame 5. Their collider push is a force from a contact query
    whose CCD started at the nodes' positions one internal step earlier, against the mesh moving over the whole
    substep: a node the force had not yet pushed out started the next query on the inside (or one resting on a
    receding surface looked inside its earlier pose), was held there and pushed deeper, without bound. The
    query now starts at each node's anchor (its last position pushed out on its side) against the mesh moving
    over the same part of the substep as the node."""
    positions, inside, stats, depth = _shot(False, "cosserat")
    assert np.all(np.isfinite(positions))
    np.testing.assert_allclose(_shot(True, "cosserat")[0], positions, rtol=0, atol=1e-9)
    assert sum(frame_stats["contacts"] for frame_stats in stats) > 0
    # the push is a force applied once a node is found inside its contact offset (the collider's 2 mm
    # thickness), so a node landing at ~3 m/s in a ~2 ms step can pass it: measured, one node 0.35 and one
    # 0.70 mm under the skin at the first impacts (frames 3 and 4), out again the frame after. Resting and
    # sliding contact holds: no node inside from frame 6 to the end, while the head turns and slides
    assert max(depth) < 1.0e-3, depth
    assert max(inside[5:]) == 0, inside
    # these floppy strands (r = 50 µm, little damping) whip their tips to ~9 m/s as they fall over, head or not;
    # the head may not fling them (measured: 8.9 m/s with it, 9.2 without)
    free_fall = _shot(False, "cosserat", head=False)[0]
    speed = np.linalg.norm(np.diff(positions, axis=0), axis=2).max() * 24.0
    free_speed = np.linalg.norm(np.diff(free_fall, axis=0), axis=2).max() * 24.0
    assert speed < 1.5 * free_speed, f"a hair vertex moved at {speed:.1f} m/s (no head: {free_speed:.1f} m/s)"


def test_cosserat_hair_on_the_head_resumes_exactly():
    """A bake resumed from a checkpoint taken while strands lie on the turning head continues exactly: the
    nodes' contact anchors (the side of the mesh each is on) travel in the checkpoint."""
    built, drive, *_ = hair_on_suzanne(FRAMES)
    built["objects"][0]["params"] = {"model": "cosserat"}
    backend = get_backend("cpu")
    reference = Simulation(built, backend)
    reference.initial_frame()
    checkpoint, frames = None, {}
    for frame in range(2, 11):
        frames[frame] = reference.advance(drive(frame))
        if frame == 6:
            assert frames[frame][2]["contacts"] > 0
            checkpoint = decode_checkpoint(encode_checkpoint(reference.checkpoint()))
    resumed = Simulation(built, backend)
    resumed.restore(checkpoint)
    for frame in range(7, 11):
        np.testing.assert_allclose(resumed.advance(drive(frame))[1]["Hair"], frames[frame][1]["Hair"], rtol=0,
                                   atol=1e-9, err_msg=f"frame {frame}")
