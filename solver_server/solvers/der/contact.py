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

import warp as wp

from ...kernels import cuda_layout_on, int32_view, launch, warp_device_of, warp_view
from ...kernels.pairs import ChainSpherePairs
from .colliders import adapt_collider
from .contact_detection import ContactDetector, KinematicVertices
from .contact_failsafe import MeshFailsafe
from .contact_response import LocalResponse
from .contact_set import ContactSet, rows_dot
from .contact_space import DelassusOperator, coulomb_scale
from .frames import row_lengths
from .kernels import contact as contact_kernels
from .model import DerModel
from .settings import ContactSettings


# a refactorization that changes some contact's normal compliance W_nn by more than this fraction (of the
# smaller of the two) has the last round's impulses solved again on it before a step applies them
RESOLVE_RESPONSE_CHANGE = 0.5
# hits of one rod edge kept by the strand–strand search's counting pass for its filling pass (an edge with more is
# searched again there): (E, KEPT_HITS) slots, 36 bytes each
KEPT_HITS = 8


class ContactSolver:
    """The contact side of a DER solver across steps: the colliders, the settings, the strand–strand broad
    phase and the warm start (the last step's impulses by contact key); ``begin_step`` makes the step's
    StepContacts."""

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
        # [m] the largest of them on the host (read once here): bounds of queries that need only near points
        self.largest_vertex_radius = float(xp.max(self.vertex_radius)) if model.n_vertices else 0.0
        # strand–strand broad phase: edges as one chain ordered by their first vertex (adjacent ones share one)
        self.edge_pairs = ChainSpherePairs(xp.zeros_like(model.edge_vertex), model.edge_vertex, xp)
        self._kinematic = None      # (fixed DOFs, KinematicVertices) of the last step's fixed DOFs
        self._kept_hits = None      # (j (E, KEPT_HITS) int32, hits (E · KEPT_HITS,) vec4d) views: kept_hits
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

    def kinematic(self, fixed_dofs) -> "KinematicVertices":
        """The kinematic vertices of the step whose fixed DOFs are ``fixed_dofs`` (F,), kept while the steps pass
        the same array (a solver's fixed DOFs do not change: the indices and nearest-kinematic tables, which are
        data-sized, are found once, not read back every step)."""
        if self._kinematic is None or self._kinematic[0] is not fixed_dofs:
            self._kinematic = (fixed_dofs, KinematicVertices.of(self.xp, self.model, fixed_dofs))
        return self._kinematic[1]

    def remember(self, contacts: "StepContacts") -> None:
        """Keep the impulses a finished step applied, keyed by contact, to warm-start the next step."""
        xp = self.xp
        order = xp.argsort(contacts.set.keys)
        self._warm = (contacts.set.keys[order], contacts.applied[order], contacts.h)

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

    def kept_hits(self, n_edges: int):
        """The Warp views (j (n_edges, KEPT_HITS) int32, hits (n_edges · KEPT_HITS,) vec4d) in which the strand–strand
        search's counting pass keeps each edge's first hits (``kernels.ccd.edge_hits``), allocated once."""
        if self._kept_hits is None or self._kept_hits[0].shape[0] != n_edges:
            xp = self.xp
            self._kept_hits = (warp_view(xp.zeros((n_edges, KEPT_HITS), dtype=xp.int32), wp.int32),
                               warp_view(xp.zeros((n_edges * KEPT_HITS, 4)), wp.vec4d))
        return self._kept_hits

    def begin_step(self, state, dt: float, fixed_dofs) -> "StepContacts":
        return StepContacts(self, state, dt, fixed_dofs)

    def per_object_contacts(self, found: ContactSet, dt: float) -> ContactSet:
        """``found`` with the μ and normal targets of the objects its contacts belong to; one object's contacts
        are detected with its own parameters, so they come back unchanged."""
        return found

    def vertex_thickness(self):
        """(N,) [m] the extra contact distance of each vertex's object (``ContactSettings.thickness``)."""
        return self.xp.full(self.model.n_vertices, self.settings.thickness)


class StepContacts:
    """The contacts and impulses of one time step (the ``impulses`` handler of the integrator): the set its
    ContactDetector finds (``set``, a ContactSet), the impulses solved on it (the seed's Jacobi local step on
    the LocalResponse, or Gauss–Seidel sweeps on the Delassus operator), the end check (``relinearize``) and
    the failsafe (MeshFailsafe)."""

    def __init__(self, solver: ContactSolver, state, dt: float, fixed_dofs):
        xp, model = solver.xp, solver.model
        self.xp, self.model, self.solver, self.h = xp, model, solver, dt
        self.start_positions = state.positions
        kinematic = solver.kinematic(fixed_dofs)
        self.dof_fixed = kinematic.dof_fixed
        self.vertex_fixed = kinematic.vertex_fixed
        self.detector = ContactDetector(solver, self.start_positions, kinematic, dt)
        self.response = LocalResponse(xp, model, solver.settings.response, self.dof_fixed, self.vertex_fixed)
        self.failsafe = MeshFailsafe(solver, self.start_positions, self.vertex_fixed, dt)
        self.set = ContactSet.empty(xp)
        self.worst_penetration = 0.0
        n = 0
        self.impulse = xp.zeros((n, 3))
        self.applied = xp.zeros((n, 3))
        self._last_increment = xp.zeros((n, 3))
        self._relaxation = xp.ones(n)
        self.active_mask = xp.zeros(n, dtype=bool)
        self.last_velocity = None
        self._end_positions = None
        self.n_edge_contacts = 0
        self.n_collider_contacts = 0
        self._factor = None
        self._operator = None          # DelassusOperator of the contact set and the factor (Gauss–Seidel)
        self._structure = None         # its DelassusStructure: of the contact set alone, kept over refactors
        self._last_problem = None      # (relative velocities, start, W_nn) of the last contact-space solve
        self.sweeps = 0                # Gauss–Seidel sweeps of the last local solve
        self.relinearized = False      # the set was written again at the end positions (relinearize)

    def set_system(self, factor) -> None:
        self._factor = factor
        self._operator = None
        self.response.set_factor(factor)

    def _set_contacts(self, contacts: ContactSet) -> None:
        """Make ``contacts`` the step's set: the operators built on the old one are dropped."""
        self.set = contacts
        self._operator = None
        self._structure = None
        self.response.set_contacts(contacts)
        edges = contacts.kind_edge.sum()
        # figures for the frame's stats: on the device a 0-d device array, read with them (statistics)
        self.n_edge_contacts = edges if cuda_layout_on(warp_device_of(contacts.normal)) else int(edges)
        self.n_collider_contacts = contacts.count - self.n_edge_contacts

    def _take(self, found: ContactSet | None) -> None:
        """The first path's contacts become the set, with no impulse yet."""
        if found is None:
            return
        xp = self.xp
        self._set_contacts(found)
        n = found.count
        self.impulse = xp.zeros((n, 3))
        self.applied = xp.zeros((n, 3))
        self._last_increment = xp.zeros((n, 3))
        self._relaxation = xp.ones(n)
        self.active_mask = xp.ones(n, dtype=bool)

    def keep_outside(self, positions, velocities):
        """The failsafe after the contact loop (``MeshFailsafe.keep_outside``): (positions, velocities) with no
        free vertex or edge through a mesh collider, with whether anything moved, or None (see there)."""
        return self.failsafe.keep_outside(positions, velocities, self.detector.unreachable_of)

    def relative_velocity(self, velocity):
        """(n, 3) velocity of side A minus side B (minus the collider surface velocity)."""
        return _interpolate(self.xp, self.set.weights, velocity[self.set.vertices]) - self.set.surface_velocity

    @property
    def resolves_each_round(self) -> bool:
        return self.solver.settings.local_solver != "jacobi"

    @property
    def contact_count(self) -> int:
        return self.set.count

    @property
    def checks_end_positions(self) -> bool:
        return bool(self.set.count) or bool(self.solver.colliders)

    def converged(self):
        """No contact predicts a penetration deeper than `penetration_tolerance` × its (smaller) hair radius (half
        of `end_penetration_tolerance`, if larger, once the set was written again at the end positions: the
        Gauss–Seidel solve of such a set closes its last few hundredths of a radius slowly, measured 0.04–0.05 r
        over 10 and more iterations, up to N_max, on the dense substeps of benchmarks.der_vs_blender_hair). A 0-d
        device bool once a round has measured the penetration (the integrator reads it with its other flags), True
        before."""
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
          x_t → x_t + h v of every free vertex is tested again (``ContactDetector.end_contacts``); a vertex that
          reaches a surface gets a contact at the first touching point, on the side it started on.

        A contact already in the set keeps its impulse (same key), projected onto the new cone. The loop then
        goes on with the new set."""
        xp, model = self.xp, self.model
        v_after = model.gather_positions(velocity_after)
        x1 = self.start_positions + self.h * v_after
        found = self.detector.end_contacts(x1)
        if found is None:
            return None
        # the set without the contacts these replace (same key), then the new ones with the old impulses
        kept = ~xp.isin(self.set.keys, found.keys)
        old_order = xp.argsort(self.set.keys)
        carried = impulses_by_key(xp, self.set.keys[old_order], self.applied[old_order], found.keys)
        impulse = project_to_cone(xp, carried, found.normal, found.mu)
        self._set_contacts(ContactSet.concatenate(xp, [self.set.subset(kept), found]))
        applied = xp.concatenate([self.applied[kept], impulse])
        self.impulse, self.applied = applied, applied.copy()
        self._last_increment = xp.zeros_like(applied)
        self._relaxation = xp.concatenate([self._relaxation[kept], xp.ones(impulse.shape[0])])
        self.active_mask = row_lengths(xp, applied) > 0.0
        self._last_problem = None
        self._end_positions = x1
        self.last_velocity = v_after
        self.relinearized = True
        return self.generalized_impulse(applied)

    def update(self, iteration: int, velocity_before, velocity_after):
        """Seed Algorithm 3: new generalized impulse (n_dofs,) from the velocities after a global step."""
        xp, model = self.xp, self.model
        v_after = model.gather_positions(velocity_after)
        if iteration == 0:
            self._take(self.detector.detect(v_after))
        self.last_velocity = v_after
        n = self.set.count
        if n == 0:
            return None
        self._end_positions = self.start_positions + self.h * v_after
        self.applied = self.impulse.copy()
        relative = self.relative_velocity(v_after)
        # predicted end-of-step penetration beyond the contact distance, relative to that distance
        shortfall = (self.set.target_normal - rows_dot(xp, relative, self.set.normal)) * self.h / self.set.radius_scale
        self.worst_penetration = xp.maximum(shortfall, 0.0).max()     # 0-d, read by the caller of converged()
        if self.resolves_each_round and self._factor is not None:
            start = self.solver.warm_start(self.set.keys, self.set.normal, self.set.mu, self.h) if iteration == 0 \
                else self.impulse
            local = self._solve_contact_space(relative, start)
            self._last_problem = (relative, start, self._normal_response())
            return self._relaxed_update(local)
        if iteration == 0:
            warm = self.solver.warm_start(self.set.keys, self.set.normal, self.set.mu, self.h)
            if bool(xp.any(warm != 0.0)):
                # the next global step applies last step's impulses of the contacts that persist; the local
                # steps start from them (the first velocities did not feel them, so no local step now)
                self.impulse = warm
                self.active_mask = xp.linalg.norm(warm, axis=1) > 0.0
                return self.generalized_impulse(warm)
        response = self.response.response(self.active_mask, self._end_positions)
        return self._relaxed_update(local_impulse_update(xp, response, relative, self.set.normal,
                                                         self.set.target_normal, self.impulse, self.set.mu))

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
        if self._last_problem is None or self._factor is None or self.set.count == 0:
            return None
        xp = self.xp
        relative, start, solved_on = self._last_problem
        now = self._normal_response()
        change = xp.abs(now - solved_on) / xp.maximum(xp.minimum(now, solved_on), 1e-300)
        changed = change.max() > RESOLVE_RESPONSE_CHANGE
        resident = cuda_layout_on(warp_device_of(now))
        if not resident and not bool(changed):
            return None
        sweeps_before = self.sweeps
        local = self._solve_contact_space(relative, start)
        impulse = self.applied + self._relaxation[:, None] * (local - self.applied)
        active = xp.linalg.norm(impulse, axis=1) > 0.0
        if resident:
            # on the device the solve runs whatever the change and is taken where the response changed (a device
            # flag, no read): the impulses the host's choice gives
            impulse = xp.where(changed, impulse, self.impulse)
            active = xp.where(changed, active, self.active_mask)
            self._last_increment = xp.where(changed, impulse - self.applied, self._last_increment)
            self._last_problem = (relative, start, xp.where(changed, now, solved_on))
            self.sweeps = xp.where(changed, self.sweeps, sweeps_before)
        else:
            self._last_increment = impulse - self.applied
            self._last_problem = (relative, start, now)
        self.impulse, self.active_mask = impulse, active
        return self.generalized_impulse(self.impulse)

    def _normal_response(self):
        """Normal compliance W_nn (n,) [m/s per N·s] of every contact on the current factor."""
        return self.xp.einsum("ni,nij,nj->n", self.set.normal, self._delassus_operator().diagonal, self.set.normal)

    def _relaxed_update(self, local):
        """Move the impulses towards the local solution `local` (n, 3); returns the generalized impulse.

        The global/local loop can settle into a two-iteration oscillation (a contact's increment flips
        direction every iteration: coupled Jacobi steps, or a nearly free strand tip whose contacts' solution
        alternates with the matrix refreshes); such contacts are under-relaxed, halving their step each flip
        (down to 1/8) and regaining it while they move steadily.  A convex combination of two impulses inside
        the Coulomb cone stays inside it."""
        xp = self.xp
        increment = local - self.impulse
        flipped = rows_dot(xp, increment, self._last_increment) < 0.0
        self._relaxation = xp.where(flipped, xp.maximum(0.5 * self._relaxation, 0.125),
                                    xp.minimum(1.5 * self._relaxation, 1.0))
        self._last_increment = self._relaxation[:, None] * increment
        self.impulse = self.impulse + self._last_increment
        self.active_mask = xp.linalg.norm(self.impulse, axis=1) > 0.0
        return self.generalized_impulse(self.impulse)

    def _delassus_operator(self) -> DelassusOperator:
        """The contact set's Delassus operator on the current factor (built once per factor and contact set; what
        it takes from the set alone, once per set)."""
        if self._operator is None:
            self._operator = DelassusOperator(self.xp, self.model, self._factor, self.set.vertices,
                                              self.set.weights, self.dof_fixed, self.set.normal,
                                              self.solver.settings.gauss_seidel_colours, self._structure)
            self._structure = self._operator.structure
        return self._operator

    def _solve_contact_space(self, relative, start):
        """Impulses (n, 3) solving the contact problem of the linear model u(λ) = u_now + W (λ − λ_applied),
        from the impulses `start` (contact_space.py).  relative (n, 3): u_now, the relative velocities the
        applied impulses produced."""
        settings = self.solver.settings
        operator = self._delassus_operator()
        velocity_tolerance = (settings.gauss_seidel_tolerance * settings.penetration_tolerance / self.h) \
            * self.set.radius_scale
        impulse, self.sweeps, _ = operator.gauss_seidel(relative + operator.apply(start - self.applied), start,
                                                        self.set.target_normal, self.set.mu,
                                                        settings.gauss_seidel_sweeps, velocity_tolerance)
        return impulse

    def generalized_impulse(self, impulse):
        """The contacts' impulses (n, 3) [N·s] as a generalized impulse (n_dofs,) on the vertices' position DOFs:
        each shared out over its contact's vertex slots by their weights (one kernel,
        ``kernels.contact.slot_impulses_to_vertices``)."""
        xp, model = self.xp, self.model
        vertex_impulse = xp.zeros((model.n_vertices, 3))
        launch(contact_kernels.slot_impulses_to_vertices, self.set.count, device=warp_device_of(vertex_impulse),
               inputs=[int32_view(xp, self.set.vertices),
                       warp_view(xp.ascontiguousarray(self.set.weights, dtype=xp.float64), wp.float64),
                       warp_view(xp.ascontiguousarray(impulse, dtype=xp.float64), wp.vec3d),
                       warp_view(vertex_impulse, wp.vec3d)])
        generalized = xp.zeros(model.n_dofs)
        generalized[model.position_dofs] = vertex_impulse
        return generalized

    def statistics(self) -> dict:
        """The step's contact figures. On the device (CUDA's layout) the data-dependent ones stay 0-d device arrays,
        read with the frame's stats (``simulation._frame_totals``); on the CPU they are host numbers."""
        xp = self.xp
        n = self.set.count
        resident = cuda_layout_on(warp_device_of(self.set.normal))
        stats = {"contacts": n, "edge_contacts": self.n_edge_contacts,
                 "collider_contacts": self.n_collider_contacts, "active_contacts": 0, "active_edge_contacts": 0,
                 "mean_impulse": 0.0, "fischer_burmeister": 0.0,
                 "contact_sweeps": self.sweeps if resident else int(self.sweeps),
                 "unreachable_contacts": sum(self.detector.unreachable_by_collider.values()),
                 "failsafe_vertices": self.failsafe.vertices_moved, "failsafe_edges": self.failsafe.edges_crossed}
        if n == 0 or self.last_velocity is None:
            return stats
        residual = self.fischer_burmeister(self.last_velocity)
        magnitude = xp.linalg.norm(self.applied, axis=1)
        active = magnitude > 0.0
        active_count = active.sum()
        figures = {"active_contacts": active_count, "active_edge_contacts": (active & self.set.kind_edge).sum(),
                   "mean_impulse": xp.where(active, magnitude, 0.0).sum() / xp.maximum(active_count, 1),
                   "fischer_burmeister": residual.mean()}
        if not resident:
            figures = {name: (int if name.startswith("active") else float)(value) for name, value in figures.items()}
        stats.update(figures)
        return stats

    def fischer_burmeister(self, velocity):
        """Per-contact ‖f_FB‖ of the SOCCP form of Coulomb's law (seed eqs. 4.5-4.6), in m/s.

        Velocities are shifted by the normal target (so the complementarity is at the contact distance) and
        impulses converted to velocities by the unscaled normal response nᵀKn.
        """
        xp = self.xp
        relative = self.relative_velocity(velocity) - self.set.target_normal[:, None] * self.set.normal
        response = self.response.rigid_rod(xp.ones(self.model.n_vertices), self._end_positions)
        scale = xp.einsum("ni,nij,nj->n", self.set.normal, response, self.set.normal)
        return fischer_burmeister_residual(xp, self.applied * scale[:, None], relative, self.set.normal, self.set.mu)


def _vertex_radius(xp, model: DerModel):
    """(N,) [m] the mean radius of the edges at each vertex."""
    radius = xp.zeros(model.n_vertices)
    count = xp.zeros(model.n_vertices)
    for shift in (0, 1):
        radius += xp.bincount(model.edge_vertex + shift, weights=model.edge_radius, minlength=model.n_vertices)
        count += xp.bincount(model.edge_vertex + shift, minlength=model.n_vertices)
    return radius / count


def _interpolate(xp, weights, velocities):
    """Σ_k w_k v_k over the 4 vertex slots of every contact: (n, 4), (n, 4, 3) -> (n, 3)."""
    return xp.einsum("nk,nkc->nc", weights, velocities)


def local_impulse_update(xp, response, relative, normal, target_normal, impulse, mu):
    """One local step per contact: normal first, then friction (seed eqs. 3.1, 3.4, 3.5).

    The normal impulse brings the normal relative velocity to its target (u'_N = target, λ_N ≥ 0); the
    tangential impulse then cancels the tangential relative velocity (including the tangential effect of the
    normal change) and is clamped to the Coulomb disc ‖λ_T‖ ≤ μ λ_N.  response (n, 3, 3): Δu = W λ.
    """
    u_normal = rows_dot(xp, relative, normal)
    w_normal = xp.einsum("ni,nij,nj->n", normal, response, normal)
    old_normal = rows_dot(xp, impulse, normal)
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
    normal_part = rows_dot(xp, impulse, normal)
    tangential = impulse - normal_part[:, None] * normal
    scale = coulomb_scale(xp, xp.maximum(normal_part, 0.0), tangential, mu)
    projected = xp.maximum(normal_part, 0.0)[:, None] * normal + scale[:, None] * tangential
    return xp.where((normal_part > 0.0)[:, None], projected, 0.0)


def fischer_burmeister_residual(xp, impulse, velocity, normal, mu):
    """‖x + y − (x∘x + y∘y)^{1/2}‖ in the Lorentz cone with x = (μ r_N, r_T), y = (û_N/μ, u_T),
    û_N = u_N + μ‖u_T‖ (De Saxcé/Daviet change of variables).  μ = 0 uses the scalar FB function on the
    normal components (tangential impulse is zero then)."""
    r_n = rows_dot(xp, impulse, normal)
    u_n = rows_dot(xp, velocity, normal)
    r_t = impulse - r_n[:, None] * normal
    u_t = velocity - u_n[:, None] * normal
    u_t_norm = xp.linalg.norm(u_t, axis=1)
    safe_mu = xp.where(mu > 0.0, mu, 1.0)
    x0, x1 = mu * r_n, r_t
    y0, y1 = (u_n + mu * u_t_norm) / safe_mu, u_t
    w0 = x0 * x0 + rows_dot(xp, x1, x1) + y0 * y0 + rows_dot(xp, y1, y1)
    w1 = 2.0 * (x0[:, None] * x1 + y0[:, None] * y1)
    w1_norm = xp.linalg.norm(w1, axis=1)
    root_hi = xp.sqrt(xp.maximum(w0 + w1_norm, 0.0))
    root_lo = xp.sqrt(xp.maximum(w0 - w1_norm, 0.0))
    direction = w1 / xp.maximum(w1_norm, 1e-300)[:, None]
    sqrt0 = 0.5 * (root_hi + root_lo)
    sqrt1 = 0.5 * (root_hi - root_lo)[:, None] * direction
    f0 = x0 + y0 - sqrt0
    f1 = x1 + y1 - sqrt1
    cone = xp.sqrt(f0 * f0 + rows_dot(xp, f1, f1))
    scalar = xp.abs(r_n + u_n - xp.sqrt(r_n * r_n + u_n * u_n))
    return xp.where(mu > 0.0, cone, scalar)
