"""Registry entry for hair with ``params.model == "der"`` (solver_server.solvers registry, ("hair", "der")).

Each DER hair object gets one DerSolver over all of its strands (hair–hair contact inside the object;
between two hair objects it is not simulated).  Kinematic points:

* no ``pins`` key: clamped roots (first two points and the first twist angle of every strand), bound to the
  emitter surface (``roots``) or carried by the object's matrix_world;
* ``pins``: weight 1 points follow their rest positions carried by matrix_world; weight w < 1 points are
  pulled there by a zero-length spring of stiffness w · ``pin_stiffness`` (seed §4.1); empty pins: free.

Scene solver settings (``scene["solver"]["der"]``): max_iterations (50), tolerance [m/s] (1e-6), quasi_newton
(true), quasi_newton_matrix ("gauss_newton" | "exact"), refresh_interval (4; 0 = the seed's never),
response ("delassus" | "rigid_rod").
"""

from __future__ import annotations

import numpy as np

from ...sim.errors import SceneError
from ..guides.roots import RootBinding
from ..registry_types import SubstepInputs, checked_state_array
from .contact import ContactSettings
from .integrator import NewtonSettings
from .model import DerInputError, DerMaterial, build_model
from .solver import DerControl, DerSolver
from .state import DerState, rest_state

_SETTING_KEYS = {"max_iterations": int, "tolerance": float, "quasi_newton": bool, "response": str,
                 "quasi_newton_matrix": str, "refresh_interval": int}
# scene defaults: quasi-Newton on the Gauss-Newton matrix refreshed every 4 iterations (docs/der.md §3)
_SCENE_DEFAULTS = {"quasi_newton_matrix": "gauss_newton", "refresh_interval": 4}


def _settings(scene, object_id):
    raw = dict(scene.solver.get("der", {}) or {})
    unknown = sorted(set(raw) - set(_SETTING_KEYS))
    if unknown:
        raise SceneError(f"unknown scene.solver.der setting(s) {unknown}; known: {sorted(_SETTING_KEYS)}",
                         object=object_id)
    newton = NewtonSettings(**_SCENE_DEFAULTS)
    for key in ("max_iterations", "tolerance", "quasi_newton", "quasi_newton_matrix", "refresh_interval"):
        if key in raw:
            setattr(newton, key, _SETTING_KEYS[key](raw[key]))
    if newton.max_iterations < 1 or not newton.tolerance > 0.0 or newton.refresh_interval < 0:
        raise SceneError("scene.solver.der needs max_iterations >= 1, tolerance > 0 and refresh_interval >= 0",
                         object=object_id)
    return newton, raw.get("response", "delassus")


class _DerObject:
    def __init__(self, spec, backend, scene):
        xp = backend.xp
        self.id = spec.id
        points = np.asarray(spec.vertices, np.float64)
        offsets = np.asarray(spec.raw.get("strand_offsets", [0, len(points)]), np.int64)
        params = spec.params
        radius = spec.raw.get("radius", params["radius"])
        material = DerMaterial(radius=np.asarray(radius, np.float64), young_modulus=float(params["young_modulus"]),
                               shear_modulus=float(params["shear_modulus"]), density=float(params["density"]),
                               damping=float(params["damping"]))
        try:
            self.model = build_model(xp, backend.from_host(points), backend.from_host(offsets), material)
        except DerInputError as error:
            raise SceneError(str(error), object=spec.id) from error
        newton, response = _settings(scene, spec.id)
        contact = ContactSettings(friction=float(params["friction"]), collider_friction=float(params["collider_friction"]),
                                  thickness=float(params["thickness"]), response=response)
        self.matrix_rest = spec.matrix_world
        self.rest_points = points
        self.binding = None
        fixed_vertices, fixed_edges, soft = None, None, None
        self.soft_indices = np.zeros(0, np.int64)
        if "pins" in spec.raw and spec.raw.get("pins") is not None:
            hard = spec.pin_weights >= 1.0
            fixed_vertices, fixed_edges = spec.pin_indices[hard].astype(np.int64), np.zeros(0, np.int64)
            self.soft_indices = spec.pin_indices[~hard].astype(np.int64)
            if self.soft_indices.size:   # weight w < 1: spring of stiffness w · pin_stiffness (ARCHITECTURE §2)
                soft = (self.soft_indices, spec.pin_weights[~hard] * float(params["pin_stiffness"]))
        else:
            self.binding = RootBinding(spec, scene, points[offsets[:-1]])
        try:
            self.solver = DerSolver(self.model, backend, newton, fixed_vertices=fixed_vertices, fixed_edges=fixed_edges,
                                    contact=contact, soft_pins=soft)
        except ValueError as error:
            raise SceneError(str(error), object=spec.id) from error
        self.fixed_vertices_host = backend.to_host(self.solver.fixed_vertices)  # pin targets are built on the host
        self.state = rest_state(xp, self.model)
        self.offsets = offsets

    def control(self, poses) -> DerControl:
        if self.binding is not None:
            roots, rotations = self.binding.frames(poses)
            first = self.offsets[:-1]
            second = roots + np.einsum("sij,sj->si", rotations, self.rest_points[first + 1] - self.rest_points[first])
            return DerControl(vertex_targets=np.concatenate((roots, second)))
        pose = poses.get(self.id)
        matrix = self.matrix_rest if pose is None else pose.matrix
        carry = matrix @ np.linalg.inv(self.matrix_rest)
        pinned = self.rest_points[self.fixed_vertices_host]
        soft = self.rest_points[self.soft_indices]
        return DerControl(vertex_targets=pinned @ carry[:3, :3].T + carry[:3, 3],
                          soft_targets=soft @ carry[:3, :3].T + carry[:3, 3])


class DerHairGroup:
    """All DER hair objects of a scene."""

    def __init__(self, specs, backend, scene):
        self.backend = backend
        self.ids = [spec.id for spec in specs]
        self.objects = [_DerObject(spec, backend, scene) for spec in specs]

    def step(self, inputs: SubstepInputs) -> dict:
        totals = {"iterations": 0, "contacts": 0, "mean_dv": 0.0, "fischer_burmeister": 0.0}
        colliders = list(inputs.colliders.colliders) if inputs.colliders is not None else []
        for hair in self.objects:
            hair.solver.contact.set_colliders(colliders)
            control = hair.control(inputs.poses)
            control.vertex_targets = self.backend.from_host(control.vertex_targets)
            if control.soft_targets is not None:
                control.soft_targets = self.backend.from_host(control.soft_targets)
            out = hair.state.copy()
            stats = hair.solver.step(hair.state, out, control, None, inputs.dt, gravity=inputs.gravity)
            hair.state = out
            totals["iterations"] = max(totals["iterations"], stats["iterations"])
            totals["contacts"] += stats.get("contacts", 0)
            totals["mean_dv"] = max(totals["mean_dv"], stats["mean_dv"])
            totals["fischer_burmeister"] = max(totals["fischer_burmeister"], stats.get("fischer_burmeister", 0.0))
        return totals

    def positions(self) -> dict[str, np.ndarray]:
        return {hair.id: self.backend.to_host(hair.state.positions).astype(np.float32) for hair in self.objects}

    def state_arrays(self) -> dict[str, np.ndarray]:
        """Checkpoint state: every DerState field of every object (positions, velocities, twist angles
        and their rates, time-parallel reference frames and unwrapped reference twists), named
        ``object<i>_<field>`` with i the object's position in ``ids``."""
        to_host = self.backend.to_host
        return {f"object{index}_{name}": np.array(to_host(getattr(hair.state, name)))
                for index, hair in enumerate(self.objects) for name in DerState.__dataclass_fields__}

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        loaded = []
        for index, hair in enumerate(self.objects):
            fields = {}
            for name in DerState.__dataclass_fields__:
                like = self.backend.to_host(getattr(hair.state, name))
                value = checked_state_array(arrays, f"object{index}_{name}", like.shape, like.dtype, hair.id)
                fields[name] = self.backend.from_host(value)
            loaded.append(DerState(**fields))
        for hair, state in zip(self.objects, loaded):
            hair.state = state

    def first_non_finite(self) -> str | None:
        xp = self.backend.xp
        for hair in self.objects:
            if not bool(xp.all(xp.isfinite(hair.state.positions))):
                return hair.id
        return None


def build_group(specs, backend, scene) -> DerHairGroup:
    """Registry factory for ("hair", "der")."""
    return DerHairGroup(specs, backend, scene)
