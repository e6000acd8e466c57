"""Where baked frames go, and the bake record stored with the scene (bpy side).

Two output routes for meshes per scene (``Scene.tangle.output_route``):

- ``SHAPE_KEYS``: one shape key per frame (``bake_write.write_frame``), everything inside the .blend.
- ``PC2``: one PC2 file per object in ``<blend folder>/<blend name>_tangle/<scene>/<object>.pc2``,
  played by a Mesh Cache modifier whose path is stored relative (``//``). Blender remaps relative
  paths on *Save As*, so a copy saved elsewhere still plays the same files; a bake only ever
  *writes* under the current .blend's own cache folder (re-baking in a Save-As copy first copies the
  kept frames there), so two .blend files never overwrite each other's cache.

Curves hair goes to keyframes or, with ``Scene.tangle.hair_cache`` = ``GEOMETRY_NODES``, to a Geometry
Nodes bake packed in the .blend (``hair_cache``). Every route can continue a bake: ``begin(keep_before)`` removes only frames >= ``keep_before`` and
leaves the earlier ones untouched (bit-identical).

The bake record (:class:`core.bake_state.BakeRecord`: range, route, topology per object, last baked
frame, solver checkpoints as ``.npz`` bytes) is an ID property of the Scene, ``scene["_tangle_bake"]``
(hidden in the UI by the leading underscore). Checkpoints are packed into the .blend on purpose: a
resume needs no server-side state and no extra file that could be lost when the .blend is copied to a
farm machine or saved elsewhere; their size is bounded by *Checkpoint Every*.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import bpy
import numpy as np

from . import bake_write, hair_cache, hair_io
from .core.bake_state import BakeRecord, BakeRefused, frame_of_shape_key, shape_key_name, split_route
from .core.pc2 import Pc2Error, Pc2Writer, read_header
from .core.transforms import to_local
from .shape_keys import remove_shape_keys, shape_key_fcurve
from .skin import BAKE_CACHE_MODIFIER, mute_skin

RECORD_PROPERTY = "_tangle_bake"
MESH_CACHE_NAME = BAKE_CACHE_MODIFIER
CACHE_FOLDER_SUFFIX = "_tangle"


# ---- bake record ------------------------------------------------------------------------------

def load_record(scene: bpy.types.Scene) -> BakeRecord | None:
    values = scene.get(RECORD_PROPERTY)
    return BakeRecord.from_properties(values.to_dict()) if values is not None else None


def save_record(scene: bpy.types.Scene, record: BakeRecord) -> None:
    scene[RECORD_PROPERTY] = record.to_properties()


def clear_record(scene: bpy.types.Scene) -> None:
    if RECORD_PROPERTY in scene:
        del scene[RECORD_PROPERTY]


def record_frame(scene: bpy.types.Scene, frame: int, checkpoint_blob: bytes | None) -> None:
    """Note that ``frame`` is baked (extends the unbroken run) and store its checkpoint, if any."""
    values = scene[RECORD_PROPERTY]
    last = values["last_frame"] if values["has_last_frame"] else values["frame_start"] - 1
    if frame == last + 1:
        values["last_frame"], values["has_last_frame"] = frame, True
    if checkpoint_blob is not None:
        values["checkpoints"][str(frame)] = checkpoint_blob


# ---- shape keys -------------------------------------------------------------------------------

def remove_shape_keys_from(obj: bpy.types.Object, first_removed: int) -> int:
    """Remove the baked shape keys of frames >= ``first_removed`` and their F-curves; the key of
    ``first_removed - 1`` loses its closing 0-key so its pose holds until new frames arrive."""
    key = obj.data.shape_keys
    if key is None:
        return 0
    removed = remove_shape_keys(obj, [block for block in key.key_blocks
                                      if (frame := frame_of_shape_key(block.name)) is not None
                                      and frame >= first_removed])
    previous = shape_key_fcurve(obj.data.shape_keys, shape_key_name(first_removed - 1))
    if previous is not None:
        for point in [p for p in previous.keyframe_points if p.co[0] >= first_removed]:
            previous.keyframe_points.remove(point)
    return removed


class ShapeKeyOutput:
    """Frames of one object as written by ``bake_write.write_frame``: shape keys ``tangle_f####`` for
    meshes (and legacy curves), keyframed points for Curves hair."""

    route = "SHAPE_KEYS"

    def __init__(self, scene: bpy.types.Scene, target, frame_start: int):
        self.target, self.frame_start = target, frame_start

    def check(self, keep_before: int | None) -> None:
        """Nothing to refuse: the kept frames stay where they are (read back, for the hair cache)."""

    def begin(self, keep_before: int | None) -> None:
        obj = bpy.data.objects[self.target.object_name]
        if keep_before is None:
            free_outputs(obj)
        elif obj.type == "CURVES":
            hair_io.remove_curves_frames_from(obj, keep_before)     # continued: later keys are appended
        else:
            remove_shape_keys_from(obj, keep_before)

    def write(self, frame: int, positions_world: np.ndarray) -> None:
        bake_write.write_frame(self.target, frame, self.frame_start, positions_world)

    def flush(self) -> None:
        """Write the frames still queued (Curves hair keys are written in batches)."""
        bake_write.flush_frames(self.target)


class GeometryNodesHairOutput(ShapeKeyOutput):
    """Frames of one Curves hair object as a Geometry Nodes bake packed in the .blend (``hair_cache``)."""

    route = "GEOMETRY_NODES"

    def begin(self, keep_before: int | None) -> None:
        obj = bpy.data.objects[self.target.object_name]
        if keep_before is None:
            free_outputs(obj)       # keyframes or a cache of an earlier bake, whichever it has
        hair_cache.begin_bake(obj, keep_before)
        obj.tangle.baked_topology = self.target.topology

    def write(self, frame: int, positions_world: np.ndarray) -> None:
        hair_cache.stage_frame(bake_write.target_object(self.target), frame,
                               bake_write.checked_local_positions(self.target, frame, positions_world))

    def flush(self) -> None:
        """Pack the staged frames (at the end of a bake, however it ended)."""
        obj = bpy.data.objects.get(self.target.object_name)
        if obj is not None:
            hair_cache.pack_staged(obj)


# ---- PC2 + Mesh Cache -------------------------------------------------------------------------

def _file_name(name: str) -> str:
    clean = bpy.path.clean_name(name)
    return clean if clean == name else f"{clean}_{hashlib.sha1(name.encode()).hexdigest()[:6]}"


def cache_file(scene: bpy.types.Scene, object_name: str) -> tuple[Path, str]:
    """(absolute path, ``//`` relative path) of an object's PC2 file for the current .blend."""
    if not bpy.data.filepath:
        raise BakeRefused("save the .blend first: the PC2 cache is written next to it "
                          "(or choose Output: Shape Keys)")
    blend = Path(bpy.data.filepath)
    relative = f"//{blend.stem}{CACHE_FOLDER_SUFFIX}/{_file_name(scene.name)}/{_file_name(object_name)}.pc2"
    return Path(bpy.path.abspath(relative)), relative


def mesh_cache_modifier(obj: bpy.types.Object):
    return next((m for m in obj.modifiers if m.type == "MESH_CACHE" and m.name == MESH_CACHE_NAME), None)


class Pc2Output:
    """Frames of one object appended to its PC2 file, played by a Mesh Cache modifier (first in the stack)."""

    route = "PC2"

    def __init__(self, scene: bpy.types.Scene, target, frame_start: int):
        self.scene_name, self.target, self.frame_start = scene.name, target, frame_start
        self.writer: Pc2Writer | None = None

    def check(self, keep_before: int | None) -> None:
        """Refuse before anything is sent: an unsaved .blend, or (continuing) a cache that cannot hold
        the kept frames."""
        name = self.target.object_name
        cache_file(bpy.data.scenes[self.scene_name], name)
        if keep_before is None:
            return
        modifier = mesh_cache_modifier(bpy.data.objects[name])
        if modifier is None:
            raise BakeRefused(f"object '{name}': its '{MESH_CACHE_NAME}' modifier was removed; bake from the start")
        current = Path(bpy.path.abspath(modifier.filepath))
        try:
            points, start, _, samples = read_header(current)
        except (OSError, Pc2Error) as error:
            raise BakeRefused(f"object '{name}': the PC2 cache {current} cannot be read ({error}); "
                              "bake from the start") from None
        kept = keep_before - self.frame_start
        if points != self.target.vertex_count or start != self.frame_start or samples < kept:
            raise BakeRefused(f"object '{name}': the PC2 cache {current} holds {samples} frames of {points} points "
                              f"from frame {start:g}, but {kept} frames of {self.target.vertex_count} points from "
                              f"frame {self.frame_start} are to be kept; bake from the start")

    def begin(self, keep_before: int | None) -> None:
        obj = bpy.data.objects[self.target.object_name]
        path, relative = cache_file(bpy.data.scenes[self.scene_name], obj.name)
        if keep_before is None:
            free_outputs(obj, delete_files=False)
            keep = 0
        else:
            keep = keep_before - self.frame_start
            modifier = mesh_cache_modifier(obj)
            current = Path(bpy.path.abspath(modifier.filepath)) if modifier is not None else path
            if current.resolve() != path.resolve():  # a Save-As copy: copy the kept frames, never write there
                path.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(current, path)
        self.writer = Pc2Writer(path, self.target.vertex_count, self.frame_start, keep_samples=keep)
        modifier = mesh_cache_modifier(obj) or obj.modifiers.new(MESH_CACHE_NAME, "MESH_CACHE")
        modifier.cache_format = "PC2"
        modifier.filepath = relative
        modifier.time_mode, modifier.play_mode = "FRAME", "SCENE"
        modifier.frame_start, modifier.frame_scale = float(self.frame_start), 1.0
        modifier.interpolation, modifier.deform_mode = "LINEAR", "OVERWRITE"
        modifier.forward_axis, modifier.up_axis, modifier.factor = "POS_Y", "POS_Z", 1.0
        index = list(obj.modifiers).index(modifier)
        if index != 0:
            obj.modifiers.move(index, 0)
        if getattr(self.target, "skin", False):
            mute_skin(obj)     # the cache replaces what the skin modifiers did: no second deformation
        obj.tangle.baked_topology = self.target.topology

    def write(self, frame: int, positions_world: np.ndarray) -> None:
        self.writer.append(frame, to_local(positions_world, self.target.matrix_at(frame)))
        obj = bpy.data.objects.get(self.target.object_name)
        if obj is not None:
            obj.update_tag()  # the Mesh Cache modifier re-reads the file

    def flush(self) -> None:
        """Nothing is queued: every frame is appended to the file as it arrives."""


OUTPUTS = {"SHAPE_KEYS": ShapeKeyOutput, "PC2": Pc2Output}


def output_for(route: str, scene: bpy.types.Scene, target, frame_start: int):
    """The output of one bake target (route: ``core.bake_state.bake_route``): the mesh route for meshes;
    Curves hair as keyframes or a Geometry Nodes bake; legacy Curve hair as shape keys."""
    mesh_route, hair_cache = split_route(route)
    kind = bpy.data.objects[target.object_name].type
    if kind == "MESH":
        return OUTPUTS[mesh_route](scene, target, frame_start)
    if kind == "CURVES" and hair_cache == "GEOMETRY_NODES":
        return GeometryNodesHairOutput(scene, target, frame_start)
    return ShapeKeyOutput(scene, target, frame_start)


def free_outputs(obj: bpy.types.Object, delete_files: bool = True) -> int:
    """Remove every baked output of ``obj`` (shape keys, hair keyframes, the Tangle Hair Cache modifier,
    the Tangle Mesh Cache modifier and, when it lies in the current .blend's own cache folder, its PC2
    file); returns how many frames were removed."""
    removed = bake_write.free_bake(obj)
    if obj.type == "CURVES":
        removed += hair_cache.free_hair_cache(obj)
    modifier = mesh_cache_modifier(obj)
    if modifier is not None:
        path = Path(bpy.path.abspath(modifier.filepath))
        own_folder = Path(bpy.path.abspath(f"//{Path(bpy.data.filepath).stem}{CACHE_FOLDER_SUFFIX}")) \
            if bpy.data.filepath else None
        if path.is_file():
            try:
                removed += read_header(path)[3]
            except Pc2Error:
                pass  # a damaged cache is removed all the same
            if delete_files and own_folder is not None and own_folder.resolve() in path.resolve().parents:
                path.unlink()
        obj.modifiers.remove(modifier)
    obj.tangle.baked_topology = ""
    return removed
