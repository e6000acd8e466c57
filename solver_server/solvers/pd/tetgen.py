"""Tetrahedra for soft bodies: a Kuhn-subdivided cubic lattice embedding the artist's surface.

Why a lattice (not a conforming mesher): it is always well shaped (every tet is one sixth of a
cube, no slivers), needs no third-party code (GPL-compatible, no TetGen licence question), and
tolerates slightly imperfect input; the surface rides along through barycentric weights
(``weights``: sparse (N_surface, n_nodes), output = weights @ nodes).

Steps: (1) check the surface is closed and manifold (every edge shared by exactly two
triangles, consistently oriented) — otherwise SceneError naming the first bad edge; (2) a
lattice over the bounding box with ``resolution`` cells along the longest axis; (3) keep the
cells whose centre is inside (ray parity along +z per lattice column, vectorized) or that
contain a surface vertex; (4) split each kept cube into the 6 Kuhn tetrahedra (conforming across cubes); (5)
embed each surface vertex in its Kuhn tet: with fractional cell coordinates sorted
f_a ≥ f_b ≥ f_c, the barycentric weights are (1 − f_a, f_a − f_b, f_b − f_c, f_c).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import scipy.sparse

from ...sim.errors import SceneError

# the 6 Kuhn tets of a unit cube: paths 000 → 111 adding axes in permutation order
_PERMUTATIONS = np.array(list(itertools.permutations(range(3))))  # (6, 3)


def _kuhn_corner_offsets() -> np.ndarray:
    """(6, 4, 3) integer corner offsets of the Kuhn tets, oriented with positive volume."""
    tets = []
    for perm in _PERMUTATIONS:
        corner = np.zeros(3, int)
        path = [corner.copy()]
        for axis in perm:
            corner[axis] = 1
            path.append(corner.copy())
        path = np.array(path)
        # vertex 3 is the pivot: det(x0 − x3, x1 − x3, x2 − x3) must be > 0
        if np.linalg.det((path[:3] - path[3]).T) < 0:
            path[[0, 1]] = path[[1, 0]]
        tets.append(path)
    return np.array(tets)


KUHN = _kuhn_corner_offsets()


def check_closed_manifold(object_id: str, triangles: np.ndarray) -> None:
    """SceneError unless every edge is shared by exactly two consistently oriented triangles."""
    directed = np.stack([triangles, np.roll(triangles, -1, axis=1)], axis=2).reshape(-1, 2)
    undirected, counts = np.unique(np.sort(directed, axis=1), axis=0, return_counts=True)
    if np.any(counts == 1):
        a, b = undirected[np.argmax(counts == 1)]
        raise SceneError(f"surface is open ({int((counts == 1).sum())} boundary edges, e.g. {a}–{b}); "
                         "soft bodies need a closed surface (fill holes) or explicit 'tets'", object=object_id)
    if np.any(counts > 2):
        a, b = undirected[np.argmax(counts > 2)]
        raise SceneError(f"surface is non-manifold: edge {a}–{b} is shared by {int(counts.max())} triangles",
                         object=object_id)
    _, directed_counts = np.unique(directed, axis=0, return_counts=True)
    if np.any(directed_counts > 1):
        raise SceneError("surface normals are inconsistent (recalculate normals in Blender)", object=object_id)


def inside_columns(vertices: np.ndarray, triangles: np.ndarray, origin: np.ndarray, cell: float,
                   dims: np.ndarray) -> np.ndarray:
    """Inside/outside of every lattice cell centre (dims (3,) cells) by ray parity along +z.

    For each triangle, the lattice columns (i, j) whose centre lies inside its XY projection are
    enumerated from its bounding box (vectorized over all triangles); the crossing height is
    interpolated; a cell centre is inside when an odd number of crossings of its column lie above
    it. Column centres are nudged by a tiny irrational offset so rays miss edges and vertices.
    Returns a bool array (dims[0], dims[1], dims[2])."""
    nudge = np.array([1.0 / np.sqrt(2.0), 1.0 / np.sqrt(3.0)]) * 1e-7 * cell
    xy = vertices[:, :2] - origin[:2] - nudge
    corners = xy[triangles]                                          # (F, 3, 2)
    low = np.clip(np.ceil(corners.min(axis=1) / cell - 0.5), 0, dims[:2] - 1).astype(np.int64)
    high = np.clip(np.floor(corners.max(axis=1) / cell - 0.5), -1, dims[:2] - 1).astype(np.int64)
    span = np.maximum(high - low + 1, 0)
    count = span[:, 0] * span[:, 1]
    owner = np.repeat(np.arange(len(triangles)), count)
    if len(owner) == 0:
        return np.zeros(tuple(dims), bool)
    local = np.arange(len(owner)) - np.repeat(np.cumsum(count) - count, count)
    col_i = low[owner, 0] + local // span[owner, 1]
    col_j = low[owner, 1] + local % span[owner, 1]
    centre = (np.stack([col_i, col_j], axis=1) + 0.5) * cell
    a, b, c = corners[owner, 0], corners[owner, 1], corners[owner, 2]
    det = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (c[:, 0] - a[:, 0]) * (b[:, 1] - a[:, 1])
    valid = np.abs(det) > 1e-12 * cell * cell   # faces seen edge-on from +z are never crossed
    safe = np.where(valid, det, 1.0)
    u = ((b[:, 0] - centre[:, 0]) * (c[:, 1] - centre[:, 1]) - (c[:, 0] - centre[:, 0]) * (b[:, 1] - centre[:, 1])) / safe
    v = ((c[:, 0] - centre[:, 0]) * (a[:, 1] - centre[:, 1]) - (a[:, 0] - centre[:, 0]) * (c[:, 1] - centre[:, 1])) / safe
    w = 1.0 - u - v
    hit = valid & (u >= 0) & (v >= 0) & (w >= 0)
    z = vertices[:, 2][triangles[owner]]
    height = (u * z[:, 0] + v * z[:, 1] + w * z[:, 2] - origin[2]) / cell - 0.5   # in cell-centre units
    column = col_i[hit] * dims[1] + col_j[hit]
    height = height[hit]
    # crossings sorted by (column, height); count those above each cell centre
    key = column * (dims[2] + 2.0) + np.clip(height, -1.0, dims[2] + 0.5)
    key.sort()
    cells = np.arange(dims[0] * dims[1] * dims[2])
    cell_column = cells // dims[2]
    cell_height = (cells % dims[2]).astype(float)
    column_end = np.searchsorted(key, cell_column * (dims[2] + 2.0) + dims[2] + 1.0, side="right")
    above_start = np.searchsorted(key, cell_column * (dims[2] + 2.0) + cell_height, side="right")
    return ((column_end - above_start) % 2 == 1).reshape(tuple(dims))


def winding_number(points: np.ndarray, vertices: np.ndarray, triangles: np.ndarray, chunk: int = 2048) -> np.ndarray:
    """Generalized winding number (Jacobson et al. 2013) of points (Q, 3) w.r.t. a triangle mesh.
    Van Oosterom–Strackee solid angles, summed per point, in chunks (memory ≤ chunk × F)."""
    a, b, c = (vertices[triangles[:, k]] for k in range(3))
    result = np.empty(len(points))
    for start in range(0, len(points), chunk):
        p = points[start:start + chunk, None, :]
        ra, rb, rc = a[None] - p, b[None] - p, c[None] - p
        la, lb, lc = (np.linalg.norm(r, axis=2) for r in (ra, rb, rc))
        numerator = np.einsum("qfi,qfi->qf", ra, np.cross(rb, rc))
        denominator = la * lb * lc + np.einsum("qfi,qfi->qf", ra, rb) * lc \
            + np.einsum("qfi,qfi->qf", rb, rc) * la + np.einsum("qfi,qfi->qf", rc, ra) * lb
        result[start:start + chunk] = (2.0 * np.arctan2(numerator, denominator)).sum(axis=1) / (4.0 * np.pi)
    return result


@dataclass
class Lattice:
    """nodes (n, 3) [m], tets (T, 4) node indices, weights sparse (N_surface, n), cell size [m]."""

    nodes: np.ndarray
    tets: np.ndarray
    weights: scipy.sparse.csr_matrix
    cell: float

    def pins_for(self, surface_indices: np.ndarray, surface_weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pinned surface vertices -> pinned lattice nodes (every node of their enclosing tets),
        node weight = the largest pin weight among the vertices it carries."""
        if len(surface_indices) == 0:
            return np.zeros(0, np.int64), np.zeros(0)
        rows = self.weights[surface_indices].tocoo()
        node_weight = np.zeros(len(self.nodes))
        np.maximum.at(node_weight, rows.col, surface_weights[rows.row])
        nodes = np.nonzero(node_weight > 0)[0]
        return nodes.astype(np.int64), node_weight[nodes]


def embed_in_lattice(object_id: str, vertices: np.ndarray, triangles: np.ndarray, resolution: int) -> Lattice:
    """Build the embedding lattice of a closed surface (see module docstring)."""
    if len(triangles) < 4:
        raise SceneError("a soft body surface needs at least 4 triangles (a closed mesh)", object=object_id)
    check_closed_manifold(object_id, triangles)
    low, high = vertices.min(axis=0), vertices.max(axis=0)
    extent = high - low
    if np.any(extent <= 0):
        raise SceneError("surface is flat (zero extent along an axis); it encloses no volume", object=object_id)
    cell = float(extent.max() / resolution)
    origin = low - 0.5 * cell
    dims = np.ceil((high + 0.5 * cell - origin) / cell).astype(int)
    grid = np.stack(np.meshgrid(*(np.arange(d) for d in dims), indexing="ij"), axis=-1).reshape(-1, 3)
    inside = inside_columns(vertices, triangles, origin, cell, dims).ravel()
    vertex_cells = np.clip(np.floor((vertices - origin) / cell).astype(int), 0, dims - 1)
    flat = lambda ijk: (ijk[..., 0] * dims[1] + ijk[..., 1]) * dims[2] + ijk[..., 2]  # noqa: E731
    keep = inside.copy()
    keep[flat(vertex_cells)] = True
    cells = grid[keep]
    if not inside.any() and abs(winding_number(vertices.mean(axis=0, keepdims=True), vertices, triangles)[0]) < 1e-6:
        raise SceneError("surface encloses no volume (self-intersecting or inside-out?)", object=object_id)
    # 6 tets per cell, corners on the (dims + 1) node grid
    node_dims = dims + 1
    node_flat = lambda ijk: (ijk[..., 0] * node_dims[1] + ijk[..., 1]) * node_dims[2] + ijk[..., 2]  # noqa: E731
    corners = cells[:, None, None, :] + KUHN[None]                  # (C, 6, 4, 3)
    tets_global = node_flat(corners).reshape(-1, 4)
    used, tets = np.unique(tets_global, return_inverse=True)
    tets = tets.reshape(-1, 4)
    node_ijk = np.stack(np.unravel_index(used, node_dims), axis=1)
    nodes = origin + node_ijk * cell
    # embedding: Kuhn tet of each vertex from the order of its fractional coordinates
    fraction = np.clip((vertices - origin) / cell - vertex_cells, 0.0, 1.0)
    order = np.argsort(-fraction, axis=1, kind="stable")           # axes by decreasing fraction
    sorted_f = np.take_along_axis(fraction, order, axis=1)
    bary = np.stack([1.0 - sorted_f[:, 0], sorted_f[:, 0] - sorted_f[:, 1], sorted_f[:, 1] - sorted_f[:, 2],
                     sorted_f[:, 2]], axis=1)                         # weights of path corners 0..3
    path = np.zeros((len(vertices), 4, 3), int)
    for step in range(1, 4):
        path[:, step] = path[:, step - 1]
        np.put_along_axis(path[:, step], order[:, step - 1:step], 1, axis=1)
    corner_nodes = node_flat(vertex_cells[:, None, :] + path)        # (N, 4) global node ids
    local = np.searchsorted(used, corner_nodes)
    weights = scipy.sparse.csr_matrix((bary.ravel(), (np.repeat(np.arange(len(vertices)), 4), local.ravel())),
                                      shape=(len(vertices), len(nodes)))
    return Lattice(nodes=nodes, tets=tets.astype(np.int64), weights=weights, cell=cell)
