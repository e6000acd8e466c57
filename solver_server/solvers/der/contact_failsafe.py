"""The failsafe after a DER step's contact loop: no free vertex or rod edge ends the step through a mesh
collider (the loop's contacts are linearized planes on an iteration budget; see ``MeshFailsafe.keep_outside``)."""

from __future__ import annotations

import warp as wp

from ...collision.mesh import CREASE_PASSES, EDGE_CONTACT_COUNTS
from ...kernels import cuda_layout_on, warp_device_of, warp_view
from .contact_set import rows_dot


class MeshFailsafe:
    """The failsafe of one step of ``solver`` (a ContactSolver) from the start positions (N, 3) [m];
    ``vertex_fixed`` (N,) bool marks the kinematic vertices, ``h`` [s] is the step. Counts what it corrected
    over the step: ``vertices_moved`` and ``edges_crossed``."""

    def __init__(self, solver, start_positions, vertex_fixed, h: float):
        self.solver, self.xp, self.model = solver, solver.xp, solver.model
        self.start_positions = start_positions
        self.vertex_fixed = vertex_fixed
        self.h = h
        self.vertices_moved = 0
        self.edges_crossed = 0
        self._kept_edges = None     # the edge array a Warp view points into, kept alive for the launch

    def keep_outside(self, positions, velocities, unreachable_of):
        """The failsafe after the contact loop: no free vertex or edge ends the step through a mesh collider.

        The Newton contact loop ends on its iteration and end-check budgets (``MAX_RELINEARIZATIONS``), and
        its contacts are linearized planes: a vertex held by one face can still slip through the next one in
        a crease, and a mesh edge thinner than the hair's segments (an ear's rim, a brow's crest) can pass
        between two vertices that both stay outside. Here the end positions are tested as cloth tests its own
        (``MeshGeometry.resolve`` and ``add_edge_corrections``, two-sided, the side taken from the start of
        the step): a vertex whose path x_t → x crosses a triangle goes back in front of it, and an edge that
        crossed a mesh edge is moved back to its side (both with the contact distance less the tolerance),
        then the vertices are tested once more. A moved vertex keeps its velocity less the part that drove
        it into the surface. Returns (positions, velocities, whether any vertex moved), or None when nothing
        crossed; the counts go to ``vertices_moved`` and ``edges_crossed``. On the device (CUDA's layout) the state
        is always returned, with the flag a 0-d device boolean, and the counts are device scalars: no read.
        unreachable_of {collider index: (N,) bool}: the vertices left out of that collider's contacts
        (``ContactDetector.unreachable_of``), left out here too."""
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
        resident = cuda_layout_on(warp_device_of(end))
        for number, collider in meshes:
            geometry = collider.mesh_geometry()
            unreachable = unreachable_of.get(number)
            free = ~self.vertex_fixed if unreachable is None else ~self.vertex_fixed & ~unreachable
            edges = self._edge_view(unreachable)
            reach = xp.ascontiguousarray((1.0 - settings.end_penetration_tolerance) * radius + collider.thickness
                                         + self.solver.vertex_thickness())
            end, crossed = self._vertices_back(geometry, start, end, velocities, free, reach)
            moved |= crossed
            correction = xp.zeros((model.n_vertices, 3))
            count = xp.zeros(model.n_vertices, dtype=xp.int32)
            contacts = xp.zeros(EDGE_CONTACT_COUNTS, dtype=xp.int32)
            crossed_point = xp.zeros(model.n_vertices, dtype=xp.int32)
            geometry.add_edge_corrections(xp, start, end, edges, reach, xp.where(free, 1.0, 0.0), correction, count,
                                          contacts, crossed_point)
            edge_crossed = (crossed_point > 0) & free
            self.edges_crossed = self.edges_crossed + (contacts[1] if resident else int(contacts[1]))
            # on the device the second test runs every time, gated by whether any edge crossed (no read)
            any_edge = edge_crossed.any() if resident else bool(edge_crossed.any())
            if resident or any_edge:
                shifted = end + correction / xp.maximum(count, 1)[:, None]
                end = xp.ascontiguousarray(xp.where(edge_crossed[:, None], shifted, end))
                end, crossed = self._vertices_back(geometry, start, end, velocities, free & any_edge, reach)
                moved |= crossed | edge_crossed
        if resident:
            # the device counts and always hands back the (possibly unchanged) state with whether anything moved
            self.vertices_moved = self.vertices_moved + moved.sum()
            return end, velocities, moved.any()
        count = int(moved.sum())
        self.vertices_moved += count
        return (end, velocities, True) if count else None

    def _vertices_back(self, geometry, start, end, velocities, free, reach):
        """``free`` (N,) vertices whose path start → end (N, 3) [m] crosses the mesh moved back ``reach`` (N,) [m]
        in front of the crossed triangle on their starting side; the inward part of their velocities
        (relative to the surface) is removed in place. Returns (end positions, crossed (N,) bool). On the device
        the masked updates run whether or not any vertex crossed (they change nothing then): no read."""
        xp = self.xp
        resolved, _, normal, motion, crossed = geometry.resolve(xp, start, end, reach, passes=CREASE_PASSES)
        crossed = (crossed > 0) & free
        if not cuda_layout_on(warp_device_of(end)) and not bool(crossed.any()):
            return end, crossed
        relative = velocities - motion / self.h
        inward = xp.minimum(rows_dot(xp, relative, normal), 0.0)
        velocities[...] = xp.where(crossed[:, None], velocities - inward[:, None] * normal, velocities)
        return xp.ascontiguousarray(xp.where(crossed[:, None], resolved, end)), crossed

    def _edge_view(self, excluded):
        """Warp int32 (E, 2) view of the rods' edges (their two vertex indices) without those with an
        ``excluded`` (N,) vertex (None: none excluded)."""
        edges = self.solver.edge_vertices
        if excluded is not None and bool(excluded.any()):
            self._kept_edges = edges = self.xp.ascontiguousarray(edges[~(excluded[edges[:, 0]] | excluded[edges[:, 1]])])
        return warp_view(edges, wp.int32)
