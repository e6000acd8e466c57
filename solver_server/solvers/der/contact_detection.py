"""Contact detection of one DER time step (seed 000 §3, Algorithm 2's collision detection): which pairs of rod
edges and which vertices and edges against colliders take part in the step's contact problem.

* Edge–edge contacts between rod edges that do not share a vertex and have a free vertex: the broad phase's hash
  grid (kernels.pairs) over the edges' swept bounding spheres and boxes, queried by kernels that run the narrow
  phase on each candidate (kernels.ccd: coplanarity times of seed eq. 4.1 plus the end points of the step, segment
  distance below r_a + r_b + thickness) and list the hits.
* Vertex–collider contacts: CCD along each vertex's path (collider_ccd.py), and the colliders' signed
  distances at the predicted end positions for vertices that touch nothing on the way.
* Rod edges against a mesh collider's edges (kernels.ccd over the mesh's edge BVH).

The first path (``detect``) is the motion x_t → x_t + h v¹ of the first iterate; the end check
(``end_contacts``, for ``StepContacts.relinearize``) tests the end positions the settled loop predicts.
Every result is a ContactSet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import warp as wp

from ...kernels import cuda_layout_on, int32_view, launch, launch_items, launch_split, warp_device_of, warp_view
from ...kernels.segments import nearest_marked
from .collider_ccd import swept_distance_touches, swept_mesh_touches
from .contact_set import ContactSet, normalize, rows_dot
from .frames import cross3, row_lengths
from .geometry import overlap_far_end, segment_closest_points
from .kernels import ccd as ccd_kernels
from .model import index_view

# smallest summed |barycentric weight| of free vertices for a pair contact to be solved (see _detect_edges)
KINEMATIC_CONTACT_WEIGHT = 1e-3
# edge pairs at a smaller angle than this (its sine) get a second contact at the far end of the stretch along
# which they touch (ContactDetector._far_end_contacts)
PARALLEL_SINE = 0.1


class ContactDetector:
    """Finds the contacts of one step of ``solver`` (a ContactSolver: model, colliders, settings) from the start
    positions x_t (N, 3) [m]; ``kinematic`` (KinematicVertices) the step's kinematic vertices, ``h`` [s] the step.
    ``unreachable_of`` {collider index: (N,) bool} and ``unreachable_by_collider`` {collider index: count} hold
    the free vertices only a sunk kinematic point could bring out of each collider (``_unreachable``)."""

    def __init__(self, solver, start_positions, kinematic: "KinematicVertices", h: float):
        self.solver, self.xp, self.model = solver, solver.xp, solver.model
        self.start_positions = start_positions
        self.kinematic = kinematic
        self.vertex_fixed = kinematic.vertex_fixed
        self.h = h
        self.unreachable_of = {}
        self.unreachable_by_collider = {}

    def detect(self, velocity) -> ContactSet | None:
        """The contacts along the first path x_t → x_t + h ``velocity`` (N, 3) [m/s], with each object's
        parameters (``ContactSolver.per_object_contacts``), or None when there are none."""
        settings = self.solver.settings
        x0 = self.start_positions
        x1 = x0 + self.h * velocity
        parts = []
        if settings.self_collision:
            parts.append(self._detect_edges(x0, x1))
        for number, collider in enumerate(self.solver.colliders):
            parts.append(self._detect_collider(collider, number, x0, x1, velocity))
            if collider.mesh_geometry() is not None:
                movable = ~self.vertex_fixed & ~self.unreachable_of[number]
                parts.append(self._mesh_edge_contacts(collider, number, x0, x1, movable, end=False))
        return self._gathered(parts)

    def end_contacts(self, x1) -> ContactSet | None:
        """The contacts closer than their contact distance (less the tolerance) at the end positions x1 (N, 3)
        [m] the settled loop predicts, and of the vertices whose path x_t → x1 reaches a collider; None when
        there are none."""
        x0 = self.start_positions
        return self._gathered([self._end_edge_contacts(x0, x1), *self._end_collider_contacts(x0, x1)])

    def _gathered(self, parts) -> ContactSet | None:
        found = ContactSet.concatenate(self.xp, parts)
        return None if found is None else self.solver.per_object_contacts(found, self.h)

    def _edge_pair_hits(self, x0, x1, end_check: bool = False):
        """The edge pairs (no shared vertex, not all four vertices kinematic) that come within their limit while the
        points move x0 → x1 (N, 3) [m]: (1 + proximity) × the contact distance r_a + r_b + thickness on the path, or
        with ``end_check`` the contact distance less end_penetration_tolerance × the smaller radius (at rest at x1:
        pass x0 = x1). Returns (ea, eb (n,) int64, their first vertices va, vb, contact distances (n,) [m],
        closest (n, 4): (τ, s, t, distance) of each pair's nearest approach), sorted by (ea, eb), or None.

        One launch gives every edge its swept sphere and box (``kernels.ccd.swept_edge_bounds``); the broad phase's
        hash grid is built over the spheres (one read: the largest radius, its cell size); the hits are counted
        and then written at the counts' prefix sums by kernels that query the grid, skip kinematic pairs and run
        the narrow phase (``kernels.ccd.edge_hits``, counting then filling: one read, their number; the counting
        pass keeps each edge's first hits, ``ContactSolver.kept_hits``, and the filling pass takes them from there
        instead of running the query and the narrow phase again)."""
        xp, model, settings = self.xp, self.model, self.solver.settings
        n_edges = model.n_edges
        if n_edges == 0:
            return None
        device = warp_device_of(x1)
        points = [warp_view(xp.ascontiguousarray(x, dtype=xp.float64), wp.vec3d) for x in (x0, x1)]
        edge_vertex = index_view(model, "edge_vertex")
        edge_radius = warp_view(xp.ascontiguousarray(model.edge_radius, dtype=xp.float64), wp.float64)
        reach_scale = 1.0 + settings.proximity
        centre, lower, upper = (xp.empty((n_edges, 3)) for _ in range(3))
        radius = xp.empty(n_edges)
        launch(ccd_kernels.swept_edge_bounds, n_edges, device=device, inputs=[
            *points, edge_vertex, edge_radius, float(settings.thickness), reach_scale, warp_view(centre, wp.vec3d),
            warp_view(radius, wp.float64), warp_view(lower, wp.vec3d), warp_view(upper, wp.vec3d)])
        largest = float(radius.max())
        grid, chain_of, order_of = self.solver.edge_pairs.grid(centre, largest)
        shared = [grid, warp_view(centre, wp.vec3d), warp_view(radius, wp.float64), largest, chain_of, order_of,
                  warp_view(lower, wp.vec3d), warp_view(upper, wp.vec3d), *points, edge_vertex, edge_radius,
                  int32_view(xp, self.vertex_fixed), float(settings.thickness), reach_scale,
                  float(settings.end_penetration_tolerance), int(end_check)]
        counts = xp.empty(n_edges, dtype=xp.int32)
        count_view = warp_view(counts, wp.int32)
        kept = self.solver.kept_hits(n_edges)
        launch_split(ccd_kernels.edge_hits, n_edges, device, [], [
            *shared, 0, count_view, count_view, *kept, warp_view(xp.empty((0, 2), dtype=xp.int32), wp.int32),
            warp_view(xp.empty((0, 4)), wp.vec4d)])
        ends = xp.cumsum(counts, dtype=xp.int32)
        total = int(ends[-1])               # one read: the hits' count (none: no contact)
        if total == 0:
            return None
        pairs = xp.empty((total, 2), dtype=xp.int32)
        closest = xp.empty((total, 4), dtype=xp.float64)
        launch_split(ccd_kernels.edge_hits, n_edges, device, [], [
            *shared, 1, warp_view(xp.ascontiguousarray(ends - counts), wp.int32), count_view, *kept,
            warp_view(pairs, wp.int32), warp_view(closest, wp.vec4d)])
        ea, eb = pairs[:, 0].astype(xp.int64), pairs[:, 1].astype(xp.int64)
        va, vb = model.edge_vertex[ea], model.edge_vertex[eb]
        return ea, eb, va, vb, model.edge_radius[ea] + model.edge_radius[eb] + settings.thickness, closest

    def _without_kinematic(self, found, wanted=None):
        """The ContactSet ``found`` without the contacts carried (almost) only by kinematic vertices, e.g.
        one strand's clamped root edge touching another's clamped second point: their response J A⁻¹ Jᵀ is
        (nearly) zero; with ``wanted`` (n,) bool, only the rows it marks. None when no row is left. One read of
        the device: the number kept."""
        xp = self.xp
        free_weight = xp.sum(xp.abs(found.weights) * ~self.vertex_fixed[found.vertices], axis=1)
        kept = free_weight > KINEMATIC_CONTACT_WEIGHT
        rows = xp.nonzero(kept if wanted is None else kept & wanted)[0]
        return found.subset(rows) if rows.shape[0] else None

    def _detect_edges(self, x0, x1):
        xp, model = self.xp, self.model
        # the narrow phase (kernels.ccd) inside the broad phase's query: the prefilter (the segments' distance
        # shrinks by at most the largest relative motion of an endpoint of A against one of B, so strands moving
        # together are not tested further), the coplanarity times (seed eq. 4.1) and the closest points at τ = 0, 1
        # and those times
        hits = self._edge_pair_hits(x0, x1)
        if hits is None:
            return None
        ea, eb, va, vb, contact_distance, closest = hits
        tau = closest[:, 0]
        points0 = [x0[va], x0[va + 1], x0[vb], x0[vb + 1]]
        motion = [x1[va] - points0[0], x1[va + 1] - points0[1], x1[vb] - points0[2], x1[vb + 1] - points0[3]]
        # contact point and normal from the closest points at the START of the step, where the strands are
        # apart even when the predicted motion crosses them; duplicate pairs around a shared vertex then
        # describe the very same constraint.  Touching at the start: normal of the two lines at contact time.
        s, t, distance0 = segment_closest_points(xp, *points0)
        start_a = points0[0] + s[:, None] * (points0[1] - points0[0])
        start_b = points0[2] + t[:, None] * (points0[3] - points0[2])
        # (every row computed, the touching ones taken: no read of which touch)
        touching = (distance0 < 1e-3 * contact_distance)[:, None]
        at = [p0 + tau[:, None] * m for p0, m in zip(points0, motion)]
        normal = xp.where(touching, cross3(xp, at[1] - at[0], at[3] - at[2]), start_a - start_b)
        degenerate = touching & (xp.linalg.norm(normal, axis=1) < 1e-12)[:, None]
        normal = normalize(xp, xp.where(degenerate, xp.asarray([0.0, 0.0, 1.0]), normal))
        normal = xp.where((rows_dot(xp, start_a - start_b, normal) < 0.0)[:, None], -normal, normal)
        keys = ea * model.n_edges + eb
        closest = self._edge_contacts(ea, eb, va, vb, s, t, normal, start_a - start_b, contact_distance, keys)
        far, far_wanted = self._far_end_contacts(ea, eb, va, vb, s, normal, points0, motion, contact_distance, keys)
        wanted = xp.concatenate((xp.ones(ea.shape[0], dtype=bool), far_wanted))
        return self._without_kinematic(ContactSet.concatenate(xp, [closest, far]), wanted)

    def _edge_contacts(self, ea, eb, va, vb, s, t, normal, separation, contact_distance, keys):
        """The ContactSet of edge–edge contacts at parameters s, t (n,) of edges ea, eb (n,) with first
        vertices va, vb; normal (n, 3) unit, from B to A; separation (n, 3) [m]: A's point − B's point at the
        start of the step."""
        xp, model = self.xp, self.model
        n = va.shape[0]
        start_gap = rows_dot(xp, separation, normal)
        return ContactSet(vertices=xp.stack((va, va + 1, vb, vb + 1), axis=1),
                          weights=xp.stack((1.0 - s, s, -(1.0 - t), -t), axis=1), kind_edge=xp.ones(n, dtype=bool),
                          normal=normal, target_normal=(contact_distance - start_gap) / self.h,
                          surface_velocity=xp.zeros((n, 3)), mu=xp.full(n, self.solver.settings.friction),
                          radius_scale=xp.minimum(model.edge_radius[ea], model.edge_radius[eb]), keys=keys)

    def _far_end_contacts(self, ea, eb, va, vb, s, normal, points0, motion, contact_distance, keys):
        """Second contacts of (nearly) parallel edge pairs that lie along each other: the closest points pin
        one end of the stretch where they touch, and nothing stops the other end from closing in when the
        strands turn during the step (at a strand's end no neighbouring edge pair covers it).  A contact at
        the far end of that stretch (geometry.overlap_far_end), wanted when it is a quarter edge or more away and
        within reach during the step.  Keys: −(pair key) − 1.  Returns (the ContactSet of every pair's far end,
        which of them are wanted (n,) bool): the caller keeps the wanted rows in its one selection."""
        xp, settings = self.xp, self.solver.settings
        axis_a, axis_b = points0[1] - points0[0], points0[3] - points0[2]
        cross = cross3(xp, axis_a, axis_b)
        sine_squared = rows_dot(xp, cross, cross) / (rows_dot(xp, axis_a, axis_a) * rows_dot(xp, axis_b, axis_b))
        s_far, t_far = overlap_far_end(xp, *points0, s)
        start_a = points0[0] + s_far[:, None] * axis_a
        start_b = points0[2] + t_far[:, None] * axis_b
        end_a = start_a + (1.0 - s_far)[:, None] * motion[0] + s_far[:, None] * motion[1]
        end_b = start_b + (1.0 - t_far)[:, None] * motion[2] + t_far[:, None] * motion[3]
        nearest = xp.minimum(xp.linalg.norm(start_a - start_b, axis=1), xp.linalg.norm(end_a - end_b, axis=1))
        wanted = (sine_squared < PARALLEL_SINE ** 2) & (xp.abs(s_far - s) >= 0.25) \
            & (nearest < (1.0 + settings.proximity) * contact_distance)
        separation = start_a - start_b
        # apart at the start: the normal of the far end's own points; touching there: the pair's normal
        length = xp.linalg.norm(separation, axis=1)
        own = length >= 1e-3 * contact_distance
        far_normal = xp.where(own[:, None], separation / xp.maximum(length, 1e-300)[:, None], normal)
        return self._edge_contacts(ea, eb, va, vb, s_far, t_far, far_normal, separation, contact_distance,
                                   -keys - 1), wanted

    def _collider_keys(self, number, vertices, end: bool = False):
        """Keys of vertex–collider contacts, after every edge-pair key (edge pairs: e_a · E + e_b, e_a < e_b); those
        of the end path (``relinearize``) after those of the first path."""
        model = self.model
        slot = number + (len(self.solver.colliders) if end else 0)
        return model.n_edges * model.n_edges + slot * model.n_vertices + vertices

    def _collider_contacts(self, collider, index, normal, target_normal, surface_velocity, radius, keys):
        """The ContactSet of vertex contacts with a collider: vertices index (k,), unit normals (k, 3),
        normal target velocities (k,) [m/s], the surface's velocities (k, 3) [m/s], vertex radii (N,) [m];
        μ is the mean of the hair's collider friction and the collider's own, where both are given."""
        xp, settings = self.xp, self.solver.settings
        given = [value for value in (settings.collider_friction, collider.friction) if value is not None]
        mu = sum(given) / len(given) if given else 0.3
        n = index.shape[0]
        weights = xp.zeros((n, 4))
        weights[:, 0] = 1.0
        return ContactSet(vertices=xp.stack((index, index, index, index), axis=1), weights=weights,
                          kind_edge=xp.zeros(n, dtype=bool), normal=normal, target_normal=target_normal,
                          surface_velocity=surface_velocity, mu=xp.full(n, float(mu)), radius_scale=radius[index],
                          keys=keys)

    def _detect_collider(self, collider, number, x0, x1, velocity):
        """Vertex contacts with one collider: CCD hits of vertices whose path reaches the collider during the
        step (collider_ccd.py) and, for the other vertices, the end-of-step test at x1; selected together (one
        read of the device: their number)."""
        xp, settings = self.xp, self.solver.settings
        radius = self.solver.vertex_radius
        contact_distance = radius + collider.thickness + settings.thickness
        band = (1.0 + settings.proximity) * contact_distance
        self.unreachable_of[number] = self._unreachable(collider, number, x0, x1, contact_distance)
        movable = ~self.vertex_fixed & ~self.unreachable_of[number]
        parts = []
        if settings.collider_ccd:
            if collider.mesh_motion() is None:
                touches = swept_distance_touches(xp, collider, x0, x1, movable, band, self.h)
            else:
                touches = swept_mesh_touches(xp, collider.mesh_geometry(), x0, x1, movable, band, self.h)
            movable = movable & ~touches.hit
            # keep the end position contact_distance in front of the plane touched first
            parts.append(self._touch_contacts(touches, contact_distance))
        parts.append(self._end_position_contacts(collider, x1, velocity, movable, band, contact_distance))
        selected = self._selected(parts)
        if selected is None:
            return None
        index, normal, target, surface_velocity = selected
        return self._collider_contacts(collider, index, normal, target, surface_velocity, radius,
                                             self._collider_keys(number, index))

    def _touch_contacts(self, touches, contact_distance):
        """(touched (N,) bool, rows → (unit normals, normal target velocities [m/s], surface velocities)) of the
        first touches ``touches`` (collider_ccd.VertexTouches): the end position kept ``contact_distance`` (N,) [m]
        in front of the plane touched first."""
        def contacts(rows):
            normal, start_gap, surface_velocity = touches.planes(rows)
            return normal, (contact_distance[rows] - start_gap) / self.h, surface_velocity
        return touches.hit, contacts

    def _selected(self, parts):
        """The vertex contacts of ``parts`` [(mask (N,) bool, rows → (normals (k, 3), targets (k,), surface velocities
        (k, 3)))], part after part, each in vertex order: (vertices (m,), normals, targets, surface velocities), or
        None. One read of the device (their number): every part's columns are made for every selected row and each
        row takes its own part's."""
        xp = self.xp
        count = parts[0][0].shape[0]
        rows = xp.nonzero(xp.concatenate([mask for mask, _ in parts]) if len(parts) > 1 else parts[0][0])[0]
        if rows.shape[0] == 0:
            return None
        vertex = rows % count
        columns = None
        for number, (_, contacts) in enumerate(parts):
            made = contacts(vertex)
            if columns is None:
                columns = made
                continue
            own = rows // count == number
            columns = tuple(xp.where(own[:, None] if new.ndim == 2 else own, new, old)
                            for new, old in zip(made, columns))
        return (vertex, *columns)

    def _end_position_contacts(self, collider, x1, velocity, movable, reach, contact_distance):
        """Contacts of the ``movable`` (N,) vertices whose predicted end positions x1 (N, 3) [m] (velocity (N, 3)
        [m/s]) lie nearer to the collider than ``reach`` (N,) [m]: (which vertices (N,) bool, rows → (unit normals
        (k, 3), normal target velocities (k,) [m/s], surface velocities (k, 3) [m/s])). The end-of-step gap is
        linearized at the predicted position, d(x_t + h v) ≈ d1 + h n·(v − v¹); a vertex predicted inside the
        solid comes out by at most recovery_speed · h in this step."""
        xp = self.xp
        # only vertices nearer than their reach count: the query searches within the largest reach (a host bound)
        settings = self.solver.settings
        largest_reach = max(1.0, 1.0 + settings.proximity) * (self.solver.largest_vertex_radius + collider.thickness
                                                              + settings.thickness)
        distance, normal = collider.near_distance(xp, x1, largest_reach)

        def contacts(rows):
            unit = normalize(xp, normal[rows])
            surface_velocity = collider.velocity(xp, x1[rows], self.h)
            relative_now = rows_dot(xp, velocity[rows] - surface_velocity, unit)
            depth_limited = xp.maximum(distance[rows], -self.solver.settings.recovery_speed * self.h)
            return unit, relative_now + (contact_distance[rows] - depth_limited) / self.h, surface_velocity

        return (distance < reach) & movable, contacts

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
        # only the kinematic vertices nearest to a free vertex can leave one unreachable: their depths alone
        fixed, fixed_index = self.kinematic.vertex_fixed, self.kinematic.beside_free
        none = xp.zeros(model.n_vertices, dtype=bool)
        if fixed_index.shape[0] == 0:
            return none
        depth = collider.depth_inside(xp, x1[fixed_index])
        if not cuda_layout_on(warp_device_of(depth)) and not bool((depth > 0.0).any()):
            return none             # nothing sunk (a free read on the CPU; a device computes the empty answer)
        n = model.n_vertices
        depth_of = xp.zeros(n)
        depth_of[fixed_index] = depth
        strand = model.vertex_strand
        first = model.strand_offsets[strand]                 # (N,) first vertex of each vertex's strand
        end = model.strand_offsets[strand + 1]               # (N,) one past its last vertex
        kinematic_before, kinematic_after = self.kinematic.nearest
        sides = []
        for kinematic, valid in ((kinematic_before, kinematic_before >= first), (kinematic_after, kinematic_after < end)):
            nearest = xp.where(valid, kinematic, 0)
            sides.append((nearest, valid & (depth_of[nearest] > 0.0)))
        resident = cuda_layout_on(warp_device_of(depth))
        pressed = (sides[0][1] | sides[1][1]) & ~fixed       # free vertices whose nearest kinematic vertex is sunk
        if not resident and not bool(pressed.any()):
            return none             # a sunk kinematic vertex with no free vertex beside it (a root on the skin)
        if resident:
            inside = collider.depth_inside(xp, x0) > 0.0
        else:
            # the inside test (a winding number a point) only on the strands it can matter for
            tested = xp.zeros(model.n_strands, dtype=bool)
            tested[strand[pressed]] = True
            rows = xp.nonzero(tested[strand])[0]
            inside = xp.zeros(n, dtype=bool)
            inside[rows] = collider.depth_inside(xp, x0[rows]) > 0.0
        step = xp.zeros(n)
        step[model.edge_vertex + 1] = model.rest_edge_length
        arc = xp.cumsum(step)
        arc = arc - arc[first]                               # rest arc length from the strand's first vertex
        # nearest within the strand: −1 / N where the strand has none, as far out as a neighbour strand's index in
        # every comparison below (each is taken only where the kinematic vertex lies in the vertex's own strand)
        outside_before, outside_after = nearest_marked(xp, ~inside, index_view(model, "strand_offsets"))
        reach = contact_distance
        unreachable = xp.zeros(n, dtype=bool)
        for (nearest, sunk), run in zip(sides, (outside_before < kinematic_before, outside_after > kinematic_after)):
            unreachable = unreachable | (sunk & ((xp.abs(arc - arc[nearest]) < depth_of[nearest] + reach) | run))
        unreachable = unreachable & ~fixed
        self.unreachable_by_collider[number] = unreachable.sum()      # a device scalar, read with the frame's stats
        return unreachable

    def _end_edge_contacts(self, x0, x1):
        """Edge–edge contacts of the pairs closer at the end positions x1 (N, 3) [m] than their contact
        distance less the tolerance (``relinearize``): the ContactSet, or None."""
        xp, model, settings = self.xp, self.model, self.solver.settings
        if not settings.self_collision:
            return None
        short = self._edge_pair_hits(x1, x1, end_check=True)       # at rest at the end positions
        if short is None:
            return None
        ea, eb, va, vb, contact_distance, closest = short
        s, t = closest[:, 1], closest[:, 2]
        end_a = x1[va] + s[:, None] * (x1[va + 1] - x1[va])
        end_b = x1[vb] + t[:, None] * (x1[vb + 1] - x1[vb])
        separation = (x0[va] + s[:, None] * (x0[va + 1] - x0[va])) - (x0[vb] + t[:, None] * (x0[vb + 1] - x0[vb]))
        normal = end_a - end_b
        degenerate = (row_lengths(xp, normal) < 1e-9 * contact_distance)[:, None]
        normal = normalize(xp, xp.where(degenerate, cross3(xp, x1[va + 1] - x1[va], x1[vb + 1] - x1[vb]), normal))
        normal = xp.where((rows_dot(xp, normal, separation) < 0.0)[:, None], -normal, normal)
        keys = ea * model.n_edges + eb
        return self._without_kinematic(
            self._edge_contacts(ea, eb, va, vb, s, t, normal, separation, contact_distance, keys))

    def _end_collider_contacts(self, x0, x1):
        """Per collider, the ContactSet (or None) of the free vertices whose path x0 → x1 (N, 3) [m] comes
        closer to its surface than their contact distance less the tolerance: CCD along the path for a mesh,
        the signed distance at x1 for an analytic collider. Keys of the end range (``_collider_keys``), so a
        vertex may hold a contact of the first path and one of the end path."""
        xp, settings = self.xp, self.solver.settings
        radius = self.solver.vertex_radius
        found = []
        for number, collider in enumerate(self.solver.colliders):
            contact_distance = radius + collider.thickness + settings.thickness
            reach = xp.maximum(contact_distance - settings.end_penetration_tolerance * radius, 0.0)
            movable = ~self.vertex_fixed & ~self.unreachable_of[number]
            mesh = collider.mesh_motion()
            if mesh is None:
                part = self._end_position_contacts(collider, x1, (x1 - x0) / self.h, movable, reach, contact_distance)
            else:
                # the exact CCD (collider_ccd) on the vertices whose path the mesh's own kernel finds crossing it
                # or ending within reach: the few near the surface, not every vertex of every strand
                near = collider.path_reaches_mesh(xp, x0, x1, reach)
                part = self._touch_contacts(
                    swept_mesh_touches(xp, collider.mesh_geometry(), x0, x1, movable & near, reach, self.h),
                    contact_distance)
            selected = self._selected([part])
            if selected is not None:
                index, normal, target, surface_velocity = selected
                found.append(self._collider_contacts(collider, index, normal, target, surface_velocity, radius,
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
        approach, turned against their relative motion. Returns the ContactSet, or None."""
        xp, model, settings = self.xp, self.model, self.solver.settings
        geometry = collider.mesh_geometry()
        ev = model.edge_vertex
        # an edge with a vertex that only its sunk root could bring out is left out, as that vertex is; every rod
        # edge is an item of the search (no data-sized selection: one read, the hits' number)
        reachable = ~self.unreachable_of[number]
        wanted = (movable[ev] | movable[ev + 1]) & reachable[ev] & reachable[ev + 1]
        radius = model.edge_radius
        contact_distance = radius + collider.thickness + settings.thickness
        limit = xp.maximum(contact_distance - settings.end_penetration_tolerance * radius, 0.0) if end \
            else (1.0 + settings.proximity) * contact_distance
        pose = geometry.pose(xp)
        count = model.n_edges
        nearest_edge = xp.empty(count, dtype=xp.int32)
        closest = xp.empty((count, 4), dtype=xp.float64)
        launch_items(ccd_kernels.mesh_edges_closest_in_step, count, warp_device_of(closest),
                     [warp_view(xp.ascontiguousarray(x0, dtype=xp.float64), wp.vec3d),
                      warp_view(xp.ascontiguousarray(x1, dtype=xp.float64), wp.vec3d),
                      index_view(model, "edge_vertex"), warp_view(xp.ascontiguousarray(limit), wp.float64),
                      int32_view(xp, wanted), pose.edges.bvh.id, pose.previous_view, pose.current_view,
                      pose.edges.index_view],
                     [warp_view(nearest_edge, wp.int32), warp_view(closest, wp.vec4d)], split=True)
        # hits carried (almost) only by kinematic vertices are left out as _without_kinematic leaves them (the free
        # vertices' weights |1 − s| and |s|), in the same selection: one read, the hits' count (none: no contact)
        free = ~self.vertex_fixed
        along = closest[:, 1]
        free_weight = xp.abs(1.0 - along) * free[ev] + xp.abs(along) * free[ev + 1]
        edge = xp.nonzero((nearest_edge >= 0) & (free_weight > KINEMATIC_CONTACT_WEIGHT))[0]
        if edge.shape[0] == 0:
            return None
        mesh_edge, closest = nearest_edge[edge], closest[edge]
        contact_distance = contact_distance[edge]
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
        approach = rows_dot(xp, crossing, motion_a - motion_b)
        crossing = xp.where((approach > 0.0)[:, None], -crossing, crossing)
        touching = (gap < 1e-3 * contact_distance)[:, None]
        normal = normalize(xp, xp.where(touching, crossing, separation))
        start_gap = rows_dot(xp, separation, normal)
        n = edge.shape[0]
        given = [value for value in (settings.collider_friction, collider.friction) if value is not None]
        mu = sum(given) / len(given) if given else 0.3
        colliders = len(self.solver.colliders)
        keys = model.n_edges * model.n_edges + 2 * colliders * model.n_vertices \
            + (number + (colliders if end else 0)) * model.n_edges + edge
        return ContactSet(
            vertices=xp.stack((va, va + 1, va, va), axis=1),
            weights=xp.stack((1.0 - s, s, xp.zeros(n), xp.zeros(n)), axis=1), kind_edge=xp.zeros(n, dtype=bool),
            normal=normal, target_normal=(contact_distance - start_gap) / self.h, surface_velocity=motion_b / self.h,
            mu=xp.full(n, float(mu)), radius_scale=model.edge_radius[edge], keys=keys)


@dataclass
class KinematicVertices:
    """A step's kinematic vertices: dof_fixed (n_dofs,) and vertex_fixed (N,) bool, their indices (K,), for every
    vertex the nearest kinematic vertex at or before it and at or after it in its strand (−1 / N where there is none:
    ``kernels.segments.nearest_marked``), and ``beside_free`` (A,): the kinematic vertices that are the nearest one
    of some free vertex (a strand's clamped root edge: its second vertex, not the root)."""
    dof_fixed: Any
    vertex_fixed: Any
    indices: Any
    nearest: tuple
    beside_free: Any

    @classmethod
    def of(cls, xp, model, fixed_dofs) -> "KinematicVertices":
        dof_fixed = xp.zeros(model.n_dofs, dtype=bool)
        dof_fixed[fixed_dofs] = True
        vertex_fixed = dof_fixed[model.position_dofs[:, 0]]
        nearest = nearest_marked(xp, vertex_fixed, index_view(model, "strand_offsets"))
        strand = model.vertex_strand
        first, end = model.strand_offsets[strand], model.strand_offsets[strand + 1]
        beside = xp.zeros(vertex_fixed.shape[0], dtype=bool)
        for kinematic, valid in ((nearest[0], nearest[0] >= first), (nearest[1], nearest[1] < end)):
            beside[kinematic[valid & ~vertex_fixed]] = True
        return cls(dof_fixed, vertex_fixed, xp.nonzero(vertex_fixed)[0], nearest, xp.nonzero(beside)[0])
