"""scene_export for soft bodies, hair, box/torus/mesh colliders and deformed-vertex drive entries; the
entries pass the solver server's own scene parser (solver_server.sim.builder) unchanged."""

import numpy as np
import pytest

from blender_addon.core import scene_export
from blender_addon.core.param_table import HAIR_PARAMS, SOFTBODY_PARAMS, defaults
from blender_addon.core.scene_export import ExportError
from solver_server.sim.builder import parse_scene

from addon_shapes import cube, strands


def test_softbody_entry_is_parsed_by_the_server():
    vertices, triangles = cube()
    entry = scene_export.softbody_object("Jelly", vertices, triangles, [0], [1.0], defaults(SOFTBODY_PARAMS))
    assert entry["kind"] == "softbody" and entry["triangles"].dtype == np.dtype("<i4")
    floor = scene_export.collider_object("Floor", scene_export.plane_shape(), np.eye(4), {}, False)
    spec = parse_scene(scene_export.build_scene([entry, floor], 24.0, 1, 5, 2)).by_id("Jelly")
    np.testing.assert_array_equal(spec.vertices, vertices)
    assert spec.params["young_modulus"] == 1.0e5 and list(spec.pin_indices) == [0]


def test_moving_cloth_and_softbody_carry_their_matrix_and_are_animated():
    vertices, triangles = cube()
    matrix = np.eye(4)
    matrix[:3, 3] = [1.0, 2.0, 3.0]
    cloth = scene_export.cloth_object("Cape", vertices, triangles, [0], [1.0], {}, matrix)
    jelly = scene_export.softbody_object("Jelly", vertices + 3.0, triangles, [], [], {}, matrix)
    static = scene_export.cloth_object("Sheet", vertices + 6.0, triangles, [], [], {})
    assert cloth["animated"] is True and jelly["animated"] is True and static["animated"] is False
    assert "matrix_world" not in static and cloth["matrix_world"].dtype == np.dtype("<f8")
    parsed = parse_scene(scene_export.build_scene([cloth, jelly, static], 24.0, 1, 3, 1))
    np.testing.assert_array_equal(parsed.by_id("Cape").matrix_world, matrix)
    assert parsed.by_id("Cape").animated and not parsed.by_id("Sheet").animated


def test_softbody_rejects_zero_area_triangles():
    vertices, triangles = cube()
    vertices[1] = vertices[0]
    with pytest.raises(ExportError, match="zero-area") as info:
        scene_export.softbody_object("Jelly", vertices, triangles, [], [], {})
    assert info.value.object == "Jelly"


def test_simulated_mesh_kind_names_the_entry_and_an_unknown_kind_is_refused():
    vertices, triangles = cube()
    for kind in ("cloth", "softbody"):
        entry = scene_export.simulated_mesh_object(kind, "Thing", vertices, triangles, [], [], {})
        assert entry["kind"] == kind
    with pytest.raises(ExportError, match="'rope'") as info:
        scene_export.simulated_mesh_object("rope", "Thing", vertices, triangles, [], [], {})
    assert info.value.object == "Thing"
    with pytest.raises(ExportError, match="as a soft body"):
        scene_export.softbody_object("Jelly", vertices, np.zeros((0, 3), int), [], [], {})


def test_hair_entry_with_roots_is_parsed_by_the_server():
    points, offsets = strands()
    head_vertices, head_triangles = cube(center=(0.0, 0.0, 0.5))
    roots = scene_export.hair_roots("Head", [0, 1, 2], [[1.0, 0.0, 0.0], [0.2, 0.3, 0.5], [0.0, 0.0, 1.0]])
    hair = scene_export.hair_object("Hair", points, offsets, defaults(HAIR_PARAMS), np.eye(4), False, roots)
    head = scene_export.mesh_collider_object("Head", head_vertices, head_triangles, np.eye(4), {}, True)
    scene = parse_scene(scene_export.build_scene([hair, head], 24.0, 1, 5, 2))
    spec = scene.by_id("Hair")
    np.testing.assert_array_equal(spec.vertices, points)
    assert spec.raw["roots"]["surface"] == "Head" and spec.raw["roots"]["triangles"].dtype == np.dtype("<i4")
    assert spec.params["wind_direction"] == (1.0, 0.0, 0.0)
    assert scene.by_id("Head").animated is True and scene.by_id("Head").triangles.shape == (12, 3)


@pytest.mark.parametrize("offsets, fragment", [([0, 5, 6, 15], "at least 2 points"), ([0, 5], "at least 2 points"),
                                               ([0], "no strands")])
def test_hair_rejects_bad_strand_offsets(offsets, fragment):
    points, _ = strands()
    with pytest.raises(ExportError, match=fragment) as info:
        scene_export.hair_object("Hair", points, offsets, {}, np.eye(4), False)
    assert info.value.object == "Hair"


def test_hair_roots_must_match_the_strand_count():
    points, offsets = strands()
    with pytest.raises(ExportError, match="2 root bindings for 3 strands"):
        scene_export.hair_object("Hair", points, offsets, {}, np.eye(4), False,
                                 scene_export.hair_roots("Head", [0, 1], np.full((2, 3), 1 / 3)))


def test_barycentric_reproduces_points_inside_and_clamps_outside():
    rng = np.random.default_rng(3)
    corners = rng.normal(size=(50, 3, 3))
    weights = rng.dirichlet(np.ones(3), size=50)
    inside = np.einsum("sk,skd->sd", weights, corners)
    np.testing.assert_allclose(scene_export.barycentric_on_triangles(inside, corners), weights, atol=1e-9)
    # in 2D (UV space) too, and a point outside lands on the triangle with non-negative weights summing to 1
    uv_corners = np.array([[[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]])
    np.testing.assert_allclose(scene_export.barycentric_on_triangles([[0.25, 0.5]], uv_corners), [[0.25, 0.25, 0.5]])
    outside = scene_export.barycentric_on_triangles([[2.0, -1.0]], uv_corners)
    assert np.all(outside >= 0) and outside.sum() == pytest.approx(1.0)


def test_box_and_torus_fitted_to_the_bounding_box_are_parsed_by_the_server():
    box_corners = np.array([[x, y, z] for x in (-1.0, 3.0) for y in (0.0, 1.0) for z in (2.0, 2.5)])
    assert scene_export.box_shape(box_corners, "Crate") == {"type": "box", "center": [1.0, 0.5, 2.25],
                                                            "size": [4.0, 1.0, 0.5]}
    # Blender's default torus: major 1 m, minor 0.25 m -> bounding box 2.5 x 2.5 x 0.5 m
    torus_corners = np.array([[x, y, z] for x in (-1.25, 1.25) for y in (-1.25, 1.25) for z in (-0.25, 0.25)])
    torus = scene_export.torus_shape(torus_corners, "Ring")
    assert torus == {"type": "torus", "center": [0.0, 0.0, 0.0], "major_radius": 1.0, "minor_radius": 0.25}
    with pytest.raises(ExportError, match="flat") as info:
        scene_export.box_shape(np.zeros((8, 3)), "Crate")
    assert info.value.object == "Crate"
    with pytest.raises(ExportError, match="torus"):  # a cube's box: minor 0.5 m leaves no room for the ring
        scene_export.torus_shape(cube()[0], "Ring")
    vertices, triangles = cube()
    cloth = scene_export.cloth_object("Sheet", vertices, triangles, [], [], {})
    objects = [cloth] + [scene_export.collider_object(name, shape, np.eye(4), {}, False)
                         for name, shape in (("Crate", scene_export.box_shape(box_corners, "Crate")), ("Ring", torus))]
    parsed = parse_scene(scene_export.build_scene(objects, 24.0, 1, 3, 1))
    np.testing.assert_array_equal(parsed.by_id("Crate").shape["size"], [4.0, 1.0, 0.5])
    assert parsed.by_id("Ring").shape["minor_radius"] == 0.25


def test_drive_entry_carries_deformed_vertices():
    vertices, _ = cube()
    entry = scene_export.drive_entry("Body", np.eye(4), vertices)
    assert entry["vertices"].dtype == np.dtype("<f8") and entry["vertices"].shape == (8, 3)
    assert set(scene_export.drive_entry("Body", np.eye(4))) == {"matrix_world"}
    with pytest.raises(ExportError, match="deformed vertices") as info:
        scene_export.drive_entry("Body", np.eye(4), vertices[:, :2])
    assert info.value.object == "Body"


def test_build_scene_asks_for_any_simulated_role():
    floor = scene_export.collider_object("Floor", scene_export.plane_shape(), np.eye(4), {}, False)
    with pytest.raises(ExportError, match="Cloth, Soft Body or Hair"):
        scene_export.build_scene([floor], 24.0, 1, 5, 4)
