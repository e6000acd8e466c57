"""Newton-based Coulomb friction contact for hair (seed 000 §3, Algorithms 2 and 3).

After the first global (quasi-)Newton step of a time step, continuous collision detection between the
start positions x_t and the predicted end positions x_t + h v¹ builds the contact set:

* edge–edge contacts between rod edges that do not share a vertex (broad phase: kernels.pairs, a Warp
  hash grid on every device, over the swept bounding spheres of the edges; narrow
  phase: coplanarity times of seed eq. 4.1 plus the end points of the step, segment–segment distance
  below r_a + r_b + thickness);
* vertex–collider contacts: continuous collision detection along each vertex's path (collider_ccd.py), and
  the colliders' signed distances at the predicted end positions for vertices that touch nothing on the way.

Then, after every global step, every contact solves its local problem with the velocities v^{k+1} (Jacobi,
all contacts at once): the rods of an edge–edge contact are rigid bodies with response
K = δ/m + [l]ₓᵀ I⁻¹ [l]ₓ (I = m|e|²/12 about the centre; rods with a clamped end pivot about it, K = 3α²/m
(δ − t tᵀ)), a vertex is a point mass (K = δ/m).  The impulse increment that brings the relative velocity to
the target (tangential 0, normal u_min: the normal speed that ends the step at the contact distance) is
added to the contact's accumulated impulse λ, which is then projected onto the Coulomb cone
(‖λ_T‖ ≤ μ λ_N, λ_N ≥ 0; seed eq. 3.5).  Masses are divided by the number of active contacts of each
vertex (seed §3.2.3).  Accumulating λ (instead of only adding new increments, seed Algorithm 3 line 16) lets
an over-estimated impulse shrink again in later iterations; the cone holds for the total impulse.
The global step then uses the generalized impulse I = Σ Jᵀλ (equal and opposite on the two rods of a pair).
"""

from __future__ import annotations


import numpy as np
import warp as wp

from ...backend import repeat_each
from ...kernels import launch_items, warp_device_of, warp_view
from ...kernels.pairs import ChainSpherePairs
from .kernels import ccd as ccd_kernels
from .collider_ccd import swept_distance_hits, swept_mesh_hits
from .colliders import adapt_collider
from .frames import cross3, row_lengths
from .banded import band_of_inverse
from .contact_space import DelassusOperator, coulomb_scale
from .geometry import overlap_far_end, segment_closest_points
from .model import DerModel
from .settings import ContactSettings


# a refactorization that changes some contact's normal compliance W_nn by more than this fraction (of the
# smaller of the two) has the last round's impulses solved again on it before a step applies them
RESOLVE_RESPONSE_CHANGE = 0.5


def _rows_dot(xp, a, b):
    return xp.einsum("nc,nc->n", a, b)


# the columns of a detection tuple, in order: vertex slots (n, 4) (rod A: 0-1, rod B or the collider's point:
# 2-3), their weights (n, 4), edge–edge pair (n,) bool, unit normal from B to A (n, 3), normal target velocity
# (n,) [m/s], the collider surface's velocity (n, 3) [m/s], μ (n,), radius scale (n,) [m], key (n,)
DETECTION_FIELDS = ("vertices", "weights", "kind_edge", "normal", "target_normal", "surface_velocity", "mu",
                    "radius_scale", "keys")

# smallest summed |barycentric weight| of free vertices for a pair contact to be solved (see _detect_edges)
KINEMATIC_CONTACT_WEIGHT = 1e-3
# edge pairs at a smaller angle than this (its sine) get a second contact at the far end of the stretch along
# which they touch (StepContacts._far_end_contacts)
PARALLEL_SINE = 0.1


def _normalize(xp, vectors):
    return vectors / xp.maximum(xp.linalg.norm(vectors, axis=1, keepdims=True), 1e-300)


class ContactSolver:
    def __init__(self, xp, model: DerModel, colliders, settings: ContactSettings):
        self.xp = xp
        self.model = model
        self.colliders = [adapt_collider(collider) for collider in colliders]
        self.settings = settings
        self._warm = None   # (sorted keys, impulses (n, 3), step length) of the last finished step
        # (E, 2) int32 device array of the rods' edges (their two vertices; StepContacts._edge_view)
        self.edge_vertices = xp.ascontiguousarray(
            xp.stack((model.edge_vertex, model.edge_vertex + 1), axis=1).astype(xp.int32))
        self.vertex_radius = _vertex_radius(xp, model)   # (N,) [m] mean radius of each vertex's edges
        # strand–strand broad phase: edges as one chain ordered by their first vertex (adjacent ones share one)
        self.edge_pairs = ChainSpherePairs(xp.zeros_like(model.edge_vertex), model.edge_vertex, xp)
        if settings.response not in ("rigid_rod", "delassus"):
            raise ValueError(f"contact response must be 'rigid_rod' or 'delassus', got {settings.response!r}")
        if settings.local_solver not in ("jacobi", "gauss_seidel"):
            raise ValueError(f"contact local_solver must be 'jacobi' or 'gauss_seidel', got {settings.local_solver!r}")
        if settings.gauss_seidel_sweeps < 1 or settings.gauss_seidel_colours < 1 \
                or not settings.gauss_seidel_tolerance >= 0.0:
            raise ValueError("contact gauss_seidel_sweeps and gauss_seidel_colours must be >= 1 and "
                             f"gauss_seidel_tolerance >= 0, got {settings.gauss_seidel_sweeps}, "
                             f"{settings.gauss_seidel_colours} and {settings.gauss_seidel_tolerance}")
        for name in ("friction", "thickness", "end_penetration_tolerance"):
            if getattr(settings, name) < 0.0:
                raise ValueError(f"contact {name} must be >= 0, got {getattr(settings, name)}")

    def remember(self, contacts: "StepContacts") -> None:
        """Keep the impulses a finished step applied, keyed by contact, to warm-start the next step."""
        xp = self.xp
        order = xp.argsort(contacts.keys)
        self._warm = (contacts.keys[order], contacts.applied[order], contacts.h)

    def state_arrays(self) -> dict:
        """Cross-step state for checkpoints (arrays of this solver's xp): the warm start as ``warm_keys`` (n,)
        int64, ``warm_impulses`` (n, 3) [N·s] and ``warm_step`` (1,) [s]; {} before the first step."""
        if self._warm is None:
            return {}
        keys, impulses, step = self._warm
        return {"warm_keys": keys, "warm_impulses": impulses, "warm_step": self.xp.asarray([float(step)])}

    def load_state_arrays(self, arrays: dict) -> None:
        """Restore :meth:`state_arrays` (xp arrays; {}: no warm start).  Raises KeyError for a missing array
        and ValueError for one of the wrong shape or dtype, or not finite."""
        if not arrays:
            self._warm = None
            return
        xp = self.xp
        keys, impulses, step = arrays["warm_keys"], arrays["warm_impulses"], arrays["warm_step"]
        if keys.ndim != 1 or keys.dtype.kind not in "iu":
            raise ValueError(f"warm_keys must be (n,) integers, got shape {tuple(keys.shape)} dtype {keys.dtype}")
        if tuple(impulses.shape) != (keys.shape[0], 3) or tuple(step.shape) != (1,):
            raise ValueError(f"warm_impulses must be ({keys.shape[0]}, 3) and warm_step (1,), got "
                             f"{tuple(impulses.shape)} and {tuple(step.shape)}")
        if not (bool(xp.all(xp.isfinite(impulses))) and bool(xp.all(xp.isfinite(step)))):
            raise ValueError("warm_impulses / warm_step contain NaN or Inf")
        self._warm = (keys.astype(xp.int64), impulses.astype(xp.float64), float(step[0]))

    def warm_start(self, keys, normal, mu, dt: float):
        """Impulses (n, 3) [N·s] for contacts `keys` (n,): the last step's impulse of the same contact scaled by
        the step-length ratio and projected onto the new Coulomb cone; zero for new contacts."""
        xp = self.xp
        if self._warm is None or self._warm[0].shape[0] == 0 or keys.shape[0] == 0:
            return xp.zeros((keys.shape[0], 3))
        previous_keys, previous_impulse, previous_dt = self._warm
        return project_to_cone(xp, impulses_by_key(xp, previous_keys, previous_impulse, keys) * (dt / previous_dt),
                               normal, mu)

    def set_colliders(self, colliders) -> None:
        """Replace the colliders (e.g. the scene's ColliderSet entries, posed for the coming step)."""
        self.colliders = [adapt_collider(collider) for collider in colliders]

    @property
    def active(self) -> bool:
        return bool(self.colliders) or (self.settings.self_collision and self.model.n_strands > 0)

    def begin_step(self, state, dt: float, fixed_dofs) -> "StepContacts":
        return StepContacts(self, state, dt, fixed_dofs)


class StepContacts:
    """Contact set and impulses of one time step (the `impulses` handler of the integrator)."""

    def __init__(self, solver: ContactSolver, state, dt: float, fixed_dofs):
        xp, model = solver.xp, solver.model
        self.xp, self.model, self.solver, self.h = xp, model, solver, dt
        self.start_positions = state.positions
        fixed = xp.zeros(model.n_dofs, dtype=bool)
        fixed[fixed_dofs] = True
        self.dof_fixed = fixed
        self.vertex_fixed = fixed[model.position_dofs[:, 0]]
        n = 0
        # contact arrays: 4 vertex slots (rod A: a0, a1; rod B: b0, b1) with interpolation weights
        self.vertices = xp.zeros((n, 4), dtype=xp.int64)
        self.keys = xp.zeros(n, dtype=xp.int64)    # identity of a contact across steps (warm start)
        self.weights = xp.zeros((n, 4))
        self.kind_edge = xp.zeros(n, dtype=bool)
        self.normal = xp.zeros((n, 3))
        self.target_normal = xp.zeros(n)
        self.surface_velocity = xp.zeros((n, 3))
        self.mu = xp.zeros(n)
        self.radius_scale = xp.ones(n)
        self.worst_penetration = 0.0
        self.impulse = xp.zeros((n, 3))
        self.applied = xp.zeros((n, 3))
        self._last_increment = xp.zeros((n, 3))
        self._relaxation = xp.ones(n)
        self.active_mask = xp.zeros(n, dtype=bool)
        self.last_velocity = None
        self.n_edge_contacts = 0
        self.n_collider_contacts = 0
        self.unreachable_by_collider = {}   # collider index -> free vertices left out of its contact (_unreachable)
        self.failsafe_vertices = 0          # vertices the failsafe moved back out of a mesh (keep_outside)
        self.failsafe_edges = 0             # edge–mesh-edge pairs it found crossed
        self._unreachable_of = {}           # collider index -> (N,) bool mask of those vertices (kinematic input only)
        self._factor = None
        self._inverse_band = None
        self._delassus = None
        self._coupled_pairs = None
        self._operator = None          # DelassusOperator of the contact set and the factor (Gauss–Seidel)
        self._last_problem = None      # (relative velocities, start, W_nn) of the last contact-space solve
        self.sweeps = 0                # Gauss–Seidel sweeps of the last local solve
        self.relinearized = False      # the set was written again at the end positions (relinearize)

    def set_system(self, factor) -> None:
        self._factor = factor
        self._inverse_band = None
        self._delassus = None
        self._operator = None

    # ---------------------------------------------------------------- detection
    def _detect(self, velocity):
        xp, model, settings = self.xp, self.model, self.solver.settings
        x0 = self.start_positions
        x1 = x0 + self.h * velocity
        parts = []
        if settings.self_collision:
            parts.append(self._detect_edges(x0, x1))
        for number, collider in enumerate(self.solver.colliders):
            parts.append(self._detect_collider(collider, number, x0, x1, velocity))
            if collider.mesh_geometry() is not None:
                movable = ~self.vertex_fixed & ~self._unreachable_of[number]
                parts.append(self._mesh_edge_contacts(collider, number, x0, x1, movable, end=False))
        parts = [part for part in parts if part is not None and part[0].shape[0]]
        if not parts:
            return
        found = self._per_object(tuple(xp.concatenate(columns) for columns in zip(*parts)))
        for name, column in zip(DETECTION_FIELDS, found):
            setattr(self, name, column)
        self._coupled_pairs = self._delassus = self._operator = None
        n = self.vertices.shape[0]
        self.impulse = xp.zeros((n, 3))
        self.applied = xp.zeros((n, 3))
        self._last_increment = xp.zeros((n, 3))
        self._relaxation = xp.ones(n)
        self.active_mask = xp.ones(n, dtype=bool)
        self.n_edge_contacts = int(self.kind_edge.sum())
        self.n_collider_contacts = n - self.n_edge_contacts

    def _per_object(self, found):
        """The detection tuple ``found`` with the μ and normal targets of the objects its contacts belong to (one
        object's contacts are detected with its own parameters: unchanged)."""
        return found

    def _vertex_thickness(self):
        """(N,) [m] the extra contact distance of each vertex's object (``ContactSettings.thickness``)."""
        return self.xp.full(self.model.n_vertices, self.solver.settings.thickness)

    def _candidate_pairs(self, x0, x1):
        """Edge pairs whose swept bounding spheres and boxes overlap, no shared vertex (kernels.pairs, sorted by
        (i, j))."""
        xp, model, settings = self.xp, self.model, self.solver.settings
        ev = model.edge_vertex
        a0, a1, b0, b1 = x0[ev], x0[ev + 1], x1[ev], x1[ev + 1]
        centre = 0.25 * (a0 + a1 + b0 + b1)
        reach = (0.5 * xp.maximum(row_lengths(xp, a1 - a0), row_lengths(xp, b1 - b0))
                 + 0.5 * xp.maximum(row_lengths(xp, b0 - a0), row_lengths(xp, b1 - a1))
                 + model.edge_radius + 0.5 * settings.thickness)
        # overlapping spheres and boxes of edges whose first vertices are more than 1 apart (no shared vertex):
        # the box of an edge's four end positions holds every point of the edge during the step; grown by the
        # edge's share of the largest distance the narrow phase accepts ((1 + proximity) × contact distance)
        margin = ((1.0 + settings.proximity) * (model.edge_radius + 0.5 * settings.thickness))[:, None]
        lower = xp.minimum(xp.minimum(a0, a1), xp.minimum(b0, b1)) - margin
        upper = xp.maximum(xp.maximum(a0, a1), xp.maximum(b0, b1)) + margin
        pairs = self.solver.edge_pairs.pairs(centre, reach, float(reach.max()), along=1, boxes=(lower, upper))
        if pairs.shape[0] == 0:
            return None
        return pairs[:, 0], pairs[:, 1]

    def _movable_edge_pairs(self, x0, x1):
        """The broad phase's edge pairs (``_candidate_pairs`` of the motion x0 → x1) that have a free vertex:
        (ea, eb, their first vertices va, vb, contact distances r_a + r_b + thickness [m]), or None."""
        model, settings = self.model, self.solver.settings
        candidates = self._candidate_pairs(x0, x1)
        if candidates is None or candidates[0].shape[0] == 0:
            return None
        ea, eb = candidates
        va, vb = model.edge_vertex[ea], model.edge_vertex[eb]
        movable = ~(self.vertex_fixed[va] & self.vertex_fixed[va + 1] & self.vertex_fixed[vb] & self.vertex_fixed[vb + 1])
        ea, eb, va, vb = ea[movable], eb[movable], va[movable], vb[movable]
        return ea, eb, va, vb, model.edge_radius[ea] + model.edge_radius[eb] + settings.thickness

    def _without_kinematic(self, found):
        """The detection tuple ``found`` without the contacts carried (almost) only by kinematic vertices, e.g.
        one strand's clamped root edge touching another's clamped second point: their response J A⁻¹ Jᵀ is
        (nearly) zero."""
        free_weight = self.xp.sum(self.xp.abs(found[1]) * ~self.vertex_fixed[found[0]], axis=1)
        movable = free_weight > KINEMATIC_CONTACT_WEIGHT
        return found if bool(movable.all()) else tuple(part[movable] for part in found)

    def _detect_edges(self, x0, x1):
        xp, model, settings = self.xp, self.model, self.solver.settings
        pairs = self._movable_edge_pairs(x0, x1)
        if pairs is None:
            return None
        ea, eb, va, vb, contact_distance = pairs
        # the narrow phase in one kernel (kernels.ccd): the prefilter (the segments' distance shrinks by at most
        # the largest relative motion of an endpoint of A against one of B, so strands moving together are not
        # tested further), the coplanarity times (seed eq. 4.1) and the closest points at τ = 0, 1 and those
        # times; a pair the prefilter drops gets an infinite distance
        limit = (1.0 + settings.proximity) * contact_distance
        closest = self._closest_in_step(x0, x1, va, vb, limit)
        hit = closest[:, 3] < limit
        if not bool(hit.any()):
            return None
        tau = closest[hit, 0]
        ea, eb, va, vb, contact_distance = ea[hit], eb[hit], va[hit], vb[hit], contact_distance[hit]
        points0 = [x0[va], x0[va + 1], x0[vb], x0[vb + 1]]
        motion = [x1[va] - points0[0], x1[va + 1] - points0[1], x1[vb] - points0[2], x1[vb + 1] - points0[3]]
        # contact point and normal from the closest points at the START of the step, where the strands are
        # apart even when the predicted motion crosses them; duplicate pairs around a shared vertex then
        # describe the very same constraint.  Touching at the start: normal of the two lines at contact time.
        s, t, distance0 = segment_closest_points(xp, *points0)
        start_a = points0[0] + s[:, None] * (points0[1] - points0[0])
        start_b = points0[2] + t[:, None] * (points0[3] - points0[2])
        normal = start_a - start_b
        touching = distance0 < 1e-3 * contact_distance
        if bool(touching.any()):
            at = [p0 + tau[:, None] * m for p0, m in zip(points0, motion)]
            normal[touching] = cross3(xp, at[1] - at[0], at[3] - at[2])[touching]
            degenerate = xp.linalg.norm(normal, axis=1) < 1e-12
            normal[degenerate] = xp.asarray([0.0, 0.0, 1.0])
        normal = _normalize(xp, normal)
        flip = _rows_dot(xp, start_a - start_b, normal) < 0.0
        normal[flip] *= -1.0
        keys = ea * model.n_edges + eb
        closest = self._edge_contacts_tuple(ea, eb, va, vb, s, t, normal, start_a - start_b, contact_distance, keys)
        far = self._far_end_contacts(ea, eb, va, vb, s, normal, points0, motion, contact_distance, keys)
        found = closest if far is None else tuple(xp.concatenate(parts) for parts in zip(closest, far))
        return self._without_kinematic(found)

    def _closest_in_step(self, x0, x1, va, vb, limit):
        """(n, 4) (τ, s, t, distance) of each edge pair's (first vertices va, vb (n,)) smallest closest-point
        distance while the points move x0 → x1 (N, 3) [m], +inf distance where it stays above ``limit`` (n,) [m]
        (``kernels.ccd.edge_pairs_closest_in_step``, one launch)."""
        xp = self.xp
        closest = xp.empty((va.shape[0], 4), dtype=xp.float64)
        launch_items(ccd_kernels.edge_pairs_closest_in_step, va.shape[0], warp_device_of(closest),
                     [warp_view(xp.ascontiguousarray(x0, dtype=xp.float64), wp.vec3d),
                      warp_view(xp.ascontiguousarray(x1, dtype=xp.float64), wp.vec3d),
                      warp_view(xp.ascontiguousarray(va, dtype=xp.int32), wp.int32),
                      warp_view(xp.ascontiguousarray(vb, dtype=xp.int32), wp.int32),
                      warp_view(xp.ascontiguousarray(limit, dtype=xp.float64), wp.float64)],
                     [warp_view(closest, wp.vec4d)], split=True)
        return closest

    def _edge_contacts_tuple(self, ea, eb, va, vb, s, t, normal, separation, contact_distance, keys):
        """The detection tuple of edge–edge contacts at parameters s, t (n,) of edges ea, eb (n,) with first
        vertices va, vb; normal (n, 3) unit, from B to A; separation (n, 3) [m]: A's point − B's point at the
        start of the step."""
        xp, model = self.xp, self.model
        n = va.shape[0]
        start_gap = _rows_dot(xp, separation, normal)
        return (xp.stack((va, va + 1, vb, vb + 1), axis=1), xp.stack((1.0 - s, s, -(1.0 - t), -t), axis=1),
                xp.ones(n, dtype=bool), normal, (contact_distance - start_gap) / self.h, xp.zeros((n, 3)),
                xp.full(n, self.solver.settings.friction), xp.minimum(model.edge_radius[ea], model.edge_radius[eb]),
                keys)

    def _far_end_contacts(self, ea, eb, va, vb, s, normal, points0, motion, contact_distance, keys):
        """Second contacts of (nearly) parallel edge pairs that lie along each other: the closest points pin
        one end of the stretch where they touch, and nothing stops the other end from closing in when the
        strands turn during the step (at a strand's end no neighbouring edge pair covers it).  A contact at
        the far end of that stretch (geometry.overlap_far_end), when it is a quarter edge or more away and
        within reach during the step.  Keys: −(pair key) − 1.  Returns the detection tuple or None."""
        xp, settings = self.xp, self.solver.settings
        axis_a, axis_b = points0[1] - points0[0], points0[3] - points0[2]
        cross = cross3(xp, axis_a, axis_b)
        sine_squared = _rows_dot(xp, cross, cross) / (_rows_dot(xp, axis_a, axis_a) * _rows_dot(xp, axis_b, axis_b))
        s_far, t_far = overlap_far_end(xp, *points0, s)
        start_a = points0[0] + s_far[:, None] * axis_a
        start_b = points0[2] + t_far[:, None] * axis_b
        end_a = start_a + (1.0 - s_far)[:, None] * motion[0] + s_far[:, None] * motion[1]
        end_b = start_b + (1.0 - t_far)[:, None] * motion[2] + t_far[:, None] * motion[3]
        nearest = xp.minimum(xp.linalg.norm(start_a - start_b, axis=1), xp.linalg.norm(end_a - end_b, axis=1))
        wanted = (sine_squared < PARALLEL_SINE ** 2) & (xp.abs(s_far - s) >= 0.25) \
            & (nearest < (1.0 + settings.proximity) * contact_distance)
        if not bool(wanted.any()):
            return None
        separation = (start_a - start_b)[wanted]
        # apart at the start: the normal of the far end's own points; touching there: the pair's normal
        length = xp.linalg.norm(separation, axis=1)
        own = length >= 1e-3 * contact_distance[wanted]
        far_normal = xp.where(own[:, None], separation / xp.maximum(length, 1e-300)[:, None], normal[wanted])
        return self._edge_contacts_tuple(ea[wanted], eb[wanted], va[wanted], vb[wanted], s_far[wanted],
                                        t_far[wanted], far_normal, separation, contact_distance[wanted],
                                        -keys[wanted] - 1)

    def _collider_keys(self, number, vertices, end: bool = False):
        """Keys of vertex–collider contacts, after every edge-pair key (edge pairs: e_a · E + e_b, e_a < e_b); those
        of the end path (``relinearize``) after those of the first path."""
        model = self.model
        slot = number + (len(self.solver.colliders) if end else 0)
        return model.n_edges * model.n_edges + slot * model.n_vertices + vertices

    def _collider_contacts_tuple(self, collider, index, normal, target_normal, surface_velocity, radius, keys):
        """The detection tuple of vertex contacts with a collider: vertices index (k,), unit normals (k, 3),
        normal target velocities (k,) [m/s], the surface's velocities (k, 3) [m/s], vertex radii (N,) [m];
        μ is the mean of the hair's collider friction and the collider's own, where both are given."""
        xp, settings = self.xp, self.solver.settings
        given = [value for value in (settings.collider_friction, collider.friction) if value is not None]
        mu = sum(given) / len(given) if given else 0.3
        n = index.shape[0]
        weights = xp.zeros((n, 4))
        weights[:, 0] = 1.0
        return (xp.stack((index, index, index, index), axis=1), weights, xp.zeros(n, dtype=bool), normal,
                target_normal, surface_velocity, xp.full(n, float(mu)), radius[index], keys)

    def _detect_collider(self, collider, number, x0, x1, velocity):
        """Vertex contacts with one collider: CCD hits of vertices whose path reaches the collider during the
        step (collider_ccd.py) and, for the other vertices, the end-of-step test at x1."""
        xp, settings = self.xp, self.solver.settings
        radius = self.solver.vertex_radius
        contact_distance = radius + collider.thickness + settings.thickness
        band = (1.0 + settings.proximity) * contact_distance
        self._unreachable_of[number] = self._unreachable(collider, number, x0, x1, contact_distance)
        movable = ~self.vertex_fixed & ~self._unreachable_of[number]
        parts = []
        if settings.collider_ccd:
            mesh = collider.mesh_motion()
            if mesh is None:
                hits = swept_distance_hits(xp, collider, x0, x1, movable, band, self.h)
            else:
                previous, current, triangles = (xp.asarray(array) for array in mesh)
                hits = swept_mesh_hits(xp, previous, current, triangles, x0, x1, movable, band, self.h)
            movable = movable.copy()
            movable[hits.vertex] = False
            # keep the end position contact_distance in front of the plane touched first
            parts.append((hits.vertex, hits.normal, (contact_distance[hits.vertex] - hits.start_gap) / self.h,
                          hits.surface_velocity))
        ended = self._end_position_contacts(collider, x1, velocity, movable, band, contact_distance)
        if ended is not None:
            parts.append(ended)
        if not parts:
            return None
        index, normal, target, surface_velocity = (xp.concatenate(columns) for columns in zip(*parts))
        if index.shape[0] == 0:
            return None
        return self._collider_contacts_tuple(collider, index, normal, target, surface_velocity, radius,
                                             self._collider_keys(number, index))

    def _end_position_contacts(self, collider, x1, velocity, movable, reach, contact_distance):
        """Contacts of the ``movable`` (N,) vertices whose predicted end positions x1 (N, 3) [m] (velocity (N, 3)
        [m/s]) lie nearer to the collider than ``reach`` (N,) [m]: (vertices (k,), unit normals (k, 3), normal
        target velocities (k,) [m/s], surface velocities (k, 3) [m/s]), or None. The end-of-step gap is
        linearized at the predicted position, d(x_t + h v) ≈ d1 + h n·(v − v¹); a vertex predicted inside the
        solid comes out by at most recovery_speed · h in this step."""
        xp = self.xp
        distance, normal = collider.signed_distance(xp, x1)
        hit = (distance < reach) & movable
        if not bool(hit.any()):
            return None
        index = xp.nonzero(hit)[0]
        normal = _normalize(xp, normal[index])
        surface_velocity = collider.velocity(xp, x1[index], self.h)
        relative_now = _rows_dot(xp, velocity[index] - surface_velocity, normal)
        depth_limited = xp.maximum(distance[index], -self.solver.settings.recovery_speed * self.h)
        return index, normal, relative_now + (contact_distance[index] - depth_limited) / self.h, surface_velocity

    def _unreachable(self, collider, number, x0, x1, contact_distance):
        """(N,) bool: free vertices whose collider contact only kinematic points could resolve, left out of
        contact (as contacts carried only by kinematic vertices are) and counted (``unreachable_contacts``);
        the solver would otherwise fight them for every iteration it has. Where a kinematic vertex of a
        strand (a clamped root, a pin) lies inside the collider's solid at the end of the step:

        - the free vertices nearer to it along the strand than its depth (+ the contact distance): no
          motion of their own can bring them out;
        - the run of vertices next to it that are all inside at the start of the step: the part of the
          strand that the artist rooted inside the collider (roots sunk into a scalp), which leaves the
          solid where the strand does, not by being pushed out sideways vertex by vertex.
        number: the collider's index; x0, x1: (N, 3) [m] positions at the start and the predicted end of the
        step."""
        xp, model = self.xp, self.model
        fixed = self.vertex_fixed
        fixed_index = xp.nonzero(fixed)[0]
        none = xp.zeros(model.n_vertices, dtype=bool)
        if fixed_index.shape[0] == 0:
            return none
        depth = collider.depth_inside(xp, x1[fixed_index])
        if not bool((depth > 0.0).any()):
            return none
        n = model.n_vertices
        depth_of = xp.zeros(n)
        depth_of[fixed_index] = depth
        inside = collider.depth_inside(xp, x0) > 0.0
        strand = model.vertex_strand
        first = model.strand_offsets[strand]                 # (N,) first vertex of each vertex's strand
        end = model.strand_offsets[strand + 1]               # (N,) one past its last vertex
        step = xp.zeros(n)
        step[model.edge_vertex + 1] = model.rest_edge_length
        arc = xp.cumsum(step)
        arc = arc - arc[first]                               # rest arc length from the strand's first vertex
        kinematic_before, kinematic_after = _nearest_marked(xp, fixed)
        outside_before, outside_after = _nearest_marked(xp, ~inside)
        reach = contact_distance
        unreachable = xp.zeros(n, dtype=bool)
        for kinematic, valid, run in (
                (kinematic_before, kinematic_before >= first, outside_before < kinematic_before),
                (kinematic_after, kinematic_after < end, outside_after > kinematic_after)):
            nearest = xp.where(valid, kinematic, 0)
            sunk = valid & (depth_of[nearest] > 0.0)
            unreachable = unreachable | (sunk & ((xp.abs(arc - arc[nearest]) < depth_of[nearest] + reach) | run))
        unreachable = unreachable & ~fixed
        self.unreachable_by_collider[number] = int(unreachable.sum())
        return unreachable

    # ---------------------------------------------------------------- local impulses
    def relative_velocity(self, velocity):
        """(n, 3) velocity of side A minus side B (minus the collider surface velocity)."""
        return _interpolate(self.xp, self.weights, velocity[self.vertices]) - self.surface_velocity

    def _response(self, contact_counts):
        """Per-contact 3×3 response (n, 3, 3): Δu = K λ, with the active-contact count correction."""
        if self.solver.settings.response == "delassus" and self._factor is not None:
            return self._delassus_response(contact_counts)
        return self._rigid_rod_response(contact_counts)

    def _inverse_entries(self, rows, cols):
        """Entries (A⁻¹)_{rows, cols} from its band; 0 outside the band (far apart on a strand or two strands)."""
        xp = self.xp
        if self._inverse_band is None:
            self._inverse_band = self._inverse_band_of_touched_strands()
        band = self._inverse_band
        p = band.shape[0] - 1
        lower, upper = xp.maximum(rows, cols), xp.minimum(rows, cols)
        offset = lower - upper
        # kinematic DOFs do not respond (their identity rows in A would otherwise contribute 1)
        inside = (offset <= p) & ~self.dof_fixed[rows] & ~self.dof_fixed[cols]
        return xp.where(inside, band[xp.minimum(offset, p), upper], 0.0)

    def _inverse_band_of_touched_strands(self):
        """Band of A⁻¹ (p+1, n_dofs).  A is block diagonal over strands, so each strand's block of A⁻¹ comes
        from its own factor columns.  On the xp path (device) every strand's block is computed (no
        data-sized selection, nothing leaves the device); with a LAPACK factor (numpy) only the strands that
        carry a contact (zero elsewhere)."""
        factor = self._factor
        if factor.on_xp_path:
            return factor.inverse_band()
        model = self.model
        touched = np.zeros(model.n_strands, dtype=bool)
        touched[model.vertex_strand[self.vertices[self.weights != 0.0]]] = True
        columns, ends = factor.blocks.columns_of(touched)
        lower_factor = factor.lower_factor
        inverse = np.zeros_like(lower_factor)
        inverse[:, columns] = band_of_inverse(np, lower_factor[:, columns], ends)
        return inverse

    def _coupling(self, first, second):
        """Delassus blocks W_{c c'} = J_c A⁻¹ J_{c'}ᵀ (m, 3, 3) for contact index pairs (first, second)."""
        xp, model = self.xp, self.model
        dofs_first = model.vertex_dof[self.vertices[first]][:, :, None] + xp.arange(3)     # (m, 4, 3)
        dofs_second = model.vertex_dof[self.vertices[second]][:, :, None] + xp.arange(3)
        rows, cols = xp.broadcast_arrays(dofs_first[:, :, None, :, None], dofs_second[:, None, :, None, :])
        pair_weights = self.weights[first][:, :, None] * self.weights[second][:, None, :]     # (m, 4, 4)
        return xp.einsum("nkl,nklab->nab", pair_weights, self._inverse_entries(rows, cols))

    def _neighbour_pairs(self):
        """Pairs (c, c') of contacts with a vertex within ±2 of each other on one strand (c ≠ c')."""
        xp, model = self.xp, self.model
        touched = self.weights != 0.0
        contact, slot = xp.nonzero(touched)
        vertex = self.vertices[contact, slot]
        order = xp.argsort(vertex, kind="stable")
        contact, vertex = contact[order], vertex[order]
        pairs = []
        for shift in range(-2, 3):  # the five vertex offsets that share band entries
            target = vertex + shift
            lo = xp.searchsorted(vertex, target, side="left")
            hi = xp.searchsorted(vertex, target, side="right")
            count = hi - lo
            if int(count.sum()) == 0:
                continue
            owner = repeat_each(xp, xp.arange(vertex.shape[0]), count)
            partner = lo[owner] + (xp.arange(owner.shape[0]) - (xp.cumsum(count) - count)[owner])
            same_strand = model.vertex_strand[vertex[owner]] == model.vertex_strand[vertex[partner]]
            pairs.append(xp.stack((contact[owner], contact[partner]), axis=1)[same_strand])
        if not pairs:
            return xp.zeros((0, 2), dtype=xp.int64)
        pairs = xp.unique(xp.concatenate(pairs), axis=0)
        return pairs[pairs[:, 0] != pairs[:, 1]]

    def _delassus_response(self, contact_counts):
        """W_cc = J_c A⁻¹ J_cᵀ from the band of A⁻¹, scaled for the Jacobi iteration (the Delassus
        generalisation of the seed's division of masses by the number of contacts, §3.2.3):

        * by 1 + Σ_{c'} ‖W_{cc'}‖ / ‖W_cc‖ over the active contacts c' coupled to c through the band;
        * along each touched strand's axis t, by the number of active contacts on that strand: stretching
          makes a strand move axially almost as one body, so every contact on it shares the axial response
          (without this, friction along the strand overshoots by that number and oscillates).

        The blocks depend on the contact set and the factor: computed again after every refactorization
        (set_system); the coupled pairs depend on the contact set only and are kept for the step."""
        xp, model = self.xp, self.model
        n = self.vertices.shape[0]
        if self._delassus is None:
            everyone = xp.arange(n)
            own = self._coupling(everyone, everyone)
            if self._coupled_pairs is None:
                self._coupled_pairs = self._neighbour_pairs()
            pairs = self._coupled_pairs
            coupling = xp.linalg.norm(self._coupling(pairs[:, 0], pairs[:, 1]), axis=(1, 2)) if pairs.shape[0] \
                else xp.zeros(0)
            self._delassus = (own, pairs, coupling / xp.maximum(xp.linalg.norm(own, axis=(1, 2))[pairs[:, 0]], 1e-300),
                              self._strand_axes())
        own, pairs, relative_coupling, (strands, axes) = self._delassus
        active_partner = self.active_mask[pairs[:, 1]]
        scale = 1.0 + xp.bincount(pairs[:, 0], weights=relative_coupling * active_partner, minlength=n)
        response = own * scale[:, None, None]
        on_strand = xp.bincount(strands[:, 0][self.active_mask], minlength=model.n_strands) \
            + xp.bincount(strands[:, 1][self.active_mask & self.kind_edge], minlength=model.n_strands)
        for side in (0, 1):
            axis = axes[:, side]
            extra = xp.maximum(on_strand[strands[:, side]] - scale, 0.0)
            if side == 1:
                extra = xp.where(self.kind_edge, extra, 0.0)
            axial = xp.einsum("ni,nij,nj->n", axis, own, axis)
            response = response + (extra * axial)[:, None, None] * axis[:, :, None] * axis[:, None, :]
        return response

    def _strand_axes(self):
        """Strand index (n, 2) and unit strand direction (n, 2, 3) at each side of every contact."""
        xp, model = self.xp, self.model
        x = self._end_positions
        axes, strands = [], []
        for first in (0, 2):
            a, b = self.vertices[:, first], self.vertices[:, first + 1]
            point = ~self.kind_edge if first == 0 else xp.zeros(a.shape[0], dtype=bool)
            # a vertex contact uses the chord through its neighbours inside the strand
            strand = model.vertex_strand[a]
            lo = xp.maximum(a - 1, model.strand_offsets[strand])
            hi = xp.minimum(a + 1, model.strand_offsets[strand + 1] - 1)
            a = xp.where(point, lo, a)
            b = xp.where(point, hi, b)
            axes.append(_normalize(xp, x[b] - x[a]))
            strands.append(strand)
        return xp.stack(strands, axis=1), xp.stack(axes, axis=1)

    def _rigid_rod_response(self, contact_counts):
        xp, model = self.xp, self.model
        eye = xp.eye(3)[None]
        mass = model.vertex_mass[self.vertices] / contact_counts[self.vertices]   # (n, 4), seed §3.2.3
        fixed = self.vertex_fixed[self.vertices]
        total = xp.zeros((self.vertices.shape[0], 3, 3))
        # point contacts (a vertex, or a point of a rod edge, against a collider): K = Σ w²/m δ over its free slots
        point = ~self.kind_edge
        compliance = xp.where(fixed[:, :2], 0.0, self.weights[:, :2] ** 2 / mass[:, :2]).sum(axis=1)
        total[point] = eye * compliance[point][:, None, None]
        if bool(self.kind_edge.any()):
            for side in (0, 2):  # rod A uses slots 0-1, rod B slots 2-3
                e = xp.nonzero(self.kind_edge)[0]
                first, second = self.vertices[e, side], self.vertices[e, side + 1]
                alpha = xp.abs(self.weights[e, side + 1])
                rod_mass = 0.5 * (mass[e, side] + mass[e, side + 1])
                tangent = _normalize(xp, self._end_positions[second] - self._end_positions[first])
                lateral = eye - tangent[:, :, None] * tangent[:, None, :]
                fixed_first, fixed_second = fixed[e, side], fixed[e, side + 1]
                free = eye / rod_mass[:, None, None] + (12.0 * (alpha - 0.5) ** 2 / rod_mass)[:, None, None] * lateral
                arm = xp.where(fixed_first, alpha, 1.0 - alpha)
                pivot = (3.0 * arm * arm / rod_mass)[:, None, None] * lateral
                k = xp.where((fixed_first | fixed_second)[:, None, None], pivot, free)
                k = xp.where((fixed_first & fixed_second)[:, None, None], 0.0, k)
                total[e] += k
        return total

    def _contact_counts(self):
        """Active contacts per vertex (seed §3.2.3: masses are divided by it in the rigid-rod response)."""
        xp, model = self.xp, self.model
        touching = self.vertices[self.active_mask]
        weights = self.weights[self.active_mask] != 0.0
        counts = xp.bincount(touching[weights], minlength=model.n_vertices).astype(float)
        return xp.maximum(counts, 1.0)

    @property
    def resolves_each_round(self) -> bool:
        return self.solver.settings.local_solver != "jacobi"

    @property
    def contact_count(self) -> int:
        return int(self.vertices.shape[0])

    def keep_outside(self, positions, velocities):
        """The failsafe after the contact loop: no free vertex or edge ends the step through a mesh collider.

        The Newton contact loop ends on its iteration and end-check budgets (``MAX_RELINEARIZATIONS``), and
        its contacts are linearized planes: a vertex held by one face can still slip through the next one in
        a crease, and a mesh edge thinner than the hair's segments (an ear's rim, a brow's crest) can pass
        between two vertices that both stay outside. Here the end positions are tested as cloth tests its own
        (``MeshGeometry.resolve`` and ``add_edge_corrections``, two-sided, the side taken from the start of
        the step): a vertex whose path x_t → x crosses a triangle goes back in front of it, and an edge that
        crossed a mesh edge is moved back to its side (both with the contact distance less the tolerance),
        then the vertices are tested once more. A moved vertex keeps its velocity less the part that drove
        it into the surface. Returns (positions, velocities), or None when nothing crossed; the counts go to
        the statistics (``failsafe_vertices``, ``failsafe_edges``)."""
        xp, model, settings = self.xp, self.model, self.solver.settings
        meshes = [(number, collider) for number, collider in enumerate(self.solver.colliders)
                  if collider.mesh_geometry() is not None]
        if not meshes:
            return None
        start = xp.ascontiguousarray(self.start_positions, dtype=xp.float64)
        moved = xp.zeros(model.n_vertices, dtype=bool)
        end = xp.ascontiguousarray(positions, dtype=xp.float64)
        velocities = xp.array(velocities, dtype=xp.float64)
        radius = self.solver.vertex_radius
        for number, collider in meshes:
            geometry = collider.mesh_geometry()
            unreachable = self._unreachable_of.get(number, xp.zeros(model.n_vertices, dtype=bool))
            free = ~self.vertex_fixed & ~unreachable
            edges = self._edge_view(unreachable)
            reach = xp.ascontiguousarray((1.0 - settings.end_penetration_tolerance) * radius + collider.thickness
                                         + self._vertex_thickness())
            end, crossed = self._vertices_back(geometry, start, end, velocities, free, reach)
            moved |= crossed
            correction = xp.zeros((model.n_vertices, 3))
            count = xp.zeros(model.n_vertices, dtype=xp.int32)
            contacts = xp.zeros(3, dtype=xp.int32)
            crossed_point = xp.zeros(model.n_vertices, dtype=xp.int32)
            geometry.add_edge_corrections(xp, start, end, edges, reach, xp.where(free, 1.0, 0.0), correction, count,
                                          contacts, crossed_point)
            edge_crossed = (crossed_point > 0) & free
            self.failsafe_edges += int(contacts[1])
            if bool(edge_crossed.any()):
                shifted = end + correction / xp.maximum(count, 1)[:, None]
                end = xp.ascontiguousarray(xp.where(edge_crossed[:, None], shifted, end))
                end, crossed = self._vertices_back(geometry, start, end, velocities, free, reach)
                moved |= crossed | edge_crossed
        count = int(moved.sum())
        self.failsafe_vertices += count
        return (end, velocities) if count else None

    def _vertices_back(self, geometry, start, end, velocities, free, reach):
        """``free`` (N,) vertices whose path start → end (N, 3) [m] crosses the mesh moved back ``reach`` (N,) [m]
        in front of the crossed triangle on their starting side; the inward part of their velocities
        (relative to the surface) is removed in place. Returns (end positions, crossed (N,) bool)."""
        xp = self.xp
        resolved, _, normal, motion, crossed = geometry.resolve(xp, start, end, reach)
        crossed = (crossed > 0) & free
        if not bool(crossed.any()):
            return end, crossed
        relative = velocities - motion / self.h
        inward = xp.minimum(_rows_dot(xp, relative, normal), 0.0)
        velocities[...] = xp.where(crossed[:, None], velocities - inward[:, None] * normal, velocities)
        return xp.ascontiguousarray(xp.where(crossed[:, None], resolved, end)), crossed

    def _edge_view(self, excluded):
        """Warp int32 (E, 2) view of the rods' edges (their two vertex indices) without those with an
        ``excluded`` (N,) vertex."""
        edges = self.solver.edge_vertices
        if bool(excluded.any()):
            self._kept_edges = edges = self.xp.ascontiguousarray(edges[~(excluded[edges[:, 0]] | excluded[edges[:, 1]])])
        return warp_view(edges, wp.int32)

    @property
    def checks_end_positions(self) -> bool:
        return bool(self.vertices.shape[0]) or bool(self.solver.colliders)

    def converged(self) -> bool:
        """No contact predicts a penetration deeper than `penetration_tolerance` × its (smaller) hair radius (half
        of `end_penetration_tolerance`, if larger, once the set was written again at the end positions: the
        Gauss–Seidel solve of such a set closes its last few hundredths of a radius slowly, measured 0.04–0.05 r
        over 10 and more iterations, up to N_max, on the dense substeps of benchmarks.der_vs_blender_hair)."""
        settings = self.solver.settings
        tolerance = settings.penetration_tolerance
        if self.relinearized:
            tolerance = max(tolerance, 0.5 * settings.end_penetration_tolerance)
        return self.worst_penetration <= tolerance

    def relinearize(self, velocity_after):
        """Contacts written again at the end of the step the settled loop predicts: new generalized impulse
        (n_dofs,), or None when nothing there is closer than its contact distance (within
        ``end_penetration_tolerance`` of the radius) and no vertex's path crosses a collider.

        A contact of seed Algorithm 2 is linearized once, on the first iterate's path. Its impulses, and the other
        contacts', then change the motion: the end positions can lie where that path never went.

        * Edge pairs: hair falling over hair slides millimetres along the other strand within a substep, so at
          the end the closest points and normal of the start no longer describe the pair, and pairs the first
          iterate's path never brought together meet: on ``benchmarks.der_vs_blender_hair`` dense substeps
          converged with 50–150 pairs of edges closer than 90 % of their contact distance. Every pair deeper
          than the tolerance at the predicted end positions x_t + h v gets a contact at its END closest points,
          with the normal of their separation turned to the side the same material points had at the start (a
          pair that passed through each other is pushed back, not further).
        * Colliders: a vertex pushed by its strand's other contacts can cross a collider surface that its first
          path did not reach (a tip swung into the brow by the contact of the segment before it). The path
          x_t → x_t + h v of every free vertex is tested again (``_end_collider_contacts``); a vertex that
          reaches a surface gets a contact at the first touching point, on the side it started on.

        A contact already in the set keeps its impulse (same key), projected onto the new cone. The loop then
        goes on with the new set."""
        xp, model = self.xp, self.model
        v_after = model.gather_positions(velocity_after)
        x0 = self.start_positions
        x1 = x0 + self.h * v_after
        parts = [part for part in (self._end_edge_contacts(x0, x1), *self._end_collider_contacts(x0, x1))
                 if part is not None and part[0].shape[0]]
        if not parts:
            return None
        found = self._per_object(tuple(xp.concatenate(columns) for columns in zip(*parts)))
        # the set without the contacts these replace (same key), then the new ones with the old impulses
        kept = ~xp.isin(self.keys, found[8])
        old_order = xp.argsort(self.keys)
        impulse = project_to_cone(xp, impulses_by_key(xp, self.keys[old_order], self.applied[old_order], found[8]),
                                  found[3], found[6])
        for name, part in zip(DETECTION_FIELDS, found):
            setattr(self, name, xp.concatenate([getattr(self, name)[kept], part]))
        applied = xp.concatenate([self.applied[kept], impulse])
        self.impulse, self.applied = applied, applied.copy()
        self._last_increment = xp.zeros_like(applied)
        self._relaxation = xp.concatenate([self._relaxation[kept], xp.ones(impulse.shape[0])])
        self.active_mask = row_lengths(xp, applied) > 0.0
        self._coupled_pairs = self._delassus = self._operator = self._last_problem = None
        self.n_edge_contacts = int(self.kind_edge.sum())
        self.n_collider_contacts = int(self.vertices.shape[0]) - self.n_edge_contacts
        self._end_positions = x1
        self.last_velocity = v_after
        self.relinearized = True
        return self.generalized_impulse(applied)

    def _end_edge_contacts(self, x0, x1):
        """Edge–edge contacts of the pairs closer at the end positions x1 (N, 3) [m] than their contact
        distance less the tolerance (``relinearize``): the detection tuple, or None."""
        xp, model, settings = self.xp, self.model, self.solver.settings
        if not settings.self_collision or model.n_edges == 0:
            return None
        pairs = self._movable_edge_pairs(x1, x1)
        if pairs is None:
            return None
        ea, eb, va, vb, contact_distance = pairs
        radius_scale = xp.minimum(model.edge_radius[ea], model.edge_radius[eb])
        limit = contact_distance - settings.end_penetration_tolerance * radius_scale
        closest = self._closest_in_step(x1, x1, va, vb, limit)       # at rest at the end positions
        short = closest[:, 3] < limit
        if not bool(short.any()):
            return None
        ea, eb, va, vb, contact_distance = ea[short], eb[short], va[short], vb[short], contact_distance[short]
        s, t = closest[short, 1], closest[short, 2]
        end_a = x1[va] + s[:, None] * (x1[va + 1] - x1[va])
        end_b = x1[vb] + t[:, None] * (x1[vb + 1] - x1[vb])
        separation = (x0[va] + s[:, None] * (x0[va + 1] - x0[va])) - (x0[vb] + t[:, None] * (x0[vb + 1] - x0[vb]))
        normal = end_a - end_b
        degenerate = row_lengths(xp, normal) < 1e-9 * contact_distance
        if bool(degenerate.any()):
            normal[degenerate] = cross3(xp, x1[va + 1] - x1[va], x1[vb + 1] - x1[vb])[degenerate]
        normal = _normalize(xp, normal)
        normal = xp.where((_rows_dot(xp, normal, separation) < 0.0)[:, None], -normal, normal)
        keys = ea * model.n_edges + eb
        return self._without_kinematic(
            self._edge_contacts_tuple(ea, eb, va, vb, s, t, normal, separation, contact_distance, keys))

    def _end_collider_contacts(self, x0, x1):
        """Per collider, the detection tuple (or None) of the free vertices whose path x0 → x1 (N, 3) [m] comes
        closer to its surface than their contact distance less the tolerance: CCD along the path for a mesh,
        the signed distance at x1 for an analytic collider. Keys of the end range (``_collider_keys``), so a
        vertex may hold a contact of the first path and one of the end path."""
        xp, settings = self.xp, self.solver.settings
        radius = self.solver.vertex_radius
        found = []
        for number, collider in enumerate(self.solver.colliders):
            contact_distance = radius + collider.thickness + settings.thickness
            reach = xp.maximum(contact_distance - settings.end_penetration_tolerance * radius, 0.0)
            movable = ~self.vertex_fixed & ~self._unreachable_of[number]
            mesh = collider.mesh_motion()
            if mesh is None:
                ended = self._end_position_contacts(collider, x1, (x1 - x0) / self.h, movable, reach,
                                                    contact_distance)
                if ended is None:
                    found.append(None)
                    continue
                index, normal, target, surface_velocity = ended
            else:
                # the exact CCD (collider_ccd) on the vertices whose path the mesh's own kernel finds crossing it
                # or ending within reach: the few near the surface, not every vertex of every strand
                near = collider.path_reaches_mesh(xp, x0, x1, reach)
                previous, current, triangles = (xp.asarray(array) for array in mesh)
                hits = swept_mesh_hits(xp, previous, current, triangles, x0, x1, movable & near, reach, self.h)
                index, normal, surface_velocity = hits.vertex, hits.normal, hits.surface_velocity
                target = (contact_distance[index] - hits.start_gap) / self.h
            found.append(self._collider_contacts_tuple(collider, index, normal, target, surface_velocity, radius,
                                                       self._collider_keys(number, index, end=True)))
            if mesh is not None:
                found.append(self._mesh_edge_contacts(collider, number, x0, x1, movable, end=True))
        return found

    def _mesh_edge_contacts(self, collider, number, x0, x1, movable, end: bool):
        """Contacts of rod edges with a mesh collider's edges (an ear's rim, a brow's crest, thinner than the
        hair's segments, passes between two vertices that both stay outside: no vertex contact sees it).

        Every rod edge with a ``movable`` (N,) vertex is swept x0 → x1 (N, 3) [m] against the mesh's edges moving
        over the substep (``kernels.ccd.mesh_edges_closest_in_step``, the mesh's edge BVH); the mesh edge that
        comes nearest, within (1 + proximity) × the contact distance on the first path, or closer than the
        contact distance less the tolerance on the ``end`` path (``relinearize``), gives a contact at those closest
        points (s along the rod edge, t along the mesh edge). Its normal is the direction between the same
        material points at the START of the step (the side the rod edge came from, so a crossing is pushed
        back, never through); for points that touched already then, the normal of the two edges at the
        approach, turned against their relative motion. Returns the detection tuple, or None."""
        xp, model, settings = self.xp, self.model, self.solver.settings
        geometry = collider.mesh_geometry()
        ev = model.edge_vertex
        # an edge with a vertex that only its sunk root could bring out is left out, as that vertex is
        reachable = ~self._unreachable_of[number]
        candidate = xp.nonzero((movable[ev] | movable[ev + 1]) & reachable[ev] & reachable[ev + 1])[0]
        if candidate.shape[0] == 0:
            return None
        radius = model.edge_radius[candidate]
        contact_distance = radius + collider.thickness + settings.thickness
        limit = xp.maximum(contact_distance - settings.end_penetration_tolerance * radius, 0.0) if end \
            else (1.0 + settings.proximity) * contact_distance
        pose = geometry.pose(xp)
        first_vertex = xp.ascontiguousarray(ev[candidate], dtype=xp.int32)
        nearest_edge = xp.empty(candidate.shape[0], dtype=xp.int32)
        closest = xp.empty((candidate.shape[0], 4), dtype=xp.float64)
        launch_items(ccd_kernels.mesh_edges_closest_in_step, candidate.shape[0], warp_device_of(closest),
                     [warp_view(xp.ascontiguousarray(x0, dtype=xp.float64), wp.vec3d),
                      warp_view(xp.ascontiguousarray(x1, dtype=xp.float64), wp.vec3d),
                      warp_view(first_vertex, wp.int32), warp_view(xp.ascontiguousarray(limit), wp.float64),
                      pose.edges.bvh.id, pose.previous_view, pose.current_view, pose.edges.index_view],
                     [warp_view(nearest_edge, wp.int32), warp_view(closest, wp.vec4d)], split=True)
        hit = nearest_edge >= 0
        if not bool(hit.any()):
            return None
        edge, mesh_edge, closest = candidate[hit], nearest_edge[hit], closest[hit]
        contact_distance = contact_distance[hit]
        tau, s, t = closest[:, 0:1], closest[:, 1], closest[:, 2]
        va = ev[edge]
        corners = pose.edges.indices[mesh_edge]
        c0, d0 = pose.previous[corners[:, 0]], pose.previous[corners[:, 1]]
        c1, d1 = pose.current[corners[:, 0]], pose.current[corners[:, 1]]
        start_a = x0[va] + s[:, None] * (x0[va + 1] - x0[va])
        start_b = c0 + t[:, None] * (d0 - c0)
        motion_b = (c1 - c0) + t[:, None] * ((d1 - c1) - (d0 - c0))
        separation = start_a - start_b
        gap = row_lengths(xp, separation)
        at = [p + tau * (q - p) for p, q in ((x0[va], x1[va]), (x0[va + 1], x1[va + 1]), (c0, c1), (d0, d1))]
        crossing = cross3(xp, at[1] - at[0], at[3] - at[2])
        motion_a = (x1[va] - x0[va]) + s[:, None] * ((x1[va + 1] - x0[va + 1]) - (x1[va] - x0[va]))
        approach = _rows_dot(xp, crossing, motion_a - motion_b)
        crossing = xp.where((approach > 0.0)[:, None], -crossing, crossing)
        touching = (gap < 1e-3 * contact_distance)[:, None]
        normal = _normalize(xp, xp.where(touching, crossing, separation))
        start_gap = _rows_dot(xp, separation, normal)
        n = edge.shape[0]
        given = [value for value in (settings.collider_friction, collider.friction) if value is not None]
        mu = sum(given) / len(given) if given else 0.3
        colliders = len(self.solver.colliders)
        keys = model.n_edges * model.n_edges + 2 * colliders * model.n_vertices \
            + (number + (colliders if end else 0)) * model.n_edges + edge
        found = (xp.stack((va, va + 1, va, va), axis=1),
                 xp.stack((1.0 - s, s, xp.zeros(n), xp.zeros(n)), axis=1), xp.zeros(n, dtype=bool), normal,
                 (contact_distance - start_gap) / self.h, motion_b / self.h, xp.full(n, float(mu)),
                 model.edge_radius[edge], keys)
        return self._without_kinematic(found)

    def update(self, iteration: int, velocity_before, velocity_after):
        """Seed Algorithm 3: new generalized impulse (n_dofs,) from the velocities after a global step."""
        xp, model = self.xp, self.model
        v_after = model.gather_positions(velocity_after)
        if iteration == 0:
            self._detect(v_after)
        self.last_velocity = v_after
        n = self.vertices.shape[0]
        if n == 0:
            return None
        self._end_positions = self.start_positions + self.h * v_after
        self.applied = self.impulse.copy()
        relative = self.relative_velocity(v_after)
        # predicted end-of-step penetration beyond the contact distance, relative to that distance
        shortfall = (self.target_normal - _rows_dot(xp, relative, self.normal)) * self.h / self.radius_scale
        self.worst_penetration = float(xp.maximum(shortfall, 0.0).max())
        if self.resolves_each_round and self._factor is not None:
            start = self.solver.warm_start(self.keys, self.normal, self.mu, self.h) if iteration == 0 else self.impulse
            local = self._solve_contact_space(relative, start)
            self._last_problem = (relative, start, self._normal_response())
            return self._relaxed_update(local)
        if iteration == 0:
            warm = self.solver.warm_start(self.keys, self.normal, self.mu, self.h)
            if bool(xp.any(warm != 0.0)):
                # the next global step applies last step's impulses of the contacts that persist; the local
                # steps start from them (the first velocities did not feel them, so no local step now)
                self.impulse = warm
                self.active_mask = xp.linalg.norm(warm, axis=1) > 0.0
                return self.generalized_impulse(warm)
        response = self._response(self._contact_counts())
        return self._relaxed_update(local_impulse_update(xp, response, relative, self.normal, self.target_normal,
                                                         self.impulse, self.mu))

    def resolve_on_new_system(self):
        """The last round's impulses solved again (same relative velocities, start and relaxation) on the
        response of the factor set since (set_system), when that response differs from the one they were
        solved on by more than RESOLVE_RESPONSE_CHANGE in some contact's normal compliance W_nn; returns the
        generalized impulse (n_dofs,), or None when they are kept (nothing solved in contact space yet, no
        contact, or a response that barely changed: the usual case, whose impulses the next round corrects).

        The integrator refactors the matrix at the current iterate between a contact round and the global
        step that applies its impulses.  For stiff, light strands (a 1 TPa rod of 12 kg/m³) the stretch
        blocks k/l t tᵀ outweigh the inertia M/h² by ~10⁸, so a tangent that turned by a milliradian makes
        the old matrix 10⁴ × too stiff across the edge: the impulses computed on it launched a hinged rod
        resting on a floor at 50 m/s (``benchmarks.parameter_sweep``, seed 1)."""
        if self._last_problem is None or self._factor is None or self.vertices.shape[0] == 0:
            return None
        relative, start, solved_on = self._last_problem
        now = self._normal_response()
        change = self.xp.abs(now - solved_on) / self.xp.maximum(self.xp.minimum(now, solved_on), 1e-300)
        if float(change.max()) <= RESOLVE_RESPONSE_CHANGE:
            return None
        local = self._solve_contact_space(relative, start)
        self._last_problem = (relative, start, now)
        self.impulse = self.applied + self._relaxation[:, None] * (local - self.applied)
        self._last_increment = self.impulse - self.applied
        self.active_mask = self.xp.linalg.norm(self.impulse, axis=1) > 0.0
        return self.generalized_impulse(self.impulse)

    def _normal_response(self):
        """Normal compliance W_nn (n,) [m/s per N·s] of every contact on the current factor."""
        return self.xp.einsum("ni,nij,nj->n", self.normal, self._delassus_operator().diagonal, self.normal)

    def _relaxed_update(self, local):
        """Move the impulses towards the local solution `local` (n, 3); returns the generalized impulse.

        The global/local loop can settle into a two-iteration oscillation (a contact's increment flips
        direction every iteration: coupled Jacobi steps, or a nearly free strand tip whose contacts' solution
        alternates with the matrix refreshes); such contacts are under-relaxed, halving their step each flip
        (down to 1/8) and regaining it while they move steadily.  A convex combination of two impulses inside
        the Coulomb cone stays inside it."""
        xp = self.xp
        increment = local - self.impulse
        flipped = _rows_dot(xp, increment, self._last_increment) < 0.0
        self._relaxation = xp.where(flipped, xp.maximum(0.5 * self._relaxation, 0.125),
                                    xp.minimum(1.5 * self._relaxation, 1.0))
        self._last_increment = self._relaxation[:, None] * increment
        self.impulse = self.impulse + self._last_increment
        self.active_mask = xp.linalg.norm(self.impulse, axis=1) > 0.0
        return self.generalized_impulse(self.impulse)

    def _delassus_operator(self) -> DelassusOperator:
        """The contact set's Delassus operator on the current factor (built once per factor and contact set)."""
        if self._operator is None:
            self._operator = DelassusOperator(self.xp, self.model, self._factor, self.vertices, self.weights,
                                              self.dof_fixed, self.normal, self.solver.settings.gauss_seidel_colours)
        return self._operator

    def _solve_contact_space(self, relative, start):
        """Impulses (n, 3) solving the contact problem of the linear model u(λ) = u_now + W (λ − λ_applied),
        from the impulses `start` (contact_space.py).  relative (n, 3): u_now, the relative velocities the
        applied impulses produced."""
        settings = self.solver.settings
        operator = self._delassus_operator()
        velocity_tolerance = (settings.gauss_seidel_tolerance * settings.penetration_tolerance / self.h) \
            * self.radius_scale
        impulse, self.sweeps, _ = operator.gauss_seidel(relative + operator.apply(start - self.applied), start,
                                                        self.target_normal, self.mu, settings.gauss_seidel_sweeps,
                                                        velocity_tolerance)
        return impulse

    def generalized_impulse(self, impulse):
        xp, model = self.xp, self.model
        per_slot = self.weights[:, :, None] * impulse[:, None, :]            # (n, 4, 3)
        vertex_impulse = xp.zeros((model.n_vertices, 3))
        for axis in range(3):
            vertex_impulse[:, axis] = xp.bincount(self.vertices.ravel(), weights=per_slot[:, :, axis].ravel(),
                                                  minlength=model.n_vertices)
        generalized = xp.zeros(model.n_dofs)
        generalized[model.position_dofs] = vertex_impulse
        return generalized

    # ---------------------------------------------------------------- diagnostics
    def statistics(self) -> dict:
        xp = self.xp
        n = self.vertices.shape[0]
        stats = {"contacts": int(n), "edge_contacts": self.n_edge_contacts,
                 "collider_contacts": self.n_collider_contacts, "active_contacts": 0, "active_edge_contacts": 0,
                 "mean_impulse": 0.0, "fischer_burmeister": 0.0, "contact_sweeps": self.sweeps,
                 "unreachable_contacts": sum(self.unreachable_by_collider.values()),
                 "failsafe_vertices": self.failsafe_vertices, "failsafe_edges": self.failsafe_edges}
        if n == 0 or self.last_velocity is None:
            return stats
        residual = self.fischer_burmeister(self.last_velocity)
        active = xp.linalg.norm(self.applied, axis=1) > 0.0
        stats["active_contacts"] = int(active.sum())
        stats["active_edge_contacts"] = int((active & self.kind_edge).sum())
        stats["mean_impulse"] = float(xp.linalg.norm(self.applied[active], axis=1).mean()) if bool(active.any()) else 0.0
        stats["fischer_burmeister"] = float(residual.mean())
        return stats

    def fischer_burmeister(self, velocity):
        """Per-contact ‖f_FB‖ of the SOCCP form of Coulomb's law (seed eqs. 4.5-4.6), in m/s.

        Velocities are shifted by the normal target (so the complementarity is at the contact distance) and
        impulses converted to velocities by the unscaled normal response nᵀKn.
        """
        xp = self.xp
        relative = self.relative_velocity(velocity) - self.target_normal[:, None] * self.normal
        response = self._rigid_rod_response(xp.ones(self.model.n_vertices))
        scale = xp.einsum("ni,nij,nj->n", self.normal, response, self.normal)
        return fischer_burmeister_residual(xp, self.applied * scale[:, None], relative, self.normal, self.mu)


def _vertex_radius(xp, model: DerModel):
    """(N,) [m] the mean radius of the edges at each vertex."""
    radius = xp.zeros(model.n_vertices)
    count = xp.zeros(model.n_vertices)
    for shift in (0, 1):
        radius += xp.bincount(model.edge_vertex + shift, weights=model.edge_radius, minlength=model.n_vertices)
        count += xp.bincount(model.edge_vertex + shift, minlength=model.n_vertices)
    return radius / count


def _nearest_marked(xp, marked):
    """For every index i of the bool array ``marked`` (N,): the largest marked index ≤ i (−1 if none) and the
    smallest marked index ≥ i (N if none), with cumulative counts (device arrays only, no host copy)."""
    n = marked.shape[0]
    positions = xp.nonzero(marked)[0]
    count = positions.shape[0]
    upto = xp.cumsum(marked.astype(xp.int64))           # marked indices ≤ i
    if count == 0:
        return xp.full(n, -1, dtype=xp.int64), xp.full(n, n, dtype=xp.int64)
    before = xp.where(upto > 0, positions[xp.maximum(upto - 1, 0)], -1)
    following = upto - marked.astype(xp.int64)           # marked indices < i: the next one ≥ i is number `following`
    after = xp.where(following < count, positions[xp.minimum(following, count - 1)], n)
    return before, after


def _interpolate(xp, weights, velocities):
    """Σ_k w_k v_k over the 4 vertex slots of every contact: (n, 4), (n, 4, 3) -> (n, 3)."""
    return xp.einsum("nk,nkc->nc", weights, velocities)


def local_impulse_update(xp, response, relative, normal, target_normal, impulse, mu):
    """One local step per contact: normal first, then friction (seed eqs. 3.1, 3.4, 3.5).

    The normal impulse brings the normal relative velocity to its target (u'_N = target, λ_N ≥ 0); the
    tangential impulse then cancels the tangential relative velocity (including the tangential effect of the
    normal change) and is clamped to the Coulomb disc ‖λ_T‖ ≤ μ λ_N.  response (n, 3, 3): Δu = W λ.
    """
    u_normal = _rows_dot(xp, relative, normal)
    w_normal = xp.einsum("ni,nij,nj->n", normal, response, normal)
    old_normal = _rows_dot(xp, impulse, normal)
    new_normal = xp.maximum(old_normal + (target_normal - u_normal) / w_normal, 0.0)
    projector = xp.eye(3)[None] - normal[:, :, None] * normal[:, None, :]
    normal_effect = xp.einsum("nij,nj->ni", response, normal) * (new_normal - old_normal)[:, None]
    goal = -xp.einsum("nij,nj->ni", projector, relative + normal_effect)
    tangential_response = projector @ response @ projector + w_normal[:, None, None] * normal[:, :, None] * normal[:, None, :]
    increment = xp.linalg.solve(tangential_response, goal[:, :, None])[:, :, 0]
    tangential = xp.einsum("nij,nj->ni", projector, impulse + increment)
    return project_to_cone(xp, new_normal[:, None] * normal + tangential, normal, mu)


def impulses_by_key(xp, sorted_keys, impulses, keys):
    """(n, 3) impulses [N·s] of contacts ``keys`` (n,) looked up in ``sorted_keys`` (m,) ascending with their
    ``impulses`` (m, 3); zero for keys not there."""
    found_impulses = xp.zeros((keys.shape[0], 3))
    if sorted_keys.shape[0] == 0:
        return found_impulses
    slot = xp.minimum(xp.searchsorted(sorted_keys, keys), sorted_keys.shape[0] - 1)
    found = sorted_keys[slot] == keys
    found_impulses[found] = impulses[slot[found]]
    return found_impulses


def project_to_cone(xp, impulse, normal, mu):
    """Seed eq. 3.5: λ_N ≥ 0 (else λ = 0) and ‖λ_T‖ ≤ μ λ_N by scaling the tangential part."""
    normal_part = _rows_dot(xp, impulse, normal)
    tangential = impulse - normal_part[:, None] * normal
    scale = coulomb_scale(xp, xp.maximum(normal_part, 0.0), tangential, mu)
    projected = xp.maximum(normal_part, 0.0)[:, None] * normal + scale[:, None] * tangential
    return xp.where((normal_part > 0.0)[:, None], projected, 0.0)


def fischer_burmeister_residual(xp, impulse, velocity, normal, mu):
    """‖x + y − (x∘x + y∘y)^{1/2}‖ in the Lorentz cone with x = (μ r_N, r_T), y = (û_N/μ, u_T),
    û_N = u_N + μ‖u_T‖ (De Saxcé/Daviet change of variables).  μ = 0 uses the scalar FB function on the
    normal components (tangential impulse is zero then)."""
    r_n = _rows_dot(xp, impulse, normal)
    u_n = _rows_dot(xp, velocity, normal)
    r_t = impulse - r_n[:, None] * normal
    u_t = velocity - u_n[:, None] * normal
    u_t_norm = xp.linalg.norm(u_t, axis=1)
    safe_mu = xp.where(mu > 0.0, mu, 1.0)
    x0, x1 = mu * r_n, r_t
    y0, y1 = (u_n + mu * u_t_norm) / safe_mu, u_t
    w0 = x0 * x0 + _rows_dot(xp, x1, x1) + y0 * y0 + _rows_dot(xp, y1, y1)
    w1 = 2.0 * (x0[:, None] * x1 + y0[:, None] * y1)
    w1_norm = xp.linalg.norm(w1, axis=1)
    root_hi = xp.sqrt(xp.maximum(w0 + w1_norm, 0.0))
    root_lo = xp.sqrt(xp.maximum(w0 - w1_norm, 0.0))
    direction = w1 / xp.maximum(w1_norm, 1e-300)[:, None]
    sqrt0 = 0.5 * (root_hi + root_lo)
    sqrt1 = 0.5 * (root_hi - root_lo)[:, None] * direction
    f0 = x0 + y0 - sqrt0
    f1 = x1 + y1 - sqrt1
    cone = xp.sqrt(f0 * f0 + _rows_dot(xp, f1, f1))
    scalar = xp.abs(r_n + u_n - xp.sqrt(r_n * r_n + u_n * u_n))
    return xp.where(mu > 0.0, cone, scalar)
