"""blender_addon.core.scene_export: the scene dict the add-on sends (DESIGN §2, ARCHITECTURE §2)."""

import numpy as np
import pytest

from blender_addon.core import scene_export
from blender_addon.core.scene_export import ExportError

from addon_shapes import grid


def test_cloth_object_has_contract_dtypes_and_fields():
    vertices, triangles = grid()
    entry = scene_export.cloth_object("Sheet", vertices, triangles, [0, 2], [1.0, 0.5], {"density": 0.3})
    assert entry["id"] == "Sheet" and entry["kind"] == "cloth" and entry["animated"] is False
    assert entry["vertices"].dtype == np.dtype("<f8") and entry["vertices"].shape == (9, 3)
    assert entry["triangles"].dtype == np.dtype("<i4") and entry["triangles"].shape == (8, 3)
    assert entry["pins"]["indices"].dtype == np.dtype("<i4")
    assert entry["pins"]["weights"].dtype == np.dtype("<f8")
    np.testing.assert_array_equal(entry["pins"]["indices"], [0, 2])
    np.testing.assert_array_equal(entry["vertices"], vertices)
    assert entry["params"] == {"density": 0.3}


@pytest.mark.parametrize("mutate, fragment", [
    (lambda v, t: (v[:0], t), "no vertices"),
    (lambda v, t: (v, t[:0]), "no faces"),
    (lambda v, t: (v, np.where(t == 8, 99, t)), "do not exist"),
    (lambda v, t: (np.where(np.arange(9)[:, None] == 4, np.nan, v), t), "NaN"),
    (lambda v, t: (v, np.vstack([t, [[0, 1, 2]]])), "zero-area"),
    (lambda v, t: (v[:, :2], t), "shape"),
])
def test_cloth_object_rejects_bad_meshes_naming_the_object(mutate, fragment):
    vertices, triangles = grid()
    bad_vertices, bad_triangles = mutate(vertices, triangles)
    with pytest.raises(ExportError) as info:
        scene_export.cloth_object("Shirt", bad_vertices, bad_triangles, [], [], {})
    assert info.value.object == "Shirt"
    assert fragment in str(info.value) and "Shirt" in str(info.value)


def test_cloth_object_rejects_bad_pins():
    vertices, triangles = grid()
    with pytest.raises(ExportError, match="pin indices reference"):
        scene_export.cloth_object("Shirt", vertices, triangles, [0, 9], [1.0, 1.0], {})
    with pytest.raises(ExportError, match="2 pin indices but 1 pin weights"):
        scene_export.cloth_object("Shirt", vertices, triangles, [0, 1], [1.0], {})


def test_sphere_fitted_to_bounding_box():
    corners = np.array([[x, y, z] for x in (-1.0, 3.0) for y in (0.0, 1.0) for z in (2.0, 2.5)])
    shape = scene_export.sphere_shape(corners, "Ball")
    assert shape == {"type": "sphere", "center": [1.0, 0.5, 2.25], "radius": 2.0}
    with pytest.raises(ExportError, match="bounding box is empty"):
        scene_export.sphere_shape(np.zeros((8, 3)), "Ball")


def test_plane_is_local_xy_with_plus_z_normal():
    assert scene_export.plane_shape() == {"type": "plane", "point": [0.0, 0.0, 0.0], "normal": [0.0, 0.0, 1.0]}


def test_collider_object_and_drive_entry_carry_float64_matrices():
    matrix = np.diag([2.0, 2.0, 2.0, 1.0])
    matrix[:3, 3] = [1.0, 2.0, 3.0]
    entry = scene_export.collider_object("Floor", scene_export.plane_shape(), matrix, {"friction": 0.5}, True)
    assert entry["kind"] == "collider" and entry["animated"] is True
    assert entry["matrix_world"].dtype == np.dtype("<f8")
    np.testing.assert_array_equal(entry["matrix_world"], matrix)
    drive = scene_export.drive_entry("Floor", matrix.tolist())
    np.testing.assert_array_equal(drive["matrix_world"], matrix)
    with pytest.raises(ExportError, match="singular") as info:
        scene_export.collider_object("Floor", scene_export.plane_shape(), np.diag([1.0, 0.0, 1.0, 1.0]), {}, False)
    assert info.value.object == "Floor"


def test_build_scene_time_block_and_validation():
    vertices, triangles = grid()
    cloth = scene_export.cloth_object("Sheet", vertices, triangles, [], [], {})
    floor = scene_export.collider_object("Floor", scene_export.plane_shape(), np.eye(4), {}, False)
    scene = scene_export.build_scene([cloth, floor], 24.0, 1, 10, 4)
    assert scene["time"] == {"fps": 24.0, "frame_start": 1, "frame_end": 10, "substeps": 4}
    assert scene["gravity"] == [0.0, 0.0, -9.81]
    assert [obj["id"] for obj in scene["objects"]] == ["Sheet", "Floor"]
    assert scene_export.animated_ids(scene) == []
    with pytest.raises(ExportError, match="empty"):
        scene_export.build_scene([cloth], 24.0, 5, 5, 4)
    with pytest.raises(ExportError, match="substeps"):
        scene_export.build_scene([cloth], 24.0, 1, 5, 0)
    assert scene_export.build_scene([cloth], 24.0, 1, 5, 4, preroll=30)["time"]["preroll"] == 30
    with pytest.raises(ExportError, match="pre-roll"):
        scene_export.build_scene([cloth], 24.0, 1, 5, 4, preroll=-1)
    with pytest.raises(ExportError, match="nothing to simulate"):
        scene_export.build_scene([floor], 24.0, 1, 5, 4)
    with pytest.raises(ExportError, match="share this name"):
        scene_export.build_scene([cloth, cloth], 24.0, 1, 5, 4)


def test_scene_survives_the_wire_format():
    """The exported scene encodes and decodes with the protocol package unchanged."""
    from protocol import messages
    from protocol.wire import decode, encode

    vertices, triangles = grid()
    cloth = scene_export.cloth_object("Sheet", vertices, triangles, [0], [1.0], {"density": 0.2})
    ball = scene_export.collider_object("Ball", scene_export.sphere_shape(vertices, "Ball"), np.eye(4), {}, True)
    scene = scene_export.build_scene([cloth, ball], 24.0, 1, 3, 2)
    frames = [bytes(frame) for frame in encode(messages.submit(scene, job="j1"))]
    decoded = decode(frames).body["scene"]
    np.testing.assert_array_equal(decoded["objects"][0]["vertices"], vertices)
    np.testing.assert_array_equal(decoded["objects"][0]["triangles"], triangles)
    assert decoded["objects"][1]["shape"]["type"] == "sphere"
    np.testing.assert_array_equal(decoded["objects"][1]["matrix_world"], np.eye(4))
