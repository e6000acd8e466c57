"""Particle hair (seed 004): statics, teleport robustness, wind period, colliders."""

import math

import numpy as np
import pytest

from solver_server.sim.errors import SceneError
from solver_server.solvers.guides.layout import StrandLayout
from solver_server.solvers.particles import (AnalyticColliders, ParticleHairSettings, ParticleHairSolver, StrandControl,
                                             WindSettings)

GRAVITY = np.array([0.0, 0.0, -9.81])
TELEPORT_SPEED = 10.0


def horizontal_strands(strands=3, points=11, length=0.3):
    """(S, P, 3) straight strands along +x, roots spaced along y."""
    x = np.linspace(0.0, length, points)
    pos = np.zeros((strands, points, 3))
    pos[:, :, 0] = x
    pos[:, :, 1] = np.arange(strands)[:, None] * 0.05
    return pos


def run(solver, state, seconds, dt=1.0 / 96.0, targets=None, colliders=None, record=None):
    steps = int(round(seconds / dt))
    targets = state.positions[:, :solver.settings.pinned_points].copy() if targets is None else targets
    for _ in range(steps):
        solver.step(state, state, StrandControl(targets, colliders), None, dt)
        if record is not None:
            record.append(state.positions.copy())
    return state


def test_chain_hangs_straight_with_analytic_stretch():
    rest = horizontal_strands()
    settings = ParticleHairSettings(pinned_points=1, bend_stiffness=0.0, damping=4.0, max_stretch=1.5, rest_speed=0.0)
    solver = ParticleHairSolver(rest, StrandLayout.uniform(3, 11), settings, GRAVITY)
    state = run(solver, solver.initial_state(), 6.0)
    pos = state.positions
    lateral = np.abs(pos[:, :, 0] - pos[:, :1, 0]).max()
    assert lateral < 1e-3 * 0.3, "chain does not hang straight down"
    assert np.all(np.diff(pos[:, :, 2], axis=1) < 0), "points are not stacked downward"
    assert np.abs(state.velocities).max() < 1e-3
    # top segment carries the 10 particles below: k Δx²/(s L) = 10 g  =>  Δx = sqrt(10 g s L / k)
    rest_length = 0.03
    expected = math.sqrt(10 * 9.81 * settings.stretch_scale * rest_length / settings.stiffness)
    top = np.linalg.norm(pos[:, 1] - pos[:, 0], axis=-1) - rest_length
    np.testing.assert_allclose(top, expected, rtol=0.02)


def test_stiff_second_neighbour_springs_straighten_the_chain_faster():
    rest = horizontal_strands(1)
    sag = []
    for bend in (0.0, 2.0e4):
        settings = ParticleHairSettings(pinned_points=2, bend_stiffness=bend, damping=2.0)
        solver = ParticleHairSolver(rest, StrandLayout.uniform(1, 11), settings, GRAVITY)
        state = run(solver, solver.initial_state(), 0.05)
        sag.append(-state.positions[0, -1, 2])
    assert sag[1] < sag[0]


def test_teleport_by_ten_meters_does_not_explode():
    rest = horizontal_strands()
    settings = ParticleHairSettings(pinned_points=2, max_stretch=1.1, teleport_speed=TELEPORT_SPEED)
    solver = ParticleHairSolver(rest, StrandLayout.uniform(3, 11), settings, GRAVITY)
    state = run(solver, solver.initial_state(), 0.5)
    targets = state.positions[:, :2].copy()
    jump = np.array([10.0, 0.0, 0.0])
    dt = 1.0 / 24.0
    stats = solver.step(state, state, StrandControl(targets + jump), None, dt)
    assert stats["teleported_strands"] == 3
    rest_length = 0.03
    for _ in range(48):
        lengths = np.linalg.norm(np.diff(state.positions, axis=1), axis=-1)
        assert lengths.max() <= settings.max_stretch * rest_length * (1 + 1e-9)
        assert np.abs(state.velocities).max() < 20.0
        solver.step(state, state, StrandControl(targets + jump), None, dt)
    assert np.all(np.abs(state.positions[:, :, 0] - (10.0 + targets[:, :1, 0])) < 0.4)
    assert state.rigidity.max() < 0.01, "the rigid constraint did not fade back to springs"


def test_slow_root_motion_is_not_a_teleport():
    rest = horizontal_strands(1)
    solver = ParticleHairSolver(rest, StrandLayout.uniform(1, 11), ParticleHairSettings(), GRAVITY)
    state = solver.initial_state()
    targets = state.positions[:, :2].copy()
    stats = solver.step(state, state, StrandControl(targets + [0.01, 0, 0]), None, 1.0 / 96.0)
    assert stats["teleported_strands"] == 0
    assert state.velocities[0, 5, 0] != 0.0 or state.positions[0, 5, 0] != rest[0, 5, 0]


def test_wind_sways_with_the_set_period():
    # hanging strands; wind along +x with zero mean and amplitude 3 m/s², period 0.8 s
    rest = np.zeros((2, 9, 3))
    rest[:, :, 2] = -np.linspace(0.0, 0.2, 9)
    rest[1, :, 1] = 0.05
    period = 0.8
    wind = WindSettings(direction=(1.0, 0.0, 0.0), strength=0.0, amplitude=3.0, period=period)
    settings = ParticleHairSettings(pinned_points=2, damping=3.0, wind=wind)
    solver = ParticleHairSolver(rest, StrandLayout.uniform(2, 9), settings, GRAVITY)
    dt = 1.0 / 96.0
    record = []
    run(solver, solver.initial_state(), 8 * period, dt, record=record)
    tip_x = np.array([frame[0, -1, 0] for frame in record])
    tip_x = tip_x[len(tip_x) // 4:]
    tip_x = tip_x - tip_x.mean()
    spectrum = np.abs(np.fft.rfft(tip_x * np.hanning(len(tip_x)), n=8 * len(tip_x)))
    freqs = np.fft.rfftfreq(8 * len(tip_x), dt)
    peak = freqs[np.argmax(spectrum[1:]) + 1]
    assert abs(peak - 1.0 / period) < 0.1 / period
    assert np.ptp(tip_x) > 1e-3, "wind did not move the strand"


def test_sphere_and_capsule_colliders_keep_points_outside():
    rest = np.zeros((2, 11, 3))
    rest[:, :, 0] = np.linspace(0.0, 0.3, 11)
    rest[1, :, 1] = 0.2
    colliders = AnalyticColliders(sphere_centers=np.array([[0.2, 0.0, -0.1]]), sphere_radii=np.array([0.06]),
                            capsule_a=np.array([[0.1, 0.1, -0.12]]), capsule_b=np.array([[0.1, 0.3, -0.12]]),
                            capsule_radii=np.array([0.04]), friction=0.5)
    settings = ParticleHairSettings(pinned_points=2, damping=2.0, radius=0.002)
    solver = ParticleHairSolver(rest, StrandLayout.uniform(2, 11), settings, GRAVITY)
    state = solver.initial_state()
    targets = state.positions[:, :2].copy()
    contacts = 0
    for _ in range(150):
        stats = solver.step(state, state, StrandControl(targets, colliders), None, 1.0 / 96.0)
        contacts += stats["contacts"]
        distance, _ = colliders.signed_distance(state.positions)
        assert distance.min() > settings.radius - 1e-3
    assert contacts > 0


def test_collider_set_from_scene_maps_local_shapes_and_reports_unsupported():
    matrix = np.eye(4)
    matrix[:3, :3] *= 2.0
    matrix[:3, 3] = [1.0, 0.0, 0.0]
    colliders = AnalyticColliders.from_scene([
        {"id": "Ball", "shape": {"type": "sphere", "center": [0, 0, 1], "radius": 0.5}, "matrix_world": matrix,
         "params": {"thickness": 0.01}},
        {"id": "Floor", "shape": {"type": "plane", "point": [0, 0, 0], "normal": [0, 0, 1]}},
        {"id": "Body", "vertices": np.zeros((3, 3)), "triangles": np.zeros((1, 3), int)},
    ])
    np.testing.assert_allclose(colliders.sphere_centers, [[1.0, 0.0, 2.0]])
    np.testing.assert_allclose(colliders.sphere_radii, [1.01])
    assert colliders.ignored == ("Body",)
    distance, normal = colliders.signed_distance(np.array([[5.0, 5.0, -0.25]]))
    np.testing.assert_allclose(distance, [-0.25])
    np.testing.assert_allclose(normal, [[0, 0, 1]])


def test_bad_settings_name_the_object_and_key():
    with pytest.raises(SceneError, match="Hair.*particle_max_stretch"):
        ParticleHairSettings.from_params({"particle_max_stretch": 0.5}, "Hair")
    with pytest.raises(SceneError, match="wind"):
        ParticleHairSettings.from_params({"wind": {"gust": 1}}, "Hair")


def test_variable_length_strands_are_padded_and_unpadded():
    offsets = np.array([0, 4, 11])
    flat = np.zeros((11, 3))
    flat[:4, 0] = np.linspace(0, 0.09, 4)
    flat[4:, 0] = np.linspace(0, 0.18, 7)
    flat[4:, 1] = 0.1
    layout = StrandLayout.from_offsets(offsets, 11)
    # the seed's springs only (no turning-angle springs, which hold such short coarse strands nearly straight):
    # both padded strands must droop visibly
    settings = ParticleHairSettings(damping=2.0, angle_stiffness=0.0)
    solver = ParticleHairSolver(layout.pad(flat), layout, settings, GRAVITY)
    state = run(solver, solver.initial_state(), 1.0)
    out = layout.unpad(state.positions)
    assert out.shape == (11, 3)
    np.testing.assert_allclose(out[:2], flat[:2])
    assert out[3, 2] < -0.05 and out[10, 2] < -0.1
    with pytest.raises(SceneError, match="strand 1 has 1 points"):
        StrandLayout.from_offsets(np.array([0, 4, 5]), 5, "Hair")
