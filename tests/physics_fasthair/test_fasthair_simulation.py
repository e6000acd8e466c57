"""The fast hair models through the Simulation (registry, scene parsing, drive, colliders)."""

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.sim.errors import SceneError
from solver_server.simulation import Simulation


def hair_scene(model, animated=False, pins=None, frames=12):
    strands, points = 4, 9
    pos = np.zeros((strands, points, 3))
    pos[:, :, 0] = np.linspace(0.0, 0.16, points)
    pos[:, :, 1] = np.arange(strands)[:, None] * 0.02
    pos[:, :, 2] = 1.0
    hair = {"id": "Hair", "kind": "hair", "points": pos.reshape(-1, 3),
            "strand_offsets": np.arange(strands + 1, dtype=np.int32) * points,
            "animated": animated, "matrix_world": np.eye(4),
            "params": {"model": model, "radius": 1e-3, "young_modulus": 1e8, "shear_modulus": 4e7, "damping": 2.0}}
    if pins is not None:
        hair["pins"] = pins
    ball = {"id": "Ball", "kind": "collider", "shape": {"type": "sphere", "center": [0.1, 0.03, 0.9], "radius": 0.06},
            "matrix_world": np.eye(4), "params": {"friction": 0.3, "thickness": 0.0}}
    return {"gravity": [0.0, 0.0, -9.81], "time": {"fps": 24, "frame_start": 1, "frame_end": frames, "substeps": 2},
            "objects": [hair, ball]}


@pytest.mark.parametrize("model", ["particles", "cosserat"])
def test_hair_falls_onto_a_sphere_and_roots_stay(model):
    sim = Simulation(hair_scene(model), get_backend("cpu"))
    _, first, _ = sim.initial_frame()
    for _ in range(11):
        frame, positions, stats = sim.advance(None)
    out = positions["Hair"]
    assert out.dtype == np.float32 and out.shape == (36, 3)
    np.testing.assert_allclose(out[::9], first["Hair"][::9], atol=1e-6)
    assert out[8, 2] < 0.99, "hair did not fall"
    center = np.array([0.1, 0.03, 0.9])
    assert np.linalg.norm(out - center, axis=1).min() > 0.06 - 0.01


@pytest.mark.parametrize("model", ["particles", "cosserat"])
def test_roots_follow_the_animated_hair_object(model):
    sim = Simulation(hair_scene(model, animated=True), get_backend("cpu"))
    _, first, _ = sim.initial_frame()
    matrix = np.eye(4)
    for frame in range(2, 13):
        matrix = np.eye(4)
        matrix[2, 3] = 0.01 * (frame - 1)
        _, positions, _ = sim.advance({"Hair": {"matrix_world": matrix}})
    np.testing.assert_allclose(positions["Hair"][::9, 2], first["Hair"][::9, 2] + 0.11, atol=1e-5)


def test_free_strands_are_rejected_by_the_fast_models():
    scene = hair_scene("cosserat", pins={"indices": np.zeros(0, np.int32)})
    with pytest.raises(SceneError, match="root pins only"):
        Simulation(scene, get_backend("cpu"))


@pytest.mark.parametrize("model", ["particles", "cosserat"])
def test_guide_count_simulates_guides_and_interpolates_children(model):
    from solver_server.sim.builder import parse_scene
    from solver_server.solvers import factory_for
    from solver_server.solvers.registry_types import ObjectPose, SubstepInputs

    scene = parse_scene(hair_scene(model))
    hair = scene.by_id("Hair")
    hair.params["guide_count"] = 2
    group = factory_for(hair)([hair], get_backend("cpu"), scene)
    assert group.objects[0].simulated[0].shape[0] == 2
    matrix = np.eye(4)
    for k in range(24):
        matrix = np.eye(4)
        matrix[0, 3] = 0.005 * (k + 1)
        poses = {"Hair": ObjectPose(matrix, None), "Ball": ObjectPose(np.eye(4), None)}
        group.step(SubstepInputs(frame=1, time=k / 48, dt=1 / 48, gravity=scene.gravity, poses=poses, colliders=None))
    out = group.positions()["Hair"]
    assert out.shape == (36, 3)
    np.testing.assert_allclose(out[::9], hair.vertices[::9] + [0.12, 0.0, 0.0], atol=1e-6)
    assert out[8, 2] < 0.99


@pytest.mark.parametrize("model", ["particles", "cosserat"])
def test_roots_follow_a_deforming_emitter_surface(model):
    """Roots bound to emitter triangles (scene ``roots``) follow the driven, deformed vertices."""
    from solver_server.sim.builder import parse_scene
    from solver_server.solvers import factory_for
    from solver_server.solvers.registry_types import ObjectPose, SubstepInputs

    surface = np.array([[0.0, 0.0, 1.0], [0.2, 0.0, 1.0], [0.0, 0.2, 1.0], [0.2, 0.2, 1.0]])
    triangles = np.array([[0, 1, 2], [1, 3, 2]], np.int32)
    scene_dict = hair_scene(model)
    hair = scene_dict["objects"][0]
    strands = 4
    hair["roots"] = {"surface": "Scalp", "triangles": np.array([0, 0, 1, 1], np.int32),
                     "barycentric": np.array([[0.6, 0.2, 0.2], [0.2, 0.6, 0.2], [0.2, 0.2, 0.6], [0.4, 0.3, 0.3]])}
    tri = surface[triangles[hair["roots"]["triangles"]]]
    roots = np.einsum("sk,skd->sd", hair["roots"]["barycentric"], tri)
    points = hair["points"].reshape(strands, 9, 3) - hair["points"].reshape(strands, 9, 3)[:, :1] + roots[:, None]
    hair["points"] = points.reshape(-1, 3)
    scene_dict["objects"].append({"id": "Scalp", "kind": "collider", "vertices": surface, "triangles": triangles,
                                  "animated": True, "params": {"friction": 0.3, "thickness": 0.0}})
    scene = parse_scene(scene_dict)
    group = factory_for(scene.by_id("Hair"))([scene.by_id("Hair")], get_backend("cpu"), scene)
    angle = 0.5
    rotation = np.array([[np.cos(angle), -np.sin(angle), 0.0], [np.sin(angle), np.cos(angle), 0.0], [0.0, 0.0, 1.0]])
    for k in range(24):
        alpha = (k + 1) / 24
        turn = np.array([[np.cos(angle * alpha), -np.sin(angle * alpha), 0.0],
                         [np.sin(angle * alpha), np.cos(angle * alpha), 0.0], [0.0, 0.0, 1.0]])
        moved = surface @ turn.T + [0.0, 0.0, 0.05 * alpha]
        poses = {"Hair": ObjectPose(np.eye(4), None), "Ball": ObjectPose(np.eye(4), None),
                 "Scalp": ObjectPose(np.eye(4), moved)}
        group.step(SubstepInputs(frame=1, time=k / 48, dt=1 / 48, gravity=scene.gravity, poses=poses,
                                 colliders=None))
    out = group.positions()["Hair"].reshape(strands, 9, 3)
    expected_roots = roots @ rotation.T + [0.0, 0.0, 0.05]
    np.testing.assert_allclose(out[:, 0], expected_roots, atol=1e-6)
    second = points[:, 1] - points[:, 0]
    np.testing.assert_allclose(out[:, 1], expected_roots + second @ rotation.T, atol=1e-5)


def test_artist_guides_through_the_simulation():
    scene = hair_scene("particles")
    scene["objects"][0]["guides"] = np.array([0, 3], np.int32)
    sim = Simulation(scene, get_backend("cpu"))
    assert sim.groups[0].objects[0].simulated[0].shape[0] == 2
    _, first, _ = sim.initial_frame()
    for _ in range(6):
        _, positions, _ = sim.advance(None)
    out = positions["Hair"]
    np.testing.assert_array_equal(out[::9], first["Hair"][::9])
    assert np.all(out[8::9, 2] < first["Hair"][8::9, 2])
