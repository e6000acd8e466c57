"""Scenes whose resumed bakes must equal the uninterrupted ones bit for bit: contact-heavy shots on the
turning Suzanne (cloth with self-collision, each hair model, guide hair), a soft body landing on a
pinned cloth. Every builder returns (scene, drive, checkpoint frame)."""

from __future__ import annotations

import numpy as np

from tests.physics.character_scenes import cloth_on_suzanne, hair_on_suzanne
from tests.physics.scenes import box_tets, cloth_object, grid, scene


def cloth_with_self_collision_on_suzanne(flipped: bool = False):
    """A 32² cloth with self-collision falling onto the turning, sliding Suzanne (either winding)."""
    built, drive, *_ = cloth_on_suzanne(resolution=32, frames=24, flipped=flipped)
    return built, drive, 8


def soft_body_on_pinned_cloth():
    """A soft box dropped onto a cloth pinned at its four corners over a floor and a rising ball: contact
    between two simulated objects, primitive colliders, an animated collider."""
    vertices, triangles, index = grid(12, 12, size=0.8, height=0.4)
    corners = [index[0, 0], index[-1, 0], index[0, -1], index[-1, -1]]
    cloth = cloth_object(vertices, triangles, pins=corners,
                         params={"self_collision": True, "thickness": 0.004, "friction": 0.4})
    box_vertices, tets, faces, _ = box_tets((2, 2, 2), (0.2, 0.2, 0.2), origin=(0.3, 0.3, 0.5))
    jelly = {"id": "Jelly", "kind": "softbody", "vertices": box_vertices, "triangles": faces, "tets": tets,
             "params": {"young_modulus": 3e4, "density": 400.0, "thickness": 0.004}}
    floor = {"id": "Floor", "kind": "collider", "shape": {"type": "plane", "point": [0, 0, 0], "normal": [0, 0, 1]},
             "matrix_world": np.eye(4), "params": {"friction": 0.5}}
    ball = {"id": "Ball", "kind": "collider", "shape": {"type": "sphere", "center": [0, 0, 0], "radius": 0.1},
            "matrix_world": np.eye(4), "animated": True, "params": {"friction": 0.3}}

    def drive(frame: int) -> dict:
        matrix = np.eye(4)
        matrix[:3, 3] = (0.6, 0.2, 0.1 + 0.012 * (frame - 1))
        return {"Ball": {"matrix_world": matrix}}

    return scene([cloth, jelly, floor, ball], frame_end=20, substeps=4), drive, 7


def hair_on_suzanne_shot(model: str, guides: bool = False):
    """Hair of ``model`` (its own defaults; DER: the shot's own parameters) falling onto the turning head;
    ``guides``: every fourth strand is simulated and the rest interpolated."""
    built, drive, *_ = hair_on_suzanne(frames=14)
    hair = built["objects"][0]
    if model != "der":
        hair["params"] = {"model": model}
    if guides:
        hair["params"]["guide_count"] = (len(hair["strand_offsets"]) - 1) // 4
    return built, drive, 6


def cloth_let_go(checkpoint_frame: int):
    """A cloth pinned at two corners with a timed unpin at frame 10 (its pins let go and it falls onto a
    floor): a checkpoint before the release and one after it."""
    vertices, triangles, index = grid(10, 10, size=0.6, height=0.5)
    cloth = cloth_object(vertices, triangles, pins=[index[0, 0], index[-1, 0]],
                         params={"unpin_frame": 10, "thickness": 0.004})
    floor = {"id": "Floor", "kind": "collider", "shape": {"type": "plane", "point": [0, 0, 0], "normal": [0, 0, 1]},
             "matrix_world": np.eye(4), "params": {"friction": 0.5}}
    return scene([cloth, floor], frame_end=18, substeps=4), lambda frame: None, checkpoint_frame


def cloth_pin_pulled_to_a_jumped_target():
    """A cloth pinned at one corner whose target jumps 0.4 m at frame 4, pulled in at 0.5 m/s (pin_pull_speed):
    the checkpoint at frame 8 falls in the middle of the pull."""
    vertices, triangles, index = grid(8, 8, size=0.4, height=0.6)
    cloth = cloth_object(vertices, triangles, pins=[index[0, 0], index[-1, 0]], animated=True,
                         matrix_world=np.eye(4), params={"pin_pull_speed": 0.5})

    def drive(frame: int) -> dict:
        moved = vertices.copy()
        if frame >= 4:
            moved[:, 1] += 0.4
        return {"Cloth": {"matrix_world": np.eye(4), "vertices": moved}}

    return scene([cloth], frame_end=20, substeps=4), drive, 8


RESUME_SCENES = {
    "cloth_self_collision_suzanne": cloth_with_self_collision_on_suzanne,
    "cloth_self_collision_suzanne_flipped": lambda: cloth_with_self_collision_on_suzanne(flipped=True),
    "soft_body_on_pinned_cloth": soft_body_on_pinned_cloth,
    "cloth_let_go_checkpoint_before": lambda: cloth_let_go(6),
    "cloth_let_go_checkpoint_after": lambda: cloth_let_go(12),
    "cloth_pin_pulled_to_a_jumped_target": cloth_pin_pulled_to_a_jumped_target,
    "der_hair_on_suzanne": lambda: hair_on_suzanne_shot("der"),
    "cosserat_hair_on_suzanne": lambda: hair_on_suzanne_shot("cosserat"),
    "particle_hair_on_suzanne": lambda: hair_on_suzanne_shot("particles"),
    "der_guide_hair_on_suzanne": lambda: hair_on_suzanne_shot("der", guides=True),
    "cosserat_guide_hair_on_suzanne": lambda: hair_on_suzanne_shot("cosserat", guides=True),
    "particle_guide_hair_on_suzanne": lambda: hair_on_suzanne_shot("particles", guides=True),
}
