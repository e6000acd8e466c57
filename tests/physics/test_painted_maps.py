"""Painted maps (sim/maps.py): per-point factors on paintable parameters.

Validation names the object and the map; a uniform map equals the scaled parameter in every solver; a
painted stiffness gradient changes the drape (the soft half of a cantilevered sheet sags more than the
stiff half); a piecewise painted DER rod bends like the Euler–Bernoulli cantilever with that piecewise EI;
a painted friction decides stick or slip on an incline; painted density moves mass.
"""

from __future__ import annotations

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.sim.builder import parse_scene
from solver_server.sim.errors import SceneError
from solver_server.simulation import Simulation
from solver_server.solvers.der.model import DerMaterial
from solver_server.solvers.pd.assemble import build_particle_model

from tests.physics_der.helpers import clamped_rod_in_wind
from tests.physics.scenes import box_tets, cloth_object, grid, run, scene

BACKEND = get_backend("cpu")


def _hair(model="der", maps=None, strands=3, points=8):
    lines = [np.stack([np.full(points, 0.02 * k), np.zeros(points), np.linspace(1.0, 0.86, points)], axis=1)
             for k in range(strands)]
    hair = {"id": "Hair", "kind": "hair", "points": np.concatenate(lines),
            "strand_offsets": np.arange(0, strands * points + 1, points), "params": {"model": model}}
    if maps is not None:
        hair["maps"] = maps
    return hair


def _sheet(maps=None, params=None, n=9):
    vertices, triangles, index = grid(n, n, size=0.4)
    cloth = cloth_object(vertices, triangles, pins=index[:2].ravel(), params=params or {})   # clamped edge
    if maps is not None:
        cloth["maps"] = maps
    return cloth, vertices, index


# ----------------------------------------------------------------------------------------- validation

@pytest.mark.parametrize("maps, message", [
    ({"thickness": np.ones(81)}, "map 'thickness' cannot be painted on a cloth object"),
    ({"bend_stiffness": np.ones(80)}, "shape (81,)"),
    ({"bend_stiffness": np.full(81, -1.0)}, "must be finite and >= 0; point 0"),
    ({"density": np.r_[np.ones(80), 0.0]}, "must be finite and > 0; point 80"),
    ({"stretch_stiffness": np.r_[np.ones(5), np.nan, np.ones(75)]}, "point 5"),
    ({"bend_stiffness": np.full(81, 1e9)}, "outside"),
    ("not a map", "'maps' must be a map"),
])
def test_bad_cloth_maps_are_refused_naming_the_object_and_the_map(maps, message):
    cloth, _, _ = _sheet(maps, {"bend_stiffness": 1.0})
    with pytest.raises(SceneError, match=message.replace("(", r"\(").replace(")", r"\)")) as error:
        parse_scene(scene([cloth]))
    assert error.value.object == "Cloth"


def test_a_hair_model_refuses_the_maps_it_would_ignore_and_colliders_take_none():
    with pytest.raises(SceneError, match="cannot be painted on a hair object with model 'particles'"):
        parse_scene(scene([_hair("particles", {"young_modulus": np.ones(24)})]))
    with pytest.raises(SceneError, match="cannot be painted on a hair object with model 'der'"):
        parse_scene(scene([_hair("der", {"particle_stiffness": np.ones(24)})]))
    collider = {"id": "Floor", "kind": "collider", "shape": {"type": "plane"}, "maps": {"friction": np.ones(1)}}
    with pytest.raises(SceneError, match="a collider takes no painted 'maps'"):
        parse_scene(scene([_hair(), collider]))


# ----------------------------------------------------------------------------------------- exact scaling

def _final(objects, frames=6, object_id=None):
    result = run(Simulation(scene(objects, frame_end=frames), BACKEND))[-1][1]
    return result[object_id or objects[0]["id"]]


def test_a_uniform_cloth_map_equals_the_scaled_parameters():
    params = {"stretch_stiffness": 500.0, "shear_stiffness": 50.0, "bend_stiffness": 0.002, "density": 0.3,
              "friction": 0.4}
    scaled = {key: value * 0.5 for key, value in params.items()}
    painted, _, _ = _sheet({key: np.full(81, 0.5) for key in params}, params)
    plain, _, _ = _sheet(None, scaled)
    np.testing.assert_allclose(_final([painted]), _final([plain]), atol=1e-9)


def test_a_uniform_softbody_map_equals_the_scaled_parameters():
    vertices, tets, triangles, _ = box_tets((3, 1, 1), (0.3, 0.1, 0.1))
    base = {"id": "Jelly", "kind": "softbody", "vertices": vertices, "tets": tets, "triangles": triangles,
            "pins": {"indices": np.nonzero(vertices[:, 0] < 1e-9)[0]}}
    painted = {**base, "params": {"young_modulus": 2e4, "density": 500.0},
               "maps": {"young_modulus": np.full(len(vertices), 2.0), "density": np.full(len(vertices), 2.0)}}
    plain = {**base, "params": {"young_modulus": 4e4, "density": 1000.0}}
    np.testing.assert_allclose(_final([painted]), _final([plain]), atol=1e-9)


@pytest.mark.parametrize("model, maps, scaled", [
    ("der", {"young_modulus": 0.5, "shear_modulus": 0.5, "density": 2.0},
     {"young_modulus": 1.5e9, "shear_modulus": 0.5e9, "density": 2600.0}),
    ("cosserat", {"young_modulus": 0.5, "shear_modulus": 0.5, "density": 2.0},
     {"young_modulus": 1.5e9, "shear_modulus": 0.5e9, "density": 2600.0}),
    ("particles", {"particle_stiffness": 0.5, "particle_bend_stiffness": 2.0},
     {"particle_stiffness": 1.0e4, "particle_bend_stiffness": 2.0e4}),
])
def test_a_uniform_hair_map_equals_the_scaled_parameters_in_every_model(model, maps, scaled):
    painted = _hair(model, {key: np.full(24, value) for key, value in maps.items()})
    plain = _hair(model)
    plain["params"].update(scaled)
    wind = {"wind_direction": [0.0, 1.0, 0.0], "wind_strength": 5.0}   # a load across the strands
    painted["params"].update(wind)
    plain["params"].update(wind)
    a, b = _final([painted]), _final([plain])
    assert np.abs(b - _final([_hair(model)])).max() > 1e-4        # the scaled parameters do change the motion
    np.testing.assert_allclose(a, b, atol=1e-7)


# ----------------------------------------------------------------------------------------- physics

def _tip_sag(frame, vertices, index, rows):
    """Mean drop [m] of the free edge's vertices in ``rows`` (y indices)."""
    tips = index[-1, rows]
    return float(np.mean(vertices[tips, 2] - frame[tips, 2]))


def test_a_painted_stiffness_gradient_changes_the_drape_the_soft_half_sags_more():
    """A sheet clamped along x = 0 droops under gravity as a plate cantilever; bending rigidity painted 1 on
    the y < 0.2 half and 0.1 on the other: that half's free edge sags several times further, the stiff
    half no further than the uniformly stiff sheet; the unpainted sheet droops nearly symmetrically (within
    15 %: its triangles' diagonals all run one way)."""
    n = 9
    params = {"bend_stiffness": 2.0, "stretch_stiffness": 2000.0, "damping": 4.0}
    vertices, _, index = grid(n, n, size=0.4)
    weights = np.where(vertices[:, 1] < 0.2 - 1e-9, 1.0, 0.1)
    frames = {}
    for name, maps in (("uniform", None), ("painted", {"bend_stiffness": weights})):
        cloth, _, _ = _sheet(maps, params, n)
        frames[name] = _final([cloth], frames=36)
    stiff_rows, soft_rows = slice(0, 3), slice(n - 3, n)
    uniform_stiff = _tip_sag(frames["uniform"], vertices, index, stiff_rows)
    uniform_other = _tip_sag(frames["uniform"], vertices, index, soft_rows)
    painted_stiff = _tip_sag(frames["painted"], vertices, index, stiff_rows)
    painted_soft = _tip_sag(frames["painted"], vertices, index, soft_rows)
    assert np.all(np.isfinite(frames["painted"]))
    assert abs(uniform_stiff - uniform_other) < 0.15 * uniform_stiff           # symmetric without a map
    assert painted_soft > 2.5 * painted_stiff                                    # the soft half droops
    assert painted_stiff < 1.6 * uniform_stiff                                   # the stiff half holds


def test_painted_density_weighs_down_its_half_of_the_sheet():
    n = 9
    params = {"bend_stiffness": 2.0, "stretch_stiffness": 2000.0, "damping": 4.0}
    vertices, _, index = grid(n, n, size=0.4)
    heavy = np.where(vertices[:, 1] < 0.2 - 1e-9, 1.0, 4.0)
    cloth, _, _ = _sheet({"density": heavy}, params, n)
    model = build_particle_model(parse_scene(scene([cloth])).objects)
    plain = build_particle_model(parse_scene(scene([_sheet(None, params, n)[0]])).objects)
    np.testing.assert_allclose(model.mass, plain.mass * heavy)
    frame = _final([cloth], frames=36)
    assert _tip_sag(frame, vertices, index, slice(n - 3, n)) > 1.4 * _tip_sag(frame, vertices, index, slice(0, 3))


def test_a_lattice_soft_body_carries_its_painted_density_to_the_lattice_nodes():
    vertices, _, triangles, _ = box_tets((2, 2, 2), (0.2, 0.2, 0.2))
    body = {"id": "Jelly", "kind": "softbody", "vertices": vertices, "triangles": triangles,
            "params": {"tet_resolution": 4}}
    plain = build_particle_model(parse_scene(scene([body])).objects)
    doubled = build_particle_model(parse_scene(scene([{**body, "maps": {"density": np.full(len(vertices), 2.0)}}]))
                                   .objects)
    np.testing.assert_allclose(doubled.mass, 2.0 * plain.mass)
    upper = vertices[:, 2] > 0.1 + 1e-9
    half = build_particle_model(parse_scene(scene([{**body, "maps": {"density": np.where(upper, 3.0, 1.0)}}]))
                                .objects)
    nodes_up = half.rest[:, 2] > 0.16          # nearer the top face than the middle layer of surface vertices
    np.testing.assert_allclose(half.mass[nodes_up], 3.0 * plain.mass[nodes_up])


@pytest.mark.parametrize("factor, slides", [(1.0, False), (0.15, True)])
def test_painted_friction_decides_stick_or_slip_on_an_incline(factor, slides):
    """μ = 2 painted × factor on a 30° ramp of μ 0.3 (tan 30° = 0.577; a contact takes the mean of both μ):
    × 1 holds (μ 1.15), × 0.15 slides (μ 0.3) with a = g (sin θ − μ cos θ)."""
    theta = np.radians(30.0)
    rotation = np.array([[1, 0, 0], [0, np.cos(theta), -np.sin(theta)], [0, np.sin(theta), np.cos(theta)]])
    local, tets, triangles, _ = box_tets((2, 2, 2), (0.1, 0.1, 0.1), origin=(-0.05, -0.05, 0.0))
    vertices = local @ rotation.T
    matrix = np.eye(4)
    matrix[:3, :3] = rotation
    ramp = {"id": "Ramp", "kind": "collider", "shape": {"type": "plane"}, "matrix_world": matrix,
            "params": {"friction": 0.3}}
    block = {"id": "Jelly", "kind": "softbody", "vertices": vertices, "tets": tets, "triangles": triangles,
             "params": {"young_modulus": 1e6, "friction": 2.0, "thickness": 0.0, "damping": 0.0},
             "maps": {"friction": np.full(len(vertices), factor)}}
    frames = run(Simulation(scene([block, ramp], frame_end=25), BACKEND))
    travel = (frames[-1][1]["Jelly"].mean(axis=0) - frames[0][1]["Jelly"].mean(axis=0)) @ (rotation @ [0, -1, 0])
    if slides:
        mu = 0.3
        expected = 0.5 * 9.81 * (np.sin(theta) - mu * np.cos(theta)) * 1.0 ** 2
        assert travel == pytest.approx(expected, rel=0.2)
    else:
        assert abs(travel) < 1e-3


def test_a_painted_der_rod_bends_like_the_cantilever_with_that_piecewise_stiffness():
    """A clamped rod under a uniform cross load w with EI painted f·EI on the half next to the clamp:
    Euler–Bernoulli gives δ = w/8 [(L⁴ − (L − a)⁴)/(f·EI) + (L − a)⁴/EI] (a: the painted length)."""
    count, length = 21, 0.2
    x = np.linspace(0.0, length, count)
    for factor in (0.5, 2.0):
        young = np.where(x <= 0.1 + 1e-9, 2e9 * factor, 2e9)
        material = DerMaterial(radius=1e-3, young_modulus=young, shear_modulus=1e9, density=1000.0)
        _, state = clamped_rod_in_wind(material, count, length)          # load 9.81 m/s² along -z
        segment = length / (count - 1)
        bending_length = length - 0.5 * segment              # as in test_dynamics' cantilever
        painted = 0.1                                        # the edge across x = 0.1 takes the mean: its middle
        load = 1000.0 * np.pi * 1e-6 * 9.81
        stiffness = 2e9 * np.pi * 1e-12 / 4
        outer = (bending_length - painted) ** 4
        expected = load / 8 * ((bending_length ** 4 - outer) / (factor * stiffness) + outer / stiffness)
        assert abs(-state.positions[-1, 2] - expected) / expected < 0.10, factor
