"""Projective Dynamics solver (seed Algorithm 2) for a merged cloth / soft-body ParticleModel.

Per substep of length h:
  1. s = q + h v + h² g                           (f_ext = M g, so M⁻¹ f_ext = g)
  2. s ← ResolveCollision(s)                      (pre-projection)
  3. q ← s; repeat `iterations` times:
        b = M/h² s + Σ_c ω_c A_cᵀ p_c(q) + f + d(q) (local step, one batch per constraint type; d: the still
                                                    air's drag on cloth with air_drag, air.py)
        q_F = K_FF⁻¹ (b_F − K_FP q_P)               (global step; pinned q_P = targets)
        contact forces f ← local contact step on q     (contact.py; setting contact_forces: the
                                                    next global step includes f, so bodies squeezed by
                                                    colliders bulge instead of losing volume, and
                                                    Coulomb friction acts inside the solve)
  4. q ← ResolveCollision(q) (post-projection), Coulomb friction
  4b. hard cloth strain limit (strain_limit.py: no edge longer than (σmax + slack)·r) and the colliders' rounds
      (vertices, then surface edges against mesh edges), twice; cloth self-collision
  5. v = (q − q_t)/h, then v ← v / (1 + damping·h)
"""

from __future__ import annotations

import logging
import time

import numpy as np
import scipy.sparse

from ...collision import ColliderSet
from ...kernels import cuda_layout_on
from ...sim.maps import element_factors
from ...sim.model import ParticleModel
from .state import PDControl, PDState
from . import constraints as pdc
from .kernels.bending import BendingLocal
from .contact import ContactPoints, merge_contacts
from .global_solve import CholeskySolve, JacobiSolve
from .kernels.local import EdgeStrainLocal
from .strain_limit import EdgeStrainLimit
from .kernels.tet import TetLocal
from .kernels.triangle import TriangleStrainLocal
from .air import ClothAirDrag
from .wind import ClothWind

SELF_COLLIDER_ROUNDS = 4            # self-contact + collider push repeats while the push left surfaces crossed
FINAL_ROUNDS = 2                    # rounds of strain limit, collider and self-contact passes after the iterations
CONTACT_BAND = 0.5                  # a pushed point within (1 + this) × its contact offset keeps no outgoing speed
REVERT_ROUNDS = 4                   # tests of the closing strain limit for crossings it made (see _closing_limit)
STRAIN_LIMIT_PASSES_PER_ROUND = 8   # Jacobi passes per round (a round: full edge check, one global solve, passes)
# a frame reports the cloth edges longer than their hard limit by more than this fraction of their rest length:
# the stretch an artist sees, beyond the limit's own rounding and the contacts' last small pushes
REPORTED_OVERSTRETCH = 0.02

log = logging.getLogger(__name__)


def _slot_values(model: ParticleModel, key: str) -> np.ndarray:
    """(slots,) or (slots, 2) parameter ``key`` of every slot (0 on slots of a kind without it)."""
    values = [params.get(key, 0.0) for params in model.params]
    width = next((len(value) for value in values if isinstance(value, tuple)), None)
    return np.array([value if width is None or isinstance(value, tuple) else (value,) * width for value in values],
                    dtype=float)


def build_constraints(model: ParticleModel) -> list[pdc.ConstraintBatch]:
    """All constraint batches of a model (soft pins excluded), weights from slot params times the painted
    factors (an element takes the mean factor of its vertices; bending is per vertex)."""
    batches: list[pdc.ConstraintBatch] = []
    rest = model.rest
    n = model.particle_count
    cloth_slots = [i for i, slot in enumerate(model.slots) if slot.kind == "cloth"]
    cloth_mask = np.isin(model.triangle_slot, cloth_slots)
    if np.any(cloth_mask):
        triangles = model.triangles[cloth_mask]
        slot_of = model.triangle_slot[cloth_mask]
        param = lambda key: _slot_values(model, key)[slot_of]  # noqa: E731
        limits = param("strain_limits")
        painted = lambda key: element_factors(model.factors(key), triangles)  # noqa: E731
        stretch = param("stretch_stiffness") * painted("stretch_stiffness")
        batches.append(pdc.edge_strain(rest, triangles, stretch, limits))
        shear = param("shear_stiffness") * painted("shear_stiffness")
        if np.any(shear > 0):
            keep = shear > 0
            batches.append(pdc.triangle_strain(rest, triangles[keep], shear[keep], limits[keep]))
        bend_per_slot = np.array([model.params[s].get("bend_stiffness", 0.0) for s in range(len(model.slots))])
        if np.any(bend_per_slot[cloth_slots] > 0):
            areas = pdc.triangle_areas(rest, triangles)
            vertex_areas = np.bincount(triangles.ravel(), weights=np.repeat(areas / 3.0, 3), minlength=n)
            bend = np.zeros(n)
            for slot_index in cloth_slots:
                slot = model.slots[slot_index]
                bend[slot.start:slot.stop] = bend_per_slot[slot_index]
            if model.factors("bend_stiffness") is not None:
                bend = bend * model.factors("bend_stiffness")
            batch = pdc.bending(rest, triangles, bend, vertex_areas, object_id=None)
            if batch is not None:
                batches.append(batch)
    if len(model.tets):
        slot_of = model.tet_slot
        param = lambda key: _slot_values(model, key)[slot_of]  # noqa: E731
        young = param("young_modulus") * element_factors(model.factors("young_modulus"), model.tets)
        poisson = param("poisson_ratio")
        limits = param("strain_limits")
        batches.append(pdc.tet_strain(rest, model.tets, young, limits))
        volume = pdc.tet_volume(rest, model.tets, young, poisson)
        if volume is not None:
            batches.append(volume)
    return batches


def edge_strain_batch(batches: list[pdc.ConstraintBatch]) -> pdc.ConstraintBatch | None:
    """The cloth edge-strain batch among ``batches`` (None without cloth)."""
    return next((batch for batch in batches if batch.name == "edge_strain"), None)


def tet_local_step(backend, batches: list[pdc.ConstraintBatch], n: int) -> tuple[TetLocal | None, list]:
    """The tet strain and volume batches' local step in kernels (kernels.tet.TetLocal) and the batches it
    covers; (None, []) without tets."""
    strain = next((batch for batch in batches if batch.name == "tet_strain"), None)
    if strain is None:
        return None, []
    volume = next((batch for batch in batches if batch.name == "tet_volume"), None)
    volume_weight = np.zeros(strain.count)
    if volume is not None:
        volume_weight[volume.elements] = volume.weights
    local = TetLocal(backend, strain.tets, strain.rest_inverse, strain.limits, strain.weights, volume_weight, n)
    return local, [batch for batch in (strain, volume) if batch is not None]


def kernel_local_steps(backend, batches: list[pdc.ConstraintBatch], n: int) -> tuple[list, set[int]]:
    """The local steps that run in Warp kernels, each fused with its right-hand side (``add_rhs(q, rhs)``):
    cloth edges (kernels.local), shear triangles (kernels.triangle), bending (kernels.bending), soft-body tet
    strain and volume (kernels.tet); and the ids of the batches they cover. The others (soft pins) go through
    their selectors."""
    steps, covered = [], []
    edges = edge_strain_batch(batches)
    if edges is not None:
        steps.append(EdgeStrainLocal(backend, edges.edges, edges.limits[:, 0] * edges.rest_length,
                                     edges.limits[:, 1] * edges.rest_length, edges.weights, n))
        covered.append(edges)
    triangles = next((batch for batch in batches if batch.name == "triangle_strain"), None)
    if triangles is not None:
        steps.append(TriangleStrainLocal(backend, triangles.triangles, triangles.rest_inverse, triangles.limits,
                                         triangles.weights, n))
        covered.append(triangles)
    bending = next((batch for batch in batches if batch.name == "bending"), None)
    if bending is not None:
        steps.append(BendingLocal(backend, bending.triangles, bending.interior, bending.selector, bending.weights,
                                  bending.signed_magnitude, bending.curved, n))
        covered.append(bending)
    tets, tet_batches = tet_local_step(backend, batches, n)
    if tets is not None:
        steps.append(tets)
        covered.extend(tet_batches)
    return steps, {id(batch) for batch in covered}


def stiffen_near_pins(batches, pinned: np.ndarray, n: int, rings: int) -> None:
    """Scale the cloth edge weights near exactly pinned particles by rings / d (d = 1, 2, … hops of the edge
    from the nearest pin; edges from d = rings on keep their weight).

    A point pin carries its load through a few edges: the membrane strain around a point load grows like
    1/distance, so on any mesh the first ring of edges stretches by tens of per cent. Stiffening by
    rings / d cancels the 1/d growth inside ``rings`` hops, as if the pin held a small stiff patch of
    cloth (a grommet) instead of one vertex. Changes the system matrix only (built once).
    """
    edges = edge_strain_batch(batches)
    if edges is None or rings <= 1 or len(pinned) == 0:
        return
    from scipy.sparse.csgraph import dijkstra  # noqa: PLC0415

    pairs = edges.edges
    graph = scipy.sparse.csr_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    hops = dijkstra(graph, directed=False, indices=np.unique(pinned), unweighted=True, min_only=True,
                    limit=rings + 1)
    edge_hops = np.minimum(hops[pairs[:, 0]], hops[pairs[:, 1]]) + 1.0      # 1 for an edge at a pin
    edges.weights = edges.weights * np.maximum(1.0, rings / edge_hops)


def pinned_system(system: scipy.sparse.csr_matrix, pinned: np.ndarray):
    """The global system with exactly pinned particles eliminated in place: (K', C).

    system: K (n, n) = M/h² + Σ ω AᵀA; pinned: (P,) particle indices. K' (n, n) is K with the pinned rows
    and columns replaced by the identity's, C (n, P) the pinned columns of K with the pinned rows zeroed.
    Solving K' x = b − C q_P with b_P replaced by q_P gives the free particles' K_FF x_F = b_F − K_FP q_P and
    x_P = q_P: the pins leave the solve without gathering the free rows out of every right-hand side and
    scattering the solution back (0.3 ms each on 20 000 particles, as long as a third of the solve itself).
    """
    n = system.shape[0]
    keep = np.ones(n)
    keep[pinned] = 0.0
    free = scipy.sparse.diags(keep)
    held = scipy.sparse.diags(1.0 - keep)
    matrix = (free @ system @ free + held).tocsr()
    matrix.eliminate_zeros()
    coupling = (free @ system[:, pinned]).tocsr()
    coupling.eliminate_zeros()
    return matrix, coupling


class PDSolver:
    """Newton-style solver: built from a Model, ``step(state_in, state_out, control, contacts, dt)``.

    settings: resolved ``solver.pd`` map (see settings.py); dt: substep [s] (the system matrix
    depends on it; a different dt in ``step`` raises ValueError).
    """

    def __init__(self, model: ParticleModel, backend, settings: dict, dt: float, gravity: np.ndarray):
        self.model = model
        self.backend = backend
        self.settings = settings
        self.dt = float(dt)
        self.gravity = np.asarray(gravity, float)
        xp = backend.xp
        n = model.particle_count
        hard = model.pin_weights >= 1.0
        self.hard_pin_rows = np.nonzero(hard)[0]                 # rows of model.pin_* that are exact
        self.hard_indices = model.pin_indices[hard]
        soft = ~hard
        self.soft_pin_rows = np.nonzero(soft)[0]
        self.batches = build_constraints(model)
        stiffen_near_pins(self.batches, self.hard_indices, n, settings["pin_stiffening_rings"])
        if np.any(soft):
            stiffness = np.array([model.params[s]["pin_stiffness"] for s in model.pin_slot[soft]])
            self.soft_pins = pdc.soft_pins(model.pin_indices[soft], model.pin_weights[soft] * stiffness, n)
            self.batches.append(self.soft_pins)
        else:
            self.soft_pins = None
        inertia = scipy.sparse.diags(model.mass / self.dt**2)
        system = inertia + sum((batch.normal_matrix() for batch in self.batches), scipy.sparse.csr_matrix((n, n)))
        self.system_matrix, coupling = pinned_system(system.tocsr(), self.hard_indices)

        to_device = (lambda m: backend.sparse.csr_matrix(m)) if backend.name != "cpu" else (lambda m: m.tocsr())
        self.selectors = [to_device(batch.selector) for batch in self.batches]
        self.scatters = [to_device(batch.weighted_transpose()) for batch in self.batches]
        # the pinned columns reach only the pins' neighbours: those rows and their (rows, P) block
        coupled = np.unique(coupling.nonzero()[0])
        self.coupled_rows = xp.asarray(coupled)
        self.coupling = to_device(coupling[coupled])
        self.inertia_over_h2 = xp.asarray(model.mass / self.dt**2)[:, None]
        self.hard_device = xp.asarray(self.hard_indices)
        self.contact = ContactPoints(model, backend, model.mass / self.dt**2, self.hard_indices)
        self.damping = xp.asarray(model.damping)
        self.cholesky = CholeskySolve(backend, self.system_matrix)
        mode = settings["global"]
        self.global_solver = self.cholesky
        if mode in ("jacobi", "a_jacobi"):
            self.global_solver = JacobiSolve(
                backend, self.system_matrix, order=settings["order"],
                iterations=settings["jacobi_iterations"], chebyshev_start=settings["chebyshev_start"],
                gamma=settings["gamma"], rho=settings["rho"])
        self.fell_back = False
        self.convergence_seen = False   # an iterative global step converged over a whole host-checked frame
        self.started = False     # the first step recovers points that start inside a closed collider shell
        self.self_collision = None
        self.strain_limit = self._build_strain_limit(backend, model, settings)
        self._overstretch = self._overstretch_table(model)
        self.wind = ClothWind.of_model(backend, model)
        self.air = ClothAirDrag.of_model(backend, model, self.hard_indices)
        edges = edge_strain_batch(self.batches)
        self.edge_scatter = next((scatter for batch, scatter in zip(self.batches, self.scatters) if batch is edges),
                                 None)
        self.kernel_steps, in_kernels = kernel_local_steps(backend, self.batches, n)
        self.selector_batches = [(batch, selector, scatter)
                                 for batch, selector, scatter in zip(self.batches, self.selectors, self.scatters)
                                 if id(batch) not in in_kernels]

    def _build_strain_limit(self, backend, model, settings) -> EdgeStrainLimit | None:
        """Hard σmax pass on the cloth edges (strain_limit.py), or None without cloth / when disabled."""
        edges = edge_strain_batch(self.batches)
        passes = settings["strain_limit_iterations"]
        if edges is None or passes == 0:
            return None
        inverse_mass = 1.0 / model.mass
        inverse_mass[self.hard_indices] = 0.0
        # the artist's σmax is the hard limit; an inextensible cloth (σmax 1) gets the slack as room to move
        max_length = np.maximum(edges.limits[:, 1], 1.0 + settings["strain_limit_slack"]) * edges.rest_length
        per_round = min(passes, STRAIN_LIMIT_PASSES_PER_ROUND)
        return EdgeStrainLimit(backend, edges.edges, max_length, inverse_mass,
                               rounds=-(-passes // per_round), passes_per_round=per_round,
                               free_length=edges.limits[:, 1] * edges.rest_length)

    def _overstretch_table(self, model):
        """(rest lengths (E,) [m], reported lengths (E,) [m]: the strain limit's hard lengths plus REPORTED_OVERSTRETCH
        of the rest length, on the device; each edge's object slot (E,) on the host) of the limit's edges, or None
        without a limit."""
        if self.strain_limit is None:
            return None
        edges = edge_strain_batch(self.batches)
        rest = self.backend.xp.asarray(edges.rest_length)
        starts = np.array([slot.start for slot in model.slots])
        return (rest, self.strain_limit.max_length + REPORTED_OVERSTRETCH * rest,
                np.searchsorted(starts, edges.edges[:, 0], side="right") - 1)

    def overstretch(self, q) -> dict:
        """The cloth edges at positions q (n, 3) [m] longer than their hard limit by more than REPORTED_OVERSTRETCH
        of their rest length, once per frame (reads the device): {} when none; else {"stretch_beyond_limit": how
        many, "stretch_beyond_limit_objects": the ids of their objects, "stretch_worst": the largest length / rest
        length of any cloth edge}. The limit holds within that against colliders; a heavy body on a cloth or pins
        dragged apart can stretch it further, and the artist is told."""
        if self._overstretch is None:
            return {}
        xp = self.backend.xp
        edges = self.strain_limit.edges
        rest, reported, edge_slot = self._overstretch
        lengths = xp.sqrt(xp.sum((q[edges[:, 0]] - q[edges[:, 1]]) ** 2, axis=1))
        beyond = self.backend.to_host(lengths > reported)
        if not beyond.any():
            return {}
        slots = np.unique(edge_slot[beyond])
        return {"stretch_beyond_limit": int(beyond.sum()),
                "stretch_beyond_limit_objects": [self.model.slots[slot].id for slot in slots],
                "stretch_worst": float(self.backend.to_host(xp.max(lengths / rest)))}

    def _strain_limit_solve(self, q, overshoot):
        """One global correction of the strain-limit pass: Δq_F = K_FF⁻¹ (Aᵀ W (−overshoot))_F.

        overshoot: (E, 3) [m] the part of each cloth edge vector beyond its hard limit (0 within it).
        This is a PD global step whose only non-zero residual is the overshoot: the linear elastic
        response of the whole system (inertia, every constraint) to pulling the too-long edges back,
        so a stretched region contracts as a whole; pinned particles stay (Δq_P = 0).
        """
        rhs = -(self.edge_scatter @ overshoot)
        if len(self.hard_indices):
            rhs[self.hard_device] = 0.0
        delta, _ = self.cholesky.solve(rhs)
        q += delta
        return q

    def finish_frame(self) -> dict:
        """At a frame's end: the deferred divergence test of the iterative global step (one read). A solve that
        diverged in this frame (it left its start, so the frame stays sane) switches the solver to Cholesky from
        the next frame on; else, after a first frame checked solve by solve, the later frames' tests stay on the
        device. Returns stats ({"global_fallback": "cholesky"} on a switch)."""
        solver = self.global_solver
        if solver is self.cholesky:
            return {}
        if self.convergence_seen and bool(solver.diverged_since_read):
            log.warning("PD %s global step diverged during the frame; Cholesky from the next frame on", solver.name)
            self.fell_back = True
            self.global_solver = self.cholesky
            return {"global_fallback": "cholesky"}
        solver.diverged_since_read = self.backend.xp.zeros((), dtype=bool)
        self.convergence_seen = True
        return {}

    def _global(self, rhs, pinned_targets, initial):
        """Positions (n, 3) [m] solving the global step for ``rhs`` (n, 3) (overwritten), the hard pins at
        ``pinned_targets`` (P, 3) [m] (None without hard pins); ``initial`` (n, 3): the iterative solvers'
        start. Returns (positions, SolveReport)."""
        if pinned_targets is not None:
            rhs[self.coupled_rows] -= self.coupling @ pinned_targets
            rhs[self.hard_device] = pinned_targets
        if self.global_solver is not self.cholesky and self.convergence_seen and cuda_layout_on(self.contact.device):
            # on a device the divergence test waits for the frame's end (finish_frame): the iteration matrix is
            # fixed, so a solver that converged over a whole frame of host-checked solves keeps converging
            return self.global_solver.solve(rhs, initial, deferred=True)
        solution, report = self.global_solver.solve(rhs, initial)
        if report.diverged and self.global_solver is not self.cholesky:
            log.warning("PD %s global solve diverged (residual %.3g); falling back to Cholesky",
                        self.global_solver.name, report.residual)
            self.fell_back = True
            self.global_solver = self.cholesky
            solution, report = self.cholesky.solve(rhs)
        return solution, report

    def _final_constraints(self, q, q_start, colliders: ColliderSet, contact_count: int, timings: dict):
        """The hard constraints after the iterations, in FINAL_ROUNDS rounds: the cloth strain limit, then
        the colliders (vertices by CCD, then surface edges against mesh edges, each followed by the vertex
        projection); in the last round then surface self-contact followed by the vertex projection (self-
        contact in every round cost twice the passes for the same intersections). A later constraint
        undoes part of an earlier one (a collider push stretches an edge, the strain limit pulls a point
        back towards a surface), so each round hands the residue back to the others; colliders have the
        last word. Returns (q, contact_count + self contacts, the self-contact push between objects
        (``_self_contact``) or None)."""
        xp = self.backend.xp
        has_colliders = len(colliders) > 0
        surface_push = None
        timings.setdefault("strain_limit_ms", 0.0)
        for round_index in range(FINAL_ROUNDS):
            if self.strain_limit is not None:
                tick = time.perf_counter()
                global_step = self._strain_limit_solve if self.settings["strain_limit_global"] else None
                planes = self._limit_planes(colliders, q, q_start) if has_colliders else None
                q, timings["strain_limit_rounds"], timings["strain_limit_left"] = self.strain_limit.apply(
                    xp, q, global_step, planes)
                timings["strain_limit_ms"] += (time.perf_counter() - tick) * 1e3
            tick = time.perf_counter()
            if has_colliders:
                # the self-contact's colliders follow in the last round: only a last call confirms its result
                followed = round_index < FINAL_ROUNDS - 1 or self.self_collision is not None
                q = self._collider_constraints(colliders, q, q_start, timings, confirm=not followed)
            if self.self_collision is not None and round_index == FINAL_ROUNDS - 1:
                q, contact_count, surface_push = self._self_contact(colliders, q, q_start, contact_count, timings)
            timings["collision_ms"] += (time.perf_counter() - tick) * 1e3
        if self.strain_limit is not None and has_colliders:
            tick = time.perf_counter()
            q = self._closing_limit(colliders, q, q_start, timings)
            timings["strain_limit_ms"] += (time.perf_counter() - tick) * 1e3
        return q, contact_count, surface_push

    def _closing_limit(self, colliders: ColliderSet, q, q_start, timings: dict):
        """The strain limit once more after the contact rounds, so that the colliders' pushes (vertex and edge
        contact over a rim, an ear, a brow) do not leave their stretch in the frame, then the vertex
        projection. The limit keeps points resting on a collider on their contact planes, so it shortens
        an edge over a rim by sliding its points along the surface; but it does not know edge–edge contact,
        so it can carry an edge through a collider's edge or through another cloth layer. A CCD test from
        the substep start finds such crossings; the particles of the crossing edges (and triangles) go
        back towards where the contact rounds left them and the test repeats, each time halving their share
        of the limit's move, REVERT_ROUNDS times, the last to none; crossings that the contact rounds had
        left already are not the limit's and are not held against it. Returns q (n, 3) [m]."""
        xp = self.backend.xp
        contact = self.contact
        settled = q
        global_step = self._strain_limit_solve if self.settings["strain_limit_global"] else None
        planes = self._limit_planes(colliders, q, q_start)
        limited, timings["strain_limit_rounds"], timings["strain_limit_left"] = self.strain_limit.apply(
            xp, q, global_step, planes)
        already = None                                    # crossings left by the contact rounds (tested once needed)
        share = xp.ones(q.shape[0], dtype=xp.float64)     # of the limit's move each particle keeps
        for round_index in range(REVERT_ROUNDS + 1):
            candidate, _ = contact.project(colliders, settled + share[:, None] * (limited - settled), q_start)
            if not colliders.has_meshes and self.self_collision is None:
                return candidate            # nothing to cross: no mesh edge, no other layer
            crossing = self._crossing_particles(colliders, candidate, q_start) & (share > 0)
            if already is not None:
                crossing = crossing & ~already
            if not bool(crossing.any()):
                return candidate            # one read in the common case: nothing crossed
            if already is None:
                already = self._crossing_particles(colliders, settled, q_start)
                crossing = crossing & ~already
                if not bool(crossing.any()):
                    return candidate
            share = xp.where(crossing, 0.0 if round_index >= REVERT_ROUNDS - 1 else 0.5 * share, share)
        return settled

    def _limit_planes(self, colliders: ColliderSet, q, q_start):
        """The contact planes the strain limit keeps points above: those of the substep's candidate query where
        it made them (mesh colliders with contact forces), else a query at q (n, 3) [m] within CONTACT_BAND."""
        planes = self.contact.candidate_planes()
        return planes if planes is not None else self.contact.contact_planes(colliders, q, q_start, CONTACT_BAND)

    def _crossing_particles(self, colliders: ColliderSet, q, q_start):
        """(n,) bool: particles of surface edges that crossed a collider's edge, and of cloth/surface pairs
        that passed through each other, between q_start and q (test passes only)."""
        crossing = self.contact.edges_crossing_colliders(colliders, q, q_start)
        if self.self_collision is not None:
            crossing = crossing | self.self_collision.crossed_points(self.backend.xp, q, q_start)
        return self.contact.particles_of(crossing)

    def _self_contact(self, colliders: ColliderSet, q, q_start, contact_count: int, timings: dict):
        """Surface self-contact, then the collider vertex projection (colliders have the last word). A
        collider push can carry a point through a layer lying on the collider (a crossing that CCD would
        then keep for good), so a test pass follows it and, if it finds pairs passed through each other,
        self-contact and the push run again, SELF_COLLIDER_ROUNDS times at most. Where surfaces of several
        objects may touch, cloth at its strain limit holds against the others (``SurfaceContact.resolve``): a
        soft body or another cloth resting on it is pushed out instead of the contact stretching the cloth
        past its limit. Returns (q, contact count, the particles' total self-contact correction (n, 3) [m]
        where several objects may touch, else None)."""
        xp = self.backend.xp
        surfaces = self.self_collision
        several = surfaces.several_objects
        held, relax = None, None
        if several and self.strain_limit is not None:
            held = lambda positions: self.strain_limit.taut_particles(xp, positions)   # noqa: E731
            relax = lambda positions: self.strain_limit.sweep(xp, positions)            # noqa: E731
        push = xp.zeros_like(q) if several else None
        for _ in range(SELF_COLLIDER_ROUNDS):
            before = q
            q, self_contacts = surfaces.resolve(xp, q, q_start, held, relax)
            if several:
                push = push + (q - before)
            contact_count += self_contacts
            if len(colliders) == 0:
                break
            q = self._collider_constraints(colliders, q, q_start, timings)
            if surfaces.crossed_since(xp, q, q_start) == 0:
                break
        if held is not None:
            # the limit once more, then the contact with taut cloth holding fully: a heavy body stays on the
            # cloth at its limit instead of pressing it further
            before = self.strain_limit.sweep(xp, q)
            q, self_contacts = surfaces.resolve(xp, before, q_start, held, None)
            push = push + (q - before)
        timings["self_contacts_left"] = surfaces.left
        if surfaces.left and surfaces.left_objects:
            timings["self_contacts_left_objects"] = surfaces.left_objects
        return q, contact_count, push

    def _collider_constraints(self, colliders: ColliderSet, q, q_start, timings: dict, confirm: bool = True):
        """Collider vertices by CCD, then surface edges against mesh edges (each round followed by the cloth
        strain-limit passes and the vertex projection: ContactPoints.resolve_edges); records the edge pairs
        in contact and those still crossed when the rounds ran out (``collider_edges_left``). confirm: False where
        another call of this substep follows (``ContactPoints.resolve_edges``). Returns q."""
        q, _ = self.contact.project(colliders, q, q_start)
        relax = self._limit_passes if self.strain_limit is not None else None
        q, timings["collider_edge_contacts"], timings["collider_edges_left"] = self.contact.resolve_edges(
            colliders, q, q_start, relax=relax, confirm=confirm)
        return q

    def _limit_passes(self, q, frozen):
        """Strain-limit passes on q (n, 3) [m] with the ``frozen`` (n,) bool particles held still."""
        return self.strain_limit.sweep(self.backend.xp, q, frozen=frozen)

    def _recover_inside(self, colliders: ColliderSet, q):
        """Particles q (n, 3) whose collision points start the job inside a closed collider shell, moved out
        (winding number; collision.mesh.MeshGeometry.recover_inside). Returns (q, number of points moved)."""
        contact = self.contact
        points = contact.points(q)
        moved, recovered = colliders.recover_inside(self.backend.xp, points, contact.thickness)
        recovered &= contact.keep
        count = int(recovered.sum())
        if count == 0:
            return q, 0
        log.warning("PD: %d points were inside a collider shell (at the start of the job or after a teleport: %s) "
                    "and were moved out", count, ", ".join(colliders.teleported) or "none")
        return contact.distribute(q, moved - points, recovered), count

    def _no_surface_kick(self, velocities, push_velocity):
        """Restitution 0 between surfaces: a particle that self-contact pushed by ``push_velocity`` (n, 3)
        [m/s] (its correction over the substep / h) keeps no velocity along the push beyond what it had without
        the push, or zero: the push cancels its approach, it does not launch it (a body dropped on a taut cloth
        comes to rest on it). velocities (n, 3) [m/s]; returns the corrected velocities."""
        xp = self.backend.xp
        length = xp.sqrt((push_velocity * push_velocity).sum(axis=1))
        pushed = length > 0.0
        direction = push_velocity / xp.maximum(length, 1e-300)[:, None]
        along = (velocities * direction).sum(axis=1)
        allowed = xp.maximum(along - length, 0.0)
        excess = xp.where(pushed, xp.maximum(along - allowed, 0.0), 0.0)
        return velocities - excess[:, None] * direction

    def _no_outgoing_kick(self, colliders: ColliderSet, q, q_start, velocities, pushed):
        """Restitution 0 and no velocity kick from position corrections: a point the colliders pushed during
        the substep (``pushed`` (n_c,) bool over the collision points) and that is still within its contact
        band keeps no normal velocity away from the surface beyond the surface's own motion. Against mesh colliders
        the band and the surface are the contact planes of the substep's candidate query (as for the strain limit;
        ``ContactPoints.near_candidate_planes``), else a query of the colliders at q.
        velocities (n, 3) [m/s] = (q − q_start)/h; returns the corrected velocities."""
        xp = self.backend.xp
        contact = self.contact
        h = self.dt
        planes = contact.near_candidate_planes(q, CONTACT_BAND)
        if planes is None:
            band = contact.thickness * (1.0 + CONTACT_BAND) + 1e-9
            _, found = colliders.project(xp, contact.points(q), band, contact.friction, contact.points(q_start),
                                         lists="band")
            planes = (found.mask, found.normal, found.surface_motion)
        near, normal, surface_motion = planes
        chosen = near & pushed & contact.keep
        point_velocity = contact.points(velocities)
        outgoing = ((point_velocity - surface_motion / h) * normal).sum(axis=1)
        chosen = chosen & (outgoing > 0)
        change = -xp.where(chosen, outgoing, 0.0)[:, None] * normal
        return contact.distribute(velocities, change, chosen)

    def step(self, state_in: PDState, state_out: PDState, control: PDControl, contacts, dt: float) -> dict:
        """Advance one substep; returns stats {iterations, contacts, local_ms, global_ms, collision_ms} and,
        with cloth, strain_limit_ms, strain_limit_rounds (rounds of passes run), strain_limit_left (edges
        still longer than the hard limit)."""
        if abs(dt - self.dt) > 1e-12 * self.dt:
            raise ValueError(f"PD solver was factored for dt={self.dt}, step called with dt={dt}")
        xp = self.backend.xp
        h = self.dt
        q_start = state_in.positions
        recovered = 0
        if len(control.colliders) and (not self.started or control.colliders.teleported):
            q_start, recovered = self._recover_inside(control.colliders, q_start)
        self.started = True
        targets_all = control.pin_targets
        hard_targets = targets_all[self.hard_pin_rows] if len(self.hard_pin_rows) else None
        if self.soft_pins is not None:
            self.soft_pins.targets = targets_all[self.soft_pin_rows]
        colliders: ColliderSet = control.colliders
        has_colliders = len(colliders) > 0
        timings = {"local_ms": 0.0, "global_ms": 0.0, "collision_ms": 0.0}

        inertial = q_start + h * state_in.velocities + (h * h) * xp.asarray(self.gravity)
        if self.wind is not None:
            inertial = inertial + (h * h) * self.wind.acceleration(q_start, control.time)
        if hard_targets is not None:
            inertial[self.hard_device] = hard_targets
        tick = time.perf_counter()
        pre = None
        if has_colliders:
            inertial, pre = self.contact.project(colliders, inertial, q_start)          # Algorithm 2, line 2
        timings["collision_ms"] += (time.perf_counter() - tick) * 1e3

        q = inertial.copy()
        base_rhs = self.inertia_over_h2 * inertial
        iterations = self.settings["iterations"]
        use_forces = self.settings["contact_forces"] and has_colliders
        candidates = self.contact.candidates(colliders, inertial, q_start) if use_forces else None
        use_forces = use_forces and len(candidates) > 0
        point_force = xp.zeros((len(candidates), 3)) if use_forces else None
        particle_force = None
        drag = self.air.substep(q_start, state_in.velocities, h) if self.air is not None else None
        report = None
        for _ in range(iterations):
            tick = time.perf_counter()
            rhs = base_rhs.copy()
            for local_step in self.kernel_steps:
                local_step.add_rhs(q, rhs)
            for batch, selector, scatter in self.selector_batches:
                state = (selector @ q).reshape(batch.count, batch.rows, 3)
                projected = batch.project(xp, state, q)
                rhs += scatter @ projected.reshape(-1, 3)
            if particle_force is not None:
                rhs += particle_force
            if drag is not None:
                rhs += ClothAirDrag.force(xp, drag, q, q_start)
            mid = time.perf_counter()
            q, report = self._global(rhs, hard_targets, q)
            if hard_targets is not None:
                q[self.hard_device] = hard_targets
            timings["local_ms"] += (mid - tick) * 1e3
            timings["global_ms"] += (time.perf_counter() - mid) * 1e3
            if use_forces:
                tick = time.perf_counter()
                point_force, particle_force = self.contact.forces(colliders, q, point_force, q_start, candidates)
                timings["collision_ms"] += (time.perf_counter() - tick) * 1e3

        tick = time.perf_counter()
        contact_count = 0
        if has_colliders:
            q, post = self.contact.project(colliders, q, q_start)                       # Algorithm 2, line 12
            # position-level friction for the pushes outside the force iteration (pre + post);
            # the in-loop forces already carry friction for their own normal force. What friction's tangential
            # moves leave inside a curved surface, the colliders' rounds after this take back
            q = self.contact.apply_friction(q, q_start, merge_contacts(xp, pre, post))
            touching = post.mask.copy()
            if point_force is not None:
                touching[candidates] |= xp.abs(point_force).sum(axis=1) > 0
            contact_count = touching.sum()
        timings["collision_ms"] += (time.perf_counter() - tick) * 1e3
        if hard_targets is not None:
            q[self.hard_device] = hard_targets
        q, contact_count, surface_push = self._final_constraints(q, q_start, colliders, contact_count, timings)

        velocities = (q - q_start) / h
        if surface_push is not None:
            velocities = self._no_surface_kick(velocities, surface_push / h)
        if has_colliders:
            pushed = pre.mask | post.mask
            if point_force is not None:
                pushed[candidates] |= xp.abs(point_force).sum(axis=1) > 0
            velocities = self._no_outgoing_kick(colliders, q, q_start, velocities, pushed)
        velocities = velocities / (1.0 + self.damping * h)[:, None]
        state_out.positions = q
        state_out.velocities = velocities
        stats = {"iterations": iterations, "contacts": contact_count, **timings}
        if recovered:
            stats["recovered_inside"] = recovered
        if colliders.teleported:
            stats["teleported_colliders"] = list(colliders.teleported)
        if report is not None and self.global_solver is not self.cholesky:
            stats["global_residual"] = report.residual
        if self.fell_back:
            stats["global_fallback"] = "cholesky"
        return stats
