"""Contact between PD surfaces: cloth self-collision and contact between cloth and soft bodies.

Works on the collision points y = C q of a ``solvers.pd.contact.ContactPoints`` map (cloth and
directly simulated soft bodies: their particles; lattice-embedded soft bodies: their surface
vertices), so the same pass handles cloth folding onto itself, cloth on a soft body and two soft
bodies touching. Elements are the objects' surfaces (cloth triangles, soft-body boundary) and their
edges. Pairs of one object touch only when it is a cloth with ``self_collision``.

Each pass (``surface_kernels``, Warp kernels on the points' device) finds, against the positions at
the start of the substep, every vertex–triangle and edge–edge pair that either passed through each
other during the substep (CCD of the linear motions) or is closer than the two thicknesses (among the
candidate pairs of lists built once and reused while no point has moved farther than CANDIDATE_MARGIN
from where they were built: a tree query per element then, not per pass), and
restores the separation on the side the pair started on (never read from a winding normal) by
inverse-mass-weighted position corrections, averaged per point (Jacobi). Passes repeat until no
pair is found or ``iterations`` are spent; the pairs the last pass still found passed through each
other are reported as ``self_contacts_left``, so a frame that could not be made intersection-free
says so (layers resting on each other within their thickness are contacts, not failures).
"""

from __future__ import annotations

import numpy as np
import warp as wp

from ..kernels import QUERY_MIN_ITEMS, launch, launch_items, launch_split, warp_device_of, warp_view
from ..sim.model import ParticleModel
from . import surface_kernels
from .swept_elements import CandidateList, SweptElements, unique_edges


ZONE_ROUNDS = 6             # impact-zone rounds per substep at most (each: one test pass, zones moved rigidly)
CROSSED_PAIRS_KEPT = 4096   # rows for the points of pairs found passed through each other (at least one per point)
# how far [m] a collision point may move from where the candidate lists were built before they are built again,
# in units of the largest thickness (and at least CANDIDATE_MARGIN_FLOOR): a larger margin lists more pairs
# that each pass tests, a smaller one rebuilds more often
CANDIDATE_MARGIN = 1.0
CANDIDATE_MARGIN_FLOOR = 1e-4
# a resolve stops once a pass crossed nothing and corrected no pair by more than this fraction of its separation:
# Jacobi averaging leaves resting layers a little inside their separation at every pass, and the passes that
# follow would only shave that residue. Between objects the residue of a body resting on a cloth goes into the
# cloth's stretch under its weight; within one cloth (its folds resting on each other) a fifth of the separation
# is invisible, and the passes that shaved it to a twentieth were a tenth of a draped cloth's substep
SETTLED_ERROR = 0.05
SETTLED_ERROR_WITHIN = 0.2


class SurfaceContact:
    """points: a ContactPoints map (its ``xp`` is the device of every array here); iterations: passes per substep;
    gravity (3,) [m/s²]: its direction tells a body resting on a taut cloth (which the cloth holds up) from a
    taut cloth lying over a body (which it does not push down: ``surface_kernels.pair_inverse_mass``)."""

    def __init__(self, model: ParticleModel, points, iterations: int = 2, gravity=(0.0, 0.0, -9.81)):
        xp = points.xp
        triangles, owner, self_contact = [], [], []
        point_owner = np.zeros(points.count, np.int32)
        for slot_index, slot in enumerate(model.slots):
            offset = points.row_offsets[slot_index]
            rows = (points.row_offsets[slot_index + 1] if slot_index + 1 < len(model.slots) else points.count) - offset
            point_owner[offset:offset + rows] = slot_index
            triangles.append(slot.surface_triangles + offset)
            owner.append(np.full(len(slot.surface_triangles), slot_index))
            self_contact.append(int(slot.kind == "cloth" and bool(model.params[slot_index].get("self_collision"))))
        triangles = np.concatenate(triangles).astype(np.int32)
        triangle_owner = np.concatenate(owner).astype(np.int32)
        edges, edge_triangle = unique_edges(triangles)
        self.xp = xp
        self.points = points
        rest = xp.ascontiguousarray(points.points(xp.asarray(model.rest)), dtype=xp.float64)   # the trees' shape
        rest_view = warp_view(rest, wp.vec3d)
        self.triangles = SweptElements(xp, triangles, rest_view, triangle_owner)
        self.edges = SweptElements(xp, edges, rest_view, triangle_owner[edge_triangle])
        self.point_owner = xp.asarray(point_owner)
        self.host_point_owner = point_owner   # (n_c,) host copy: naming objects needs no device download
        self.several_objects = len(model.slots) > 1   # surfaces of different objects may touch
        self.no_holding = xp.zeros(points.count, dtype=xp.int32)
        self.self_contact = xp.asarray(np.asarray(self_contact, np.int32))
        gain = points.gain
        self.inverse_mass = xp.ascontiguousarray(
            xp.where(gain > 0, 1.0 / xp.maximum(gain, 1e-300), 0.0), dtype=xp.float64)   # ∝ 1/m (h² cancels)
        self.thickness = xp.ascontiguousarray(points.thickness, dtype=xp.float64)
        self.largest_thickness = float(points.thickness.max()) if points.count else 0.0
        self.iterations = iterations
        gravity = np.asarray(gravity, dtype=np.float64)
        strength = float(np.linalg.norm(gravity))
        self.down = wp.vec3d(*(gravity / strength if strength > 0.0 else np.zeros(3)))
        self.count = points.count
        self.device = warp_device_of(self.point_owner)
        self.left = 0      # pairs the last pass of the latest resolve found passed through each other
        self._crossed = 0
        self.left_objects: list[str] = []   # ids of the objects those pairs touch
        self.crossed_pairs = xp.zeros((max(CROSSED_PAIRS_KEPT, points.count), 4), dtype=xp.int32)
        self.slot_ids = [slot.id for slot in model.slots]
        self.margin = max(CANDIDATE_MARGIN * self.largest_thickness, CANDIDATE_MARGIN_FLOOR)
        self.point_candidates = CandidateList(xp, points.count)
        self.edge_candidates = CandidateList(xp, self.edges.count)
        self.candidate_builds = 0   # builds of the candidate lists so far (statistics, tests)
        self._start = None          # a copy of the particle positions at the substep start that y0 and the lists are for
        self._y0 = None             # (n_c, 3) collision points at that start
        self._built = None          # (n_c, 3) collision points at the lists' build (None: not built yet)
        self._built_start = None    # (n_c, 3) the substep start's collision points at that build

    @staticmethod
    def wanted(model: ParticleModel) -> bool:
        """Run the pass when there are several PD objects or a cloth asks for self-collision."""
        return len(model.slots) > 1 or any(
            slot.kind == "cloth" and model.params[i].get("self_collision") for i, slot in enumerate(model.slots))

    def resolve(self, xp, positions, start, held=None, relax=None):
        """Separate surfaces: positions, start (n, 3) [m] particle positions now and at the substep start,
        on ``xp``'s device. Returns (positions, number of vertex–triangle and edge–edge contacts corrected in
        the worst pass); ``self.left`` holds the pairs the last pass still found passed through each other
        (resting layers in contact are not counted) and ``self.left_objects`` the ids of the objects with
        pairs in that pass.

        held: optional function of the particle positions giving the (n,) bool particles that hold against
        other objects (a taut cloth under a heavy body), asked before every pass; in contact with another
        object that weighs on it such a point does not move (``surface_kernels.pair_inverse_mass``).
        relax: optional function of the particle positions run before every pass but the first (the cloth
        strain limit: a cloth that a heavy body stretched is pulled back, then holds it), so the last word is
        the contact's."""
        self.left = 0
        self.left_objects = []
        if self.triangles.count == 0 or self.iterations == 0:
            return positions, 0
        y0 = self._start_points(xp, start)
        total = 0
        for iteration in range(self.iterations):
            if iteration > 0 and relax is not None:
                positions = relax(positions)
            y = xp.ascontiguousarray(self.points.points(positions), dtype=xp.float64)
            delta, touched, count, unsettled = self._pass(xp, y, y0, self._holding(xp, held, positions))
            total = max(total, count)
            self.left = self._crossed
            if count == 0:
                break
            positions = self.points.distribute(positions, delta, touched)
            if int(unsettled) == 0:
                break
        if self.left:
            positions = self._impact_zones(xp, positions, y0)
        return positions, total

    def _holding(self, xp, held, positions):
        """(n_c,) int32 on the device: 1 at the points of particles that ``held(positions)`` (n,) bool marks as
        holding against other objects (``_pass``); None without ``held``."""
        if held is None:
            return None
        holding = self.points.points(xp.asarray(held(positions), dtype=xp.float64)[:, None])[:, 0] > 0.5
        return xp.ascontiguousarray(holding.astype(xp.int32))

    def crossed_since(self, xp, positions, start) -> int:
        """Pairs that passed through each other between particle positions ``start`` and ``positions``
        (n, 3) [m] (one test pass, nothing moved): what a later constraint (a collider push) undid of the
        last resolve. Sets ``left`` to that number."""
        y0 = self._start_points(xp, start)
        y = xp.ascontiguousarray(self.points.points(positions), dtype=xp.float64)
        self._pass(xp, y, y0)
        self.left = self._crossed
        self.left_objects = self._objects_of(self._crossed_pairs_found()) if self.left else []
        return self._crossed

    def crossed_points(self, xp, positions, start):
        """(n_c,) bool on ``xp``'s device: the points of pairs that passed through each other between particle
        positions ``start`` and ``positions`` (n, 3) [m] (one test pass, nothing moved, nothing downloaded);
        every point when there were more such pairs than the record keeps."""
        y0 = self._start_points(xp, start)
        y = xp.ascontiguousarray(self.points.points(positions), dtype=xp.float64)
        self._pass(xp, y, y0)
        crossed = xp.zeros(self.count, dtype=bool)
        if self._crossed > self.crossed_pairs.shape[0]:
            crossed[:] = True
        elif self._crossed:
            crossed[self._crossed_pairs_kept().ravel()] = True
        return crossed

    def _objects_of(self, pairs: np.ndarray) -> list[str]:
        """Ids of the objects whose points appear in ``pairs`` (k, 4) host point indices."""
        owners = np.unique(self.host_point_owner[pairs.ravel()])
        return [self.slot_ids[slot_index] for slot_index in owners]

    def _impact_zones(self, xp, positions, y0):
        """Pairs still passed through each other after the Jacobi passes (Bridson et al. 2002's impact
        zones, translation only): the points of every such pair are joined into zones (connected
        components over all pairs found so far) and each zone moves as one body, by the mass-weighted
        mean of its points' displacements over the substep (a zone holding pinned points moves with
        them). Points that did not pass through each other at the start cannot after a common
        translation, so a zone ends free of crossings inside it; the test is repeated while zones meet
        other points, ZONE_ROUNDS times at most. Everything stays on the device (the zones by label
        propagation in a kernel); only the ids of objects with pairs left at the end are read back.
        Sets ``left`` (pairs found in the last test) and ``left_objects``; returns the positions."""
        found = []
        for _ in range(ZONE_ROUNDS):
            y = xp.ascontiguousarray(self.points.points(positions), dtype=xp.float64)
            self._pass(xp, y, y0)
            self.left = self._crossed
            if self._crossed == 0:
                break
            found.append(self._crossed_pairs_kept().copy())
            positions = self._move_zones(xp, positions, y, y0, xp.concatenate(found))
        if self.left:
            self.left_objects = self._objects_of(self._to_host(xp.concatenate(found)))
        return positions

    def _crossed_pairs_kept(self):
        """(k, 4) device int32 view: the points of the pairs the last pass found passed through each other,
        as many as the record kept."""
        return self.crossed_pairs[:min(self._crossed, self.crossed_pairs.shape[0])]

    def _crossed_pairs_found(self) -> np.ndarray:
        """(k, 4) host int array: ``_crossed_pairs_kept`` read back."""
        return np.asarray(self._to_host(self._crossed_pairs_kept()), np.int64)

    def _to_host(self, array):
        return array.get() if hasattr(array, "get") else array

    def zone_labels(self, xp, pairs):
        """(n_c,) int32 on the device: each point's impact zone, named by the smallest point index in it
        (points in no pair keep their own index); pairs (k, 4) int32 device point indices."""
        label = xp.arange(self.count, dtype=xp.int32)
        changed = xp.zeros(1, dtype=xp.int32)
        pairs = xp.ascontiguousarray(pairs, dtype=xp.int32)
        views = [warp_view(pairs, wp.int32)]
        label_view, changed_view = warp_view(label, wp.int32), warp_view(changed, wp.int32)
        while True:
            changed[:] = 0
            launch_items(surface_kernels.join_zones, pairs.shape[0], self.device, views, [label_view, changed_view])
            if int(changed[0]) == 0:
                return label

    def _move_zones(self, xp, positions, y, y0, pairs):
        """Positions after moving every impact zone of ``pairs`` (k, 4) device point indices rigidly
        (translation); y, y0: (n_c, 3) the collision points now and at the substep start."""
        zone = self.zone_labels(xp, pairs)
        mask = xp.zeros(self.count, dtype=bool)
        mask[pairs.ravel()] = True
        involved = xp.nonzero(mask)[0]
        zone = zone[involved]
        displacement = y[involved] - y0[involved]
        inverse_mass = self.inverse_mass[involved]
        pinned = (inverse_mass <= 0.0).astype(xp.float64)
        mass = xp.where(inverse_mass > 0.0, 1.0 / xp.maximum(inverse_mass, 1e-300), 0.0)
        pinned_count = xp.bincount(zone, weights=pinned, minlength=self.count)
        mass_sum = xp.bincount(zone, weights=mass, minlength=self.count)
        moved = xp.stack([xp.where(pinned_count > 0,
                                   xp.bincount(zone, weights=pinned * displacement[:, axis], minlength=self.count)
                                   / xp.maximum(pinned_count, 1.0),
                                   xp.bincount(zone, weights=mass * displacement[:, axis], minlength=self.count)
                                   / xp.maximum(mass_sum, 1e-300)) for axis in range(3)], axis=1)
        delta = xp.zeros_like(y)
        delta[involved] = y0[involved] + moved[zone] - y[involved]
        return self.points.distribute(positions, delta, mask)

    def _start_points(self, xp, start):
        """The collision points (n_c, 3) at the substep start ``start`` (n, 3) [m], computed once per substep
        (every call of a substep passes the same start)."""
        if self._start is None or self._start.shape != start.shape or not bool(xp.array_equal(self._start, start)):
            self._start = xp.array(start, dtype=xp.float64)
            self._y0 = xp.ascontiguousarray(self.points.points(start), dtype=xp.float64)
        return self._y0

    def _candidates(self, xp, y, y0) -> None:
        """Candidate lists that hold every pair a pass from y0 to y (n_c, 3) [m] can find: the lists built
        last when no point's start and no point's current position lies farther than the margin (per axis)
        from where they were at the build, else new ones. An element's box over y0 → y grown by the pad then
        lies inside its box at the build grown by the pad and the margin, so no pair is missed; the extra
        pairs are too far apart to touch and add nothing. Resting layers keep their lists over substeps."""
        if self._built is not None and self._built_start.shape == y0.shape and float(
                xp.maximum(xp.abs(y - self._built).max(), xp.abs(y0 - self._built_start).max())) <= self.margin:
            return
        self._built = xp.array(y, dtype=xp.float64)
        self._built_start = xp.array(y0, dtype=xp.float64)
        start_view, built_view = warp_view(self._built_start, wp.vec3d), warp_view(self._built, wp.vec3d)
        reach = self.largest_thickness + 1e-9 + self.margin
        self.triangles.refit(start_view, built_view, reach)
        self.edges.refit(start_view, built_view, reach)
        self_contact = warp_view(self.self_contact, wp.int32)
        if self.triangles.bvh is not None:
            self.point_candidates.fill(lambda found, counts: launch_split(
                surface_kernels.point_triangle_candidates, self.count, self.device, [],
                [self.triangles.bvh.id, start_view, built_view, self.triangles.index_view, self.triangles.owner_view,
                 warp_view(self.point_owner, wp.int32), self_contact, reach, found, counts],
                min_items=QUERY_MIN_ITEMS))
        if self.edges.bvh is not None:
            self.edge_candidates.fill(lambda found, counts: launch_split(
                surface_kernels.edge_edge_candidates, self.edges.count, self.device, [],
                [self.edges.bvh.id, start_view, built_view, self.edges.index_view, self.edges.owner_view,
                 self_contact, reach, found, counts], min_items=QUERY_MIN_ITEMS))
        self.candidate_builds += 1

    def _pass(self, xp, y, y0, holding=None):
        """One Jacobi pass: (correction (n_c, 3) [m], touched (n_c,) bool, number of contacts, the number of those
        that had crossed or were corrected by more than SETTLED_ERROR of their separation, SETTLED_ERROR_WITHIN
        within one object, as a device scalar).
        holding: (n_c,) int32, 1 at the points that hold against other objects (None: none): against an object
        that weighs on them they do not move (``surface_kernels.pair_inverse_mass``)."""
        n = y.shape[0]
        self._candidates(xp, y, y0)
        start_view, current_view = warp_view(y0, wp.vec3d), warp_view(y, wp.vec3d)
        correction = xp.zeros((n, 3), dtype=xp.float64)
        count = xp.zeros(n, dtype=xp.int32)
        contacts = xp.zeros(4, dtype=xp.int32)
        outputs = [warp_view(correction, wp.vec3d), warp_view(count, wp.int32), warp_view(contacts, wp.int32),
                   warp_view(self.crossed_pairs, wp.int32)]
        thickness, inverse_mass = warp_view(self.thickness, wp.float64), warp_view(self.inverse_mass, wp.float64)
        holds = warp_view(self.no_holding if holding is None else holding, wp.int32)
        masses = [thickness, inverse_mass, holds, warp_view(self.point_owner, wp.int32), self.down, SETTLED_ERROR,
                  SETTLED_ERROR_WITHIN]
        launch(surface_kernels.point_triangle_contacts, n, device=self.device,
               inputs=[start_view, current_view, self.triangles.index_view, *masses,
                       *self.point_candidates.views(), *outputs])
        launch(surface_kernels.edge_edge_contacts, self.edges.count, device=self.device,
               inputs=[start_view, current_view, self.edges.index_view, *masses,
                       *self.edge_candidates.views(), *outputs])
        # one read: the pairs found (point–triangle and edge–edge) and, above bit 32, those that had crossed
        packed = int(contacts[0].astype(xp.int64) + contacts[1].astype(xp.int64) + (contacts[2].astype(xp.int64) << 32))
        found, self._crossed = packed & 0xFFFFFFFF, packed >> 32
        touched = count > 0
        return correction / xp.maximum(count, 1)[:, None], touched, found, contacts[3]
