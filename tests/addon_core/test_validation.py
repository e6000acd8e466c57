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


# ---- settings: the server's rules before anything is sent, and settings that look wrong

def _sheet_edges(size=0.05):
    vertices = np.array([[0, 0, 0], [size, 0, 0], [size, size, 0], [0, size, 0]], float)
    corners = vertices[np.array([[0, 1, 2], [0, 2, 3]])]
    return np.linalg.norm(corners - np.roll(corners, 1, axis=1), axis=2).ravel()


def test_settings_the_server_refuses_are_blocking_problems_before_the_bake():
    from blender_addon.core.param_table import CLOTH_PARAMS, defaults

    params = defaults(CLOTH_PARAMS)
    assert validation.check_settings("Sheet", "cloth", params, _sheet_edges()) == []
    for limits in ((1.2, 1.5), (0.5, 0.9)):
        only(validation.check_settings("Sheet", "cloth", {**params, "strain_limits": limits}), "Sheet",
             "must satisfy min ≤ 1 ≤ max")
    thick = {**params, "self_collision": True, "thickness": 0.02}          # 2 cm on 5 cm edges
    only(validation.check_settings("Sheet", "cloth", thick, _sheet_edges()), "Sheet", "too large for self-collision")
    assert validation.check_settings("Sheet", "cloth", {**thick, "self_collision": False}, _sheet_edges()) == []
    assert all(problem.blocking for problem in validation.check_settings(
        "Sheet", "cloth", {**thick, "strain_limits": (1.2, 1.5)}, _sheet_edges()))


def test_the_addon_refuses_exactly_what_the_server_refuses():
    from solver_server.sim import builder
    from solver_server.sim.errors import SceneError
    from solver_server.sim.params import resolve_params

    assert validation.SELF_COLLISION_THICKNESS == builder.SELF_COLLISION_THICKNESS
    for limits in ((1.2, 1.5), (0.5, 0.9), (0.9, 1.1), (1.0, 1.0)):
        refused_here = bool(validation.check_settings("Sheet", "cloth", {"strain_limits": limits}))
        try:
            resolve_params("cloth", {"strain_limits": list(limits)}, "Sheet")
            refused_there = False
        except SceneError:
            refused_there = True
        assert refused_here == refused_there, limits


def test_zero_thickness_near_colliders_or_with_self_collision_is_a_warning():
    from blender_addon.core.param_table import CLOTH_PARAMS, SOFTBODY_PARAMS, defaults

    cloth = {**defaults(CLOTH_PARAMS), "thickness": 0.0}
    assert validation.check_settings("Sheet", "cloth", cloth, _sheet_edges()) == []   # nothing to touch
    warning = validation.check_settings("Sheet", "cloth", cloth, _sheet_edges(), near_colliders=True)
    only(warning, "Sheet", "thickness 0: the cloth rests exactly on collider surfaces")
    assert not warning[0].blocking
    only(validation.check_settings("Sheet", "cloth", {**cloth, "self_collision": True}, _sheet_edges()),
         "Sheet", "collider surfaces and itself")
    soft = {**defaults(SOFTBODY_PARAMS), "thickness": 0.0}
    only(validation.check_settings("Jelly", "softbody", soft, near_colliders=True), "Jelly", "the soft body rests")
    assert validation.blocking(validation.check_settings("Jelly", "softbody", soft, near_colliders=True)) == []
