"""core.strands: keyframe paths, strand tangents and Bezier handles that follow their knots."""

import numpy as np

from blender_addon.core import strands


def test_position_paths_round_trip():
    assert strands.position_path(12) == 'attributes["position"].data[12].vector'
    assert strands.point_of_position_path(strands.position_path(12)) == 12
    assert strands.point_of_position_path('key_blocks["x"].value') is None


def test_tangents_are_central_inside_and_one_sided_at_strand_ends():
    points = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [5, 5, 5], [5, 5, 7.0]])
    tangents = strands.strand_tangents(points, [0, 3, 5])
    np.testing.assert_allclose(tangents[0], [1, 0, 0])
    np.testing.assert_allclose(tangents[1], np.array([1, 1, 0]) / np.sqrt(2))
    np.testing.assert_allclose(tangents[2], [0, 1, 0])
    np.testing.assert_allclose(tangents[3:], [[0, 0, 1], [0, 0, 1]])  # strand 2 does not see strand 1


def test_rotations_take_vectors_onto_each_other_including_opposite():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(20, 3))
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b = rng.normal(size=(20, 3))
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    b[0] = -a[0]
    b[1] = a[1]
    rotations = strands.rotations_between(a, b)
    np.testing.assert_allclose(np.einsum("kij,kj->ki", rotations, a), b, atol=1e-12)
    np.testing.assert_allclose(rotations @ np.transpose(rotations, (0, 2, 1)), np.broadcast_to(np.eye(3), (20, 3, 3)),
                               atol=1e-12)
    np.testing.assert_allclose(np.linalg.det(rotations), 1.0)


def test_aligned_handles_follow_a_rigid_turn_of_the_strand_exactly():
    """Handles along the tangent (Blender's Auto / Aligned handles) turn exactly with the strand; the
    smallest rotation leaves the twist about the tangent out, which such handles do not see."""
    knots = np.array([[0, 0, 0], [0, 0, -1.0], [0.2, 0, -2.0]])
    left = knots - strands.strand_tangents(knots, [0, 3]) * [[0.3], [0.2], [0.4]]
    turn = np.array([[0, -1, 0], [1, 0, 0], [0, 0, 1.0]]) @ np.array([[1, 0, 0], [0, 0, -1], [0, 1, 0.0]])
    moved = knots @ turn.T + [1, 2, 3]
    np.testing.assert_allclose(strands.carried_handles(knots, left, moved, [0, 3]), left @ turn.T + [1, 2, 3],
                               atol=1e-12)


def test_a_groom_made_on_the_rest_scalp_is_carried_rigidly_onto_the_posed_scalp():
    """Two strands bound to two triangles; the surface turns 90° about z and moves: each strand keeps its
    place on its triangle and its angle to it (a bake starting on a posed frame)."""
    rest_corners = np.array([[[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]],
                             [[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]])
    weights = np.array([[0.2, 0.3, 0.5], [1.0 / 3, 1.0 / 3, 1.0 / 3]])
    roots = np.einsum("sk,skd->sd", weights, rest_corners)
    along = np.array([[0.0, 0.3, 1.0], [1.0, 0.0, 0.2]])
    points = np.concatenate([roots[s] + np.outer(np.linspace(0.0, 0.1, 4), along[s]) for s in range(2)])
    offsets = np.array([0, 4, 8])
    turn = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    shift = np.array([0.5, -0.2, 1.0])
    posed_corners = rest_corners @ turn.T + shift
    carried = strands.carried_to_posed(points, offsets, weights, rest_corners, posed_corners)
    np.testing.assert_allclose(carried, points @ turn.T + shift, atol=1e-12)
    # at rest nothing moves
    np.testing.assert_allclose(strands.carried_to_posed(points, offsets, weights, rest_corners, rest_corners), points,
                               atol=1e-12)
