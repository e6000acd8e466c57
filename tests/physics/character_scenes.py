"""Scenes of cloth and hair on a moving character (Suzanne), shared by the tests and docs/benchmarks.

Suzanne comes from real bpy (``tests/data/suzanne.npz``, written by ``tests/data/export_suzanne.py``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .contact_metrics import winding_numbers
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


def scalp_hair(points: int = 12, length: float = 0.6):
    """Straight DER strands standing out of the top of Suzanne's head: one per head vertex whose area-weighted
    normal points up (z > 0.5) within 0.5 m of the top, rooted 1 cm out along it, ``points`` points over
    ``length`` [m] along the normal; strands that would pass through the head at rest (the brow folds) are
    left out. Returns (points (S·P, 3) [m], strand offsets (S + 1,))."""
    vertices, triangles = suzanne()
    face_normals = np.cross(vertices[triangles[:, 1]] - vertices[triangles[:, 0]],
                            vertices[triangles[:, 2]] - vertices[triangles[:, 0]])
    normals = np.zeros_like(vertices)
    for corner in range(3):
        np.add.at(normals, triangles[:, corner], face_normals)
    lengths = np.linalg.norm(normals, axis=1)
    used = lengths > 0.0
    normals[used] /= lengths[used, None]
    scalp = np.nonzero(used & (normals[:, 2] > 0.5) & (vertices[:, 2] > vertices[:, 2].max() - 0.5))[0]
    along = np.linspace(0.0, length, points)
    strands = (vertices[scalp] + 0.01 * normals[scalp])[:, None, :] + along[None, :, None] * normals[scalp][:, None, :]
    outside = (np.abs(winding_numbers(strands.reshape(-1, 3), vertices, triangles)) < 0.5).reshape(len(scalp), points)
    strands = strands[outside.all(axis=1)]
    return strands.reshape(-1, 3), np.arange(0, len(strands) * points + 1, points).astype(np.int32)


def hair_on_suzanne(frames: int = 24, flipped: bool = False, substeps: int = 4):
    """DER hair (``scalp_hair``, r = 2 mm, E = 100 MPa, μ = 0.3) falling onto Suzanne's head while the head (and
    the hair's roots with it) turns 60° and slides 0.3 m over ``frames``. Returns (scene dict, drive(frame)
    callable, hair rest points (N, 3), strand offsets, head vertices, head triangles)."""
    points, offsets = scalp_hair()
    params = {"model": "der", "radius": 2e-3, "young_modulus": 1e8, "damping": 1.0, "friction": 0.3}
    return _hair_on_moving_suzanne(points, offsets, params, 0.002, lambda frame: turn_and_slide(frame, frames),
                                   frames, flipped, substeps)


def _hair_on_moving_suzanne(points, offsets, params: dict, head_thickness: float, pose_at, frames: int,
                            flipped: bool, substeps: int):
    """The scene of hair ``points`` (N, 3) [m] / ``offsets`` with ``params`` rooted on Suzanne (μ 0.3, collider
    thickness ``head_thickness`` [m]), head and roots both moved by ``pose_at(frame)`` (4, 4). Returns (scene
    dict, drive(frame) callable, points, offsets, head vertices, head triangles)."""
    head_vertices, head_triangles = suzanne(flipped)
    hair = {"id": "Hair", "kind": "hair", "points": points.astype(np.float32), "strand_offsets": offsets,
            "animated": True, "matrix_world": np.eye(4), "params": params}
    head = {"id": "Suzanne", "kind": "collider", "vertices": head_vertices, "triangles": head_triangles,
            "params": {"friction": 0.3, "thickness": head_thickness}, "animated": True, "matrix_world": np.eye(4)}

    def drive(frame):
        pose = pose_at(frame)
        return {"Suzanne": {"matrix_world": pose}, "Hair": {"matrix_world": pose}}

    return (scene([hair, head], frame_end=frames, substeps=substeps), drive, points, offsets, head_vertices,
            head_triangles)


def held_motion(frame: int, motion_frames: int, turn_degrees: float = 60.0, slide=(0.3, 0.0, 0.0),
                eased: bool = False) -> np.ndarray:
    """matrix_world (4, 4) of a head that turns and slides (``turn_and_slide``) until ``motion_frames`` and then
    holds still; ``eased``: along the same path on a smoothstep, starting and stopping at rest (as an animator
    keys it; its peak speed is 1.5× the linear motion's) instead of at constant speed with a dead stop."""
    fraction = (min(frame, motion_frames) - 1) / max(motion_frames - 1, 1)
    if eased:
        fraction = fraction * fraction * (3.0 - 2.0 * fraction)
    return turn_and_slide(1 + fraction * (motion_frames - 1), motion_frames, turn_degrees, slide)


def groom_on_suzanne(strands: int = 300, points: int = 12, length: float = 0.25, seed: int = 0):
    """Straight strands rooted on the upper half of Suzanne's head: roots at random points (area-weighted, fixed
    ``seed``) of the triangles above the head's centre, each strand straight out along its triangle's outward
    normal tilted up a little (+0.3 z), ``points`` points over ``length`` [m]. Strands that would touch the head
    at rest (sampled along every segment by winding number) are left out before the first ``strands`` are taken.
    Returns (points (S·P, 3) [m], strand offsets (S + 1,) int32, root triangle (S,))."""
    vertices, triangles = suzanne()
    corners = vertices[triangles]
    normals = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
    area = 0.5 * np.linalg.norm(normals, axis=1)
    normals /= np.maximum(2.0 * area, 1e-300)[:, None]
    # outward: the side a point just off the face's centroid has winding number 0
    centroid = corners.mean(axis=1)
    probe = np.abs(winding_numbers(centroid + 0.01 * normals, vertices, triangles)) < 0.5
    normals[~probe] *= -1.0
    upper = np.nonzero((centroid[:, 2] > 0.0) & (normals[:, 2] > -0.3))[0]
    rng = np.random.default_rng(seed)
    face = rng.choice(upper, size=4 * strands, p=area[upper] / area[upper].sum())
    u, v = rng.random(4 * strands), rng.random(4 * strands)
    flip = u + v > 1.0
    u[flip], v[flip] = 1.0 - u[flip], 1.0 - v[flip]
    roots = corners[face, 0] + u[:, None] * (corners[face, 1] - corners[face, 0]) \
        + v[:, None] * (corners[face, 2] - corners[face, 0])
    direction = normals[face] + np.array([0.0, 0.0, 0.3])
    direction /= np.linalg.norm(direction, axis=1)[:, None]
    samples = np.linspace(0.0, length, 4 * (points - 1) + 1)[1:]
    along = roots[:, None, :] + samples[None, :, None] * direction[:, None, :]
    clear = (np.abs(winding_numbers(along.reshape(-1, 3), vertices, triangles)) < 0.5).reshape(len(face), -1)
    keep = np.nonzero(clear.all(axis=1))[0][:strands]
    lines = roots[keep, None, :] + np.linspace(0.0, length, points)[None, :, None] * direction[keep, None, :]
    offsets = np.arange(0, len(keep) * points + 1, points).astype(np.int32)
    return lines.reshape(-1, 3), offsets, face[keep]


def hair_on_character(model: str = "der", strands: int = 300, frames: int = 48, motion_frames: int = 18,
                      flipped: bool = False, substeps: int = 4, guide_count: int = 0, radius: float = 1.0e-4,
                      eased: bool = False):
    """Hair on a moving Suzanne as an artist grooms it: ``groom_on_suzanne`` strands (25 cm, 12 points) of the
    given ``model`` with its own defaults (radius ``radius`` [m], μ = 0.3 against the head), rooted on the head;
    head and roots turn 60° and slide 0.3 m over ``motion_frames`` frames at 24 fps, then hold still until
    ``frames`` (``eased``: ``held_motion``'s eased motion). ``guide_count`` > 0 simulates that many guides and
    interpolates the rest (Cosserat, particles). Returns (scene dict, drive(frame) callable, hair rest points (N, 3), strand offsets, head vertices, head
    triangles)."""
    points, offsets, _ = groom_on_suzanne(strands)
    params = {"model": model, "radius": radius, "collider_friction": 0.3}
    if guide_count:
        params["guide_count"] = guide_count
    return _hair_on_moving_suzanne(points, offsets, params, 0.0,
                                   lambda frame: held_motion(frame, motion_frames, eased=eased), frames, flipped,
                                   substeps)
