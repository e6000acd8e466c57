"""Triangle-mesh colliders (moving and deforming every frame): two-sided surfaces kept by CCD.

A point's side of a mesh is never read from face normals (docs/contact.md): artists' meshes
are open, made of several shells, thin (ears) and sometimes flipped. Every triangle is a two-sided
surface with a thickness on both sides:

* :meth:`MeshGeometry.resolve` (cloth and soft bodies through ``ColliderSet.project``): the side is
  the one the point had at the start of the substep, kept by continuous collision detection of its
  path against the triangles moving linearly from the previous to the current pose
  (``mesh_kernels.resolve_mesh_contacts``);
* :meth:`MeshGeometry.signed_distance` (DER hair's end-of-step tests, which run their own CCD):
  the unsigned distance, never negative, with the direction from the surface to the point;
* :meth:`MeshGeometry.recover_inside`: points that START a job inside a closed shell (generalized
  winding number, every shell wound outward by ``protocol.mesh_shells.outward_shells``) are moved out to the
  nearest surface, and counted.

Queries traverse a ``wp.Bvh`` over each triangle's box swept over the substep (both poses), refitted
once per pose, in Warp kernels on the points' device; the vertices stay float64 (the BVH boxes are
float32, padded). Arrays cross into the kernels as zero-copy views (``kernels.warp_view``).
"""

from __future__ import annotations

import numpy as np
import warp as wp

from protocol.mesh_shells import outward_shells

from ..kernels import QUERY_MIN_ITEMS, cuda_layout_on, launch, launch_split, on_device_stream, warp_view
from ..sim.errors import SceneError
from . import mesh_kernels
from .swept_elements import CandidateList, SweptElements, unique_edges

CONTACT_PASSES = 4     # CCD + proximity passes per point in resolve (concave corners, stacked thin layers)
# passes for hair, whose solvers resolve a step's end once or a few times (not in cloth's many rounds): a
# point pushed out of the face it crossed in a sharp concave crease (the inner corner of an ear) lies behind
# the other face, and the alternating pushes out of the two close in on the corner only geometrically
CREASE_PASSES = 16
# candidate lists of the points' (and point edges') paths against the mesh (_PathLists): a path may end this far
# from where the lists were built, in mesh edge lengths, and still take its listed elements
CANDIDATE_MARGIN = 0.25
# the lists are built again when more than this fraction of the paths ends beyond the margin
CANDIDATE_REBUILD_FRACTION = 0.1
CANDIDATE_KEYS_KEPT = 6   # kinds of query (named point paths of one count, one set of point edges) whose lists a pose keeps
EDGE_CONTACT_COUNTS = 4   # add_edge_corrections' counters: pairs in contact, crossed, edges through at start, deep


def _ratio(xp, numerator, denominator):
    """numerator / denominator, 0 where the denominator is 0 (degenerate triangles)."""
    nonzero = denominator != 0
    return xp.where(nonzero, numerator, 0.0) / xp.where(nonzero, denominator, 1.0)

def closest_points_on_triangles(points, a, b, c, xp=np):
    """Closest points on triangles (a, b, c) to ``points``, all (m, 3) [m] on the ``xp`` device.

    Returns (closest (m, 3), barycentric (m, 3)). Voronoi regions are tested in the order vertex a,
    vertex b, edge ab, vertex c, edge ac, edge bc, face; the first region that holds wins."""
    ab, ac, ap = b - a, c - a, points - a
    d1 = (ab * ap).sum(axis=1)
    d2 = (ac * ap).sum(axis=1)
    bp = points - b
    d3 = (ab * bp).sum(axis=1)
    d4 = (ac * bp).sum(axis=1)
    cp = points - c
    d5 = (ab * cp).sum(axis=1)
    d6 = (ac * cp).sum(axis=1)
    va = d3 * d6 - d5 * d4
    vb = d5 * d2 - d1 * d6
    vc = d1 * d4 - d3 * d2
    zeros = xp.zeros_like(d1)
    ones = xp.ones_like(d1)
    denominator = va + vb + vc
    v = _ratio(xp, vb, denominator)
    w = _ratio(xp, vc, denominator)
    face = xp.where((denominator != 0)[:, None], xp.stack([1 - v - w, v, w], axis=1), 1.0 / 3.0)
    v_ab = _ratio(xp, d1, d1 - d3)
    w_ac = _ratio(xp, d2, d2 - d6)
    w_bc = _ratio(xp, d4 - d3, (d4 - d3) + (d5 - d6))
    regions = [  # (holds, barycentric weights), highest priority first
        ((d1 <= 0) & (d2 <= 0), xp.stack([ones, zeros, zeros], axis=1)),                       # vertex a
        ((d3 >= 0) & (d4 <= d3), xp.stack([zeros, ones, zeros], axis=1)),                      # vertex b
        ((vc <= 0) & (d1 >= 0) & (d3 <= 0), xp.stack([1 - v_ab, v_ab, zeros], axis=1)),         # edge ab
        ((d6 >= 0) & (d5 <= d6), xp.stack([zeros, zeros, ones], axis=1)),                      # vertex c
        ((vb <= 0) & (d2 >= 0) & (d6 <= 0), xp.stack([1 - w_ac, zeros, w_ac], axis=1)),         # edge ac
        ((va <= 0) & ((d4 - d3) >= 0) & ((d5 - d6) >= 0), xp.stack([zeros, 1 - w_bc, w_bc], axis=1)),  # edge bc
    ]
    bary = face
    for holds, weights in reversed(regions):
        bary = xp.where(holds[:, None], weights, bary)
    bary = xp.nan_to_num(bary, nan=1.0 / 3.0)
    closest = bary[:, :1] * a + bary[:, 1:2] * b + bary[:, 2:] * c
    return closest, bary


class _PathLists:
    """Candidate lists for repeated queries of one set of paths (points, or point edges) from the same start
    positions with the same reaches against one pose: per path, the mesh elements whose swept boxes meet the
    path's box from its start to where it ended at the build (``built``), grown by its reach and ``margin``.
    A later query whose path ends within the margin of ``built`` finds every element it can meet there.

    Whether a query records new paths, builds the lists or uses them is decided on the device
    (``mesh_kernels.decide_paths``): nothing is read back. ``points``: how many points the paths run between;
    ``paths``: how many paths (points, or point edges)."""

    def __init__(self, xp, points: int, paths: int):
        self.kept_start = xp.full((points, 3), xp.nan)       # NaN: the first query differs and records
        self.kept_reach = xp.full(points, xp.nan)
        self.built = xp.full((points, 3), xp.inf)            # inf: no path is within the margin of a build
        self.lists = CandidateList(xp, paths)
        self.control = xp.zeros(3, dtype=xp.int32)          # differing points, points beyond the margin, mode
        self.through = xp.zeros(paths, dtype=xp.int32)      # point edges only: 1 where the edge passes through the mesh at start
        self.signature = None                                # (pose version, the query's own key) of the last query
        self.views = {"control": warp_view(self.control, wp.int32), "kept_start": warp_view(self.kept_start, wp.vec3d),
                      "kept_reach": warp_view(self.kept_reach, wp.float64), "built": warp_view(self.built, wp.vec3d),
                      "through": warp_view(self.through, wp.int32)}


class _DevicePose:
    """The mesh's arrays on one device: float64 vertices of the previous and current pose, its triangles
    and edges with BVHs over their boxes swept over the substep (built once over the ``rest`` pose (V, 3)
    [m], refitted per pose)."""

    def __init__(self, xp, triangles: np.ndarray, edges: np.ndarray, rest: np.ndarray, vertices: np.ndarray):
        self.xp = xp
        rest = xp.asarray(np.ascontiguousarray(rest, np.float64))   # alive while the trees are built
        rest_view = warp_view(rest, wp.vec3d)
        self.previous = xp.asarray(np.ascontiguousarray(vertices, np.float64))
        self.current = self.previous
        self.triangles = SweptElements(xp, triangles, rest_view)
        self.edges = SweptElements(xp, edges, rest_view)
        self.device = self.triangles.device
        self.host_current = None
        self.host_previous = None
        self.version = 0                 # counts pose changes: caches of the current pose compare it
        self._winding = None             # (version, arrays kept alive, the wp.Mesh) of winding_mesh
        self._path_lists: dict[tuple, _PathLists] = {}   # the latest CANDIDATE_KEYS_KEPT kinds of query, oldest first
        self._unlisted: dict[int, _PathLists] = {}       # per path count, the lists of queries that keep none
        self.builds = xp.zeros(1, dtype=xp.int32)          # candidate list builds, counted on the device
        self._builds_view = warp_view(self.builds, wp.int32)
        self._refit()

    def _refit(self):
        self.version += 1
        self.previous_view = warp_view(self.previous, wp.vec3d)
        self.current_view = warp_view(self.current, wp.vec3d)
        self.triangles.refit(self.previous_view, self.current_view, 0.0)
        self.edges.refit(self.previous_view, self.current_view, 0.0)

    def update(self, previous: np.ndarray, current: np.ndarray) -> None:
        """Upload the substep's poses (host (V, 3) [m]; each uploaded once) and refit the BVHs."""
        if previous is self.host_previous and current is self.host_current:
            return
        xp = self.xp
        if previous is self.host_current:
            self.previous = self.current            # already on the device
        else:
            self.previous = xp.asarray(np.ascontiguousarray(previous, np.float64))
        self.current = self.previous if current is previous else \
            xp.asarray(np.ascontiguousarray(current, np.float64))
        self.host_previous, self.host_current = previous, current
        self._refit()

    @property
    def candidate_builds(self) -> int:
        """Candidate list builds so far (statistics and tests: a read from the device)."""
        return int(self.builds[0])

    def path_lists(self, xp, start_view, ends_view, reach_view, margin: float, kind: tuple, signature, paths: int,
                   search) -> _PathLists:
        """The candidate lists of the paths from ``start_view`` (n wp.vec3d) [m] with ``reach_view`` (n wp.float64)
        that end at ``ends_view`` (n wp.vec3d), the query's own kernel inputs, for a query of ``kind`` (a key of what the paths are: their count and, for point edges, which
        edges) over ``paths`` paths. A query whose start and reach differ from the last of its kind, or whose
        ``signature`` (what else the lists depend on) changed, records them and uses no lists (a one-off query
        gains nothing from a list); the same paths again build the lists with ``search(entry)`` (launches of
        kernels gated on ``entry.views["control"]``; on the CPU not launched while the lists are used), and build
        them again when more than CANDIDATE_REBUILD_FRACTION of the paths end beyond ``margin`` [m] of the
        build's ends. Decided on the device: no host synchronization."""
        count = start_view.shape[0]
        entry = self._path_lists.pop(kind, None)
        if entry is None:
            entry = _PathLists(xp, count, paths)
            while len(self._path_lists) >= CANDIDATE_KEYS_KEPT:
                self._path_lists.pop(next(iter(self._path_lists)))
        self._path_lists[kind] = entry
        forced = entry.signature != (self.version, signature)
        entry.signature = (self.version, signature)
        views = entry.views
        rebuild_above = float(CANDIDATE_REBUILD_FRACTION * count)
        compared = [start_view, reach_view, views["kept_start"], views["kept_reach"], ends_view, views["built"]]
        if not cuda_layout_on(self.device):
            launch(mesh_kernels.paths_sequential, 1, device=self.device,
                   inputs=[*compared, float(margin), int(forced), rebuild_above, views["control"], self._builds_view])
        else:
            launch(mesh_kernels.compare_paths, count, device=self.device,
                   inputs=[*compared, float(margin), views["control"]])
            launch(mesh_kernels.decide_paths, 1, device=self.device,
                   inputs=[views["control"], int(forced), rebuild_above, self._builds_view])
            launch(mesh_kernels.refresh_paths, count, device=self.device,
                   inputs=[views["control"], start_view, reach_view, ends_view, views["kept_start"],
                           views["kept_reach"], views["built"]])
        if cuda_layout_on(self.device) or int(entry.control[2]) != mesh_kernels.PATHS_USE:
            search(entry)     # on the CPU the mode is in host memory: a query using its lists launches no search
        return entry

    def unlisted(self, xp, paths: int) -> _PathLists:
        """Lists for ``paths`` paths that are never built (every path lies beyond their margin, so every pass of a
        query asks the tree): a query without lists, and without the record-build-use bookkeeping."""
        entry = self._unlisted.get(paths)
        if entry is None:
            entry = self._unlisted[paths] = _PathLists(xp, paths, paths)
        return entry

    def winding_mesh(self, outward_triangles: np.ndarray):
        """A ``wp.Mesh`` with winding-number support of the current pose and ``outward_triangles`` (F, 3)
        (``outward_shells``), built once per pose and reused until it changes."""
        if self._winding is None or self._winding[0] != self.version:
            xp = self.xp
            vertices32 = xp.ascontiguousarray(self.current, dtype=xp.float32)
            indices = xp.asarray(np.ascontiguousarray(outward_triangles, dtype=np.int32).reshape(-1))
            with on_device_stream(self.device):
                mesh = wp.Mesh(warp_view(vertices32, wp.vec3f), warp_view(indices, wp.int32),
                               support_winding_number=True)
            self._winding = (self.version, (vertices32, indices), mesh)
        return self._winding[2]


class MeshGeometry:
    """A triangle mesh collider; vertices (N, 3) world space [m], triangles (F, 3).

    ``margin`` [m] (one mean edge length) is the reach of :meth:`signed_distance`: a point farther
    than that from the surface gets distance inf."""

    def __init__(self, object_id: str, vertices: np.ndarray, triangles: np.ndarray):
        if triangles is None or len(triangles) == 0:
            raise SceneError("a mesh collider needs triangles", object=object_id)
        self.id = object_id
        # corners in ascending index order: no contact computation depends on the winding, and with one
        # canonical order a mesh and its flipped copy give bit-identical results (sign flips are exact)
        self.triangles = np.sort(np.asarray(triangles, np.int64), axis=1)
        self.rest_vertices = np.asarray(vertices, float)
        # the winding numbers' triangles: every shell wound outward, whatever the artist's winding
        self.outward_triangles = outward_shells(self.rest_vertices, triangles)
        edges = self.rest_vertices[self.triangles] - self.rest_vertices[np.roll(self.triangles, 1, axis=1)]
        self.margin = float(np.linalg.norm(edges, axis=2).mean())
        self._device = None             # _DevicePose on the device of the latest query
        self._last = None               # (face (n,), motion (n, 3)) of the last signed_distance query
        self.vertices = None
        self.previous = None
        self.set_vertices(self.rest_vertices)
        self.previous = self.vertices

    def set_vertices(self, vertices: np.ndarray) -> None:
        """The collider's vertices (N, 3) [m] (host) at the next substep."""
        self.previous = self.vertices if self.vertices is not None else vertices
        self.vertices = np.asarray(vertices, float)

    def pose(self, xp) -> _DevicePose:
        """The substep's poses on ``xp``'s device (uploaded and refitted once per pose)."""
        if self._device is None or self._device.xp is not xp:
            self._device = _DevicePose(xp, self.triangles, unique_edges(self.triangles)[0], self.rest_vertices,
                                       self.previous)
        self._device.update(self.previous, self.vertices)
        return self._device

    def resolve(self, xp, start, proposed, reach, interval=(0.0, 1.0), passes: int = CONTACT_PASSES,
                lists: str = "points"):
        """Two-sided contact of points moving start → proposed (n, 3) [m], each kept ``reach`` (n,) [m] away
        from the surface on the side it started on (module docstring), while the surface moves over
        ``interval`` (begin, end), fractions of the substep with 0 ≤ begin ≤ end ≤ 1 (a solver with internal
        steps shorter than the substep passes the part its step covers; (t, t) is the surface at rest at t).
        passes: CCD and proximity passes per point at most (each tests the path to where the last one put it).
        lists: the name of the candidate lists the query keeps and reuses (``_DevicePose.path_lists``): queries
        of one substep with different reaches name different lists, so that each keeps its own instead of
        discarding the other's at every call; None: no lists, every pass queries the tree (for a solver whose
        paths come at most twice from one start: lists built at the second query are never used again).

        Returns (resolved (n, 3), push (n,) [m] normal correction, normal (n, 3) unit towards the
        point's side, motion (n, 3) [m] of the touched surface material over the whole substep, crossed (n,)
        int32: 1 where a crossing of the surface was undone)."""
        begin, end = (float(fraction) for fraction in interval)
        if not 0.0 <= begin <= end <= 1.0:
            raise ValueError(f"mesh contact interval {interval!r} is not inside the substep [0, 1]")
        n = proposed.shape[0]
        pose = self.pose(xp)
        start, proposed = (xp.ascontiguousarray(a, dtype=xp.float64) for a in (start, proposed))
        reach = xp.ascontiguousarray(reach, dtype=xp.float64)
        resolved = xp.empty((n, 3), dtype=xp.float64)
        push = xp.empty(n, dtype=xp.float64)
        normal = xp.empty((n, 3), dtype=xp.float64)
        motion = xp.empty((n, 3), dtype=xp.float64)
        crossed = xp.empty(n, dtype=xp.int32)
        if n:
            margin = CANDIDATE_MARGIN * self.margin
            start_view, proposed_view = warp_view(start, wp.vec3d), warp_view(proposed, wp.vec3d)
            reach_view = warp_view(reach, wp.float64)

            def search(entry):
                launch_split(mesh_kernels.point_candidates, n, pose.device, [],
                             [entry.views["control"], pose.triangles.bvh.id, start_view, entry.views["built"],
                              reach_view, margin, *entry.lists.views()], min_items=QUERY_MIN_ITEMS)

            entry = pose.unlisted(xp, n) if lists is None else \
                pose.path_lists(xp, start_view, proposed_view, reach_view, margin, (lists, n), None, n, search)
            listed = _listed_inputs(entry, margin)
            launch(mesh_kernels.resolve_mesh_contacts, n, device=pose.device,
                   inputs=[pose.triangles.bvh.id, pose.previous_view, pose.current_view, pose.triangles.index_view,
                           start_view, proposed_view, reach_view, int(passes), begin, end,
                           *listed, warp_view(resolved, wp.vec3d), warp_view(push, wp.float64),
                           warp_view(normal, wp.vec3d), warp_view(motion, wp.vec3d), warp_view(crossed, wp.int32)])
        return resolved, push, normal, motion, crossed

    def add_edge_corrections(self, xp, start, proposed, point_edges, reach, inverse_mass, correction, count,
                             contacts, crossed_point, interval=(0.0, 1.0)) -> None:
        """Edge–edge contact of the points' edges with the mesh's edges (an ear's rim, a sleeve's hem) over the
        substep: CCD of both motions and proximity, two-sided (``mesh_kernels.collider_edge_contacts``).

        start, proposed: (n, 3) float64 [m] C-contiguous; point_edges: int32 (E, 2)
        Warp view of the points' edges; reach (n,) [m] each point's distance to keep plus the mesh's
        thickness; inverse_mass (n,) (0: does not move). Adds corrections (n, 3) [m], per-point counts,
        the pairs in contact (contacts[0]), those that had crossed (contacts[1]), the point edges that
        already passed through the mesh at the start, left free (contacts[2]) and the pairs closer than
        ``mesh_kernels.DEEP_EDGE_FRACTION`` of their reach (contacts[3]; contacts: int32 (EDGE_CONTACT_COUNTS,))
        into the given arrays, and sets crossed_point (n,) int32 to 1 at the points of edges that had crossed.
        interval: the part (begin, end) of the substep over which the points moved start → proposed (fractions,
        as for ``resolve``)."""
        pose = self.pose(xp)
        edge_count = point_edges.shape[0]
        if edge_count == 0:
            return
        begin, end = (float(fraction) for fraction in interval)
        margin = CANDIDATE_MARGIN * self.margin
        start_view, proposed_view = warp_view(start, wp.vec3d), warp_view(proposed, wp.vec3d)
        reach_view = warp_view(reach, wp.float64)

        def search(entry):
            views = entry.views
            launch_split(mesh_kernels.edges_through_mesh, edge_count, pose.device, [],
                         [views["control"], pose.triangles.bvh.id, pose.previous_view, pose.current_view, begin,
                          pose.triangles.index_view, start_view, point_edges, views["through"]],
                         min_items=QUERY_MIN_ITEMS)
            launch_split(mesh_kernels.edge_candidates, edge_count, pose.device, [],
                         [views["control"], pose.edges.bvh.id, start_view, views["built"], point_edges, reach_view,
                          margin, *entry.lists.views()], min_items=QUERY_MIN_ITEMS)

        entry = pose.path_lists(xp, start_view, proposed_view, reach_view, margin,
                                ("edges", point_edges.ptr, edge_count), begin, edge_count, search)
        launch(mesh_kernels.collider_edge_contacts, edge_count, device=pose.device,
               inputs=[pose.edges.bvh.id, pose.previous_view, pose.current_view, pose.edges.index_view, start_view,
                       proposed_view, point_edges, reach_view, warp_view(inverse_mass, wp.float64),
                       begin, end, entry.views["through"], *_listed_inputs(entry, margin),
                       warp_view(correction, wp.vec3d), warp_view(count, wp.int32), warp_view(contacts, wp.int32),
                       warp_view(crossed_point, wp.int32)])

    def signed_distance(self, xp, points, reach: float | None = None):
        """(distance (n,) [m] ≥ 0 to the two-sided surface, inf beyond ``margin``; unit direction (n, 3)
        from the surface to the point) of points (n, 3) on ``xp``'s device. Never negative: which side
        a point belongs on is kept by the caller's CCD, not read from the winding. reach [m]: a caller that needs
        only the distances below it gets inf beyond it (a smaller query per point: the tree is searched within
        min(reach, margin)); the distances below it are those of the full query bit for bit."""
        points = xp.ascontiguousarray(points, dtype=xp.float64)
        n = points.shape[0]
        pose = self.pose(xp)
        distance = xp.empty(n, dtype=xp.float64)
        direction = xp.empty((n, 3), dtype=xp.float64)
        face = xp.empty(n, dtype=xp.int32)
        weights = xp.empty((n, 3), dtype=xp.float64)
        motion = xp.empty((n, 3), dtype=xp.float64)
        if n:
            launch(mesh_kernels.closest_on_mesh, n, device=pose.device,
                      inputs=[pose.triangles.bvh.id, pose.previous_view, pose.current_view, pose.triangles.index_view,
                              warp_view(points, wp.vec3d),
                              float(self.margin if reach is None else min(reach, self.margin)),
                              warp_view(distance, wp.float64),
                              warp_view(direction, wp.vec3d), warp_view(face, wp.int32),
                              warp_view(weights, wp.vec3d), warp_view(motion, wp.vec3d)])
        self._last = (face, motion)
        return distance, direction

    def surface_motion(self, xp, selection):
        """Displacement (k, 3) [m] over the last pose change of the surface material nearest to the
        points of the last ``signed_distance`` query, for the rows ``selection`` (bool mask; None: all
        rows) of that query."""
        face, motion = self._last
        return motion if selection is None else motion[selection]

    def recover_inside(self, xp, points, reach):
        """Points (n, 3) that lie inside a closed shell of the CURRENT pose (generalized winding number
        > 0.5 with every shell wound outward, so flipped shells count) moved to ``reach`` (n,) [m] outside the
        nearest surface (where shells overlap, the nearest surface beyond which the point is outside every
        shell: ``mesh_kernels.out_of_closed_shells``). Returns (points, recovered (n,) bool). Where a point's
        side matters within a job it comes from CCD; this is for the start of a job, a teleport, DER roots sunk
        in a collider and Cosserat anchors held inside.
        The winding mesh is built once per pose (``_DevicePose.winding_mesh``)."""
        n = points.shape[0]
        pose = self.pose(xp)
        if n == 0:
            return points, xp.zeros(0, dtype=bool)
        mesh = pose.winding_mesh(self.outward_triangles)
        points = xp.ascontiguousarray(points, dtype=xp.float64)
        inside = xp.empty(n, dtype=xp.int32)
        surface = xp.empty((n, 3), dtype=xp.float64)
        launch(mesh_kernels.inside_closed_shell, n, device=pose.device,
                  inputs=[mesh.id, warp_view(points, wp.vec3d), float(np.finfo(np.float32).max),
                          warp_view(inside, wp.int32), warp_view(surface, wp.vec3d)])
        # out of the shell: through its nearest surface point, `reach` beyond it, or where shells overlap along
        # the shortest ray out of all of them
        moved = xp.empty((n, 3), dtype=xp.float64)
        reach = xp.zeros(n, dtype=xp.float64) + xp.asarray(reach, dtype=xp.float64)    # (n,), writable
        launch(mesh_kernels.out_of_closed_shells, n, device=pose.device,
               inputs=[mesh.id, warp_view(points, wp.vec3d), warp_view(inside, wp.int32),
                       warp_view(surface, wp.vec3d), warp_view(reach, wp.float64), float(np.finfo(np.float32).max),
                       warp_view(moved, wp.vec3d)])
        return moved, inside > 0


def _listed_inputs(entry: _PathLists, margin: float) -> list:
    """The candidate-list arguments of ``resolve_mesh_contacts`` and ``collider_edge_contacts``: (found, counts,
    built, margin)."""
    return [*entry.lists.views(), entry.views["built"], float(margin)]
