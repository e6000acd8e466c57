"""A stand-in for solver_server.simulation.Simulation (same contract, trivial physics) so the
transport can be tested independently of the solvers.

Each object moves by ``velocity`` (m/frame, default [0, 0, -0.01]) per frame; an animated
object follows the translation column of its driven ``matrix_world`` instead. Scene keys for
tests: ``objects[i]["fail_at_frame"]`` raises SimulationError there, ``objects[i]["invalid"]``
raises SceneError, ``time["sleep_s"]`` slows every advance (and every pre-roll frame) down. ``time["preroll"]``
frames run before the first frame and leave the positions as they are.
"""

from __future__ import annotations

import time

import numpy as np

from solver_server.sim.errors import SceneError, SimulationError


class FakeSimulation:
    def __init__(self, scene: dict, backend):
        timing = scene["time"]
        self.frame_start = int(timing["frame_start"])
        self.frame_end = int(timing["frame_end"])
        self.sleep_s = float(timing.get("sleep_s", 0.0))
        self.frame = self.frame_start
        self.preroll_left = int(timing.get("preroll", 0))
        self.prerolled = 0
        self.objects = {}
        for obj in scene["objects"]:
            if obj.get("invalid"):
                raise SceneError(str(obj["invalid"]), object=obj["id"])
            self.objects[obj["id"]] = obj
        self.positions = {oid: np.array(o["vertices"], dtype=np.float64) for oid, o in self.objects.items()}
        self.rest = {oid: p.copy() for oid, p in self.positions.items()}
        self.animated_ids = [oid for oid, o in self.objects.items() if o.get("animated")]
        self.drives_seen: list = []

    def preroll_frame(self):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        self.preroll_left -= 1
        self.prerolled += 1
        return {}

    def initial_frame(self):
        while self.preroll_left > 0:
            self.preroll_frame()
        return self.frame, self.positions, {"note": "initial", "prerolled": self.prerolled}

    def advance(self, drive):
        self.frame += 1
        if self.sleep_s:
            time.sleep(self.sleep_s)
        for oid, obj in self.objects.items():
            if obj.get("fail_at_frame") == self.frame:
                raise SimulationError("exploded", object=oid, frame=self.frame)
            if oid in self.animated_ids:
                translation = np.asarray(drive[oid]["matrix_world"])[:3, 3]
                self.positions[oid][:] = self.rest[oid] + translation
            else:
                self.positions[oid] += np.asarray(obj.get("velocity", [0.0, 0.0, -0.01]))
        return self.frame, self.positions, {"iterations": np.int64(3), "residual": np.float32(0.5)}
