"""Bad scenes and bad drive data give SceneError / SimulationError naming the object and the problem."""

from __future__ import annotations

import numpy as np
import pytest

from solver_server.backend import BackendError, get_backend
from solver_server.sim.errors import SceneError, SimulationError
from solver_server.sim.params import PARAM_TABLES, defaults, resolve_params
from solver_server.simulation import Simulation

from .scenes import cloth_object, grid, scene

BACKEND = get_backend("cpu")


def _cloth(**kwargs):
    vertices, triangles, _ = grid(4, 4)
    return cloth_object(vertices, triangles, **kwargs)


def _error(scene_dict) -> SceneError:
    with pytest.raises(SceneError) as info:
        Simulation(scene_dict, BACKEND)
    return info.value


@pytest.mark.parametrize("params, key", [
    ({"densty": 0.2}, "densty"),
    ({"density": -1.0}, "density"),
    ({"density": float("nan")}, "density"),
    ({"stretch_stiffness": 0.0}, "stretch_stiffness"),
    ({"bend_stiffness": -1.0}, "bend_stiffness"),
    ({"strain_limits": [1.1, 1.2]}, "strain_limits"),
    ({"strain_limits": [0.9]}, "strain_limits"),
    ({"friction": "lots"}, "friction"),
    ({"self_collision": 1}, "self_collision"),
])
def test_bad_cloth_params_name_object_and_key(params, key):
    error = _error(scene([_cloth(params=params, object_id="Shirt")]))
    assert error.object == "Shirt"
    assert key in str(error)


def test_unknown_softbody_and_collider_keys():
    error = _error(scene([_cloth(), {"id": "Floor", "kind": "collider", "shape": {"type": "plane"},
                                     "params": {"stiffness": 3}}]))
    assert error.object == "Floor" and "stiffness" in str(error)


@pytest.mark.parametrize("mutate, needle", [
    (lambda o: o.update(vertices=np.zeros((5, 2))), "vertices"),
    (lambda o: o.update(vertices=np.full((16, 3), np.nan)), "NaN"),
    (lambda o: o.update(triangles=np.array([[0, 1, 99]], np.int32)), "out of range"),
    (lambda o: o.update(triangles=np.array([[0.0, 1.0, 2.0]])), "integer"),
    (lambda o: o.update(triangles=np.array([[0, 0, 2]], np.int32)), "repeats a vertex"),
    (lambda o: o.update(pins={"indices": np.array([99], np.int32)}), "pins.indices"),
    (lambda o: o.update(pins={"indices": np.array([1], np.int32), "weights": np.array([2.0])}), "pins.weights"),
    (lambda o: o.update(kind="jelly"), "unknown kind"),
    (lambda o: o.update(matrix_world=np.zeros((4, 4))), "singular"),
    (lambda o: o.pop("triangles"), "triangles"),
])
def test_bad_arrays_name_the_object(mutate, needle):
    obj = _cloth(object_id="Flag")
    mutate(obj)
    error = _error(scene([obj]))
    assert error.object == "Flag"
    assert needle in str(error)


@pytest.mark.parametrize("time, needle", [
    ({"fps": 0, "frame_start": 1, "frame_end": 10, "substeps": 4}, "fps"),
    ({"fps": 24, "frame_start": 10, "frame_end": 1, "substeps": 4}, "frame_end"),
    ({"fps": 24, "frame_start": 1, "frame_end": 10, "substeps": 0}, "substeps"),
    ({"fps": 24, "frame_start": 1, "frame_end": 10, "substeps": 5000}, "substeps"),
    ({"fps": 24, "frame_start": 1, "frame_end": 10, "substep": 4}, "substep"),
])
def test_bad_time(time, needle):
    scene_dict = scene([_cloth()])
    scene_dict["time"] = time
    assert needle in str(_error(scene_dict))


@pytest.mark.parametrize("shape, needle", [
    ({"type": "cone"}, "cone"),
    ({"type": "sphere", "radius": -1.0}, "radius"),
    ({"type": "plane", "normal": [0, 0, 0]}, "normal"),
    ({"type": "box", "size": [1, 0, 1]}, "size"),
    ({"type": "torus", "major_radius": 0.1, "minor_radius": 0.5}, "minor_radius"),
    ({"type": "sphere", "radius": 1.0, "colour": "red"}, "colour"),
])
def test_bad_collider_shapes(shape, needle):
    error = _error(scene([_cloth(), {"id": "Rock", "kind": "collider", "shape": shape}]))
    assert error.object == "Rock" and needle in str(error)


def test_duplicate_ids_and_empty_scenes():
    assert _error(scene([_cloth(object_id="A"), _cloth(object_id="A")])).object == "A"
    assert "no simulated object" in str(_error(scene([{"id": "F", "kind": "collider", "shape": {"type": "plane"}}])))
    assert "objects" in str(_error({"time": {"frame_end": 3}, "objects": []}))


def test_hair_without_registered_solver_is_a_clear_scene_error(monkeypatch):
    from solver_server import solvers

    monkeypatch.setitem(solvers._FACTORIES, ("hair", "cosserat"), "solver_server.solvers.not_built_here:build_group")
    hair = {"id": "Hair", "kind": "hair", "points": np.zeros((4, 3)), "strand_offsets": np.array([0, 4], np.int32),
            "params": {"model": "cosserat"}}
    hair["points"][:, 2] = np.arange(4) * 0.01
    error = _error(scene([hair]))
    assert error.object == "Hair"
    assert "cosserat" in str(error) and "not available" in str(error)


def test_bad_solver_settings():
    assert "globl" in str(_error(scene([_cloth()], solver={"pd": {"globl": "x"}})))
    assert "iterations" in str(_error(scene([_cloth()], solver={"pd": {"iterations": 0}})))


def test_missing_and_bad_drive_data():
    sim = Simulation(scene([_cloth(object_id="Flag", animated=True)], frame_end=5), BACKEND)
    assert sim.animated_ids == ["Flag"]
    with pytest.raises(SimulationError) as info:
        sim.advance({})
    assert info.value.object == "Flag" and info.value.frame == 2
    with pytest.raises(SimulationError) as info:
        sim.advance({"Flag": {"matrix_world": np.eye(3)}})
    assert info.value.object == "Flag" and "4×4" in str(info.value)
    with pytest.raises(SimulationError) as info:
        sim.advance({"Flag": {"matrix_world": np.eye(4), "vertices": np.zeros((3, 3))}})
    assert "vertices" in str(info.value)


def test_nan_state_raises_simulation_error_naming_object_and_frame():
    """An absurd gravity × time step overflows the state to Inf: reported, not streamed."""
    sim = Simulation(scene([_cloth(object_id="Flag")], frame_end=5, fps=0.001, gravity=(0, 0, -1e308)), BACKEND)
    with np.errstate(all="ignore"):
        with pytest.raises(SimulationError) as info:
            sim.advance(None)
    assert info.value.object == "Flag" and info.value.frame == 2 and "NaN" in str(info.value)


def test_param_tables_are_complete():
    for kind, table in PARAM_TABLES.items():
        for spec in table:
            assert spec.doc and spec.name
        assert resolve_params(kind, {}) == defaults(kind)
    assert set(PARAM_TABLES["cloth"]) >= set()
    names = {spec.name for spec in PARAM_TABLES["cloth"]}
    assert {"friction", "thickness", "damping", "density", "stretch_stiffness", "shear_stiffness",
            "bend_stiffness", "strain_limits", "self_collision"} <= names


def test_cuda_backend_without_cupy_is_clear():
    try:
        import cupy  # noqa: F401
    except ImportError:
        with pytest.raises(BackendError, match="cupy|CuPy"):
            get_backend("cuda")
    with pytest.raises(BackendError, match="unknown device"):
        get_backend("tpu")
    info = BACKEND.device_info()
    assert isinstance(info["name"], str) and info["memory_bytes"] >= 0


def test_softbody_tets_are_oriented_and_degenerate_ones_rejected():
    from .scenes import box_tets, tet_volume

    vertices, tets, triangles, _ = box_tets((2, 2, 2), (0.2, 0.2, 0.2))
    flipped = tets.copy()
    flipped[::2, [0, 1]] = flipped[::2, [1, 0]]
    body = {"id": "Jelly", "kind": "softbody", "vertices": vertices, "triangles": triangles, "tets": flipped}
    sim = Simulation(scene([body], frame_end=3, gravity=(0, 0, 0)), BACKEND)
    final = sim.advance(None)[1]["Jelly"]
    np.testing.assert_allclose(final, vertices, atol=1e-9)  # at rest, nothing inverted or exploding
    assert tet_volume(vertices, sim.groups[0].model.tets) > 0
    degenerate = flipped.copy()
    degenerate[0, 3] = degenerate[0, 2]
    error = _error(scene([{**body, "tets": degenerate}]))
    assert error.object == "Jelly" and "degenerate" in str(error)


def test_self_collision_thicker_than_a_quarter_edge_is_refused_naming_the_cloth():
    # a 1 m grid of 4 × 4 points: median edge 1/3 m, so self-collision allows up to 1/12 m of thickness
    error = _error(scene([_cloth(params={"self_collision": True, "thickness": 0.5})]))
    assert error.object == "Cloth" and "thickness 0.5 m is too large for self-collision" in error.message
    Simulation(scene([_cloth(params={"self_collision": False, "thickness": 0.5})]), BACKEND)   # no self-contact: fine
    Simulation(scene([_cloth(params={"self_collision": True, "thickness": 0.05})]), BACKEND)
