"""DER hair through the Simulation contract (registry ("hair", "der"), scene params, colliders, roots)."""

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.sim.errors import SceneError
from solver_server.simulation import Simulation


def _scene(extra_objects=(), hair_extra=None, solver=None):
    strands = []
    for k in range(3):
        z = np.linspace(0.0, -0.05, 6)
        strands.append(np.stack((np.full(6, 0.01 * k), np.zeros(6), 0.1 + z), axis=1))
    hair = {"id": "Hair", "kind": "hair", "points": np.concatenate(strands).astype(np.float32),
            "strand_offsets": np.array([0, 6, 12, 18], np.int32),
            "params": {"model": "der", "radius": 1e-4, "young_modulus": 1e8, "damping": 1.0}}
    hair.update(hair_extra or {})
    scene = {"gravity": [0.0, 0.0, -9.81], "time": {"fps": 24, "frame_start": 1, "frame_end": 3, "substeps": 4},
             "objects": [hair, *extra_objects]}
    if solver is not None:
        scene["solver"] = solver
    return scene


def test_clamped_hair_hangs_and_keeps_its_roots():
    simulation = Simulation(_scene(solver={"der": {"max_iterations": 20, "tolerance": 1e-6}}), get_backend("cpu"))
    frame, positions, _ = simulation.initial_frame()
    rest = positions["Hair"].copy()
    for _ in range(2):
        frame, positions, stats = simulation.advance(None)
    assert frame == 3
    hair = positions["Hair"]
    assert hair.dtype == np.float32 and hair.shape == (18, 3)
    roots = np.array([0, 1, 6, 7, 12, 13])
    assert np.allclose(hair[roots], rest[roots], atol=1e-6)
    assert np.all(np.isfinite(hair))
    assert stats["iterations"] >= 1


def test_free_hair_falls_onto_a_plane_collider():
    floor = {"id": "Floor", "kind": "collider", "shape": {"type": "plane", "normal": [0, 0, 1], "offset": 0.0},
             "params": {"friction": 0.5}}
    simulation = Simulation(_scene([floor], {"pins": {"indices": np.zeros(0, np.int32),
                                                      "weights": np.zeros(0, np.float32)}}), get_backend("cpu"))
    simulation.initial_frame()
    for _ in range(2):
        _, positions, stats = simulation.advance(None)
    hair = positions["Hair"]
    assert hair[:, 2].mean() < 0.075 - 0.5 * 9.81 * (2 / 24) ** 2 * 0.5   # it fell freely so far
    assert hair[:, 2].min() > 0.0


def test_unknown_der_setting_is_a_scene_error_naming_the_object():
    with pytest.raises(SceneError) as error:
        Simulation(_scene(solver={"der": {"iterations": 3}}), get_backend("cpu"))
    assert error.value.object == "Hair"
    assert "iterations" in str(error.value)


def test_soft_root_pins_hold_the_hair_elastically():
    pins = {"indices": np.array([0, 6, 12], np.int32), "weights": np.full(3, 0.5, np.float32)}
    simulation = Simulation(_scene(hair_extra={"pins": pins}), get_backend("cpu"))
    _, rest, _ = simulation.initial_frame()
    for _ in range(2):
        _, positions, _ = simulation.advance(None)
    roots = positions["Hair"][[0, 6, 12]]
    sink = rest["Hair"][[0, 6, 12], 2] - roots[:, 2]
    assert np.all(sink > 0.0) and np.all(sink < 0.01)               # pulled down, held by 0.5·pin_stiffness
    assert positions["Hair"][:, 2].min() < rest["Hair"][:, 2].min()  # the free ends fell


def test_animated_hair_object_carries_its_clamped_roots():
    scene = _scene(hair_extra={"animated": True})
    simulation = Simulation(scene, get_backend("cpu"))
    _, rest, _ = simulation.initial_frame()
    moved = np.eye(4)
    moved[:3, 3] = [0.02, 0.0, 0.0]
    _, positions, _ = simulation.advance({"Hair": {"matrix_world": moved}})
    roots = np.array([0, 1, 6, 7, 12, 13])
    assert np.allclose(positions["Hair"][roots], rest["Hair"][roots] + [0.02, 0.0, 0.0], atol=1e-6)


def test_gauss_seidel_contact_solve_from_the_scene_settings():
    """scene.solver.der.local_solver reaches the contact solver; free hair landing on a floor just below it
    stays above it with the Gauss–Seidel contact solve; an unknown solver name is a SceneError."""
    floor = {"id": "Floor", "kind": "collider", "shape": {"type": "plane", "normal": [0, 0, 1], "offset": 0.049},
             "params": {"friction": 0.5}}
    free = {"pins": {"indices": np.zeros(0, np.int32), "weights": np.zeros(0, np.float32)}}
    simulation = Simulation(_scene([floor], free, {"der": {"local_solver": "gauss_seidel"}}), get_backend("cpu"))
    contact = simulation.groups[0].solvers[0].solver.contact
    assert contact.settings.local_solver == "gauss_seidel"
    simulation.initial_frame()
    for _ in range(2):
        _, positions, stats = simulation.advance(None)
    assert stats["contacts"] > 0 and stats["iterations"] < 2 * 4 * 50
    hair = positions["Hair"]
    assert np.all(np.isfinite(hair)) and hair[:, 2].min() >= 0.049 + 0.9e-4
    with pytest.raises(SceneError) as error:
        Simulation(_scene(solver={"der": {"local_solver": "sor"}}), get_backend("cpu"))
    assert error.value.object == "Hair" and "local_solver" in str(error.value)


def test_curls_turn_with_the_object_about_the_root_axis():
    """A curly strand whose first edge lies on the axis the object turns about (a head turning, hair at its
    crown): the clamp does not move that edge, but the curl turns with the object (the root's material frame
    follows the root frame), ending as the rest strand turned rigidly (no gravity: a zero-energy state)."""
    angle = np.linspace(0.0, 3.0 * np.pi, 25)
    curl = np.stack((0.01 * (np.cos(angle) - 1.0), 0.01 * np.sin(angle), 0.095 - 0.004 * angle), axis=1)
    points = np.concatenate(([[0.0, 0.0, 0.1]], curl)).astype(np.float32)
    hair = {"id": "Hair", "kind": "hair", "animated": True, "points": points,
            "strand_offsets": np.array([0, len(points)], np.int32),
            "params": {"model": "der", "radius": 2e-4, "young_modulus": 3e9, "damping": 20.0}}
    scene = {"gravity": [0.0, 0.0, 0.0], "time": {"fps": 24, "frame_start": 1, "frame_end": 20, "substeps": 4},
             "objects": [hair]}
    simulation = Simulation(scene, get_backend("cpu"))
    _, rest, _ = simulation.initial_frame()
    rest = rest["Hair"].astype(np.float64)
    total = 1.2
    for frame in range(16):
        turn = total * min(frame + 1, 8) / 8
        matrix = np.eye(4)
        matrix[:2, :2] = [[np.cos(turn), -np.sin(turn)], [np.sin(turn), np.cos(turn)]]
        _, positions, _ = simulation.advance({"Hair": {"matrix_world": matrix}})
    rotation = np.array([[np.cos(total), -np.sin(total), 0.0], [np.sin(total), np.cos(total), 0.0], [0.0, 0.0, 1.0]])
    expected = rest @ rotation.T
    size = np.linalg.norm(rest - rest[0], axis=1).max()
    assert np.abs(expected - rest).max() > 0.3 * size
    assert np.abs(positions["Hair"] - expected).max() < 0.02 * size
