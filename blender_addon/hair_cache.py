"""Curves hair baked as a Geometry Nodes bake packed into the .blend (bpy side): the cache Blender reads
natively, instead of one F-curve per point coordinate.

The groom itself is never written: a *Tangle Hair Cache* geometry-nodes modifier, first in the stack,
replaces the point positions.

- During a bake each frame arrives as a point attribute ``tangle_frame_<frame>`` (object local space,
  float3). The shared node group reads the attribute named after the scene's current frame (Scene
  Time → Value to String → Replace String into a Named Attribute) and sets the positions where it
  exists, so baked frames play while the bake is still running.
- When the bake ends (finished, cancelled or failed) ``bake_output.GeometryNodesHairOutput.flush`` bakes the
  node group's Bake node over the staged frames with Blender's own operator, packs the result into
  the .blend and removes the staging attributes. A file opened without Tangle plays the bake; the
  modifier's Bake panel can unpack it to disk, and File > Export > Alembic exports the animation.
- Resume and re-bake from a frame read the kept frames back from the packed bake into staging
  attributes (other modifiers switched off while reading), delete the bake, and continue.
- Free Bake removes the modifier and any staging attributes: the groom is exactly as it was.

Deform-on-surface modifiers are switched off while the cache exists (the baked positions already
follow the surface), as for keyframed hair (``hair_io``).
"""

from __future__ import annotations

import bpy
import numpy as np

from . import hair_io

MODIFIER_NAME = "Tangle Hair Cache"
NODE_GROUP_NAME = "Tangle Hair Cache"
STAGING_PREFIX = "tangle_frame_"
FRAME_TOKEN = "#"
_GROUP_VERSION_PROPERTY = "tangle_hair_cache_version"
_GROUP_VERSION = 1


def staging_name(frame: int) -> str:
    """Name of the point attribute holding ``frame`` while the bake runs (what the node group looks up)."""
    return f"{STAGING_PREFIX}{frame}"


def staged_frames(curves: bpy.types.Curves) -> list[int]:
    """Frames held as staging attributes on ``curves``, ascending."""
    frames = []
    for attribute in curves.attributes:
        suffix = attribute.name[len(STAGING_PREFIX):] if attribute.name.startswith(STAGING_PREFIX) else None
        if suffix and suffix.lstrip("-").isdigit():
            frames.append(int(suffix))
    return sorted(frames)


def _remove_staged(curves: bpy.types.Curves, frames: list[int]) -> None:
    for frame in frames:
        attribute = curves.attributes.get(staging_name(frame))
        if attribute is not None:
            curves.attributes.remove(attribute)


def cache_node_group() -> bpy.types.NodeTree:
    """The node group every cache modifier uses (created once per .blend):
    Group Input → Set Position(Named Attribute ``tangle_frame_<scene frame>``, where it exists) → Bake."""
    group = bpy.data.node_groups.get(NODE_GROUP_NAME)
    if group is not None and group.get(_GROUP_VERSION_PROPERTY) == _GROUP_VERSION:
        return group
    group = bpy.data.node_groups.new(NODE_GROUP_NAME, "GeometryNodeTree")
    group[_GROUP_VERSION_PROPERTY] = _GROUP_VERSION
    group.is_modifier = True
    group.interface.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    group.interface.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    nodes, links = group.nodes, group.links
    group_input, group_output = nodes.new("NodeGroupInput"), nodes.new("NodeGroupOutput")
    scene_time = nodes.new("GeometryNodeInputSceneTime")
    frame_text = nodes.new("FunctionNodeValueToString")           # Decimals 0: "12", "-3"
    template = nodes.new("FunctionNodeInputString")
    template.string = f"{STAGING_PREFIX}{FRAME_TOKEN}"
    name = nodes.new("FunctionNodeReplaceString")
    name.inputs["Find"].default_value = FRAME_TOKEN
    staged = nodes.new("GeometryNodeInputNamedAttribute")
    staged.data_type = "FLOAT_VECTOR"
    set_position = nodes.new("GeometryNodeSetPosition")
    bake = nodes.new("GeometryNodeBake")
    links.new(scene_time.outputs["Frame"], frame_text.inputs["Value"])
    links.new(template.outputs[0], name.inputs["String"])
    links.new(frame_text.outputs[0], name.inputs["Replace"])
    links.new(name.outputs[0], staged.inputs["Name"])
    links.new(group_input.outputs[0], set_position.inputs["Geometry"])
    links.new(staged.outputs["Attribute"], set_position.inputs["Position"])
    links.new(staged.outputs["Exists"], set_position.inputs["Selection"])
    links.new(set_position.outputs[0], bake.inputs[0])
    links.new(bake.outputs[0], group_output.inputs[0])
    for column, node in enumerate((group_input, scene_time, frame_text, name, staged, set_position, bake,
                                   group_output)):
        node.location = (column * 200.0, 0.0)
    template.location = (400.0, -200.0)
    return group


def cache_modifier(obj: bpy.types.Object):
    return next((m for m in obj.modifiers if m.type == "NODES" and m.name == MODIFIER_NAME), None)


def _ensure_modifier(obj: bpy.types.Object):
    modifier = cache_modifier(obj) or obj.modifiers.new(MODIFIER_NAME, "NODES")
    if modifier.node_group is None or modifier.node_group.name != NODE_GROUP_NAME:
        modifier.node_group = cache_node_group()
    index = list(obj.modifiers).index(modifier)
    if index != 0:
        obj.modifiers.move(index, 0)
    return modifier


BAKED_RANGE_PROPERTY = "tangle_hair_cache_frames"  # [first, last] of the packed bake, on the object


def baked_range(obj: bpy.types.Object) -> tuple[int, int] | None:
    """(first, last) frame of the packed bake, None when there is none."""
    values = obj.get(BAKED_RANGE_PROPERTY)
    return (int(values[0]), int(values[1])) if values is not None and cache_modifier(obj) is not None else None


def _run_bake_operator(obj: bpy.types.Object, modifier, operator) -> None:
    with bpy.context.temp_override(object=obj, active_object=obj):
        result = operator(session_uid=obj.session_uid, modifier_name=modifier.name,
                          bake_id=modifier.bakes[0].bake_id)
    if "FINISHED" not in result:
        raise RuntimeError(f"object '{obj.name}': Blender's geometry-nodes bake returned {result}")


def _pack(obj: bpy.types.Object, frames: list[int]) -> None:
    """Bake the staged frames into the modifier's Bake node, packed in the .blend; drop the staging."""
    modifier = _ensure_modifier(obj)
    item = modifier.bakes[0]
    item.bake_mode, item.bake_target = "ANIMATION", "PACKED"
    item.use_custom_simulation_frame_range = True
    item.frame_start, item.frame_end = frames[0], frames[-1]
    _run_bake_operator(obj, modifier, bpy.ops.object.geometry_node_bake_single)
    obj[BAKED_RANGE_PROPERTY] = [frames[0], frames[-1]]
    _remove_staged(obj.data, frames)


def _delete_bake(obj: bpy.types.Object, modifier) -> None:
    if BAKED_RANGE_PROPERTY in obj:
        _run_bake_operator(obj, modifier, bpy.ops.object.geometry_node_bake_delete_single)
        del obj[BAKED_RANGE_PROPERTY]


def _evaluated_positions(obj: bpy.types.Object, frame: int) -> np.ndarray:
    scene = bpy.context.scene
    scene.frame_set(frame)
    evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    positions = np.empty(len(evaluated.data.points) * 3, np.float32)
    evaluated.data.attributes["position"].data.foreach_get("vector", positions)
    return positions


def _unpack_to_staging(obj: bpy.types.Object, keep_before: int) -> None:
    """Read the packed frames < ``keep_before`` back into staging attributes and delete the bake (the
    other modifiers are off meanwhile, so what is read is the cache modifier's own output)."""
    modifier, frames = cache_modifier(obj), baked_range(obj)
    if frames is None:
        return
    first, last = frames
    others = [m for m in obj.modifiers if m != modifier and m.show_viewport]
    scene = bpy.context.scene
    current = scene.frame_current
    for other in others:
        other.show_viewport = False
    try:
        curves = obj.data
        for frame in range(first, min(last, keep_before - 1) + 1):
            values = _evaluated_positions(obj, frame)
            attribute = curves.attributes.get(staging_name(frame)) or \
                curves.attributes.new(staging_name(frame), "FLOAT_VECTOR", "POINT")
            attribute.data.foreach_set("vector", values)
    finally:
        for other in others:
            other.show_viewport = True
        scene.frame_set(current)
    _delete_bake(obj, modifier)


def free_hair_cache(obj: bpy.types.Object) -> int:
    """Remove the cache modifier (packed bake included) and any staging attributes; returns how many
    frames were removed."""
    staged, frames, modifier = staged_frames(obj.data), baked_range(obj), cache_modifier(obj)
    _remove_staged(obj.data, staged)
    removed = max(len(staged), 0 if frames is None else frames[1] - frames[0] + 1)
    if BAKED_RANGE_PROPERTY in obj:
        del obj[BAKED_RANGE_PROPERTY]
    if modifier is not None:
        obj.modifiers.remove(modifier)
        hair_io.restore_surface_deform(obj)
    return removed


def begin_bake(obj: bpy.types.Object, keep_before: int | None) -> None:
    """Get ``obj`` ready to receive frames (a bake from the start: after its earlier outputs were freed);
    a continuation reads the frames < ``keep_before`` back into staging and drops later ones."""
    if keep_before is not None:
        _unpack_to_staging(obj, keep_before)
        _remove_staged(obj.data, [frame for frame in staged_frames(obj.data) if frame >= keep_before])
    hair_io.mute_surface_deform(obj)
    _ensure_modifier(obj)


def stage_frame(obj: bpy.types.Object, frame: int, local: np.ndarray) -> None:
    """Hold one frame's positions (N, 3) [m], object local space, until :func:`pack_staged`."""
    curves = obj.data
    attribute = curves.attributes.get(staging_name(frame)) or \
        curves.attributes.new(staging_name(frame), "FLOAT_VECTOR", "POINT")
    attribute.data.foreach_set("vector", np.ascontiguousarray(local, np.float32).ravel())
    curves.update_tag()


def pack_staged(obj: bpy.types.Object) -> None:
    """Bake the staged frames into the packed Geometry Nodes bake (nothing to do when none are staged)."""
    frames = staged_frames(obj.data)
    if frames:
        _pack(obj, frames)
