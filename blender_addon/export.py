"""What a bake sends, read from the scene once and checked: the scene dict, the drive frames and the bake
targets. Above ``checks`` (object checks before the read, warnings on what was read) and ``bake_io`` (whose
readers it calls), so neither imports the other back. Check Scene runs ``check_scene``, the same checks
around the same read."""

from __future__ import annotations

from dataclasses import dataclass

import bpy

from .bake_io import (deforms, drive_frames, export_collider, export_hair, export_simulated_mesh, frame_range,
                      marked_objects, uses_emitter)
from .checks import exported_problems, object_problems, store_problems
from .core import scene_export
from .core.param_table import COLLIDER_PARAMS, defaults
from .core.validation import Problem, blocking, summary
from .skin import follows_skin, readable_skin

SIMULATED_ROLES = ("CLOTH", "SOFTBODY")
ROLES_IN_CHECK_ORDER = ("CLOTH", "SOFTBODY", "HAIR", "COLLIDER")


@dataclass
class FirstFrame:
    """The scene read at the bake's first frame: its protocol object entries, the objects that move, the
    names of the deforming mesh colliders and skinned meshes (their vertices go with every drive frame), and
    the bake targets by object name."""

    entries: list
    animated: list
    deforming: frozenset
    targets: dict


def export_scene(scene: bpy.types.Scene) -> tuple[dict, dict | None, dict[str, object]]:
    """Everything a bake sends: (scene dict, drive frames or None, bake targets by object name).

    Raises ExportError naming the first problem's object (all problems are listed in
    ``Scene.tangle.problems``) before anything is sent. The objects are read at the first frame of the range
    (the input state), whatever the current frame is; the current frame is restored.
    """
    problems, read = checked_export(scene, read_errors_raise=True)
    stopping = blocking(problems)
    if stopping:
        first_problem = summary(stopping)
        raise scene_export.ExportError(first_problem[len(stopping[0].object) + 2:], stopping[0].object)
    first, last = frame_range(scene)
    fps = scene.render.fps / scene.render.fps_base
    gravity = [round(g, 6) for g in scene.gravity] if scene.use_gravity else [0.0, 0.0, 0.0]
    scene_dict = scene_export.build_scene(read.entries, fps, first, last, scene.tangle.substeps, tuple(gravity),
                                          preroll=scene.tangle.preroll)
    drive = None
    if read.animated:
        with readable_skin(_skinned(scene)):
            drive = drive_frames(scene, read.animated, first, last, read.deforming)
    for name, target in read.targets.items():  # objects that move convert their results with each frame's transform
        if drive is not None and name in drive[first]:
            target.matrices = {frame: values[name]["matrix_world"] for frame, values in drive.items()}
    return scene_dict, drive, read.targets


def check_scene(scene: bpy.types.Scene) -> list[Problem]:
    """Check every marked object of ``scene``; store and return the problems, blocking ones and warnings
    together (none blocking: ready to bake)."""
    return checked_export(scene)[0]


def checked_export(scene: bpy.types.Scene, read_errors_raise: bool = False) -> tuple[list[Problem], FirstFrame | None]:
    """(problems, the scene read at the first frame or None). Every marked object is checked first; when
    none has a blocking problem the scene is read once and the warnings come from what was read, which a bake
    then sends. Otherwise the hair and colliders without problems are read for their warnings, so an artist
    sees every warning while fixing what blocks. The problems are stored in ``Scene.tangle.problems``. An
    object the read refuses (ExportError) is raised with ``read_errors_raise``, else listed as a problem."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    problems = []
    for role in ROLES_IN_CHECK_ORDER:
        for obj in marked_objects(scene, role):
            problems += object_problems(obj, scene, depsgraph)
    blocked = {problem.object for problem in blocking(problems)}
    colliders = {obj.name for obj in marked_objects(scene, "COLLIDER")}
    read = None
    if blocked:
        warned = {obj.name for obj in marked_objects(scene, "HAIR")} | colliders
        entries = _at_first_frame(scene, lambda: _read_for_warnings(scene, warned - blocked))
    else:
        try:
            read = _at_first_frame(scene, lambda: _read(scene))
        except scene_export.ExportError as error:
            if read_errors_raise:
                store_problems(scene, problems)
                raise
            problems.append(Problem(error.object or scene.name, error.message))
        entries = [] if read is None else read.entries
    problems += exported_problems(entries, colliders)
    store_problems(scene, problems)
    return problems, read


def _skinned(scene: bpy.types.Scene) -> list:
    return [obj for role in SIMULATED_ROLES for obj in marked_objects(scene, role) if follows_skin(obj)]


def _at_first_frame(scene: bpy.types.Scene, reader):
    """``reader()`` run with the scene at the first frame of the bake range (skin modifiers readable); the
    current frame is restored."""
    current_frame, current_subframe = scene.frame_current, scene.frame_subframe
    with readable_skin(_skinned(scene)):
        scene.frame_set(frame_range(scene)[0])
        try:
            return reader()
        finally:
            scene.frame_set(current_frame, subframe=current_subframe)


def _read(scene: bpy.types.Scene) -> FirstFrame:
    """Every marked object (and every unmarked hair emitter surface, a mesh collider with the default collider
    parameters) read at the current frame."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    entries, targets = [], {}
    for obj in [obj for role in SIMULATED_ROLES for obj in marked_objects(scene, role)]:
        entry, targets[obj.name] = export_simulated_mesh(obj, scene, depsgraph)
        entries.append(entry)
    hairs = marked_objects(scene, "HAIR")
    for obj in hairs:
        entry, targets[obj.name] = export_hair(obj, depsgraph, scene)
        entries.append(entry)
    colliders = marked_objects(scene, "COLLIDER")
    entries += [export_collider(obj, depsgraph) for obj in colliders]
    emitters = sorted({obj.data.surface.name for obj in hairs if uses_emitter(obj)} - {obj.name for obj in colliders})
    for name in emitters:
        entries.append(export_collider(bpy.data.objects[name], depsgraph, defaults(COLLIDER_PARAMS)))
    animated = [bpy.data.objects[entry["id"]] for entry in entries if entry.get("animated")]
    deforming = frozenset(entry["id"] for entry in entries if entry.get("animated") and entry["kind"] == "collider"
                          and "vertices" in entry and deforms(bpy.data.objects[entry["id"]]))
    deforming |= {name for name, target in targets.items() if getattr(target, "skin", False)}
    return FirstFrame(entries, animated, frozenset(deforming), targets)


def _read_for_warnings(scene: bpy.types.Scene, names: set[str]) -> list[dict]:
    """The entries of the marked hair and colliders named in ``names``, read at the current frame; a hair whose
    emitter cannot be read is left out (its emitter's problem is listed already)."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    entries = [export_collider(obj, depsgraph) for obj in marked_objects(scene, "COLLIDER") if obj.name in names]
    for obj in marked_objects(scene, "HAIR"):
        if obj.name not in names:
            continue
        try:
            entries.append(export_hair(obj, depsgraph, scene)[0])
        except scene_export.ExportError:
            continue
    return entries
