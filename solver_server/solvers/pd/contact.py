"""Collider contact for a PD ParticleModel: which points collide and how corrections reach particles.

Collision points y = C q (C sparse (n_c, n)): every particle of an object that is simulated
directly (cloth, soft body with given tets) is its own collision point (a row of the identity);
a soft body embedded in a lattice collides through its SURFACE vertices (rows of its barycentric
embedding), so the visible surface, not the coarse lattice, touches colliders. Exactly pinned
particles never move: their points sit where they are (so surfaces and edges touching them keep
their true shape for the self-contact and edge passes) but take no corrections.

- ``project``: the seed's ResolveCollision on the points; a point correction Δy reaches the
  particles as Δq_j = Σ_s C_sj Δy_s / Σ_s C_sj over the touching points (exact for identity rows;
  a weighted average for embedded points, repeated a few times).
- ``forces``: contact and Coulomb friction forces inside the PD iterations (see PDSolver docs);
  a point's gain is k_s = 1 / Σ_j C_sj² / k_j with particle gains k_j = m_j/h².
"""

from __future__ import annotations

import numpy as np
import scipy.sparse

import warp as wp

from ...collision import ColliderSet, Contacts, apply_friction
from ...collision.swept_elements import unique_edges
from ...kernels import cuda_layout_on, launch_items, warp_device_of, warp_view
from ...sim.model import ParticleModel
from .kernels import contact as contact_kernels


EDGE_ROUNDS = 8   # edge–edge rounds against mesh colliders per call (twice that with strain-limit passes; see resolve_edges)


class ContactPoints:
    def __init__(self, model: ParticleModel, backend, particle_gain: np.ndarray, hard_indices: np.ndarray,
                 distribution_iterations: int = 3):
        xp = backend.xp
        self.xp = xp
        n = model.particle_count
        blocks, thickness, friction = [], [], []
        self.row_offsets = []          # first point row of every slot
        rows_so_far = 0
        for slot_index, slot in enumerate(model.slots):
            params = model.params[slot_index]
            if slot.embedding is not None:
                block = scipy.sparse.csr_matrix(slot.embedding)
            else:
                rows = np.arange(slot.start, slot.stop)
                block = scipy.sparse.csr_matrix((np.ones(len(rows)), (np.arange(len(rows)), rows)),
                                                shape=(len(rows), n))
            blocks.append(block)
            self.row_offsets.append(rows_so_far)
            rows_so_far += block.shape[0]
            thickness.append(np.full(block.shape[0], params["thickness"]))
            friction.append(params["friction"] * slot.output_maps.get("friction", np.ones(block.shape[0])))
        full = scipy.sparse.vstack(blocks).tocsr()
        movable = np.ones(n)
        movable[hard_indices] = 0.0
        # positions come from the full map (a pinned particle's point is where it is: surfaces and edges
        # touching it have their true shape); corrections reach only movable particles, and points carried
        # only by pinned ones never move (keep)
        matrix = (full @ scipy.sparse.diags(movable)).tocsr()
        matrix.eliminate_zeros()
        support = np.asarray(matrix.sum(axis=1)).ravel()
        keep = support > 1e-12
        self.identity = all(slot.embedding is None for slot in model.slots)
        inverse_gain = np.zeros(n)
        inverse_gain[movable > 0] = 1.0 / particle_gain[movable > 0]
        point_inverse_gain = np.asarray(matrix.multiply(matrix) @ inverse_gain).ravel()
        gain = np.where(keep, 1.0 / np.maximum(point_inverse_gain, 1e-300), 0.0)
        to_device = (lambda m: backend.sparse.csr_matrix(m)) if backend.name != "cpu" else (lambda m: m)
        self.matrix = to_device(full)
        self.transpose = to_device(matrix.T.tocsr())
        self.keep = xp.asarray(keep)
        self.gain = xp.asarray(gain)
        self.thickness = xp.asarray(np.concatenate(thickness))
        self.friction = xp.asarray(np.concatenate(friction))
        self.iterations = 1 if self.identity else distribution_iterations
        self.count = matrix.shape[0]
        self.inverse_gain = xp.ascontiguousarray(xp.where(self.keep, 1.0 / xp.maximum(self.gain, 1e-300), 0.0),
                                                 dtype=xp.float64)
        surface = [slot.surface_triangles + offset for slot, offset in zip(model.slots, self.row_offsets)]
        edges = unique_edges(np.concatenate(surface).astype(np.int64))[0] if surface else np.zeros((0, 2))
        self.edges = xp.asarray(np.ascontiguousarray(edges, np.int32))
        self.edge_view = warp_view(self.edges, wp.int32)
        # the particle a point IS (a row of the identity on a movable particle), else -1 (embedded points)
        own = np.full(self.count, -1, dtype=np.int32)
        single = np.nonzero((np.diff(matrix.indptr) == 1) & keep)[0]
        single = single[matrix.data[matrix.indptr[single]] == 1.0]
        own[single] = matrix.indices[matrix.indptr[single]]
        self.particle_of_point = xp.asarray(own)
        # cloth only (every point is its own particle): the maps are the identity restricted to the movable
        # particles, applied as copies and masks instead of sparse products (~20 products per substep)
        self._movable = xp.asarray(movable)
        self._movable_mask = self._movable > 0
        self._every_point = xp.ones(self.count)     # the forces kernel's "movable" on points (Cᵀ masks pins)
        self.device = warp_device_of(self.gain)
        self._kept_points = xp.nonzero(self.keep)[0]   # the points corrections reach (candidates on a device)
        self.force_kernel = True        # see _forces_in_kernels
        self._candidates_int32 = None   # (candidates, their int32 copy) of the current substep
        self._planes = None   # (candidates, plane point, unit normal, surface motion, μ) of the substep (meshes)
        self._limit_planes = None   # the same planes as (particle int32, plane point, unit normal): contact_planes' form

    @property
    def resident(self) -> bool:
        """Whether the substep runs device-resident (CUDA's layout): fixed work instead of host decisions, whose
        reads of device values would each stall the host."""
        return cuda_layout_on(self.device)

    def points(self, q):
        """Contact point positions (n_c, 3) [m] of particle positions q (n, 3): a new array."""
        return q.copy() if self.identity else self.matrix @ q

    def _scatter(self, values):
        """Cᵀ values: point values (n_c,) or (n_c, 3) summed onto the movable particles that carry them."""
        if not self.identity:
            return self.transpose @ values
        return values * (self._movable[:, None] if values.ndim == 2 else self._movable)

    def distribute(self, q, delta, mask):
        """Particle positions after point corrections ``delta`` (n_c, 3) on points ``mask``."""
        xp = self.xp
        if self.identity:           # each point its own particle: the movable masked points take their delta
            return q + xp.where((mask & self._movable_mask)[:, None], delta, 0.0)
        weight = xp.where(mask, 1.0, 0.0)
        numerator = self._scatter(delta * weight[:, None])
        denominator = self._scatter(weight)
        moved = denominator > 1e-12
        return q + numerator / xp.where(moved, denominator, 1.0)[:, None]

    def _project_points(self, colliders: ColliderSet, points, start):
        projected, contacts = colliders.project(self.xp, points, self.thickness, self.friction, start)
        contacts.mask &= self.keep
        return projected, contacts

    def project(self, colliders: ColliderSet, q, q_start):
        """ResolveCollision of particles q (n, 3) [m] that were at q_start when the substep began (mesh
        colliders keep every point on its starting side): returns (q, Contacts of the points; depth
        summed over the repeats)."""
        total = None
        start = self.points(q_start)
        for _ in range(self.iterations):
            points = self.points(q)
            projected, contacts = self._project_points(colliders, points, start)
            if total is None:
                total = contacts
            else:
                total = merge_contacts(self.xp, total, contacts)
            if not self.resident and not bool(contacts.mask.any()):
                break                       # on a device a repeat with no contact moves nothing: it runs
            q = self.distribute(q, projected - points, contacts.mask)
        return q, total

    def resolve_edges(self, colliders: ColliderSet, q, q_start, rounds: int = EDGE_ROUNDS, relax=None,
                      confirm: bool = True):
        """Edge–edge contact of the objects' surface edges with mesh colliders (collision.mesh) in rounds, each
        followed by the vertex projection. Rounds repeat while a test pass finds some edge that crossed a
        mesh edge during the substep (a crossing left in place would hold the cloth through a thin part
        such as an ear: CCD keeps the sides it is given); a round after the first whose test finds no
        crossing ends the call without moving anything, so the state returned has been tested unless the
        rounds ran out. The first round's test ends the call the same way when no pair lies deeper than
        ``mesh_kernels.DEEP_EDGE_FRACTION`` of its reach: a cloth edge between two vertices that the vertex
        contact holds at their offset sags a few millimetres towards a rim it lies across (a brow, an ear's
        rim), which CCD keeps from crossing; lifting every such sag to the full reach cost a pass, strain-limit
        passes and a vertex projection per call in every resting substep.

        relax(q, frozen (n,) bool) -> q: the solver's strain-limit passes, run after each of the first
        ``rounds`` rounds with the particles of the edges that had crossed held still. Without them the
        rounds stretch the cloth: a crossing that takes several rounds to undo has its points pushed back
        to their side each round and out along the surface normals by the vertex projection after it, and
        on a ridge (a brow, an ear's rim) the ends of an edge walk apart, up to 90 % over rest in 8 rounds
        on the Suzanne scene. The passes take that back between rounds and never undo a crossing's own
        correction. Should crossings remain after them (a crossing that needs a stretched edge to undo),
        up to ``rounds`` more rounds run without passes. confirm False: a round that undid no crossing ends the call
        without the test of its result, for a caller that calls again later in the substep (that call's first test
        runs from the substep start, so it finds and undoes whatever this one's relax and projection made cross;
        the confirming test was one edge pass in three). Returns (q, edge pairs in contact in the last test,
        edges through a mesh: those that had crossed in the last test plus those that already passed
        through at the substep start; both device scalars, for the frame's stats). A round reads one number
        from the device: whether its test found pairs, whether any had crossed and whether any lay deep, packed in
        three bits."""
        if not colliders.has_meshes or self.edges.shape[0] == 0:
            return q, 0, 0
        start = self.points(q_start)
        counts = self.xp.zeros(3, dtype=self.xp.int32)
        for round_index in range(2 * rounds if relax is not None else rounds):
            points = self.points(q)
            delta, touched, counts, crossed_points = colliders.resolve_edges(
                self.xp, start, points, self.edge_view, self.thickness, self.inverse_gain)
            state = int((counts[0] > 0).astype(self.xp.int32) + 2 * (counts[1] > 0).astype(self.xp.int32)
                        + 4 * (counts[3] > 0).astype(self.xp.int32))
            found, crossed, deep = state & 1, state & 2, state & 4
            if not found or (not crossed and (round_index > 0 or not deep)):
                break
            q = self.distribute(q, delta, touched)
            if relax is not None and round_index < rounds:
                q = relax(q, self.particles_of(crossed_points))
            q, _ = self.project(colliders, q, q_start)
            if not confirm and not crossed:
                break
        return q, counts[0], counts[1] + counts[2]

    def edges_crossing_colliders(self, colliders: ColliderSet, q, q_start):
        """(n_c,) bool: the points of surface edges that crossed a mesh collider's edge between q_start and
        q (n, 3) [m] (one test pass of ``resolve_edges``' kernel, nothing moved)."""
        if not colliders.has_meshes or self.edges.shape[0] == 0:
            return self.xp.zeros(self.count, dtype=bool)
        *_, crossed = colliders.resolve_edges(self.xp, self.points(q_start), self.points(q), self.edge_view,
                                              self.thickness, self.inverse_gain)
        return crossed

    def particles_of(self, point_mask):
        """(n,) bool: the movable particles carrying any point of ``point_mask`` (n_c,) bool."""
        return self._scatter(point_mask.astype(self.xp.float64)) > 0

    def candidate_planes(self):
        """The contact planes of the substep's candidate query (``candidates``: mesh colliders) in
        ``contact_planes``' form, or None when it gave none. The strain limit after the iterations keeps points
        above these instead of querying the meshes again at every round: a candidate's plane is the tangent plane
        at the contact offset of the surface near it this substep (its points move less than the query's margin
        during the substep), and a point above its plane is not moved by it."""
        return None if self._planes is None else self._limit_planes

    def near_candidate_planes(self, q, band: float):
        """Where the points of particle positions q (n, 3) [m] lie within (1 + band) × their contact offset of a mesh
        collider, by the contact planes of the substep's candidate query (``candidate_planes``: the tangent plane at
        the contact offset, facing the point's side): (near (n_c,) bool, unit normal (n_c, 3), surface motion
        (n_c, 3) [m] over the substep), zero where not near; None when the query gave no planes."""
        if self._planes is None:
            return None
        xp = self.xp
        candidates, plane_point, normal, motion, _ = self._planes
        height = ((self.points(q)[candidates] - plane_point) * normal).sum(axis=1)
        touching = (xp.abs(normal).sum(axis=1) > 0.0) & (height <= band * self.thickness[candidates])
        near = xp.zeros(self.count, dtype=bool)
        near[candidates] = touching
        near_normal = xp.zeros((self.count, 3), dtype=xp.float64)
        near_normal[candidates] = xp.where(touching[:, None], normal, 0.0)
        near_motion = xp.zeros((self.count, 3), dtype=xp.float64)
        near_motion[candidates] = xp.where(touching[:, None], motion, 0.0)
        return near, near_normal, near_motion

    def contact_planes(self, colliders: ColliderSet, q, q_start, band: float):
        """Contact planes of the points within (1 + band) × their contact offset of a collider at q (n, 3):
        (particle (n_c,) int32, -1 for points that are not a particle of their own; point (n_c, 3) [m] on the
        plane at the contact offset; unit normal (n_c, 3), zero for points not in contact, which makes their
        plane a no-op). One entry per point, so no data-dependent sizes (no device synchronization)."""
        xp = self.xp
        if self._in_kernels(colliders):
            point, normal = colliders.primitive_contact_planes(xp, xp.ascontiguousarray(q, dtype=xp.float64),
                                                               self.thickness, band, self._movable)
            return self.particle_of_point, point, normal
        points = self.points(q)
        reach = self.thickness * (1.0 + band) + 1e-9
        projected, near = colliders.project(xp, points, reach, self.friction, self.points(q_start), lists="band")
        touching = (near.mask & self.keep)[:, None]
        normal = xp.ascontiguousarray(xp.where(touching, near.normal, 0.0), dtype=xp.float64)
        point = xp.ascontiguousarray(projected - (reach - self.thickness)[:, None] * normal, dtype=xp.float64)
        return self.particle_of_point, point, normal

    def apply_friction(self, q, q_start, contacts: Contacts):
        """Position-level Coulomb friction of the points (see collision.apply_friction), distributed (no contact
        moves nothing; only the CPU skips the work)."""
        if not self.resident and not bool(contacts.mask.any()):
            return q
        points = self.points(q)
        corrected = apply_friction(self.xp, points, self.points(q_start), contacts)
        return self.distribute(q, corrected - points, contacts.mask)

    def candidates(self, colliders: ColliderSet, inertial, q_start):
        """Indices of the points that can touch a collider during this substep: closer than their
        contact offset plus a margin of 3× the largest inertial step (the iterations move points
        by about that much). One full query per substep; the force iterations then look at
        these points only. Against mesh colliders the same query gives every candidate its contact plane for
        the iterations (``forces``): the tangent plane at the contact offset of the surface it was pushed from,
        facing the side it started the substep on (no plane: a zero normal). On a device every point that
        corrections reach is a candidate (a point that cannot touch gets an exact zero force): the list's size
        would be a read of device data."""
        xp = self.xp
        self._planes = None
        if self.resident and not colliders.has_meshes:
            return self._kept_points
        points = self.points(inertial)
        start = self.points(q_start)
        margin = 3.0 * xp.abs(points - start).max() + 1e-6 if self.count else 1e-6
        projected, contacts = colliders.project(xp, points, self.thickness + margin, self.friction, start,
                                                lists="candidates")
        near = contacts.mask & self.keep
        candidates = self._kept_points if self.resident else xp.nonzero(near)[0]
        if colliders.has_meshes:
            normal = xp.ascontiguousarray(xp.where(near[:, None], contacts.normal, 0.0)[candidates])
            self._planes = (candidates, xp.ascontiguousarray(projected[candidates] - margin * normal), normal,
                            xp.ascontiguousarray(contacts.surface_motion[candidates], dtype=xp.float64),
                            xp.ascontiguousarray(contacts.friction[candidates], dtype=xp.float64))
            self._limit_planes = (xp.ascontiguousarray(self.particle_of_point[candidates], dtype=xp.int32),
                                  self._planes[1], normal)
        return candidates

    def _forces_in_kernels(self, colliders: ColliderSet) -> bool:
        """Whether forces() runs in a kernel: every collider a primitive (and ``force_kernel``, which tests
        switch off to compare the array path)."""
        return self.force_kernel and not colliders.has_meshes

    def _in_kernels(self, colliders: ColliderSet) -> bool:
        """Whether contact_planes() runs in a kernel: as forces(), and every point its own particle."""
        return self._forces_in_kernels(colliders) and self.identity

    def _candidate_indices(self, candidates):
        """``candidates`` as a contiguous int32 array (kernel input), converted once per substep."""
        if self._candidates_int32 is None or self._candidates_int32[0] is not candidates:
            self._candidates_int32 = (candidates, self.xp.ascontiguousarray(candidates, dtype=self.xp.int32))
        return self._candidates_int32[1]

    def forces(self, colliders: ColliderSet, q, point_force, q_start, candidates):
        """One contact local step on the ``candidates`` points: returns (point forces (m, 3) for the
        candidates, particle forces (n, 3) = Cᵀ f). Against primitives the step runs in one kernel
        (``ColliderSet.primitive_contact_forces``) on the points (cloth: the particles themselves; embedded
        points: C q, their forces then scattered by Cᵀ); against mesh colliders on the candidates' contact planes
        of the substep (``candidates``), also in one kernel. With ``force_kernel`` off (tests) every collider goes
        through ``ColliderSet.project`` and array operations: the exact geometry at every iteration."""
        xp = self.xp
        planes = self._planes
        if self.force_kernel and planes is not None and planes[0] is candidates:
            return self._plane_forces(q, point_force, q_start, planes)
        if self._forces_in_kernels(colliders):
            # cloth: the particles are the points; embedded points (soft bodies): the kernel works on the points
            # C q and every point's force reaches its particles through Cᵀ
            points, start = (q, q_start) if self.identity else (self.points(q), self.points(q_start))
            force, point_space = colliders.primitive_contact_forces(
                xp, self._candidate_indices(candidates), xp.ascontiguousarray(points, dtype=xp.float64),
                xp.ascontiguousarray(start, dtype=xp.float64), xp.ascontiguousarray(point_force, dtype=xp.float64),
                self.gain, self.thickness, self.friction, self._movable if self.identity else self._every_point)
            return force, point_space if self.identity else self._scatter(point_space)
        points = self.points(q)[candidates]
        gain = self.gain[candidates][:, None]
        free = points - point_force / gain
        start_points = self.points(q_start)[candidates]
        projected, contacts = colliders.project(xp, free, self.thickness[candidates], self.friction[candidates],
                                                start_points)
        new_force = xp.zeros_like(points)
        if bool(contacts.mask.any()):
            index = xp.nonzero(contacts.mask)[0]
            k = gain[index]
            normal_force = k * (projected[index] - free[index])
            normal = contacts.normal[index]
            slip = projected[index] - start_points[index] - contacts.surface_motion[index]
            slip = slip - (slip * normal).sum(axis=1)[:, None] * normal
            slip_length = xp.linalg.norm(slip, axis=1)
            limit = contacts.friction[index] * xp.linalg.norm(normal_force, axis=1)
            wanted = k[:, 0] * slip_length
            scale = xp.where(wanted <= limit, 1.0, limit / xp.maximum(wanted, 1e-300))
            new_force[index] = normal_force - (scale[:, None] * k) * slip
        full = xp.zeros((self.count, 3))
        full[candidates] = new_force
        return new_force, self._scatter(full)

    def _plane_forces(self, q, point_force, q_start, planes):
        """``forces`` against the candidates' contact planes of this substep (``candidates``), in one launch
        (``kernels.contact.plane_contact_forces``)."""
        xp = self.xp
        candidates, plane_point, plane_normal, plane_motion, friction = planes
        points, start = (q, q_start) if self.identity else (self.points(q), self.points(q_start))
        force = xp.empty((len(candidates), 3), dtype=xp.float64)
        point_space = xp.zeros((self.count, 3), dtype=xp.float64)
        inputs = [warp_view(self._candidate_indices(candidates), wp.int32),
                  *(warp_view(xp.ascontiguousarray(values, dtype=xp.float64), wp.vec3d)
                    for values in (points, start, point_force)),
                  warp_view(self.gain, wp.float64), warp_view(plane_point, wp.vec3d),
                  warp_view(plane_normal, wp.vec3d), warp_view(plane_motion, wp.vec3d),
                  warp_view(friction, wp.float64),
                  warp_view(self._movable if self.identity else self._every_point, wp.float64)]
        launch_items(contact_kernels.plane_contact_forces, len(candidates), self.device, inputs,
                     [warp_view(force, wp.vec3d), warp_view(point_space, wp.vec3d)], split=True)
        return force, point_space if self.identity else self._scatter(point_space)


def merge_contacts(xp, first: Contacts, second: Contacts) -> Contacts:
    """Contacts of two passes: depths add up, the later normal/motion/μ win where it touched."""
    mask = second.mask
    return Contacts(depth=first.depth + second.depth,
                    normal=xp.where(mask[:, None], second.normal, first.normal),
                    surface_motion=xp.where(mask[:, None], second.surface_motion, first.surface_motion),
                    friction=xp.where(mask, second.friction, first.friction),
                    mask=first.mask | mask)

