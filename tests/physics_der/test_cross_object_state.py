"""DER hair objects sharing one solver keep their own material, damping, contact parameters and kinematic
points; frames and checkpoints are per object; a single object behaves exactly as its own DerSolver."""

import numpy as np
import pytest

from protocol.checkpoint_files import decode_checkpoint, encode_checkpoint
from solver_server.sim.errors import SceneError
from solver_server.simulation import Simulation
from solver_server.solvers.der.settings import ContactSettings
from solver_server.solvers.der.group import concatenate_models
from solver_server.solvers.der.settings import NewtonSettings
from solver_server.solvers.der.model import DerMaterial, build_model
from solver_server.solvers.der.solver import DerSolver
from solver_server.solvers.der.state import DerControl
from solver_server.solvers.der.state import rest_state

from solver_server.emulated_device import emulated_cuda_backend

from .test_cross_object import (ANGLE, BACKEND, FPS, SUBSTEPS, SUPPORT_AXIS, _crossing_scene, _free_pins, _hair,
                                _line, _run, _scene)


def test_per_object_frames_and_fixed_points_of_a_shared_solver():
    """Frames carry every object under its own id with its own point count; each object's kinematic points
    (hard pins of one, clamped roots of another) stay where they were."""
    roots = _line(6, 0.05, (0.0, 0.0, -1.0), (0.3, 0.0, 0.1))
    clamped = {"id": "Beard", "kind": "hair", "points": np.concatenate((roots, roots + [0.01, 0.0, 0.0])),
               "strand_offsets": np.array([0, 6, 12], np.int32), "params": {"model": "der", "radius": 2e-4}}
    scene = _crossing_scene(0.6, 0.6, frames=1)
    scene["objects"].append(clamped)
    simulation, frames = _run(scene)
    assert len(simulation.groups) == 1 and len(simulation.groups[0].solvers) == 1
    assert [list(frame) for frame in frames] == [["Support", "Strand", "Beard"]] * 2
    shapes = {object_id: array.shape for object_id, array in frames[-1].items()}
    assert shapes == {"Support": (11, 3), "Strand": (21, 3), "Beard": (12, 3)}
    first, last = frames[0], frames[-1]
    np.testing.assert_allclose(last["Support"][[0, 1, 9, 10]], first["Support"][[0, 1, 9, 10]], atol=1e-7)
    np.testing.assert_allclose(last["Beard"][[0, 1, 6, 7]], first["Beard"][[0, 1, 6, 7]], atol=1e-7)
    assert last["Beard"][5, 0] < first["Beard"][5, 0] + 1e-3 and np.all(np.isfinite(last["Beard"]))


NOT_IN_CHECKPOINT = ("the resumed run differs: does the DER solver keep state across steps that the checkpoint "
                     "lacks? (export it through ContactSolver.state_arrays()/load_state_arrays(), der/group.py)")


def test_checkpoint_of_a_two_hair_object_scene_resumes_bit_identically():
    """Checkpoint (through its npz bytes) in contact, per-object arrays; the resumed run continues bit for bit;
    the checkpoint does not fit a scene whose hair objects differ."""
    scene = _crossing_scene(1.2, 0.0, frames=3)
    simulation = Simulation(scene, BACKEND)
    simulation.initial_frame()
    simulation.advance(None)
    checkpoint = decode_checkpoint(encode_checkpoint(simulation.checkpoint()))
    arrays = checkpoint["groups"]["hair:der"]
    assert {"object0_positions", "object1_positions", "object1_theta", "object1_reference_twist"} <= set(arrays)
    assert arrays["object0_positions"].shape == (11, 3) and arrays["object1_positions"].shape == (21, 3)
    assert arrays["object1_theta"].shape == (20,) and arrays["object1_reference_twist"].shape == (19,)
    _, expected, stats = simulation.advance(None)
    assert stats["contacts"] > 0
    resumed = Simulation(scene, BACKEND)
    resumed.restore(checkpoint)
    _, positions, _ = resumed.advance(None)
    # cross-step state of the DER solver beyond DerState (e.g. contact warm starts) must be in the checkpoint:
    # ContactSolver.state_arrays() / load_state_arrays(arrays), saved by der/group.py as solver<k>_<name>
    for object_id, array in expected.items():
        assert np.array_equal(positions[object_id], array), f"{object_id}: {NOT_IN_CHECKPOINT}"
    for name, array in simulation.checkpoint()["groups"]["hair:der"].items():
        assert np.array_equal(resumed.checkpoint()["groups"]["hair:der"][name], array), name
    other = Simulation(dict(scene, objects=scene["objects"][::-1]), BACKEND)
    with pytest.raises(SceneError, match="shape"):
        other.restore(checkpoint)


def test_concatenated_model_equals_the_model_of_all_strands_and_keeps_each_material():
    first = np.concatenate((_line(5, 0.04, (1, 0, 0), (0, 0, 0)), _line(7, 0.06, (0, 1, 0), (0, 0, 0.01))))
    second = _line(4, 0.03, (0, 0, -1), (0.1, 0, 0))
    material = DerMaterial(radius=1e-4, young_modulus=2e9, shear_modulus=7e8, density=1100.0, damping=0.5)
    parts = [build_model(np, first, [0, 5, 12], material), build_model(np, second, [0, 4], material)]
    joined = concatenate_models(np, parts)
    whole = build_model(np, np.concatenate((first, second)), [0, 5, 12, 16], material)
    for name in whole.__dataclass_fields__:
        if name != "xp":
            np.testing.assert_allclose(getattr(joined, name), getattr(whole, name), rtol=1e-13, atol=1e-18,
                                       err_msg=name)
    stiffer = DerMaterial(radius=3e-4, young_modulus=5e9, shear_modulus=2e9, density=1300.0, damping=2.0)
    own = build_model(np, second, [0, 4], stiffer)
    mixed = concatenate_models(np, [parts[0], own])
    assert np.array_equal(mixed.bend_stiffness[parts[0].n_edges:], own.bend_stiffness)
    assert np.array_equal(mixed.vertex_mass[parts[0].n_vertices:], own.vertex_mass)
    assert mixed.damping.shape == (mixed.n_dofs,)
    assert np.all(mixed.damping[:parts[0].n_dofs] == 0.5) and np.all(mixed.damping[parts[0].n_dofs:] == 2.0)


def test_each_object_keeps_its_own_damping_in_the_shared_solver():
    """Two free straight strands far apart fall under gravity; implicit Euler with mass-proportional damping c
    gives v_{n+1} = (v_n − h g) / (1 + h c) for each object's own c (0 and 20 1/s), friction differing too (no air
    drag: its rate changes with the speed)."""
    objects = [_hair(name, _line(5, 0.04, (1, 0, 0), (offset, 0, 0)), _free_pins(), radius=1e-4, damping=c,
                     friction=mu, air_drag=0.0) for name, offset, c, mu in (("Calm", 0.0, 0.0, 0.1), ("Damped", 1.0, 20.0, 0.5))]
    _, frames = _run(_scene(objects, frames=2))
    h = 1.0 / (FPS * SUBSTEPS)
    for name, c in (("Calm", 0.0), ("Damped", 20.0)):
        velocity, drop = 0.0, 0.0
        for _ in range(2 * SUBSTEPS):
            velocity = (velocity - h * 9.81) / (1.0 + h * c)
            drop += h * velocity
        measured = frames[-1][name][:, 2].astype(float) - frames[0][name][:, 2].astype(float)
        np.testing.assert_allclose(measured, drop, rtol=1e-5)


SLOPE_NORMAL = np.array([-np.sin(ANGLE), 0.0, np.cos(ANGLE)])


def _slope_scene(frames):
    """Two free strands lying on a 20° frictionless plane collider, 0.1 m apart: "Grippy" (collider μ 1.2,
    thickness 2 mm, damping 1/s) and "Slick" (collider μ 0, thickness 0, damping 3/s)."""
    slope = {"id": "Slope", "kind": "collider", "params": {"friction": 0.0},
             "shape": {"type": "plane", "normal": SLOPE_NORMAL.tolist(), "offset": 0.0}}
    objects = []
    for name, offset, mu, thickness, damping in (("Grippy", -0.05, 1.2, 2e-3, 1.0), ("Slick", 0.05, 0.0, 0.0, 3.0)):
        base = offset * np.array([0.0, 1.0, 0.0]) + (1e-4 + thickness) * SLOPE_NORMAL
        objects.append(_hair(name, _line(6, 0.03, SUPPORT_AXIS, base), _free_pins(), radius=1e-4,
                             collider_friction=mu, thickness=thickness, damping=damping))
    return _scene([*objects, slope], frames=frames)


def test_each_object_keeps_its_own_collider_friction_and_thickness():
    """On the frictionless slope the collider μ (1.2 + 0) / 2 = 0.6 > tan 20° holds "Grippy" in place, μ 0 lets
    "Slick" slide; each rests at its own radius + thickness from the plane."""
    _, frames = _run(_slope_scene(frames=4))
    for name, thickness, slides in (("Grippy", 2e-3, False), ("Slick", 0.0, True)):
        start, end = frames[0][name].astype(float), frames[-1][name].astype(float)
        travel = float(np.mean((end - start) @ -SUPPORT_AXIS))
        np.testing.assert_allclose(end @ SLOPE_NORMAL, 1e-4 + thickness, atol=2e-5, err_msg=name)
        if slides:   # frictionless: s = ½ g sin20° t² = 0.027 m at t = 0.16 s (damping 3/s slows it)
            assert travel > 0.015, name
        else:
            assert abs(travel) < 1e-4, name


def test_shared_solver_with_per_object_parameters_runs_on_the_strict_device_backend():
    """The joined model, per-object contact parameters and the per-object checkpoint split use device arrays
    only (CuPy-like strict backend, tests/portability) and give the CPU frames."""
    reference = _run(_slope_scene(frames=2))[1]
    backend = emulated_cuda_backend()
    simulation = Simulation(_slope_scene(frames=2), backend)
    _, positions, _ = simulation.initial_frame()
    for frame in reference[1:]:
        _, positions, stats = simulation.advance(None)
        for object_id, expected in frame.items():
            np.testing.assert_allclose(positions[object_id], expected, atol=1e-6, err_msg=object_id)
    assert stats["contacts"] > 0
    arrays = simulation.checkpoint()["groups"]["hair:der"]
    assert all(isinstance(array, np.ndarray) for array in arrays.values())
    resumed = Simulation(_slope_scene(frames=2), backend)
    resumed.restore(simulation.checkpoint())
    assert np.array_equal(resumed.checkpoint()["groups"]["hair:der"]["object1_velocities"], arrays["object1_velocities"])


def test_contact_solver_state_rides_in_the_checkpoint_as_solver_arrays():
    """State a DER contact solver keeps across steps (``state_arrays`` / ``load_state_arrays``) is saved as
    ``solver<k>_<name>`` and handed back on restore (objects that opt out have solvers of their own)."""
    scene = _crossing_scene(0.6, 0.6, frames=1, strand_extra={"collide_with_other_hair": False})
    simulation = Simulation(scene, BACKEND)
    first, second = (shared.solver.contact for shared in simulation.groups[0].solvers)
    first.state_arrays = lambda: {"warm": np.arange(6.0).reshape(2, 3)}
    loaded = []
    second.state_arrays = lambda: {}
    second.load_state_arrays = loaded.append
    checkpoint = simulation.checkpoint()
    arrays = checkpoint["groups"]["hair:der"]
    assert np.array_equal(arrays["solver0_warm"], np.arange(6.0).reshape(2, 3))
    assert not any(name.startswith("solver1_") for name in arrays)
    other = Simulation(scene, BACKEND)
    other.groups[0].solvers[0].solver.contact.load_state_arrays = loaded.append
    other.restore(checkpoint)
    assert len(loaded) == 1 and set(loaded[0]) == {"warm"} and np.array_equal(loaded[0]["warm"], arrays["solver0_warm"])


def _single_object_scene():
    """One hair object: 3 clamped strands whose tips hang close enough to touch, roots carried by a moving
    matrix; no air drag (a DerSolver of its own has none)."""
    spacing = np.linspace(3e-3, 1.2e-3, 8)          # 3 mm apart at the roots, 1.2 mm (0.2 mm gap) at the tips
    strands = [np.stack(((k - 1) * spacing, np.zeros(8), np.linspace(0.1, 0.04, 8)), axis=1) for k in range(3)]
    hair = {"id": "Hair", "kind": "hair", "points": np.concatenate(strands), "animated": True,
            "strand_offsets": np.array([0, 8, 16, 24], np.int32),
            "params": {"model": "der", "radius": 5e-4, "young_modulus": 1e8, "friction": 0.4, "damping": 0.5,
                       "air_drag": 0.0}}
    return _scene([hair], frames=2, solver={"tolerance": 1e-6})


def _matrix(frame):
    matrix = np.eye(4)
    matrix[:3, 3] = [0.01 * (frame - 1), 0.0, 0.0]
    return matrix


def test_a_single_hair_object_gives_the_same_result_as_its_own_der_solver():
    """The per-object path of before (one DerSolver over the object's own model, clamped roots carried by the
    object's matrix, substep matrices interpolated linearly) reproduces the Simulation bit for bit."""
    scene = _single_object_scene()
    simulation = Simulation(scene, BACKEND)
    simulation.initial_frame()
    points = np.asarray(scene["objects"][0]["points"], float)
    model = build_model(np, points, np.array([0, 8, 16, 24]), DerMaterial(radius=np.asarray(5e-4),
                        young_modulus=1e8, shear_modulus=1e9, density=1300.0, damping=0.5))
    settings = NewtonSettings(max_iterations=50, tolerance=1e-6, quasi_newton_matrix="gauss_newton",
                              refresh_interval=4, contact_detection_tolerance=1e-4)
    solver = DerSolver(model, BACKEND, settings, contact=ContactSettings(friction=0.4, collider_friction=0.3,
                                                                         local_solver="gauss_seidel"))
    state = rest_state(np, model)
    first = np.array([0, 8, 16])
    h = 1.0 / (FPS * SUBSTEPS)
    contacts = 0
    for frame in range(2, 4):
        _, positions, stats = simulation.advance({"Hair": {"matrix_world": _matrix(frame)}})
        contacts = max(contacts, stats["contacts"])
        for k in range(SUBSTEPS):
            alpha = (k + 1) / SUBSTEPS
            carry = (1.0 - alpha) * _matrix(frame - 1) + alpha * _matrix(frame)
            roots = points[first] + carry[:3, 3]
            clamped = np.concatenate((roots, roots + (points[first + 1] - points[first])))
            out = state.copy()
            solver.step(state, out, DerControl(vertex_targets=clamped), None, h,
                        gravity=np.array([0.0, 0.0, -9.81]))
            state = out
        assert np.array_equal(positions["Hair"], state.positions.astype(np.float32)), frame
    arrays = simulation.checkpoint()["groups"]["hair:der"]
    assert np.array_equal(arrays["object0_positions"], state.positions)
    assert np.array_equal(arrays["object0_reference_u"], state.reference_u)
    assert contacts > 0                                            # the strands touch: contact is exercised


@pytest.mark.parametrize("name, corrupt", [
    ("solver0_warm_impulses", lambda array: array[:-1]),
    ("solver0_warm_step", lambda array: np.array([np.nan])),
    ("solver0_warm_keys", lambda array: array.astype(np.float64)),
    ("solver0_warm_step", None)])
def test_a_malformed_contact_warm_start_in_a_checkpoint_is_refused(name, corrupt):
    """The contact solver's warm start is validated on restore: wrong shape, NaN, wrong dtype or a missing array
    is a SceneError naming the object, never a silently different resume."""
    scene = _crossing_scene(1.2, 0.0, frames=3)
    simulation = Simulation(scene, BACKEND)
    simulation.initial_frame()
    simulation.advance(None)
    checkpoint = simulation.checkpoint()
    arrays = dict(checkpoint["groups"]["hair:der"])
    assert name in arrays
    if corrupt is None:
        del arrays[name]
    else:
        arrays[name] = corrupt(arrays[name])
    broken = dict(checkpoint, groups=dict(checkpoint["groups"], **{"hair:der": arrays}))
    with pytest.raises(SceneError, match="Support.*solver state"):
        Simulation(scene, BACKEND).restore(broken)
