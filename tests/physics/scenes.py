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
