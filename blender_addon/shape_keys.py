"""One baked frame as a shape key (meshes and legacy curves), bpy side.

Frame ``f`` becomes shape key ``tangle_fNNNN`` on top of a ``Basis`` (created when missing); its value
is keyframed LINEAR, 1 on ``f`` and 0 on the neighbouring frames, so playback is exact at integer frames
and a linear blend between them. The previous frame's key gets its closing 0 only when the next frame
arrives, so after a cancelled bake the last baked pose holds.
"""

from __future__ import annotations

import bpy
import numpy as np

from .core.bake_state import BASIS_NAME, shape_key_name


def shape_key_fcurve(key: bpy.types.Key | None, name: str):
    """The F-curve keyframing the value of shape key ``name`` of ``key`` (an object's ``data.shape_keys``),
    or None when there is none."""
    action = key.animation_data.action if key is not None and key.animation_data else None
    return action.fcurves.find(f'key_blocks["{name}"].value') if action is not None else None


def remove_shape_keys(obj: bpy.types.Object, blocks: list) -> int:
    """Remove the shape key ``blocks`` of ``obj`` and the F-curves of their values; returns how many."""
    for block in blocks:
        fcurve = shape_key_fcurve(obj.data.shape_keys, block.name)
        if fcurve is not None:
            fcurve.id_data.fcurves.remove(fcurve)
        obj.shape_key_remove(block)
    return len(blocks)


def _key_value(key_block, key: bpy.types.Key, frame: int, value: float) -> None:
    key_block.value = value
    key_block.keyframe_insert("value", frame=frame)
    fcurve = shape_key_fcurve(key, key_block.name)
    for point in fcurve.keyframe_points:
        point.interpolation = "LINEAR"


def write_shape_key(obj: bpy.types.Object, frame: int, first_frame: int, local_positions: np.ndarray):
    """Shape key ``tangle_fNNNN`` holding ``local_positions`` (N, 3) [m] (object local space) with its
    value keyframed as described above; returns the key block."""
    if obj.data.shape_keys is None:
        obj.shape_key_add(name=BASIS_NAME, from_mix=False)
        obj.tangle.created_basis = True
    key = obj.data.shape_keys
    key.use_relative = True
    name = shape_key_name(frame)
    existing = key.key_blocks.get(name)
    if existing is not None:
        obj.shape_key_remove(existing)
    block = obj.shape_key_add(name=name, from_mix=False)
    block.data.foreach_set("co", np.asarray(local_positions, np.float32).ravel())
    if frame > first_frame:
        _key_value(block, key, frame - 1, 0.0)
        previous = key.key_blocks.get(shape_key_name(frame - 1))
        if previous is not None:
            _key_value(previous, key, frame, 0.0)
    _key_value(block, key, frame, 1.0)
    return block
