"""Hair that stays on a moving head, for every hair model: strands groomed on Suzanne (the open, many-shelled
mesh Blender makes, thin ears and a brow fold) while head and roots turn and slide.

- DER: the first iterate's path is not the step's path; a tip pushed by its strand's other contacts crossed a
  brow its first path never reached, and an ear's rim passed between two vertices that both stayed outside.
- Particles: their internal steps swept the mesh over the whole substep each time (a point's side read
  against the wrong pose), and the colliders' push stretched segments past the distance clamp.
- Cosserat: the contact push is a force that closes part of a node's depth per step.
- Guides: children blended from two guides that part cut through the head and shrank to a fraction of their
  length.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.simulation import Simulation
from solver_server.solvers.cosserat.group import CosseratHairGroup

from .character_scenes import hair_on_character, held_motion
from .contact_metrics import edges_through_surface, winding_numbers
from .scenes import run, scene

FRAMES = 10
STRANDS = 150


def _shot(model: str, guide_count: int = 0, flipped: bool = False):
    built, drive, rest, offsets, head_vertices, head_triangles = hair_on_character(
        model, STRANDS, frames=FRAMES, flipped=flipped, guide_count=guide_count)
    frames = run(Simulation(built, get_backend("cpu")), drive)
    points = np.diff(offsets)[0]
    positions = np.array([frame[1]["Hair"] for frame in frames], dtype=np.float64).reshape(FRAMES, -1, points, 3)
    inside = []
    for index, frame in enumerate(positions):
        pose = held_motion(index + 1, 18)
        posed = head_vertices @ pose[:3, :3].T + pose[:3, 3]
        free = frame[:, 1:].reshape(-1, 3)                      # the root sits on the scalp
        inside.append(int((np.abs(winding_numbers(free, posed, head_triangles)) > 0.5).sum()))
    rest_lengths = np.linalg.norm(np.diff(rest.reshape(-1, points, 3), axis=1), axis=2)
    ratio = np.linalg.norm(np.diff(positions, axis=2), axis=3) / rest_lengths
    return positions, inside, ratio, [frame[2] for frame in frames[1:]]


@pytest.mark.parametrize("model", ["der", "particles", "cosserat"])
def test_hair_stays_out_of_the_turning_head(model):
    positions, inside, ratio, _ = _shot(model)
    assert np.all(np.isfinite(positions))
    # measured on the old code over these 10 frames: up to 16 points inside for DER, 58 particles, 14 Cosserat;
    # then Cosserat kept a tip or two a fraction of a millimetre under the skin, until its output was laid out
    assert max(inside) == 0, inside
    if model == "der":
        assert ratio.max() < 1.05 and ratio.min() > 0.95, (ratio.min(), ratio.max())
    if model == "particles":
        # the distance clamp (1.1) holds under contact: was 1.7x and 0.58x; then 0.903x, a segment pulled into the
        # skin by the clamp and pushed out along the normal, until the clamp kept to the contact planes
        assert ratio.max() < 1.1 + 1e-4 and ratio.min() > 1.0 / 1.1 - 1e-4, (ratio.min(), ratio.max())


def test_der_hair_is_the_same_on_the_head_in_either_winding():
    assert np.array_equal(_shot("der")[0], _shot("der", flipped=True)[0])


@pytest.mark.parametrize("model", ["der", "particles", "cosserat"])
def test_interpolated_children_stay_out_and_keep_their_length(model):
    """40 guides for 150 strands: the children drawn between guides that lie on either side of the head's
    curve or of an ear (measured on the old code: up to 60 and 131 points inside, 36 % of the segments more
    than 10 % off their rest length, down to 8 %; then, with the blend clamped to 1.1x either way and children
    that no turn got out of a fold collapsing onto a point, Cosserat segments from 0.16x to 1.44x)."""
    positions, inside, ratio, _ = _shot(model, guide_count=40)
    assert np.all(np.isfinite(positions))
    assert max(inside) == 0, inside
    # a child stretches as its guides do (DER and Cosserat: not at all; particles: up to their clamp, 1.1) and one
    # whose carried shape still enters the head is laid out of it at that length
    bound = 0.1 + 1e-4 if model == "particles" else 1e-4
    assert ratio.max() < 1.0 + bound and ratio.min() > 1.0 / (1.0 + bound), (ratio.min(), ratio.max())


def _fin():
    """A closed fin 0.3 m long (x), 1 mm thick (y), 4 cm tall (z) with its crest at z = 0: (vertices, triangles)."""
    x, y, z = 0.15, 0.0005, 0.04
    vertices = np.array([[sx * x, sy * y, sz] for sz in (-z, 0.0) for sy in (-1, 1) for sx in (-1, 1)], float)
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    triangles = np.array([t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))], np.int32)
    return vertices, triangles


@pytest.mark.parametrize("model", ["der"])
def test_a_rising_crest_between_two_vertices_lifts_the_strand(model):
    """One strand across a thin fin, its middle segment (6.7 cm) straddling the 1 mm crest, both of its
    vertices off the fin; the fin rises at 0.6 m/s and turns. No vertex ever meets a triangle: only the
    segment against the crest's edges keeps the fin from passing through the strand (on the old code the
    strand hung through the fin from the second frame on). Particle hair's one Jacobi pass of cloth's
    edge–edge push does not hold this crest yet (the segment over it meets two or three of its edges at once,
    and the averaged push leaves it through: then the edge is left free): docs/fast_hair.md."""
    vertices, triangles = _fin()
    points = np.stack([np.zeros(4), np.linspace(-0.1, 0.1, 4), np.full(4, 0.005)], axis=1)
    hair = {"id": "Hair", "kind": "hair", "points": points, "strand_offsets": np.array([0, 4], np.int32),
            "matrix_world": np.eye(4), "params": {"model": model, "radius": 1e-4}}
    fin = {"id": "Fin", "kind": "collider", "vertices": vertices, "triangles": triangles,
           "params": {"friction": 0.3, "thickness": 0.0}, "animated": True, "matrix_world": np.eye(4)}

    def pose(frame):
        angle = np.radians(3.0) * (frame - 1)
        matrix = np.eye(4)
        matrix[:3, :3] = [[np.cos(angle), -np.sin(angle), 0.0], [np.sin(angle), np.cos(angle), 0.0], [0, 0, 1]]
        matrix[2, 3] = 0.025 * (frame - 1)
        return matrix

    frames = run(Simulation(scene([hair, fin], frame_end=8, substeps=4), get_backend("cpu")),
                 lambda frame: {"Fin": {"matrix_world": pose(frame)}})
    for index, (_, positions, _) in enumerate(frames):
        posed = vertices @ pose(index + 1)[:3, :3].T + pose(index + 1)[:3, 3]
        strand = positions["Hair"].astype(np.float64)
        assert np.all(np.abs(winding_numbers(strand, posed, triangles)) < 0.5)
        through = edges_through_surface(strand, np.array([[0, 1, 1], [1, 2, 2], [2, 3, 3]]), posed, triangles)
        assert through == 0, f"frame {index + 1}: the strand passes through the fin"
    # at frame 2 the crest (at 2.5 cm) has passed the strand's start height (5 mm): the strand rides on it
    strand = frames[1][1]["Hair"].astype(np.float64)
    crossing = strand[1] + (strand[2] - strand[1]) * (-strand[1, 1] / (strand[2, 1] - strand[1, 1]))
    assert crossing[2] > pose(2)[2, 3] - 1e-3, f"the crest passed through the strand: {crossing}"


@pytest.mark.parametrize("model", ["particles", "cosserat"])
def test_fast_strands_cut_by_the_ground_finish_and_are_counted(model):
    """Five strands rooted 5 cm above a floor and reaching 30 cm below it: the job finishes, every frame is
    finite, and the first frame's stats count the 8 free points of each strand that start under the floor."""
    strands = [np.stack([np.full(10, 0.02 * k), np.zeros(10), np.linspace(0.05, -0.3, 10)], axis=1)
               for k in range(5)]
    hair = {"id": "Hair", "kind": "hair", "points": np.concatenate(strands),
            "strand_offsets": np.arange(6, dtype=np.int32) * 10, "params": {"model": model}}
    floor = {"id": "Floor", "kind": "collider", "shape": {"type": "plane", "normal": [0, 0, 1], "offset": 0.0},
             "params": {"friction": 0.5}}
    frames = run(Simulation(scene([hair, floor], frame_end=6, substeps=4), get_backend("cpu")))
    assert all(np.all(np.isfinite(positions["Hair"])) for _, positions, _ in frames)
    assert frames[1][2]["started_inside"] == 8 * 5
    assert all("started_inside" not in stats for _, _, stats in frames[2:])


def test_cosserat_hair_on_the_flipped_head_stays_finite_through_the_whip():
    """300 Cosserat strands on the flipped head to frame 20: the strands whip when the head stops dead, and at
    the whip's short steps a contact push that closes half a node's depth per step, with no cap on its speed,
    kicks the node out at metres per second and feeds the whip until the strands go non-finite."""
    built, drive, _, offsets, _, _ = hair_on_character("cosserat", 300, frames=20, flipped=True)
    frames = run(Simulation(built, get_backend("cpu")), drive)
    positions = np.array([frame[1]["Hair"] for frame in frames], dtype=np.float64)
    assert np.all(np.isfinite(positions))
    assert np.linalg.norm(np.diff(positions, axis=0), axis=-1).max() < 0.5     # no point flung 0.5 m in a frame


def test_cosserat_state_ends_every_frame_outside_the_head():
    """The head turns and slides on an eased motion (peak speed 1.5× the linear one): one strand's tip swings into
    the head beside an ear 11–19 mm deep, with the point where it crossed the skin (its contact anchor) farther
    from the node before it than their segment's length, so the end-of-substep turn-out could not bring it back.
    On the old code it stayed inside from frame 17 on (and was only drawn laid out, hopping 5 cm between two
    layouts every frame). The state itself now ends every frame outside, and the frame drawn is that state."""
    frames = 22
    built, drive, _, offsets, head_vertices, head_triangles = hair_on_character("cosserat", 120, frames=frames,
                                                                                eased=True)
    simulation = Simulation(built, get_backend("cpu"))
    simulation.initial_frame()
    group = next(group for group in simulation.groups if isinstance(group, CosseratHairGroup))
    points = int(np.diff(offsets)[0])
    inside, laid = [], 0
    for frame in range(2, frames + 1):
        _, drawn, stats = simulation.advance(drive(frame))
        laid += stats.get("laid_out_strands", 0)
        state = np.asarray(group.solvers[0].positions(group.states[0]), np.float64)
        assert np.allclose(state.reshape(-1, 3), drawn["Hair"], atol=1e-6)    # float32 output of the state
        pose = held_motion(frame, 18, eased=True)
        posed = head_vertices @ pose[:3, :3].T + pose[:3, 3]
        free = state.reshape(-1, points, 3)[:, 2:].reshape(-1, 3)
        inside.append(int((np.abs(winding_numbers(free, posed, head_triangles)) > 0.5).sum()))
    assert max(inside) == 0, inside
    assert laid > 0         # the frames where it happened say so


GUIDE_SHOT_FRAMES = 48


@functools.lru_cache(maxsize=2)
def _cosserat_guides_in_head_frame(eased: bool):
    """The benchmark's shot (benchmarks.hair_on_character: 300 strands drawn from 40 Cosserat guides, the head turning
    and sliding over 18 frames, ``eased`` or linear, then still to GUIDE_SHOT_FRAMES): (positions (F, S, P, 3) [m],
    the same in the head's frame, head vertices, head triangles, every strand's two guides (S, 2) strand indices,
    the guides (G,) strand indices). Cached: the arrays are shared, not to be changed."""
    built, drive, rest, offsets, head_vertices, head_triangles = hair_on_character(
        "cosserat", 300, frames=GUIDE_SHOT_FRAMES, motion_frames=18, guide_count=40, eased=eased)
    simulation = Simulation(built, get_backend("cpu"))
    assignment = next(group for group in simulation.groups
                      if isinstance(group, CosseratHairGroup)).objects[0].interpolator.assignment
    out = run(simulation, drive)
    positions = np.array([frame[1]["Hair"] for frame in out], dtype=np.float64).reshape(
        GUIDE_SHOT_FRAMES, -1, np.diff(offsets)[0], 3)
    local = np.empty_like(positions)
    for index in range(GUIDE_SHOT_FRAMES):
        pose = held_motion(index + 1, 18, eased=eased)
        local[index] = (positions[index] - pose[:3, 3]) @ pose[:3, :3]
    return (positions, local, head_vertices, head_triangles, assignment.guides[assignment.pairs],
            np.asarray(assignment.guides))


def test_children_on_a_still_head_do_not_hop():
    """300 strands drawn from 40 Cosserat guides on the benchmark's turn and slide (benchmarks.hair_on_character):
    with the head at rest from frame 24 on, no point of any strand moves 0.1 m in a frame in the head's frame.
    Measured on the code before children's layings carried over from frame to frame: a child's tip hopped 141 mm
    between two layouts (folded along an ear, free over its top) while its guides moved 27 mm; now the largest move
    is a child's blend's own, carried by its guides (55 mm)."""
    rest_from = 24
    positions, local, head_vertices, head_triangles, _, _ = _cosserat_guides_in_head_frame(eased=False)
    moves = np.linalg.norm(np.diff(local[rest_from - 1:], axis=0), axis=3)
    assert moves.max() < 0.1, moves.max()
    pose = held_motion(GUIDE_SHOT_FRAMES, 18)
    posed = head_vertices @ pose[:3, :3].T + pose[:3, 3]
    assert int((np.abs(winding_numbers(positions[-1][:, 1:].reshape(-1, 3), posed, head_triangles)) > 0.5).sum()) == 0


def test_children_move_no_farther_than_their_guides_allow():
    """The same 40 Cosserat guides on the eased turn and slide: after frame 8 no point moves 0.16 m in a frame in the
    head's frame. Measured on the code before a child's motion was bounded by its guides' mean: 0.204 m, a child
    between two guides that part swinging 2.5 times as far as the farther of them; now 0.122 m (the fully simulated
    Cosserat strands: 0.122 m on the linear motion)."""
    _, local, _, _, _, _ = _cosserat_guides_in_head_frame(eased=True)
    moves = np.linalg.norm(np.diff(local[7:], axis=0), axis=3)
    assert moves.max() < 0.16, moves.max()


@pytest.mark.parametrize("eased", [False, True])
def test_children_settle_as_their_guides_do(eased):
    """The same 40 Cosserat guides, 24 frames and more after the head stopped: no child's tip moves in a frame more
    than 10 mm beyond the farther of its own two guides' tips. Measured on the code before children carried their
    laying from frame to frame (each frame laid out of the head afresh, gliding towards it at a segment a frame):
    children 23.2 mm (linear) and 22.4 mm (eased) beyond their guides, 21 and 19 of them beyond 2 mm; now 4.8 and
    4.4 mm."""
    _, local, _, _, pairs, guides = _cosserat_guides_in_head_frame(eased=eased)
    settled_from = 18 + 24
    tip_moves = np.linalg.norm(np.diff(local[settled_from - 1:, :, -1], axis=0), axis=-1).max(axis=0)   # (S,) [m]
    children = np.setdiff1d(np.arange(local.shape[1]), guides)
    beyond = tip_moves[children] - tip_moves[pairs[children]].max(axis=1)
    assert beyond.max() < 0.010, beyond.max()
