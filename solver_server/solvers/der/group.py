"""Registry entry for hair with ``params.model == "der"`` (solver_server.solvers registry, ("hair", "der")).

All DER hair objects of a scene whose ``collide_with_other_hair`` is on (the default) are simulated by ONE
DerSolver: their strands are concatenated (the model is flattened over strands and its banded system is
block-diagonal per strand), so strands of different objects collide with each other (a character's hair and
its beard, two characters' hair).  Every object keeps its own material (radius, E, G, density, damping: the
combined model is the concatenation of the objects' own models), its own contact parameters and its own
kinematic points; results and checkpoint arrays are split back per object.  An object with
``collide_with_other_hair`` off gets a DerSolver of its own (contact with its own strands and the colliders
only).

Contact parameters of a pair of strands from objects a and b: hair–hair μ = (μ_a + μ_b) / 2 and extra contact
distance (thickness_a + thickness_b) / 2, which are the object's own values for a pair inside one object;
vertex–collider μ = the mean of the object's ``collider_friction`` and the collider's ``friction`` as before.

Kinematic points of every object:

* no ``pins`` key: clamped roots (first two points and the first twist angle of every strand), bound to the
  emitter surface (``roots``) or carried by the object's matrix_world; the first edge's material frame turns
  with the root frame, so curls turn with the head even about the hair's own axis;
* ``pins``: weight 1 points follow their rest positions carried by matrix_world; weight w < 1 points are
  pulled there by a zero-length spring of stiffness w · ``pin_stiffness`` (seed §4.1); empty pins: free.

Scene solver settings (``scene["solver"]["der"]``): max_iterations (50), tolerance [m/s] (1e-6), quasi_newton
(true), quasi_newton_matrix ("gauss_newton" | "exact"), refresh_interval (4; 0 = the seed's never),
length_preserving_path (true: line search along the path of retraction.py on strands without contact
impulses), contact_detection_tolerance (1e-4 m/s: contacts are detected once the free motion's mean |Δv|
is below it; a negative value: after the first iteration as in the seed), contact_detection_iterations (8:
or after this many iterations), response ("delassus" | "rigid_rod"), local_solver ("gauss_seidel": the
contact problem of each round solved on the exact Delassus operator, contact_space.py | "jacobi": the
seed's one local step per contact round).
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from ...sim.errors import SceneError
from ...sim.rigid_carry import carry_points
from ..guides.drawing import checked_drawing, drawing_arrays
from ..guides.roots import RootBinding
from ..registry_types import SubstepInputs, checked_state_array
from ..wind import WindSettings
from .air_drag import DerAirDrag
from .contact import ContactSolver
from .contact_set import ContactSet
from .guides import DerGuides
from .model import DerInputError, DerMaterial, DerModel, build_model
from .settings import SCENE_CONTACT_DEFAULTS, SCENE_NEWTON_DEFAULTS, ContactSettings, NewtonSettings
from .solver import DerSolver
from .state import DerControl, DerState, rest_state
from .wind import StrandWind, vertex_tangents

_SETTING_KEYS = {"max_iterations": int, "tolerance": float, "quasi_newton": bool, "response": str,
                 "quasi_newton_matrix": str, "refresh_interval": int, "length_preserving_path": bool,
                 "contact_detection_tolerance": float, "contact_detection_iterations": int, "local_solver": str}
# keys that configure the contacts (ContactSettings), not the Newton loop
_CONTACT_KEYS = ("response", "local_solver")


def _settings(scene, object_id):
    raw = dict(scene.solver.get("der", {}) or {})
    unknown = sorted(set(raw) - set(_SETTING_KEYS))
    if unknown:
        raise SceneError(f"unknown scene.solver.der setting(s) {unknown}; known: {sorted(_SETTING_KEYS)}",
                         object=object_id)
    newton = NewtonSettings(**SCENE_NEWTON_DEFAULTS)
    for key, kind in _SETTING_KEYS.items():
        if key in raw and key not in _CONTACT_KEYS:
            setattr(newton, key, kind(raw[key]))
    if newton.max_iterations < 1 or not newton.tolerance > 0.0 or newton.refresh_interval < 0 \
            or newton.contact_detection_iterations < 1 or np.isnan(newton.contact_detection_tolerance):
        raise SceneError("scene.solver.der needs max_iterations >= 1, tolerance > 0, refresh_interval >= 0, "
                         "contact_detection_iterations >= 1 and a contact_detection_tolerance that is a number",
                         object=object_id)
    if newton.contact_detection_tolerance < 0.0:
        newton.contact_detection_tolerance = None   # the seed's detection after the first iteration
    contact = {key: str(raw[key]) for key in _CONTACT_KEYS if key in raw}
    return newton, {**SCENE_CONTACT_DEFAULTS, **contact}


class _HairObject:
    """One DER hair object: its own model (own material), contact parameters and kinematic points.

    fixed_vertices (F,) / fixed_edges (K,) / soft_indices (P,) are indices inside the object (host int64);
    ``targets(poses)`` gives their targets at the end of a substep in that order.
    """

    def __init__(self, spec, backend, scene):
        self.id = spec.id
        points = np.asarray(spec.vertices, np.float64)
        offsets = np.asarray(spec.raw.get("strand_offsets", [0, len(points)]), np.int64)
        params = spec.params
        radius = np.asarray(spec.raw.get("radius", params["radius"]), np.float64)
        # painted maps scale the moduli and the density point by point (sim/maps.py)
        painted = {name: float(params[name]) * spec.maps[name] if name in spec.maps else float(params[name])
                   for name in ("young_modulus", "shear_modulus", "density")}
        # only the guide strands are simulated where the object asks for guides (every strand drawn from them)
        self.guides = DerGuides.of(spec, scene, backend.xp)
        self.draw_radius = float(radius.mean())
        if self.guides is not None:
            kept = self.guides.point_index
            points, offsets = points[kept], self.guides.offsets
            radius = radius[kept] if radius.ndim else radius
            painted = {name: value[kept] if np.ndim(value) else value for name, value in painted.items()}
        material = DerMaterial(radius=np.asarray(radius, np.float64), damping=float(params["damping"]), **painted)
        try:
            self.model = build_model(backend.xp, backend.from_host(points), backend.from_host(offsets), material)
        except DerInputError as error:
            raise SceneError(str(error), object=spec.id) from error
        self.friction = float(params["friction"])
        self.collider_friction = float(params["collider_friction"])
        self.thickness = float(params["thickness"])
        self.collides_with_other_hair = bool(params.get("collide_with_other_hair", True))
        self.wind = WindSettings.from_object_params(params, spec.id)
        self.air_drag = float(params["air_drag"])
        self.matrix_rest = spec.matrix_world
        self.rest_points = points
        self.offsets = offsets
        self.binding = None
        self.soft_indices = np.zeros(0, np.int64)
        self.soft_stiffness = np.zeros(0, np.float64)
        if "pins" in spec.raw and spec.raw.get("pins") is not None:
            hard = spec.pin_weights >= 1.0
            self.fixed_vertices = spec.pin_indices[hard].astype(np.int64)
            self.fixed_edges = np.zeros(0, np.int64)
            self.soft_indices = spec.pin_indices[~hard].astype(np.int64)
            # weight w < 1: spring of stiffness w · pin_stiffness (ARCHITECTURE §2)
            self.soft_stiffness = spec.pin_weights[~hard] * float(params["pin_stiffness"])
        else:   # clamped roots: [roots..., second vertices...] and the first edge of every strand
            first = offsets[:-1]
            self.fixed_vertices = np.concatenate((first, first + 1))
            self.fixed_edges = first - np.arange(len(first))
            # guides: the object's binding of every strand's root, of which the guides' rows are taken
            self.binding = RootBinding(spec, scene, points[first]) if self.guides is None else \
                self.guides.strands.binding
            # material director m1 of every first edge at rest (twist angle 0: the reference director)
            self.rest_root_directors = np.asarray(backend.to_host(self.model.rest_u))[self.fixed_edges]

    def targets(self, poses) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(F, 3) fixed-vertex and (P, 3) soft-pin targets [m] and the (K, 3) material directors of the fixed
        edges (host float64) for the poses of a substep end: clamped first edges keep their rest director
        turned by their root frame."""
        if self.binding is not None:
            roots, rotations = self.binding.frames(poses)
            if self.guides is not None:
                roots, rotations = roots[self.guides.rows], rotations[self.guides.rows]
            first = self.offsets[:-1]
            second = roots + np.einsum("sij,sj->si", rotations, self.rest_points[first + 1] - self.rest_points[first])
            directors = np.einsum("sij,sj->si", rotations, self.rest_root_directors)
            return np.concatenate((roots, second)), np.zeros((0, 3)), directors
        pose = poses.get(self.id)
        matrix = self.matrix_rest if pose is None else pose.matrix
        return (carry_points(self.rest_points[self.fixed_vertices], matrix, self.matrix_rest),
                carry_points(self.rest_points[self.soft_indices], matrix, self.matrix_rest), np.zeros((0, 3)))


# How each DerModel field is joined when the strands of several objects are concatenated: index arrays are
# shifted by the preceding objects' count of what they index; per-element data is stacked along axis 0.
_SHIFTED_FIELDS = {"vertex_strand": "n_strands", "vertex_dof": "n_dofs", "edge_vertex": "n_vertices",
                   "edge_strand": "n_strands", "edge_dof": "n_dofs", "bend_vertex": "n_vertices",
                   "bend_edges": "n_edges", "bend_dof": "n_dofs", "position_dofs": "n_dofs"}
_COUNT_FIELDS = ("n_vertices", "n_strands", "n_edges", "n_dofs")
_STACKED_FIELDS = ("edge_local", "rest_positions", "rest_edge_length", "voronoi_length", "rest_bend", "rest_twist",
                   "stretch_stiffness", "bend_stiffness", "twist_stiffness", "edge_radius", "vertex_mass",
                   "edge_inertia", "mass", "rest_u", "bend_weight", "twist_weight")


def concatenate_models(xp, models: list[DerModel]) -> DerModel:
    """One DerModel over the strands of ``models`` in order (each keeps its own stiffness, masses and rest
    shape).  damping stays a scalar when all agree, else it is per DOF (n_dofs,) [1/s]."""
    if len(models) == 1:
        return models[0]
    joined = {"xp": xp}
    for name in _COUNT_FIELDS:
        joined[name] = sum(getattr(model, name) for model in models)
    for name, counted in _SHIFTED_FIELDS.items():
        starts = np.cumsum([0] + [getattr(model, counted) for model in models[:-1]])
        joined[name] = xp.concatenate([getattr(model, name) + int(start) for model, start in zip(models, starts)])
    for name in _STACKED_FIELDS:
        joined[name] = xp.concatenate([getattr(model, name) for model in models])
    vertex_starts = np.cumsum([0] + [model.n_vertices for model in models[:-1]])
    joined["strand_offsets"] = xp.concatenate(
        [model.strand_offsets[:-1] + int(start) for model, start in zip(models, vertex_starts)]
        + [xp.asarray([joined["n_vertices"]], dtype=models[0].strand_offsets.dtype)])
    dampings = [float(model.damping) for model in models]
    joined["damping"] = dampings[0] if len(set(dampings)) == 1 else \
        xp.concatenate([xp.full(model.n_dofs, value) for model, value in zip(models, dampings)])
    missing = sorted({item.name for item in fields(DerModel)} - set(joined))
    if missing:
        raise RuntimeError(f"DerModel field(s) {missing} have no rule in der/group.py to join several hair objects")
    return DerModel(**joined)


class _SharedContactSolver(ContactSolver):
    """ContactSolver over the strands of several hair objects.  With ``per_object`` (the objects' contact
    parameters differ) every contact gets the mean μ and thickness of its two objects (the object's own
    collider μ): the detection runs with the largest thickness, then μ and the normal target are set per
    contact."""

    def __init__(self, xp, model, settings: ContactSettings, vertex_object, objects: list[_HairObject],
                 per_object: bool):
        super().__init__(xp, model, [], settings)
        self.per_object = per_object
        self.vertex_object = vertex_object
        self.object_friction = xp.asarray([hair.friction for hair in objects])
        self.object_collider_friction = xp.asarray([hair.collider_friction for hair in objects])
        self.object_thickness = xp.asarray([hair.thickness for hair in objects])

    def vertex_thickness(self):
        if not self.per_object:
            return super().vertex_thickness()
        return self.object_thickness[self.vertex_object]

    def per_object_contacts(self, found: ContactSet, dt: float) -> ContactSet:
        if not self.per_object or found.count == 0:
            return found
        xp, settings = self.xp, self.settings
        side_a = self.vertex_object[found.vertices[:, 0]]
        side_b = self.vertex_object[found.vertices[:, 2]]   # the same object for a collider contact
        pair_mu = 0.5 * (self.object_friction[side_a] + self.object_friction[side_b])
        # detected with settings.collider_friction: μ = (that + collider μ) / 2; swap in the object's own
        collider_mu = found.mu + 0.5 * (self.object_collider_friction[side_a] - settings.collider_friction)
        thickness = 0.5 * (self.object_thickness[side_a] + self.object_thickness[side_b])
        return found.with_columns(target_normal=found.target_normal - (settings.thickness - thickness) / dt,
                                  mu=xp.where(found.kind_edge, pair_mu, collider_mu))


class _SharedSolver:
    """One DerSolver over the concatenated strands of ``objects``; strands of all of them collide."""

    def __init__(self, objects: list[_HairObject], backend, newton: NewtonSettings, contact_keys: dict):
        xp = backend.xp
        self.backend = backend
        self.objects = objects
        self.model = concatenate_models(xp, [hair.model for hair in objects])
        counts = {name: np.array([getattr(hair.model, name) for hair in objects]) for name in _COUNT_FIELDS}
        counts["n_bends"] = np.array([hair.model.bend_vertex.shape[0] for hair in objects])
        self.starts = {name: np.concatenate(([0], np.cumsum(value))) for name, value in counts.items()}
        vertex_start, edge_start = self.starts["n_vertices"], self.starts["n_edges"]
        fixed_vertices = np.concatenate([hair.fixed_vertices + vertex_start[k] for k, hair in enumerate(objects)])
        fixed_edges = np.concatenate([hair.fixed_edges + edge_start[k] for k, hair in enumerate(objects)])
        soft_indices = np.concatenate([hair.soft_indices + vertex_start[k] for k, hair in enumerate(objects)])
        soft_stiffness = np.concatenate([hair.soft_stiffness for hair in objects])
        soft = (soft_indices, soft_stiffness) if soft_indices.size else None
        first = objects[0]
        uniform = all((hair.friction, hair.collider_friction, hair.thickness)
                      == (first.friction, first.collider_friction, first.thickness) for hair in objects)
        contact = ContactSettings(friction=first.friction, collider_friction=first.collider_friction,
                                  thickness=first.thickness if uniform else max(hair.thickness for hair in objects),
                                  **contact_keys)
        try:
            self.solver = DerSolver(self.model, backend, newton, fixed_vertices=fixed_vertices,
                                    fixed_edges=fixed_edges, contact=contact, soft_pins=soft)
            if len(objects) > 1:
                owner = np.repeat(np.arange(len(objects)), counts["n_vertices"])
                self.solver.contact = _SharedContactSolver(xp, self.model, contact, backend.from_host(owner),
                                                           objects, per_object=not uniform)
        except ValueError as error:
            raise SceneError(str(error), object=first.id) from error
        self.state = rest_state(xp, self.model)
        self.started = False            # the first step counts the free vertices that start inside a collider
        self.wind = StrandWind.of_objects(xp, [hair.wind for hair in objects], counts["n_vertices"])
        self.air = DerAirDrag.of_objects(xp, self.model, [hair.air_drag for hair in objects], counts["n_vertices"])

    def step(self, inputs: SubstepInputs, colliders: list) -> dict:
        from_host = self.backend.from_host
        self.solver.contact.set_colliders(colliders)
        targets = [hair.targets(inputs.poses) for hair in self.objects]
        soft_targets = np.concatenate([soft for _, soft, _ in targets])
        vertex_targets = np.concatenate([fixed for fixed, _, _ in targets])
        directors = np.concatenate([turned for _, _, turned in targets])
        self.solver.check_edge_directors(directors, vertex_targets)     # on the host: the step reads nothing for it
        control = DerControl(vertex_targets=from_host(vertex_targets),
                             soft_targets=from_host(soft_targets) if soft_targets.size else None,
                             edge_directors=from_host(directors), edge_directors_checked=True)
        started_inside = None if self.started else self._inside_colliders()
        self.started = True
        out = self.state.copy()
        along = None      # the vertices' unit tangents at the step's start: the wind's and the air drag's
        if self.wind is not None or self.air is not None:
            along = vertex_tangents(self.backend.xp, self.state.tangents, self.model.edge_vertex, self.model.n_vertices)
        wind = None if self.wind is None else self.wind.acceleration(along, inputs.time)
        drag = None if self.air is None else self.air.dof_rates(self.state.velocities, along)
        stats = self.solver.step(self.state, out, control, None, inputs.dt, gravity=inputs.gravity, acceleration=wind,
                                 drag=drag)
        self.state = out
        if started_inside:
            stats["started_inside"] = started_inside
        return stats

    def _inside_colliders(self) -> int:
        """Free vertices inside a collider's solid (below a plane, inside a primitive or a closed mesh shell):
        a groom that starts through the ground or a body. Contact brings them out over a few frames
        (``ContactSettings.recovery_speed``) where their strand can move that way."""
        xp = self.backend.xp
        inside = xp.zeros(self.state.positions.shape[0], dtype=bool)
        for collider in self.solver.contact.colliders:
            inside |= collider.depth_inside(xp, self.state.positions) > 0.0
        inside[self.solver.fixed_vertices] = False
        return int(inside.sum())

    def _rows(self, index: int, length: int) -> slice | None:
        """Rows of object ``index`` in a combined state array of leading length ``length`` (None: unknown)."""
        for name in ("n_vertices", "n_edges", "n_bends"):
            if length == self.starts[name][-1]:
                return slice(int(self.starts[name][index]), int(self.starts[name][index + 1]))
        return None

    def object_state(self, index: int) -> dict:
        """Host copies of object ``index``'s rows of every DerState field."""
        to_host = self.backend.to_host
        arrays = {}
        for name in DerState.__dataclass_fields__:
            value = to_host(getattr(self.state, name))
            rows = self._rows(index, value.shape[0])
            if rows is None:
                raise RuntimeError(f"DerState field {name!r} of length {value.shape[0]} is not per vertex, edge "
                                   "or bend element; der/group.py cannot split it per hair object")
            arrays[name] = np.array(value[rows])
        return arrays

    def load_object_states(self, states: list[dict]) -> None:
        """Replace the state by the objects' rows (one dict of DerState fields per object, in order)."""
        from_host = self.backend.from_host
        joined = {name: from_host(np.concatenate([state[name] for state in states]))
                  for name in DerState.__dataclass_fields__}
        self.state = DerState(**joined)
        self.started = True

    def solver_state(self) -> dict:
        """Cross-step state of the solver beyond DerState (its contact solver's ``state_arrays()``: the contact
        warm start), host arrays."""
        to_host = self.backend.to_host
        return {name: np.array(to_host(value)) for name, value in self.solver.contact.state_arrays().items()}

    def load_solver_state(self, arrays: dict) -> None:
        """Hand host arrays from :meth:`solver_state` back to the contact solver (none saved: no warm start)."""
        from_host = self.backend.from_host
        self.solver.contact.load_state_arrays({name: from_host(np.asarray(value)) for name, value in arrays.items()})

    def object_positions(self, index: int):
        rows = slice(int(self.starts["n_vertices"][index]), int(self.starts["n_vertices"][index + 1]))
        return self.state.positions[rows]


class DerHairGroup:
    """All DER hair objects of a scene: one shared solver for the objects that collide with other hair,
    one solver each for the objects that opt out."""

    def __init__(self, specs, backend, scene):
        self.backend = backend
        self.ids = [spec.id for spec in specs]
        objects = [_HairObject(spec, backend, scene) for spec in specs]
        newton, contact_keys = _settings(scene, self.ids[0])
        shared = [hair for hair in objects if hair.collides_with_other_hair]
        members = [shared] if shared else []
        members += [[hair] for hair in objects if not hair.collides_with_other_hair]
        self.solvers = [_SharedSolver(group, backend, newton, contact_keys) for group in members]
        # where each object lives: (solver, index inside it), in the order of ``ids``
        place = {hair.id: (solver, index) for solver in self.solvers for index, hair in enumerate(solver.objects)}
        self.places = [place[object_id] for object_id in self.ids]
        self.poses: dict = {}
        self.colliders = None   # the scene's collision.ColliderSet as posed by the latest substep
        # per object on guides, its drawing at the last frame (guides.drawing.DrawnStrands: its children's laying
        # out of the colliders carries over from it, StrandObject.draw), else None; checkpointed
        self.drawn = [None] * len(self.ids)

    def step(self, inputs: SubstepInputs) -> dict:
        self.poses, self.colliders = inputs.poses, inputs.colliders
        totals = {"iterations": 0, "contacts": 0, "mean_dv": 0.0, "fischer_burmeister": 0.0, "unreachable_contacts": 0,
                  "failsafe_vertices": 0, "failsafe_edges": 0}
        started_inside = 0
        colliders = list(inputs.colliders.colliders) if inputs.colliders is not None else []
        for shared in self.solvers:
            stats = shared.step(inputs, colliders)
            totals["iterations"] = max(totals["iterations"], stats["iterations"])
            totals["contacts"] += stats.get("contacts", 0)
            totals["mean_dv"] = self.backend.xp.maximum(totals["mean_dv"], stats["mean_dv"])   # on the device
            totals["fischer_burmeister"] = self.backend.xp.maximum(totals["fischer_burmeister"],
                                                                   stats.get("fischer_burmeister", 0.0))
            for name in ("unreachable_contacts", "failsafe_vertices", "failsafe_edges"):
                totals[name] += stats.get(name, 0)
            started_inside += stats.get("started_inside", 0)
        if started_inside:
            totals["started_inside"] = started_inside
        return totals

    def finish_frame(self) -> dict:
        """Nothing is left on the device to check: DER reads its figures inside the substep."""
        return {}

    def positions(self) -> dict[str, np.ndarray]:
        """Every object's points (N, 3) float32 [m]; an object on guides draws every strand from them."""
        xp, to_host = self.backend.xp, self.backend.to_host
        drawn = {}
        for number, (object_id, (shared, index)) in enumerate(zip(self.ids, self.places)):
            points = shared.object_positions(index)
            hair = shared.objects[index]
            if hair.guides is not None:
                drawing = hair.guides.draw(points, self.poses, xp, self.colliders, hair.draw_radius,
                                           self.drawn[number])
                self.drawn[number] = drawing
                points = hair.guides.unpadded(drawing.points, xp)
            drawn[object_id] = to_host(points).astype(np.float32)
        return drawn

    def device_positions(self) -> list:
        return [(object_id, shared.object_positions(index)) for object_id, (shared, index) in zip(self.ids, self.places)]

    def state_arrays(self) -> dict[str, np.ndarray]:
        """Checkpoint state: every DerState field of every object (positions, velocities, twist angles
        and their rates, time-parallel reference frames and unwrapped reference twists), named
        ``object<i>_<field>`` with i the object's position in ``ids`` (split out of the shared solver), plus
        ``solver<k>_<name>`` for the cross-step state of solver k (see :meth:`_SharedSolver.solver_state`), and
        ``object<i>_drawn``, ``object<i>_blend`` and ``object<i>_mean`` for an object on guides (its drawing at the
        frame, which the next frame's children carry over: guides.drawing)."""
        arrays = {}
        for number, (shared, index) in enumerate(self.places):
            arrays.update({f"object{number}_{name}": value for name, value in shared.object_state(index).items()})
            if self.drawn[number] is not None:
                arrays.update(drawing_arrays(f"object{number}", self.drawn[number], self.backend.to_host))
        for number, shared in enumerate(self.solvers):
            arrays.update({f"solver{number}_{name}": value for name, value in shared.solver_state().items()})
        return arrays

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        loaded, drawn = {}, []
        for number, (shared, index) in enumerate(self.places):
            like = shared.object_state(index)
            loaded[self.ids[number]] = {
                name: checked_state_array(arrays, f"object{number}_{name}", value.shape, value.dtype, self.ids[number])
                for name, value in like.items()}
            guides = shared.objects[index].guides
            drawn.append(None if guides is None else checked_drawing(arrays, f"object{number}",
                                                                     guides.strands.rest.shape, self.ids[number],
                                                                     self.backend.xp))
        for number, shared in enumerate(self.solvers):
            prefix = f"solver{number}_"
            try:
                shared.load_solver_state({name[len(prefix):]: value for name, value in arrays.items()
                                          if name.startswith(prefix)})
            except (KeyError, ValueError) as error:
                raise SceneError(f"the resume checkpoint's solver state {prefix}* does not fit this scene ({error})",
                                 object=shared.objects[0].id) from error
            shared.load_object_states([loaded[hair.id] for hair in shared.objects])
        self.drawn = drawn

    def first_non_finite(self) -> str | None:
        """The first object whose positions are not finite, or (on a device, where the substep reads nothing back)
        whose solver met a non-finite Newton direction or a system matrix that did not factor during the substep
        (one read for both); None when all is well."""
        xp = self.backend.xp
        for object_id, (shared, index) in zip(self.ids, self.places):
            integrator = shared.solver.integrator
            finite, integrator.directions_finite = integrator.directions_finite, None
            valid, integrator.factors_valid = integrator.factors_valid, None
            sound = finite if valid is None else valid if finite is None else finite & valid
            if sound is not None and not bool(sound):
                return object_id
            if not bool(xp.all(xp.isfinite(shared.object_positions(index)))):
                return object_id
        return None


def build_group(specs, backend, scene) -> DerHairGroup:
    """Registry factory for ("hair", "der")."""
    return DerHairGroup(specs, backend, scene)
