"""Guide hair (seed 002 §4.1–4.2): strand distance, k-means guides, eq. 4.2 weights, interpolation."""

import numpy as np

from solver_server.solvers.guides.interpolation import GuideInterpolator
from solver_server.solvers.guides.layout import StrandLayout
from solver_server.solvers.guides.selection import (GuideAssignment, assign_guides, resample, select_guides,
                                                    strand_distance)
from solver_server.solvers.particles import ParticleHairSettings, ParticleHairSolver, StrandControl, WindSettings


def scalp(strands=64, points=10, length=0.2, seed=0):
    """Strands hanging from roots scattered on a 0.2 m square; lengths ±25 % and curvature vary
    smoothly with the root position (neighbours look alike, as in a groomed head)."""
    rng = np.random.default_rng(seed)
    roots = np.concatenate([rng.uniform(-0.1, 0.1, (strands, 2)), np.zeros((strands, 1))], axis=1)
    t = np.linspace(0.0, 1.0, points)[None, :]
    lengths = length * (1.0 + 2.5 * roots[:, :1])
    bend = 0.03 + 0.4 * roots[:, 1:2]
    shape = np.stack([bend * t ** 2, np.zeros_like(t * bend), -lengths * t], axis=-1)
    return roots[:, None, :] + shape


def test_strand_distance_is_eq_4_1():
    t = np.linspace(0.0, 1.0, 11)
    guide = np.stack([np.zeros_like(t), np.zeros_like(t), -t], axis=-1)
    offset = guide + [0.03, 0.04, 0.0]
    assert strand_distance(guide, guide) == 0.0
    np.testing.assert_allclose(strand_distance(offset, guide), 0.05)
    shifted = guide + [0.0, 0.0, -0.5]          # half the points beyond the guide's end
    expected = np.mean(np.maximum(0.0, 0.5 + (-shifted[:, 2] - 1.0) - 0.5))
    np.testing.assert_allclose(strand_distance(shifted, guide), expected)


def test_k_means_gives_every_cluster_a_guide_and_weights_follow_eq_4_2():
    left = scalp(20, seed=1) + [-1.0, 0.0, 0.0]
    right = scalp(20, seed=2) + [1.0, 0.0, 0.0]
    strands = np.concatenate([left, right])
    layout = StrandLayout.uniform(40, 10)
    guides = select_guides(strands, layout, 4)
    assert len(set(guides.tolist())) == 4
    assert (guides < 20).sum() == 2 and (guides >= 20).sum() == 2
    assignment = assign_guides(strands, layout, guides)
    np.testing.assert_allclose(assignment.weights.sum(axis=1), 1.0)
    child = next(i for i in range(40) if i not in set(guides.tolist()))
    shapes = resample(strands, layout, 12)
    distances = [strand_distance(shapes[child], shapes[guides[slot]]) for slot in assignment.pairs[child]]
    inverse = 1.0 / np.asarray(distances)
    np.testing.assert_allclose(assignment.weights[child], inverse / inverse.sum(), rtol=1e-9)
    for slot, guide in enumerate(guides):
        assert assignment.weights[guide, 0] == 1.0 and assignment.pairs[guide, 0] == slot


def test_children_keep_their_roots_exactly_and_rest_is_reproduced():
    strands = scalp()
    layout = StrandLayout.uniform(64, 10)
    guides = select_guides(strands, layout, 12)
    interpolator = GuideInterpolator(strands, layout, assign_guides(strands, layout, guides))
    np.testing.assert_allclose(interpolator.interpolate(strands[guides], strands[:, 0]), strands, atol=1e-12)
    rng = np.random.default_rng(3)
    moved = strands[guides] + rng.normal(size=strands[guides].shape) * 0.05
    moved[:, 0] = strands[guides, 0]
    angle = 0.7
    rotation = np.array([[np.cos(angle), -np.sin(angle), 0.0], [np.sin(angle), np.cos(angle), 0.0], [0.0, 0.0, 1.0]])
    roots = strands[:, 0] @ rotation.T + [0.3, 0.0, 0.1]
    children = interpolator.interpolate(moved, roots, np.broadcast_to(rotation, (64, 3, 3)))
    np.testing.assert_array_equal(children[:, 0], roots)


def test_interpolated_children_follow_a_rigid_head_turn_exactly():
    strands = scalp()
    layout = StrandLayout.uniform(64, 10)
    interpolator = GuideInterpolator(strands, layout, assign_guides(strands, layout, select_guides(strands, layout, 8)))
    angle = 0.4
    rotation = np.array([[1.0, 0.0, 0.0], [0.0, np.cos(angle), -np.sin(angle)], [0.0, np.sin(angle), np.cos(angle)]])
    turned = strands @ rotation.T
    guides = interpolator.assignment.guides
    children = interpolator.interpolate(turned[guides], turned[:, 0], np.broadcast_to(rotation, (64, 3, 3)))
    np.testing.assert_allclose(children, turned, atol=1e-12)


def test_shape_error_of_interpolated_children_vs_simulating_them():
    """Documented in docs/fast_hair.md: wind-blown particle hair, 64 strands, 16 guides."""
    strands = scalp(points=10)
    layout = StrandLayout.uniform(64, 10)
    wind = WindSettings(direction=(0.0, 1.0, 0.0), strength=6.0, amplitude=3.0, period=1.0)
    solver = ParticleHairSolver(strands, layout, ParticleHairSettings(damping=1.0, wind=wind), [0.0, 0.0, -9.81])
    state = solver.initial_state()
    targets = strands[:, :2].copy()
    interpolator = GuideInterpolator(strands, layout, assign_guides(strands, layout, select_guides(strands, layout, 16)))
    guides = interpolator.assignment.guides
    errors, motions = [], []
    for _ in range(96):
        solver.step(state, state, StrandControl(targets), None, 1.0 / 96.0)
        children = interpolator.interpolate(state.positions[guides], strands[:, 0])
        errors.append(np.linalg.norm(children - state.positions, axis=-1).mean())
        motions.append(np.linalg.norm(state.positions - strands, axis=-1).mean())
    error, motion = float(np.mean(errors)), float(np.mean(motions))
    print(f"mean child shape error {error * 1000:.2f} mm vs mean motion {motion * 1000:.2f} mm")
    assert motion > 0.02
    assert error < 0.1 * motion


def test_a_guide_lying_over_a_head_lays_its_child_over_the_childs_own_part_of_it():
    """A guide rooted on the +x side of a head and a child on the +y side, both straight out of the scalp at
    rest. The guide lies down along the scalp towards +y; its child lies down along its own patch of scalp
    (towards −x: the guide's shape turned by the rotation between their root directions), not straight out
    along +y, which is what the guide's world-space shape would give it."""
    rest = np.array([[[0.1, 0.0, 0.0], [0.15, 0.0, 0.0], [0.2, 0.0, 0.0]],
                     [[0.0, 0.1, 0.0], [0.0, 0.15, 0.0], [0.0, 0.2, 0.0]]])
    assignment = GuideAssignment(guides=np.array([0]), pairs=np.zeros((2, 2), np.int64),
                                 weights=np.array([[1.0, 0.0], [1.0, 0.0]]))
    interpolator = GuideInterpolator(rest, StrandLayout.uniform(2, 3), assignment)
    lying = np.array([[[0.1, 0.0, 0.0], [0.1, 0.05, 0.0], [0.1, 0.1, 0.0]]])
    strands = interpolator.interpolate(lying, rest[:, 0])
    np.testing.assert_allclose(strands[0], lying[0], atol=1e-12)
    np.testing.assert_allclose(strands[1], [[0.0, 0.1, 0.0], [-0.05, 0.1, 0.0], [-0.1, 0.1, 0.0]], atol=1e-12)


def _parting_pair(points=6, length=0.1):
    """Two guides rooted 1 cm apart straight out along +x and a child between them (weights ½, ½), all at rest
    with segments of length / (points − 1) [m]; returns (interpolator, rest (3, P, 3))."""
    t = np.linspace(0.0, length, points)
    straight = np.stack([t, np.zeros_like(t), np.zeros_like(t)], axis=-1)
    rest = np.stack([straight, straight + [0.0, 0.01, 0.0], straight + [0.0, 0.005, 0.0]])
    assignment = GuideAssignment(guides=np.array([0, 1]), pairs=np.array([[0, 0], [1, 1], [0, 1]]),
                                 weights=np.array([[1.0, 0.0], [1.0, 0.0], [0.5, 0.5]]))
    return GuideInterpolator(rest, StrandLayout.uniform(3, points), assignment), rest


def _turned(strand, degrees, scale=1.0):
    """strand (P, 3) turned by ``degrees`` about +y around its root and stretched by ``scale``."""
    angle = np.radians(degrees)
    rotation = np.array([[np.cos(angle), 0.0, np.sin(angle)], [0.0, 1.0, 0.0], [-np.sin(angle), 0.0, np.cos(angle)]])
    return strand[0] + scale * (strand - strand[0]) @ rotation.T


def test_a_child_between_parting_guides_keeps_its_length():
    """One guide turns 60° up and the other 60° down: the blend of their points is half as long as either (the
    child folds onto its root); the child keeps its rest length along the blended direction instead."""
    interpolator, rest = _parting_pair()
    guides = np.stack([_turned(rest[0], -60.0), _turned(rest[1], 60.0)])
    child = interpolator.interpolate(guides, rest[:, 0])[2]
    segments = np.linalg.norm(np.diff(child, axis=0), axis=-1)
    np.testing.assert_allclose(segments, 0.02, rtol=1e-9)
    np.testing.assert_allclose(child[:, 2], 0.0, atol=1e-12)           # the directions are blended: along +x
    np.testing.assert_allclose(child[-1] - child[0], [0.1, 0.0, 0.0], atol=1e-12)


def test_a_child_between_opposite_guides_leans_to_its_heavier_guide_and_holds_still():
    """One guide turned 89° up and the other 89° down (nearly opposite, as two guides that part over an ear):
    the blend of their segments is the small difference of two opposite vectors, and set to full length its
    direction swung with the guides' least motion (a guide tip swaying 0.015 mm moved the child's tip 0.44 mm,
    29×; on Suzanne children jumped 2–7 cm a frame at rest). The child now leans to its heavier guide (slot 0
    here) where the blend is short, keeps its length, and moves about as little as the guides do."""
    interpolator, rest = _parting_pair()

    def swayed(strand, degrees):          # turned about +z around its root: the tip moves sideways (y)
        angle = np.radians(degrees)
        rotation = np.array([[np.cos(angle), -np.sin(angle), 0.0], [np.sin(angle), np.cos(angle), 0.0],
                             [0.0, 0.0, 1.0]])
        return strand[0] + (strand - strand[0]) @ rotation.T

    children, lighter = [], []
    for sway in (0.0, 0.5, -0.5):          # the lighter guide sways about the vertical
        lighter.append(swayed(_turned(rest[1], 89.0), sway))
        children.append(interpolator.interpolate(np.stack([_turned(rest[0], -89.0), lighter[-1]]), rest[:, 0])[2])
    tip_motion = max(np.linalg.norm(child[-1] - children[0][-1]) for child in children)
    guide_motion = max(np.linalg.norm(strand[-1] - lighter[0][-1]) for strand in lighter)
    assert tip_motion < 3.0 * guide_motion, (tip_motion, guide_motion)
    for child in children:
        np.testing.assert_allclose(np.linalg.norm(np.diff(child, axis=0), axis=-1), 0.02, rtol=1e-9)
        assert child[-1, 2] > 0.09                                     # up, with the heavier guide


def test_a_child_stretches_as_its_guides_do():
    """Guides stretched by 8 % (particle hair up to its stretch clamp): their child stretches by 8 % too, so it
    does not fall short of the guides around it."""
    interpolator, rest = _parting_pair()
    guides = np.stack([_turned(rest[0], 30.0, 1.08), _turned(rest[1], 30.0, 1.08)])
    child = interpolator.interpolate(guides, rest[:, 0])[2]
    np.testing.assert_allclose(np.linalg.norm(np.diff(child, axis=0), axis=-1), 0.02 * 1.08, rtol=1e-9)
    np.testing.assert_allclose(child, _turned(rest[2], 30.0, 1.08), atol=1e-12)


def _box(low, high):
    """A closed box shell from corner ``low`` to ``high`` [m] as a MeshGeometry (outward winding)."""
    from solver_server.collision.mesh import MeshGeometry

    corners = np.array([[x, y, z] for x in (low[0], high[0]) for y in (low[1], high[1]) for z in (low[2], high[2])])
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    triangles = np.array([t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))], np.int32)
    geometry = MeshGeometry("Box", corners, triangles)
    geometry.set_vertices(corners)
    return geometry


def test_a_child_segment_no_turn_gets_out_takes_the_nearest_way_out_of_the_shells():
    """A segment from 8 mm before a wall pointing into it (every turn towards the way out ends inside, as in the
    fold between an ear and the head): the nearest of the 26 directions that ends outside runs along the wall,
    and the segment turns back from it towards its own direction as far as it stays outside (a kink no sharper
    than it must be); inside a shell with no way out within its length it keeps the fallback."""
    from solver_server.solvers.guides.strand_object import StrandObject

    box = _box((0.0, -1.0, -1.0), (1.0, 1.0, 1.0))
    start = np.array([[-0.008, 0.0, 0.0], [0.5, 0.0, 0.0]])
    own = np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    fallback = np.array([[9.0, 9.0, 9.0], [7.0, 7.0, 7.0]])
    length = np.array([[0.02], [0.02]])
    end = StrandObject._nearest_way_out(box, start, own, length, np.full(2, 1e-4), fallback, np)
    _, inside = box.recover_inside(np, end[:1], np.full(1, 1e-4))
    assert not inside[0]
    np.testing.assert_allclose(np.linalg.norm(end[0] - start[0]), 0.02, rtol=1e-12)
    direction = (end[0] - start[0]) / 0.02
    assert 0.25 < direction[0] < 0.4            # turned back from along the wall (0) short of the wall (0.4)
    np.testing.assert_array_equal(end[1], fallback[1])


def test_a_segment_poking_into_the_skin_is_laid_out_as_far_as_its_depth_asks_and_continuously():
    """A 20 mm segment pointing steeply into a wall (8° off its normal), its end 0.1 to 1 mm deep (a Cosserat tip
    the contact force has not yet pushed out, or a child's segment that dips under the skin): it is drawn outside,
    at its length, its end moved about as far as turning it about its start needs (√(2 d L) for a depth d), and a
    tenth of a millimetre deeper moves the drawn end by a millimetre at most. The trial turns alone turned it by
    their fixed fractions: 1.4 mm at 0.1 mm deep, 27 mm from 0.3 mm on, so a tip resting at the skin hopped a few
    centimetres between frames."""
    from solver_server.solvers.guides.strand_object import StrandObject

    box = _box((0.0, -1.0, -1.0), (1.0, 1.0, 1.0))
    length = 0.02
    own = np.array([0.99, np.sqrt(1.0 - 0.99 ** 2), 0.0])
    reach = np.full(1, 1e-4)
    ends = []
    for depth in np.linspace(1e-4, 1e-3, 10):
        end = np.array([[depth, 0.0, 0.0]])
        start = end - length * own
        exit_point, inside = box.recover_inside(np, end, reach)
        assert inside[0]
        drawn = StrandObject._way_out(None, box, start, end, exit_point, reach, np)
        _, still = box.recover_inside(np, drawn, reach)
        assert not still[0]
        np.testing.assert_allclose(np.linalg.norm(drawn[0] - start[0]), length, rtol=1e-9)
        assert np.linalg.norm(drawn[0] - end[0]) < 1.5 * np.sqrt(2.0 * (depth + reach[0]) * length)
        ends.append(drawn[0] - start[0])
    assert max(np.linalg.norm(np.diff(ends, axis=0), axis=1)) < 1e-3


def _box_behind_a_wall(half_width: float = 1.0):
    """A collision.ColliderSet of one closed box mesh filling 0 ≤ x ≤ 1, |y| ≤ half_width, |z| ≤ 1: a wall at
    x = 0 (a thin one a fin, an ear)."""
    from solver_server.collision.colliders import ColliderSet
    from solver_server.sim.builder import parse_scene

    corners = np.array([[x, y, z] for x in (0.0, 1.0) for y in (-half_width, half_width) for z in (-1.0, 1.0)])
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    triangles = np.array([t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))], np.int32)
    cloth = {"id": "Cloth", "kind": "cloth", "vertices": np.eye(3) + 5.0, "triangles": np.array([[0, 1, 2]])}
    spec = parse_scene({"objects": [cloth, {"id": "Box", "kind": "collider", "vertices": corners,
                                            "triangles": triangles, "params": {}}],
                        "time": {"fps": 24, "frame_start": 1, "frame_end": 2, "substeps": 1}})
    return ColliderSet([obj for obj in spec.objects if obj.kind == "collider"])


def test_a_strand_with_a_tip_inside_a_shell_is_laid_out_and_named():
    """A strand whose tip ended a fraction of a millimetre inside a closed mesh (Cosserat's contact push is a force
    that closes the depth over the next substep; the group lays such strands out at the frame's end) comes back
    with its tip outside at its segment's length and the points before it where they are, and is the one strand
    named as laid; the points given are not changed, and a strand outside is returned as it is."""
    from solver_server.solvers.guides.strand_object import StrandObject

    colliders = _box_behind_a_wall()
    into = np.array([[-0.06, 0.0, 0.0], [-0.04, 0.0, 0.0], [-0.02, 0.0, 0.0], [0.0003, 0.0, 0.001]])
    clear = into - [0.1, 0.0, 0.0]
    strands = np.stack([clear, into])
    given = strands.copy()
    hair = StrandObject("Hair", StrandLayout.uniform(2, 4), strands.copy(), 1, None, {}, None, {})
    laid, named = hair.laid_outside(given, colliders, 1e-4, np)
    np.testing.assert_array_equal(given, strands)
    assert named.tolist() == [False, True]
    np.testing.assert_array_equal(laid[0], clear)
    np.testing.assert_array_equal(laid[1, :3], into[:3])
    assert laid[1, 3, 0] < 0.0                                              # outside the wall at x = 0
    np.testing.assert_allclose(np.linalg.norm(laid[1, 3] - laid[1, 2]), np.linalg.norm(into[3] - into[2]), rtol=1e-9)
    np.testing.assert_array_equal(hair.draw(given, None, np, colliders, 1e-4).points, given)   # drawn as given


def test_a_segment_plunging_straight_into_the_skin_lies_the_way_it_was_drawn_before():
    """A child's segment that points straight into a wall has almost no direction of its own along it: laid from
    its own sliver of sideways direction, its end swung to the opposite side when that sliver changed sign (a tip
    hopping 16 cm a frame on Suzanne with the head at rest). Given where the strand was drawn the frame before,
    it lies on that side again; and with no shell entered, nothing moves."""
    from solver_server.solvers.guides.strand_object import StrandObject

    colliders = _box_behind_a_wall()

    def plunging(sideways):
        start = np.array([[-0.045, 0.0, 0.0], [-0.025, 0.0, 0.0], [-0.005, 0.0, 0.0]])
        direction = np.array([1.0, sideways, 0.0]) / np.hypot(1.0, sideways)
        return np.concatenate([start, start[-1:] + 0.02 * direction])[None]

    hair = StrandObject("Hair", StrandLayout.uniform(1, 4), plunging(0.0), 1, None, {}, None, {})
    first, _ = hair.laid_outside(plunging(0.02), colliders, 1e-4, np)
    assert first[0, 3, 0] < 0.0 and first[0, 3, 1] > 0.015          # laid along the wall, to its own side
    again, laid = hair.laid_outside(plunging(-0.02), colliders, 1e-4, np, previous=first)
    assert laid.tolist() == [True]
    assert again[0, 3, 0] < 0.0
    assert np.linalg.norm(again[0, 3] - first[0, 3]) < 0.005, (first[0, 3], again[0, 3])
    np.testing.assert_allclose(np.linalg.norm(again[0, 3] - again[0, 2]), 0.02, rtol=1e-9)
    swung, _ = hair.laid_outside(plunging(-0.02), colliders, 1e-4, np)   # without the frame before: the other side
    assert swung[0, 3, 1] < -0.015


STRAIGHT_SEGMENT = 0.02                                                   # [m]
STRAIGHT = np.arange(6)[:, None] * np.array([STRAIGHT_SEGMENT, 0.0, 0.0])   # (6, 3) [m] a strand along +x


def _about_z(degrees):
    """Rotation matrix (3, 3) by ``degrees`` about +z."""
    angle = np.radians(degrees)
    return np.array([[np.cos(angle), -np.sin(angle), 0.0], [np.sin(angle), np.cos(angle), 0.0], [0.0, 0.0, 1.0]])


def test_a_laid_child_turns_with_its_root_frame_and_returns_to_its_blend_slowly():
    """A child laid 35° up from its blend (folded over an ear) on a head that then turns 90°: its laying is carried
    with its root frame, so with the blend turned the same way the child is its old drawing turned, exactly where
    it would be on the turned head. With nothing in its way it then returns to its blend by at most the step a
    point a frame (about that at its tip), at its blend's lengths, its root held; a child never laid is its blend
    exactly."""
    from solver_server.solvers.guides.drawing import DrawnStrands, carried_deviation, carried_layings

    segment, step = STRAIGHT_SEGMENT, np.array([0.002, 0.002])
    blend = np.stack([STRAIGHT, _turned(STRAIGHT, 6.0)])
    laid = np.stack([_turned(STRAIGHT, 35.0), blend[1]])
    still, turn = np.stack([np.eye(3)] * 2), np.stack([_about_z(90.0)] * 2)
    before = DrawnStrands(laid, blend, blend, still)
    turned_blend = blend @ turn[0].T
    carried, _ = carried_layings(np, turned_blend, carried_deviation(np, turn, before), step, 1)
    np.testing.assert_allclose(carried, laid @ turn[0].T, atol=1e-12)
    unturned, _ = carried_layings(np, turned_blend, carried_deviation(np, turn, DrawnStrands(laid, blend)), step, 1)
    assert np.linalg.norm(unturned[0, -1] - carried[0, -1]) > 0.01      # a laying carried without its root frame
    drawn, moves = DrawnStrands(carried, turned_blend, turned_blend, turn), []
    for _ in range(200):
        _, relaxed = carried_layings(np, turned_blend, carried_deviation(np, turn, drawn), step, 1)
        moves.append(np.linalg.norm(relaxed[0] - drawn.points[0], axis=1).max())
        np.testing.assert_array_equal(relaxed[:, 0], turned_blend[:, 0])              # the root stays
        np.testing.assert_allclose(np.linalg.norm(np.diff(relaxed[0], axis=0), axis=1), segment, rtol=1e-12)
        np.testing.assert_array_equal(relaxed[1], turned_blend[1])                    # never laid: its blend
        drawn = DrawnStrands(relaxed, turned_blend, turned_blend, turn)
    assert max(moves) < 1.5 * step[0], max(moves)
    assert moves[0] > 0.5 * step[0]                                                    # it does move back
    np.testing.assert_allclose(drawn.points, turned_blend, atol=1e-12)                 # and gets there


def test_a_laid_child_stays_on_its_side_of_a_fin_its_blend_runs_through():
    """A child drawn along one side of a fin (an ear) while its blend runs through the fin. Laid afresh every frame
    it could come out on either side (the laying's choice flips with millimetres of the blend: a hop through the
    ear); carried from its drawing, it stays on its own side, outside, closing in on the fin by at most the step a
    frame."""
    from solver_server.solvers.guides.drawing import DEVIATION_RELAX_PER_FRAME, DrawnStrands
    from solver_server.solvers.guides.strand_object import StrandObject

    colliders = _box_behind_a_wall(half_width=0.01)
    blend = (STRAIGHT + [-0.04, 0.0, 0.0])[None]                    # from outside the fin (x < 0) through it
    before = blend[0, 0] + (blend - blend[0, 0]) @ _about_z(25.0).T   # turned beside it (y > 0.01 where x ≥ 0)

    def beside_the_fin(points):     # every point before the fin (x < 0) or beside it on its +y side
        return np.all((points[:, 0] < 0.0) | (points[:, 1] > 0.01))

    assert beside_the_fin(before[0])
    hair = StrandObject("Hair", StrandLayout.uniform(1, 6), before.copy(), 1, None, {}, None, {})
    step = DEVIATION_RELAX_PER_FRAME * hair.rest_segment_length[0]
    still = np.eye(3)[None]
    drawn = DrawnStrands(before, blend, blend, still)
    for _ in range(60):
        points = hair._carried(blend, still, drawn, colliders, 1e-4, np)
        assert beside_the_fin(points[0]), points[0]
        assert np.linalg.norm(points - drawn.points, axis=-1).max() < 1.5 * step
        drawn = DrawnStrands(points, blend, blend, still)
    assert drawn.points[0, drawn.points[0, :, 0] >= 0.0, 1].min() < 0.012    # as close as the fin lets it


def test_a_child_moves_no_farther_than_its_guides_mean_plus_a_step():
    """Where a child's two guides part, its blended segments are short and, set to their full length, turn with every
    millimetre the guides move: a child's tip moved 2.5 times as far in a frame as the farther of its guides. Its
    motion beyond the mean of its guides' carried shapes is now at most the step at every point (about that after
    its lengths are restored), it keeps its root and its blend's lengths, and it catches up within a few frames; a
    child within the bound is returned exactly as blended."""
    from solver_server.solvers.guides.drawing import DrawnStrands, bounded_blend

    segment, step = STRAIGHT_SEGMENT, np.array([0.005, 0.005])
    mean = np.stack([STRAIGHT, STRAIGHT])                          # the guides' mean stays where it is
    blended = np.stack([_turned(STRAIGHT, 30.0), _turned(STRAIGHT, 6.0)])
    before = DrawnStrands(blended, blended, mean)
    swung = np.stack([_turned(STRAIGHT, -30.0), _turned(STRAIGHT, 6.0)])   # the blend swings to the other side at once
    drawn, moves = before, []
    for _ in range(40):
        blend = bounded_blend(np, swung, mean, drawn, step, 1)
        moves.append(np.linalg.norm(blend[0] - drawn.blend[0], axis=1).max())
        np.testing.assert_array_equal(blend[:, 0], swung[:, 0])
        np.testing.assert_allclose(np.linalg.norm(np.diff(blend[0], axis=0), axis=1), segment, rtol=1e-12)
        np.testing.assert_array_equal(blend[1], swung[1])                    # within the bound: as blended
        drawn = DrawnStrands(blend, blend, mean)
    assert moves[0] < 1.5 * step[0] and max(moves) < 1.5 * step[0], moves
    np.testing.assert_allclose(drawn.blend, swung, atol=1e-12)                 # caught up
    np.testing.assert_array_equal(bounded_blend(np, swung, mean, DrawnStrands(before.points, before.blend), step, 1),
                                  swung)                                       # no mean checkpointed: no bound
