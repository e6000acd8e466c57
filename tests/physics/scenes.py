"""Scene builders shared by the PD / collision physics tests (plain dicts as on the wire)."""

from __future__ import annotations

import numpy as np


def grid(nx: int, ny: int, size: float = 1.0, height: float = 1.0):
    """Flat square cloth in the XY plane at z = height.

    Returns (vertices (nx·ny, 3), triangles (2(nx−1)(ny−1), 3), index grid (nx, ny))."""
    xs, ys = np.meshgrid(np.linspace(0.0, size, nx), np.linspace(0.0, size, ny), indexing="ij")
    vertices = np.stack([xs.ravel(), ys.ravel(), np.full(xs.size, height)], axis=1)
    index = np.arange(nx * ny).reshape(nx, ny)
    a, b = index[:-1, :-1].ravel(), index[1:, :-1].ravel()
    c, d = index[1:, 1:].ravel(), index[:-1, 1:].ravel()
    triangles = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])
    return vertices, triangles.astype(np.int32), index


def cloth_object(vertices, triangles, pins=None, params=None, object_id="Cloth", **extra):
    obj = {"id": object_id, "kind": "cloth", "vertices": vertices, "triangles": triangles,
           "params": dict(params or {})}
    if pins is not None:
        obj["pins"] = {"indices": np.asarray(pins, np.int32), "weights": np.ones(len(pins), np.float32)}
    obj.update(extra)
    return obj


def scene(objects, frame_end=24, substeps=4, fps=24, solver=None, gravity=(0.0, 0.0, -9.81)):
    out = {"gravity": list(gravity), "time": {"fps": fps, "frame_start": 1, "frame_end": frame_end,
                                              "substeps": substeps},
           "objects": list(objects)}
    if solver is not None:
        out["solver"] = solver
    return out


def run(simulation, drive=None):
    """Advance to frame_end; drive: callable frame -> drive objects or None.
    Returns the list of (frame, positions, stats) including the initial frame."""
    frames = [simulation.initial_frame()]
    for frame in range(simulation.frame_start + 1, simulation.frame_end + 1):
        frames.append(simulation.advance(drive(frame) if drive else None))
    return frames


def box_tets(counts, size, origin=(0.0, 0.0, 0.0)):
    """Tetrahedralized box: counts (nx, ny, nz) cubes of a box of size (3,) [m], 6 Kuhn tets per cube.
    Returns (vertices (n, 3), tets (T, 4) int32, boundary triangles (F, 3) int32, node grid index)."""
    from solver_server.solvers.pd.tetgen import KUHN

    counts = np.asarray(counts)
    axes = [np.linspace(origin[k], origin[k] + size[k], counts[k] + 1) for k in range(3)]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)
    vertices = grid.reshape(-1, 3)
    index = np.arange(len(vertices)).reshape(grid.shape[:3])
    cells = np.stack(np.meshgrid(*(np.arange(c) for c in counts), indexing="ij"), axis=-1).reshape(-1, 3)
    corners = cells[:, None, None, :] + KUHN[None]
    tets = index[corners[..., 0], corners[..., 1], corners[..., 2]].reshape(-1, 4)
    faces = np.concatenate([tets[:, [0, 2, 1]], tets[:, [0, 1, 3]], tets[:, [1, 2, 3]], tets[:, [0, 3, 2]]])
    key = np.sort(faces, axis=1)
    _, first, counts_f = np.unique(key, axis=0, return_index=True, return_counts=True)
    boundary = faces[first[counts_f == 1]]
    return vertices, tets.astype(np.int32), boundary.astype(np.int32), index


def tet_volume(positions, tets):
    x = positions[tets]
    return np.linalg.det(np.stack([x[:, 0] - x[:, 3], x[:, 1] - x[:, 3], x[:, 2] - x[:, 3]], axis=2)).sum() / 6.0


def uv_sphere(rings=10, segments=20, radius=1.0, center=(0.0, 0.0, 0.0)):
    """Closed, consistently oriented (outward) UV sphere: (vertices, triangles)."""
    theta = np.linspace(0, np.pi, rings + 1)[1:-1]
    phi = np.linspace(0, 2 * np.pi, segments, endpoint=False)
    t, p = np.meshgrid(theta, phi, indexing="ij")
    ring = np.stack([np.sin(t) * np.cos(p), np.sin(t) * np.sin(p), np.cos(t)], axis=-1).reshape(-1, 3)
    vertices = np.concatenate([[[0, 0, 1]], ring, [[0, 0, -1]]]) * radius + np.asarray(center)
    m = segments
    j = np.arange(m)
    tris = [np.stack([np.zeros(m, int), 1 + j, 1 + (j + 1) % m], 1)]
    for i in range(rings - 2):
        a = 1 + i * m + j
        b = 1 + i * m + (j + 1) % m
        tris += [np.stack([a, a + m, b + m], 1), np.stack([a, b + m, b], 1)]
    last = len(vertices) - 1
    base = 1 + (rings - 2) * m
    tris.append(np.stack([np.full(m, last), base + (j + 1) % m, base + j], 1))
    return vertices, np.concatenate(tris).astype(np.int32)
