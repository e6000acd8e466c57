"""Scenes for the reliability tests: one per solver kind, each with animated kinematics (a drive) so
checkpoints must carry collider and pin poses too. Every builder returns (scene, drive) where
``drive(frame) -> {id: {"matrix_world": f8(4, 4), "vertices"?: f8(N, 3)}}`` (None when nothing is
animated)."""

from __future__ import annotations

import numpy as np

from tests.physics.scenes import box_tets, grid


def _translation(x: float, y: float, z: float) -> np.ndarray:
    matrix = np.eye(4)
    matrix[:3, 3] = (x, y, z)
    return matrix


def pd_scene(frame_end: int = 12, substeps: int = 2, cloth_n: int = 7):
    """Cloth pinned at two corners draping over a rising sphere, a soft box on a floor plane and an
    animated (deforming) mesh collider under the cloth: PD (cloth + soft body) with kinematics."""
    vertices, triangles, index = grid(cloth_n, cloth_n, size=0.6, height=0.5)
    cloth = {"id": "Cloth", "kind": "cloth", "vertices": vertices, "triangles": triangles,
             "pins": {"indices": np.array([index[0, 0], index[-1, 0]], np.int32), "weights": np.ones(2)},
             "params": {"friction": 0.4}}
    box_vertices, tets, box_faces, _ = box_tets((2, 2, 2), (0.2, 0.2, 0.2), origin=(1.0, 0.0, 0.05))
    jelly = {"id": "Jelly", "kind": "softbody", "vertices": box_vertices, "triangles": box_faces, "tets": tets,
             "params": {"young_modulus": 2e4, "density": 200.0}}
    ball = {"id": "Ball", "kind": "collider", "shape": {"type": "sphere", "center": [0, 0, 0], "radius": 0.15},
            "matrix_world": _translation(0.3, 0.3, 0.1), "animated": True, "params": {"friction": 0.3}}
    floor = {"id": "Floor", "kind": "collider", "shape": {"type": "plane", "point": [0, 0, 0], "normal": [0, 0, 1]},
             "matrix_world": np.eye(4), "params": {"friction": 0.5}}
    sheet_vertices = np.array([[-0.2, -0.2, 0.0], [0.8, -0.2, 0.0], [0.8, 0.8, 0.0], [-0.2, 0.8, 0.0]])
    sheet = {"id": "Sheet", "kind": "collider", "vertices": sheet_vertices,
             "triangles": np.array([[0, 1, 2], [0, 2, 3]], np.int32), "animated": True, "params": {}}
    scene = {"gravity": [0.0, 0.0, -9.81],
             "time": {"fps": 24, "frame_start": 1, "frame_end": frame_end, "substeps": substeps},
             "objects": [cloth, jelly, ball, floor, sheet]}

    def drive(frame: int) -> dict:
        rise = 0.01 * (frame - 1)
        wave = sheet_vertices + np.array([0.0, 0.0, 0.2 + 0.02 * np.sin(frame)])
        return {"Ball": {"matrix_world": _translation(0.3, 0.3, 0.1 + rise)},
                "Sheet": {"matrix_world": np.eye(4), "vertices": wave}}

    return scene, drive


def der_scene(frame_end: int = 8, substeps: int = 4):
    """Three free-falling DER strands landing on a plane plus one clamped strand on a moving head."""
    strands = []
    for k in range(3):
        strands.append(np.stack((np.full(6, 0.01 * k), np.zeros(6), np.linspace(0.02, 0.07, 6)), axis=1))
    free = {"id": "Loose", "kind": "hair", "points": np.concatenate(strands),
            "strand_offsets": np.array([0, 6, 12, 18], np.int32),
            "pins": {"indices": np.zeros(0, np.int32), "weights": np.zeros(0)},
            "params": {"model": "der", "radius": 1e-4, "young_modulus": 1e8, "damping": 1.0, "friction": 0.3}}
    clamped = {"id": "Ponytail", "kind": "hair",
               "points": np.stack((np.full(8, 0.2), np.zeros(8), np.linspace(0.3, 0.16, 8)), axis=1),
               "strand_offsets": np.array([0, 8], np.int32), "animated": True, "matrix_world": np.eye(4),
               "params": {"model": "der", "radius": 2e-4, "young_modulus": 1e8, "damping": 1.0}}
    floor = {"id": "Floor", "kind": "collider", "shape": {"type": "plane", "normal": [0, 0, 1], "offset": 0.0},
             "params": {"friction": 0.5}}
    scene = {"gravity": [0.0, 0.0, -9.81],
             "time": {"fps": 24, "frame_start": 1, "frame_end": frame_end, "substeps": substeps},
             "objects": [free, clamped, floor], "solver": {"der": {"max_iterations": 20}}}

    def drive(frame: int) -> dict:
        return {"Ponytail": {"matrix_world": _translation(0.02 * np.sin(0.5 * frame), 0.0, 0.0)}}

    return scene, drive


def fast_hair_scene(model: str, frame_end: int = 12):
    """Four strands of the ``particles`` or ``cosserat`` model on an animated head over a sphere (with
    strand–strand interaction for Cosserat)."""
    strands, points = 4, 9
    positions = np.zeros((strands, points, 3))
    positions[:, :, 0] = np.linspace(0.0, 0.16, points)
    positions[:, :, 1] = np.arange(strands)[:, None] * 0.02
    positions[:, :, 2] = 1.0
    params = {"model": model, "radius": 1e-3, "young_modulus": 1e8, "shear_modulus": 4e7, "damping": 2.0}
    if model == "cosserat":
        params.update(interaction_inner_radius=0.005, interaction_outer_radius=0.03)
    hair = {"id": "Hair", "kind": "hair", "points": positions.reshape(-1, 3),
            "strand_offsets": np.arange(strands + 1, dtype=np.int32) * points, "animated": True,
            "matrix_world": np.eye(4), "params": params}
    ball = {"id": "Ball", "kind": "collider", "shape": {"type": "sphere", "center": [0.1, 0.03, 0.9], "radius": 0.06},
            "matrix_world": np.eye(4), "params": {"friction": 0.3, "thickness": 0.0}}
    scene = {"gravity": [0.0, 0.0, -9.81], "time": {"fps": 24, "frame_start": 1, "frame_end": frame_end, "substeps": 2},
             "objects": [hair, ball]}

    def drive(frame: int) -> dict:
        return {"Hair": {"matrix_world": _translation(0.0, 0.0, 0.01 * (frame - 1))}}

    return scene, drive


SOLVER_SCENES = {
    "pd": pd_scene,
    "der": der_scene,
    "particles": lambda **kw: fast_hair_scene("particles", **kw),
    "cosserat": lambda **kw: fast_hair_scene("cosserat", **kw),
}


def light_cloth_scene(frame_end: int = 48, cloth_n: int = 6):
    """The cloth and the rising ball of :func:`pd_scene` only: cheap enough for multi-process tests."""
    scene, full_drive = pd_scene(frame_end=frame_end, cloth_n=cloth_n)
    scene["objects"] = [obj for obj in scene["objects"] if obj["id"] in ("Cloth", "Ball")]

    def drive(frame: int) -> dict:
        return {"Ball": full_drive(frame)["Ball"]}

    return scene, drive


def bake_frames(simulation, drive, upto, checkpoint_at=None):
    """Advance to ``upto``; returns ({frame: positions}, checkpoint taken at ``checkpoint_at``)."""
    frames, checkpoint = {}, None
    if simulation.frame == simulation.frame_start:
        frames[simulation.frame_start] = simulation.initial_frame()[1]
        if checkpoint_at == simulation.frame_start:
            checkpoint = simulation.checkpoint()
    while simulation.frame < upto:
        frame, positions, _ = simulation.advance(drive(simulation.frame + 1))
        frames[frame] = positions
        if frame == checkpoint_at:
            checkpoint = simulation.checkpoint()
    return frames, checkpoint
