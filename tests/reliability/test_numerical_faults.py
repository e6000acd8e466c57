"""An exploding simulation stops with ``simulation_failed`` naming the object, the
frame and a likely cause; frames before it reach the client; a failing job never disturbs another."""

from __future__ import annotations

import copy
import threading

import numpy as np
import pytest

from protocol.client import SolverClient, SolverError
from solver_server.faults import MAX_COORDINATE_M, MotionGuard
from solver_server.sim.errors import SimulationError
from solver_server.simulation import Simulation

from .scenes import light_cloth_scene


def _guard(frames=48):
    return MotionGuard(frame_start=1, frame_end=frames, fps=24.0, gravity=(0.0, 0.0, -9.81))


def test_speed_limit_is_the_larger_of_1000_m_s_and_100_times_the_free_fall_speed():
    assert _guard(48).speed_limit == pytest.approx(max(1e3, 100 * 9.81 * 47 / 24))
    assert _guard(2401).speed_limit == pytest.approx(100 * 9.81 * 100.0)


def test_deforming_faster_than_the_limit_is_a_fault_naming_object_frame_and_cause():
    guard = _guard()
    points = np.zeros((4, 3))
    guard.check(10, {"Cloth": points})
    moved = points.copy()
    moved[2, 0] = 200.0  # 150 m from the mean move in 1/24 s: 3600 m/s > 1921 m/s
    with pytest.raises(SimulationError) as error:
        guard.check(11, {"Cloth": moved})
    assert error.value.object == "Cloth" and error.value.frame == 11
    assert "time step too large" in error.value.message and "m/s" in error.value.message


def test_an_early_failure_blames_the_start_state():
    guard = _guard()
    guard.check(1, {"Jelly": np.zeros((3, 3))})
    with pytest.raises(SimulationError, match="intersecting start state") as error:
        guard.check(2, {"Jelly": np.array([[0.0, 0, 0], [0, 0, 0], [0, 0, 300.0]])})
    assert error.value.frame == 2


def test_rigid_teleports_and_ordinary_motion_pass():
    guard = _guard()
    rng = np.random.default_rng(0)
    points = rng.standard_normal((50, 3))
    guard.check(1, {"Hair": points})
    guard.check(2, {"Hair": points + [500.0, 0.0, 0.0]})   # the whole object jumps 500 m (teleport)
    guard.check(3, {"Hair": points + [500.0, 0.0, -0.1] + 0.05 * rng.standard_normal((50, 3))})


def test_leaving_the_domain_or_nan_is_a_fault():
    guard = _guard()
    with pytest.raises(SimulationError, match="from the origin"):
        guard.check(5, {"Far": np.full((2, 3), 2 * MAX_COORDINATE_M)})
    with pytest.raises(SimulationError, match="NaN"):
        guard.check(5, {"Bad": np.array([[np.nan, 0.0, 0.0]])})


# --------------------------------------------------------------------------------------------
# through the server, with the real solver: 3 concurrent jobs, two of them poisoned

POISON_FRAME = 5


class PoisonedSimulation(Simulation):
    """A real Simulation; for an object named "Exploding" a vertex gets 1e9 m/s after frame 5 (as
    if the solver had blown up), for "Crashing" the solver raises (as a GPU fault would)."""

    def advance(self, drive=None):
        if self.frame == POISON_FRAME and "Crashing" in self._specs:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        output = super().advance(drive)
        if self.frame == POISON_FRAME and "Exploding" in self._specs:
            group = self.groups[0]
            state = group.state_arrays()
            state["velocities"][7] = [1e9, 0.0, 0.0]
            group.load_state_arrays(state)
        return output


def _renamed(scene, object_id):
    scene = copy.deepcopy(scene)
    scene["objects"][0]["id"] = object_id
    return scene


def _bake(address, scene, drive, outcome, key):
    frames = {}
    try:
        with SolverClient(address, timeout=20.0) as client:
            for result in client.submit(scene, drive=drive).frames():
                frames[result.frame] = result.positions
    except SolverError as error:
        outcome[key + "_error"] = error
    outcome[key] = frames


def test_a_poisoned_job_fails_cleanly_and_the_other_jobs_are_unaffected(real_server):
    server = real_server(simulation_factory=PoisonedSimulation)
    scene, drive = light_cloth_scene(frame_end=14)
    outcome: dict = {}
    _bake(server.address, scene, drive, outcome, "solo")
    assert "solo_error" not in outcome
    threads = [threading.Thread(target=_bake, args=(server.address, scene, drive, outcome, "healthy")),
               threading.Thread(target=_bake, args=(server.address, _renamed(scene, "Exploding"), drive, outcome,
                                                    "exploding")),
               threading.Thread(target=_bake, args=(server.address, _renamed(scene, "Crashing"), drive, outcome,
                                                    "crashing"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert "healthy_error" not in outcome and sorted(outcome["healthy"]) == list(range(1, 15))
    for frame, positions in outcome["solo"].items():
        np.testing.assert_array_equal(outcome["healthy"][frame]["Cloth"], positions["Cloth"])

    exploded = outcome["exploding_error"]
    assert exploded.code == "simulation_failed" and exploded.object == "Exploding"
    assert exploded.frame == POISON_FRAME + 1 and "likely cause" in exploded.message
    assert sorted(outcome["exploding"]) == list(range(1, POISON_FRAME + 1)), "frames before the fault are kept"
    crashed = outcome["crashing_error"]
    assert crashed.code == "internal" and "CUDA error" in crashed.message and crashed.frame == POISON_FRAME + 1
    assert sorted(outcome["crashing"]) == list(range(1, POISON_FRAME + 1))

    with SolverClient(server.address, timeout=20.0) as client:  # and the server still serves
        assert len(list(client.submit(scene, drive=drive).frames())) == 14


@pytest.mark.parametrize("scale", [1e7, 1e12, 1e300])
def test_absurd_finite_coordinates_are_bad_scene_not_internal(real_server, scale):
    server = real_server()
    scene, drive = light_cloth_scene(frame_end=3)
    scene["objects"][0]["vertices"] = scene["objects"][0]["vertices"] * scale
    with SolverClient(server.address, timeout=20.0) as client:
        with pytest.raises(SolverError) as error:
            client.submit(scene, drive=drive)
    assert error.value.code == "bad_scene" and error.value.object == "Cloth"
    assert "beyond 1e+06" in error.value.message and "unit scale" in error.value.message
