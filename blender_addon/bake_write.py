"""Writing a bake's results back into Blender: positions come back in WORLD space and are converted to object
local space with the inverse of ``matrix_world`` at bake time (per frame for hair objects that move), then
stored as one shape key per frame (cloth, soft bodies) or through ``hair_io`` (hair); Free Bake removes them."""

from __future__ import annotations

import bpy
import numpy as np

from . import hair_io
from .core import scene_export
from .core.bake_state import frame_of_shape_key
from .core.transforms import to_local
from .shape_keys import remove_shape_keys, write_shape_key
from .skin import mute_skin, restore_muted


def target_object(target) -> bpy.types.Object:
    obj = bpy.data.objects.get(target.object_name)
    if obj is None:
        raise scene_export.ExportError("object was deleted or renamed during the bake", target.object_name)
    return obj


def checked_local_positions(target, frame: int, positions_world: np.ndarray) -> np.ndarray:
    """A frame's positions (N, 3) [m] in the target object's local space at ``frame``, after checking
    their shape against the target (a wrong count names the object and frame)."""
    positions = np.asarray(positions_world)
    if positions.shape != (target.vertex_count, 3):
        count = target.vertex_count
        expected = f"the hair has {count} points" if isinstance(target, hair_io.HairTarget) else \
            f"mesh has {count} vertices"
        raise scene_export.ExportError(
            f"frame {frame}: server sent positions of shape {positions.shape}, {expected}", target.object_name)
    return to_local(positions, target.matrix_at(frame))


def write_frame(target, frame: int, first_frame: int, positions_world: np.ndarray) -> None:
    """Store one baked frame of a cloth / soft body (shape key ``tangle_fNNNN`` with keyframed value) or
    of a hair object (``hair_io.write_frame``; Curves keys may wait in a queue until ``flush_frames``).

    positions_world: (N, 3) float32 metres in world space. The key's value is 1 on ``frame`` and 0
    on the neighbouring frames (LINEAR), so playback is exact at integer frames; the previous frame's
    key gets its 0 at ``frame`` now, so the last baked frame holds after a cancelled bake.
    """
    obj = target_object(target)
    local = checked_local_positions(target, frame, positions_world)
    if isinstance(target, hair_io.HairTarget):
        hair_io.write_frame(obj, target, frame, first_frame, local)
    else:
        write_shape_key(obj, frame, first_frame, local)
        if target.skin:
            mute_skin(obj)     # the baked frames replace what the skin modifiers did: no second deformation
    obj.tangle.baked_topology = target.topology


def flush_frames(target) -> None:
    """Write what ``write_frame`` still holds: the queued keys of a Curves hair object (``hair_io``
    keys Curves frames in batches); nothing for other targets, whose frames are written at once."""
    if isinstance(target, hair_io.HairTarget) and target.pending.frames:
        hair_io.flush_curves_keys(target_object(target), target)


def free_bake(obj: bpy.types.Object) -> int:
    """Remove the baked shape keys of ``obj`` (or the keyframed points of a Curves hair object) and their
    animation; returns how many frames were removed."""
    if obj.type == "CURVES":
        return hair_io.free_curves_bake(obj)
    restore_muted(obj)
    key = getattr(obj.data, "shape_keys", None)
    obj.tangle.baked_topology = ""
    if key is None:
        obj.tangle.created_basis = False
        return 0
    action = key.animation_data.action if key.animation_data else None
    removed = remove_shape_keys(obj, [block for block in key.key_blocks if frame_of_shape_key(block.name) is not None])
    if action is not None and len(action.fcurves) == 0:
        key.animation_data.action = None
        if action.users == 0:
            bpy.data.actions.remove(action)
    remaining = obj.data.shape_keys
    if obj.tangle.created_basis and remaining is not None and len(remaining.key_blocks) == 1:
        obj.shape_key_remove(remaining.key_blocks[0])
    obj.tangle.created_basis = False
    return removed
