"""What a bake sends, read from the scene after Check Scene: the scene dict, the drive frames and the bake
targets. Above ``checks`` (which it runs first) and ``bake_io`` (whose readers it calls), so neither imports
the other back."""

from __future__ import annotations

import bpy

from .bake_io import (deforms, drive_frames, export_collider, export_hair, export_simulated_mesh, frame_range,
                      marked_objects, uses_emitter)
from .checks import check_scene
from .core import scene_export
from .core.param_table import COLLIDER_PARAMS, defaults
from .core.validation import blocking, summary
from .skin import follows_skin, readable_skin


def export_scene(scene: bpy.types.Scene) -> tuple[dict, dict | None, dict[str, object]]:
    """Everything a bake sends: (scene dict, drive frames or None, bake targets by object name).

    Raises ExportError naming the first problem's object (all problems are listed in
    ``Scene.tangle.problems``) before anything is read for sending. The objects are read at the first
    frame of the range (the input state), whatever the current frame is; the current frame is restored.
    """
    problems = blocking(check_scene(scene))
    if problems:
        first_problem = summary(problems)
        raise scene_export.ExportError(first_problem[len(problems[0].object) + 2:], problems[0].object)
    first, last = frame_range(scene)
    current_frame, current_subframe = scene.frame_current, scene.frame_subframe
    skinned = [obj for obj in marked_objects(scene, "CLOTH") + marked_objects(scene, "SOFTBODY") if follows_skin(obj)]
    with readable_skin(skinned):
        scene.frame_set(first)
        try:
            scene_dict, animated, deforming, targets = _export_current_frame(scene, first, last)
        finally:
            scene.frame_set(current_frame, subframe=current_subframe)
        drive = drive_frames(scene, animated, first, last, deforming) if animated else None
    for name, target in targets.items():  # objects that move convert their results with each frame's transform
        if drive is not None and name in drive[first]:
            target.matrices = {frame: values[name]["matrix_world"] for frame, values in drive.items()}
    return scene_dict, drive, targets


def _export_current_frame(scene: bpy.types.Scene, first: int, last: int):
    """(scene dict, animated objects, names of deforming mesh colliders, targets), read at the current frame."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    entries, targets = [], {}
    for obj in marked_objects(scene, "CLOTH") + marked_objects(scene, "SOFTBODY"):
        entry, targets[obj.name] = export_simulated_mesh(obj, scene, depsgraph)
        entries.append(entry)
    hairs = marked_objects(scene, "HAIR")
    for obj in hairs:
        entry, targets[obj.name] = export_hair(obj, depsgraph, scene)
        entries.append(entry)
    colliders = marked_objects(scene, "COLLIDER")
    entries += [export_collider(obj, depsgraph) for obj in colliders]
    emitters = sorted({obj.data.surface.name for obj in hairs if uses_emitter(obj)} - {obj.name for obj in colliders})
    for name in emitters:  # unmarked emitter surfaces collide too, as meshes with the default collider parameters
        entries.append(export_collider(bpy.data.objects[name], depsgraph, defaults(COLLIDER_PARAMS)))
    fps = scene.render.fps / scene.render.fps_base
    gravity = [round(g, 6) for g in scene.gravity] if scene.use_gravity else [0.0, 0.0, 0.0]
    scene_dict = scene_export.build_scene(entries, fps, first, last, scene.tangle.substeps, tuple(gravity))
    animated = [bpy.data.objects[entry["id"]] for entry in entries if entry.get("animated")]
    deforming = frozenset(entry["id"] for entry in entries if entry.get("animated") and entry["kind"] == "collider"
                          and "vertices" in entry and deforms(bpy.data.objects[entry["id"]]))
    deforming |= {name for name, target in targets.items() if getattr(target, "skin", False)}
    return scene_dict, animated, deforming, targets
