"""Scenes of issue 18 ("Contact that holds on real characters"), shared by the tests and docs/benchmarks.

Suzanne comes from real bpy (``tests/data/suzanne.npz``, written by ``tests/data/export_suzanne.py``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .scenes import cloth_object, grid, scene

DATA = Path(__file__).resolve().parent.parent / "data"


def suzanne(flipped: bool = False):
    """(vertices (507, 3) [m], triangles (968, 3)) of Blender's Suzanne, size 2 m, centred at the origin,
    facing −Y; ``flipped`` reverses every triangle's winding."""
    data = np.load(DATA / "suzanne.npz")
    triangles = data["triangles"].astype(np.int32)
    return data["vertices"].astype(np.float64), (triangles[:, ::-1].copy() if flipped else triangles)


def turn_and_slide(frame: int, frames: int, turn_degrees: float = 60.0, slide=(0.3, 0.0, 0.0)) -> np.ndarray:
    """matrix_world (4, 4) of the head at ``frame`` (1-based): turns about +Z and slides linearly over the shot."""
    alpha = (frame - 1) / max(frames - 1, 1)
    angle = np.radians(turn_degrees) * alpha
    matrix = np.eye(4)
    matrix[:3, :3] = [[np.cos(angle), -np.sin(angle), 0.0], [np.sin(angle), np.cos(angle), 0.0], [0.0, 0.0, 1.0]]
    matrix[:3, 3] = alpha * np.asarray(slide)
    return matrix


def cloth_on_suzanne(resolution: int = 50, frames: int = 48, flipped: bool = False, pinned_corners: bool = True,
                     self_collision: bool = True, substeps: int = 4):
    """A resolution² cloth, 2.4 m square, 0.25 m above Suzanne's top, two corners pinned, falling onto the
    head while it turns 60° and slides 0.3 m. Returns (scene dict, drive(frame) callable, cloth rest
    (N, 3), cloth triangles, head vertices, head triangles)."""
    head_vertices, head_triangles = suzanne(flipped)
    top = head_vertices[:, 2].max()
    vertices, triangles, index = grid(resolution, resolution, size=2.4, height=top + 0.25)
    vertices[:, :2] -= 1.2
    pins = [index[0, 0], index[-1, 0]] if pinned_corners else None
    cloth = cloth_object(vertices, triangles, pins=pins,
                         params={"self_collision": self_collision, "thickness": 0.005, "friction": 0.3})
    head = {"id": "Suzanne", "kind": "collider", "vertices": head_vertices, "triangles": head_triangles,
            "params": {"friction": 0.3, "thickness": 0.002}, "animated": True, "matrix_world": np.eye(4)}

    def drive(frame):
        return {"Suzanne": {"matrix_world": turn_and_slide(frame, frames)}}

    return (scene([cloth, head], frame_end=frames, substeps=substeps), drive, vertices, triangles,
            head_vertices, head_triangles)
