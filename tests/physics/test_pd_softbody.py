"""PD soft bodies: cantilever vs Euler–Bernoulli, volume preservation, lattice tets, friction on an incline."""

from __future__ import annotations

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.sim.errors import SceneError
from solver_server.simulation import Simulation
from solver_server.solvers.pd.assemble import surface_volume
from solver_server.solvers.pd.tetgen import embed_in_lattice

from .scenes import box_tets, run, scene, tet_volume, uv_sphere

BACKEND = get_backend("cpu")


def _softbody(vertices, tets, triangles, params, pins=None, object_id="Jelly", **extra):
    obj = {"id": object_id, "kind": "softbody", "vertices": vertices, "triangles": triangles, "params": params}
    if tets is not None:
        obj["tets"] = tets
    if pins is not None:
        obj["pins"] = {"indices": np.asarray(pins, np.int32), "weights": np.ones(len(pins))}
    obj.update(extra)
    return obj


def test_cantilever_tip_deflection_matches_euler_bernoulli():
    """Beam L = 1 m, square b = 0.25 m, clamped at x = 0, sagging under gravity.

    PD tet weight ω = E·V gives the energy (E/2)‖F − R‖²·V, whose uniaxial modulus is E (ν = 0),
    so the static tip deflection should be δ = qL⁴/(8EI) with q = ρ g b², I = b⁴/12.
    (Linear tets are a little stiff in bending and Timoshenko shear adds ~5 % at b/L = 0.25;
    measured 0.93 δ.)"""
    length, width = 1.0, 0.25
    vertices, tets, triangles, index = box_tets((20, 4, 4), (length, width, width))
    young, density = 3.0e7, 1000.0
    clamp = index[0].ravel()
    beam = _softbody(vertices, tets, triangles, {"density": density, "young_modulus": young, "poisson_ratio": 0.0,
                                                "damping": 5.0}, pins=clamp, object_id="Beam")
    sim = Simulation(scene([beam], frame_end=33, substeps=2, solver={"pd": {"iterations": 20}}), BACKEND)
    frames = run(sim)
    q = density * 9.81 * width * width
    inertia = width**4 / 12.0
    expected = q * length**4 / (8.0 * young * inertia)
    tip = index[-1].ravel()
    deflection = [float(vertices[tip, 2].mean() - positions["Beam"][tip, 2].mean()) for _, positions, _ in frames]
    assert abs(deflection[-1] - deflection[-5]) < 0.01 * expected  # settled
    assert deflection[-1] == pytest.approx(expected, rel=0.15)
    np.testing.assert_allclose(frames[-1][1]["Beam"][clamp], vertices[clamp], atol=1e-6)


def test_cantilever_stiffer_material_sags_less():
    vertices, tets, triangles, index = box_tets((10, 2, 2), (1.0, 0.2, 0.2))
    tips = []
    for young in (1e6, 4e6):
        beam = _softbody(vertices, tets, triangles, {"young_modulus": young, "poisson_ratio": 0.0, "damping": 5.0},
                         pins=index[0].ravel())
        final = run(Simulation(scene([beam], frame_end=25, substeps=2), BACKEND))[-1][1]["Jelly"]
        tips.append(vertices[index[-1].ravel(), 2].mean() - final[index[-1].ravel(), 2].mean())
    assert tips[0] > 2.5 * tips[1]  # linear elasticity: 4× the modulus, ~¼ the deflection


@pytest.mark.parametrize("poisson, keeps_volume", [(0.49, True), (0.0, False)])
def test_squashed_block_keeps_volume(poisson, keeps_volume):
    """A soft block (σmin = σmax = 1) dropped from 0.8 m squashes on impact. With ν = 0.49 its tet
    volume stays within 5 % at every frame; with ν = 0 (no volume term) the same impact loses > 20 %."""
    size = 0.2
    vertices, tets, triangles, _ = box_tets((4, 4, 4), (size, size, size), origin=(-0.1, -0.1, 0.8))
    block = _softbody(vertices, tets, triangles, {"young_modulus": 2e4, "poisson_ratio": poisson, "friction": 0.0,
                                                 "strain_limits": [1.0, 1.0], "thickness": 0.0, "damping": 0.0})
    floor = {"id": "Floor", "kind": "collider", "shape": {"type": "plane"}, "params": {"friction": 0.0}}
    frames = run(Simulation(scene([block, floor], frame_end=20, substeps=8, solver={"pd": {"iterations": 10}}),
                            BACKEND))
    rest_volume = tet_volume(vertices, tets)
    heights = [np.ptp(positions["Jelly"][:, 2]) for _, positions, _ in frames]
    volumes = np.array([tet_volume(positions["Jelly"].astype(float), tets) for _, positions, _ in frames]) / rest_volume
    assert min(heights) < 0.85 * size  # really squashed on impact
    if keeps_volume:
        assert np.all(np.abs(volumes - 1.0) < 0.05)
    else:
        assert volumes.min() < 0.8


def test_lattice_embedding_of_a_closed_surface():
    vertices, triangles = uv_sphere(rings=10, segments=20, radius=0.5)
    lattice = embed_in_lattice("Ball", vertices, triangles, resolution=6)
    np.testing.assert_allclose(lattice.weights @ lattice.nodes, vertices, atol=1e-12)
    np.testing.assert_allclose(np.asarray(lattice.weights.sum(axis=1)).ravel(), 1.0)
    assert lattice.weights.min() >= 0.0
    volumes = np.linalg.det(np.stack([lattice.nodes[lattice.tets[:, k]] - lattice.nodes[lattice.tets[:, 3]]
                                      for k in range(3)], axis=2)) / 6.0
    assert volumes.min() > 0
    enclosed = surface_volume(vertices, triangles)
    assert enclosed == pytest.approx(4 / 3 * np.pi * 0.5**3, rel=0.05)
    assert enclosed < volumes.sum() < 2.0 * enclosed  # covers the body, not a box around it


@pytest.mark.parametrize("drop, needle", [(slice(1, None), "open"), (None, "non-manifold")])
def test_bad_surfaces_are_scene_errors(drop, needle):
    vertices, triangles = uv_sphere(rings=6, segments=8)
    if drop is not None:
        triangles = triangles[drop]
    else:
        triangles = np.concatenate([triangles, triangles[:1]])
    with pytest.raises(SceneError) as info:
        Simulation(scene([_softbody(vertices, None, triangles, {}, object_id="Blob")]), BACKEND)
    assert info.value.object == "Blob" and needle in str(info.value)


def test_lattice_soft_ball_falls_onto_floor_and_rests():
    vertices, triangles = uv_sphere(rings=8, segments=16, radius=0.1, center=(0, 0, 0.2))
    ball = _softbody(vertices, None, triangles, {"young_modulus": 5e4, "tet_resolution": 5, "thickness": 0.0})
    floor = {"id": "Floor", "kind": "collider", "shape": {"type": "plane", "normal": [0, 0, 1], "point": [0, 0, 0]}}
    frames = run(Simulation(scene([ball, floor], frame_end=20), BACKEND))
    for _, positions, _ in frames:
        assert positions["Jelly"].shape == vertices.shape
        assert positions["Jelly"][:, 2].min() >= -1e-5  # the embedded surface never goes below the floor
    final = frames[-1][1]["Jelly"]
    assert final[:, 2].min() < 0.01                    # it landed
    assert np.ptp(final[:, 2]) > 0.15                  # still ball-shaped (not collapsed)


@pytest.mark.parametrize("tan_theta, slides", [(0.3, False), (0.7, True)])
def test_block_on_incline_sticks_or_slides_by_coulomb(tan_theta, slides):
    """μ = 0.5 (block and ramp). Static when tan θ < μ − 0.05 (drift < 1 mm over 2 s), sliding with
    a ≈ g (sin θ − μ cos θ) when tan θ > μ + 0.05."""
    mu = 0.5
    theta = np.arctan(tan_theta)
    rotation = np.array([[1, 0, 0], [0, np.cos(theta), -np.sin(theta)], [0, np.sin(theta), np.cos(theta)]])
    size = 0.1
    local, tets, triangles, _ = box_tets((2, 2, 2), (size, size, size), origin=(-0.05, -0.05, 0.0))
    vertices = local @ rotation.T
    matrix = np.eye(4)
    matrix[:3, :3] = rotation
    ramp = {"id": "Ramp", "kind": "collider", "shape": {"type": "plane"}, "matrix_world": matrix,
            "params": {"friction": mu}}
    block = _softbody(vertices, tets, triangles, {"young_modulus": 1e6, "friction": mu, "thickness": 0.0,
                                                 "damping": 0.0})
    frames = run(Simulation(scene([block, ramp], frame_end=49, substeps=4), BACKEND))
    downhill = rotation @ [0, -1, 0]  # the ramp's y axis rises with θ
    travel = (frames[-1][1]["Jelly"].mean(axis=0) - frames[0][1]["Jelly"].mean(axis=0)) @ downhill
    if slides:
        t = 2.0
        expected = 0.5 * 9.81 * (np.sin(theta) - mu * np.cos(theta)) * t * t
        assert travel == pytest.approx(expected, rel=0.2)
    else:
        assert abs(travel) < 1e-3


def _torus_mesh(major=0.3, minor=0.1, segments=32, sides=16):
    u, v = np.meshgrid(np.linspace(0, 2 * np.pi, segments, endpoint=False),
                       np.linspace(0, 2 * np.pi, sides, endpoint=False), indexing="ij")
    vertices = np.stack([(major + minor * np.cos(v)) * np.cos(u), (major + minor * np.cos(v)) * np.sin(u),
                         minor * np.sin(v)], axis=-1).reshape(-1, 3)
    index = np.arange(segments * sides).reshape(segments, sides)
    a, b = index, np.roll(index, -1, axis=0)
    c, d = np.roll(b, -1, axis=1), np.roll(a, -1, axis=1)
    triangles = np.concatenate([np.stack([a, b, c], -1).reshape(-1, 3), np.stack([a, c, d], -1).reshape(-1, 3)])
    return vertices, triangles.astype(np.int64)


def test_lattice_inside_test_matches_winding_number_on_a_torus():
    """Ray parity per lattice column (fast path) agrees with the generalized winding number away from
    the surface, on a non-convex (genus 1) shape."""
    from solver_server.solvers.pd.tetgen import inside_columns, winding_number

    vertices, triangles = _torus_mesh()
    assert surface_volume(vertices, triangles) > 0  # outward oriented
    cell = 0.035
    origin = vertices.min(axis=0) - 0.5 * cell
    dims = np.ceil((vertices.max(axis=0) + 0.5 * cell - origin) / cell).astype(int)
    fast = inside_columns(vertices, triangles, origin, cell, dims).ravel()
    grid = np.stack(np.meshgrid(*(np.arange(d) for d in dims), indexing="ij"), axis=-1).reshape(-1, 3)
    centres = origin + (grid + 0.5) * cell
    winding = winding_number(centres, vertices, triangles)
    tube_distance = np.hypot(np.linalg.norm(centres[:, :2], axis=1) - 0.3, centres[:, 2]) - 0.1
    clear = np.abs(tube_distance) > 0.3 * cell  # cell centres on the surface are ambiguous for both tests
    assert fast[clear].sum() > 40
    np.testing.assert_array_equal(fast[clear], winding[clear] > 0.5)
    hole = np.linalg.norm(centres[:, :2], axis=1) < 0.15
    assert not fast[hole].any()  # the hole of the torus is outside


def test_pinned_lattice_soft_body_follows_its_animated_pins():
    """Pins on surface vertices of a lattice-embedded body pin the nodes of their tets; moved by
    matrix_world, the pinned surface vertices follow exactly and the rest of the body hangs below."""
    vertices, triangles = uv_sphere(rings=8, segments=16, radius=0.1, center=(0, 0, 1.0))
    top = np.nonzero(vertices[:, 2] > 1.08)[0]
    body = _softbody(vertices, None, triangles, {"young_modulus": 2e4, "tet_resolution": 5}, pins=top,
                     animated=True)

    def drive(frame):
        matrix = np.eye(4)
        matrix[0, 3] = 0.02 * (frame - 1)
        return {"Jelly": {"matrix_world": matrix}}

    frames = run(Simulation(scene([body], frame_end=12), BACKEND), drive)
    for frame, positions, _ in frames:
        np.testing.assert_allclose(positions["Jelly"][top], vertices[top] + [0.02 * (frame - 1), 0, 0], atol=1e-6)
    final = frames[-1][1]["Jelly"]
    assert final[:, 2].min() < vertices[:, 2].min() - 1e-3  # the unpinned part sags


def test_a_soft_body_with_inward_normals_drops_like_the_outward_one():
    """A closed surface whose normals all point inward (a mesh flipped as a whole; Check Scene only sees
    inconsistent normals) encloses the same volume: it must get the same positive masses and fall the same
    way (it made every lattice mass negative, the system indefinite, and the body NaN by frame 8)."""
    vertices, _, triangles, _ = box_tets((1, 1, 1), (0.2, 0.2, 0.2), origin=(-0.1, -0.1, 0.4))
    floor = {"id": "Floor", "kind": "collider", "shape": {"type": "plane"}}
    ends = {}
    for name, surface in (("outward", triangles[:, ::-1]), ("inward", triangles)):
        body = {"id": "Jelly", "kind": "softbody", "vertices": vertices, "triangles": surface,
                "params": {"tet_resolution": 3}}
        frames = run(Simulation(scene([body, floor], frame_end=12, substeps=2), BACKEND))
        ends[name] = frames[-1][1]["Jelly"]
    from solver_server.solvers.pd.assemble import surface_volume

    assert surface_volume(vertices, triangles[:, ::-1]) > 0 > surface_volume(vertices, triangles)
    assert np.all(np.isfinite(ends["inward"]))
    np.testing.assert_allclose(ends["inward"], ends["outward"], atol=1e-9)
    assert ends["inward"][:, 2].min() < 0.4 - 0.1                   # it fell onto the floor
