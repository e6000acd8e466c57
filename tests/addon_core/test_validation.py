"""core.validation: every broken input is caught with a message naming the object; good input passes."""

import numpy as np
import pytest

from blender_addon.core import validation
from blender_addon.core.validation import Problem

from addon_shapes import cube, strands


def only(problems, object_id, fragment):
    assert len(problems) == 1, problems
    assert problems[0].object == object_id and fragment in problems[0].message
    assert str(problems[0]).startswith(f"{object_id}: ")


def test_good_inputs_have_no_problems():
    vertices, triangles = cube()
    assert validation.check_mesh("Jelly", vertices, triangles, "soft body") == []
    assert validation.check_closed_manifold("Jelly", triangles) == []
    assert validation.check_transform("Jelly", np.diag([2.0, 1.0, 0.5, 1.0])) == []
    assert validation.check_hair("Hair", *strands()) == []
    assert validation.check_pin_group("Sheet", "pins", ["pins", "other"]) == []
    assert validation.check_pin_group("Sheet", "", []) == []
    assert validation.check_emitter("Hair", "Head", "MESH", "NONE", "PLANE", "UVMap", ["UVMap"]) == []
    assert validation.check_emitter("Hair", "Head", "MESH", "COLLIDER", "MESH", "", []) == []


def test_empty_mesh_and_mesh_without_faces():
    vertices, triangles = cube()
    only(validation.check_mesh("Sheet", vertices[:0], triangles[:0], "cloth"), "Sheet", "empty")
    only(validation.check_mesh("Sheet", vertices, triangles[:0], "cloth"), "Sheet", "no faces")


def test_zero_area_triangles_and_nan():
    vertices, triangles = cube()
    collapsed = vertices.copy()
    collapsed[1] = collapsed[0]
    only(validation.check_mesh("Sheet", collapsed, triangles, "cloth"), "Sheet", "zero-area")
    broken = vertices.copy()
    broken[3, 2] = np.nan
    only(validation.check_mesh("Sheet", broken, triangles, "cloth"), "Sheet", "NaN")


def test_open_non_manifold_and_flipped_soft_bodies():
    _, triangles = cube()
    only(validation.check_closed_manifold("Jelly", triangles[1:]), "Jelly", "open")
    fin = np.vstack([triangles, [[0, 1, 7]]])  # edge 0-1 now in three faces
    assert any("non-manifold" in problem.message for problem in validation.check_closed_manifold("Jelly", fin))
    flipped = triangles.copy()
    flipped[0] = flipped[0, ::-1]
    only(validation.check_closed_manifold("Jelly", flipped), "Jelly", "inconsistent normals")


def test_negative_and_zero_scale():
    only(validation.check_transform("Floor", np.diag([1.0, -1.0, 1.0, 1.0])), "Floor", "negative scale")
    only(validation.check_transform("Floor", np.diag([1.0, 0.0, 1.0, 1.0])), "Floor", "scaled to zero")
    assert validation.check_transform("Floor", np.diag([-1.0, -1.0, 1.0, 1.0])) == []  # a rotation by 180°


def test_hair_problems():
    points, offsets = strands(count=3, points=5)
    doubled = points.copy()
    doubled[7] = doubled[6]  # strand 1, points 1 and 2
    only(validation.check_hair("Hair", doubled, offsets), "Hair", "zero-length")
    assert "strand 1, point 1" in validation.check_hair("Hair", doubled, offsets)[0].message
    # strands that touch end to start are not a zero-length segment (that "segment" joins two strands)
    touching = points.copy()
    touching[5] = touching[4]
    assert validation.check_hair("Hair", touching, offsets) == []
    only(validation.check_hair("Hair", points, [0, 5, 6, 15]), "Hair", "fewer than 2 points")
    only(validation.check_hair("Hair", points[:0], [0]), "Hair", "no strands")


def test_missing_pin_group_names_the_group():
    only(validation.check_pin_group("Sheet", "pins", ["other"]), "Sheet", "'pins' does not exist")


@pytest.mark.parametrize("args, fragment", [
    ((None, None, None, None, "", []), "missing emitter surface"),
    (("Head", None, None, None, "", []), "not in this scene"),
    (("Head", "CURVE", "NONE", "PLANE", "", []), "not a mesh"),
    (("Head", "MESH", "CLOTH", "PLANE", "", []), "simulated"),
    (("Head", "MESH", "COLLIDER", "SPHERE", "", []), "collider shape to Mesh"),
    (("Head", "MESH", "NONE", "PLANE", "UVMap", ["Other"]), "no UV map 'UVMap'"),
])
def test_emitter_problems(args, fragment):
    only(validation.check_emitter("Hair", *args), "Hair", fragment)


def test_summary_names_the_first_problem_and_counts_the_rest():
    problems = [Problem("A", "bad"), Problem("B", "worse")]
    assert validation.summary(problems) == "A: bad (and 1 more problem(s), listed in the Tangle Bake panel)"
    assert validation.summary(problems[:1]) == "A: bad"
    assert validation.summary([]) == ""
