"""Cloth and soft bodies on a deforming character: modifiers below the simulation, bpy side.

A cape carries an Armature (or Surface Deform, Mesh Deform, Lattice, Geometry Nodes, …) modifier so that its
pinned top follows the skin. As in Blender's own Cloth modifier, whose place in the stack means "simulate what
the modifiers above me made", the bake reads the mesh those modifiers deform:

- the start shape is the deformed mesh at the first frame, and every frame's deformed positions go to the
  server as the drive ``vertices``, the targets of the pinned vertices (``bake_io``);
- the baked shape keys replace what the modifiers did: when the first frame is written the modifiers are
  muted (their names kept in ``MUTED_PROPERTY``), so playback does not deform the result a second time, and
  Free Bake switches them on again.

While a bake reads the object, ``readable_skin`` switches the muted modifiers back on, switches off the
modifiers that are not skin (a Subdivision Surface after the simulation changes the vertex count) and mutes
Tangle's own frame shape keys, so a resumed bake reads the same skin as the first one.
"""

from __future__ import annotations

from contextlib import contextmanager

import bpy

from .core.bake_state import frame_of_shape_key

MUTED_PROPERTY = "tangle_muted_modifiers"  # modifiers the bake switched off, restored by Free Bake

# modifiers that move vertices without changing topology; Blender's own simulations are not a skin
SKIN_MODIFIERS = frozenset({
    "ARMATURE", "CAST", "CURVE", "DISPLACE", "HOOK", "LAPLACIANDEFORM", "LATTICE", "MESH_DEFORM",
    "SHRINKWRAP", "SIMPLE_DEFORM", "SMOOTH", "CORRECTIVE_SMOOTH", "LAPLACIANSMOOTH", "SURFACE_DEFORM",
    "WARP", "WAVE", "MESH_CACHE", "MESH_SEQUENCE_CACHE", "NODES",
})


def muted_names(obj: bpy.types.Object) -> list[str]:
    """Names of the modifiers a bake of ``obj`` muted (restored by ``restore_muted``)."""
    names = obj.get(MUTED_PROPERTY)
    return [] if not names else names.split("\n")


# the Mesh Cache modifier that plays a PC2 bake back (bake_output): the bake's output, never its skin
BAKE_CACHE_MODIFIER = "Tangle Cache"


def skin_modifiers(obj: bpy.types.Object) -> list[bpy.types.Modifier]:
    """The deforming modifiers of a cloth or soft body that its bake follows: enabled in the viewport, or
    muted by an earlier bake of it."""
    muted = set(muted_names(obj))
    return [modifier for modifier in obj.modifiers
            if modifier.type in SKIN_MODIFIERS and modifier.name != BAKE_CACHE_MODIFIER
            and (modifier.show_viewport or modifier.name in muted)]


def follows_skin(obj: bpy.types.Object) -> bool:
    """Whether a cloth or soft body's pinned vertices follow the mesh its modifiers deform."""
    return obj.type == "MESH" and obj.tangle.role in ("CLOTH", "SOFTBODY") and bool(skin_modifiers(obj))


def mute_modifiers(obj: bpy.types.Object, modifiers: list[bpy.types.Modifier]) -> None:
    """Switch ``modifiers`` off in the viewport and the render and remember them for ``restore_muted``."""
    names = muted_names(obj)
    for modifier in modifiers:
        modifier.show_viewport = modifier.show_render = False
        if modifier.name not in names:
            names.append(modifier.name)
    if names:
        obj[MUTED_PROPERTY] = "\n".join(names)


def restore_muted(obj: bpy.types.Object) -> None:
    """Switch the modifiers a bake muted back on (Free Bake)."""
    for name in muted_names(obj):
        modifier = obj.modifiers.get(name)
        if modifier is not None:
            modifier.show_viewport = modifier.show_render = True
    if MUTED_PROPERTY in obj:
        del obj[MUTED_PROPERTY]


def mute_skin(obj: bpy.types.Object) -> None:
    """The baked frames replace the skin modifiers from now on (called when the first frame is written)."""
    mute_modifiers(obj, [modifier for modifier in skin_modifiers(obj) if modifier.show_viewport])


@contextmanager
def readable_skin(objects: list[bpy.types.Object]):
    """Within the block, each of ``objects`` evaluates to its skin alone: the skin modifiers on (also those a
    bake muted), every other modifier off, Tangle's frame shape keys muted. Everything is put back after."""
    changed_modifiers, changed_keys = [], []
    try:
        for obj in objects:
            skin = {modifier.name for modifier in skin_modifiers(obj)}
            for modifier in obj.modifiers:
                wanted = modifier.name in skin
                if modifier.show_viewport != wanted:
                    changed_modifiers.append((modifier, modifier.show_viewport))
                    modifier.show_viewport = wanted
            keys = getattr(obj.data, "shape_keys", None)
            for block in ([] if keys is None else keys.key_blocks):
                if frame_of_shape_key(block.name) is not None and not block.mute:
                    changed_keys.append(block)
                    block.mute = True
        yield
    finally:
        for modifier, shown in changed_modifiers:
            modifier.show_viewport = shown
        for block in changed_keys:
            block.mute = False
