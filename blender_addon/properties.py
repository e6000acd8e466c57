"""Tangle properties: ``Object.tangle`` (role + per-role parameters) and ``Scene.tangle`` (bake settings).

Cloth, soft body, hair and collider parameters are generated from ``core/param_table.py`` so names,
defaults, ranges and tooltips (with units) match the solver server's parameter table exactly.
"""

import bpy
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    EnumProperty,
    FloatProperty,
    FloatVectorProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)
from bpy.types import PropertyGroup

from .core.connection import LOCAL
from .core.painted_maps import AT_ZERO_SUFFIX, DEFAULT_AT_ZERO, MAP_SUFFIX
from .core.param_table import CLOTH_PARAMS, COLLIDER_PARAMS, HAIR_PARAMS, SOFTBODY_PARAMS, ParamSpec

DEFAULT_SERVER_ADDRESS = LOCAL   # start or reuse a solver on this machine at Bake

ROLE_ITEMS = (
    ("NONE", "None", "Not part of the Tangle simulation"),
    ("HAIR", "Hair", "Simulated as hair strands (Curves or Curve object; Elastic Rods, Cosserat or Particles)"),
    ("CLOTH", "Cloth", "Simulated as cloth (Projective Dynamics)"),
    ("SOFTBODY", "Soft Body", "Simulated as a volumetric soft body (Projective Dynamics)"),
    ("COLLIDER", "Collider", "Obstacle the simulated objects collide with"),
)

COLLIDER_SHAPE_ITEMS = (
    ("PLANE", "Plane", "Infinite plane: the object's local XY plane through its origin, normal +Z"),
    ("SPHERE", "Sphere", "Sphere at the bounding-box center, radius half the largest bounding-box dimension"),
    ("BOX", "Box", "The object's bounding box"),
    ("TORUS", "Torus", "Torus fitted to the bounding box, ring in the local XY plane"),
    ("MESH", "Mesh", "The evaluated, triangulated mesh (deforming meshes are sent every frame)"),
)


def _label(name: str) -> str:
    return name.replace("_", " ").title()


def _property_for(spec: ParamSpec):
    """A bpy property declaration for one parameter of the server's table."""
    common = {"name": _label(spec.name), "description": spec.tooltip}
    if isinstance(spec.default, bool):
        return BoolProperty(default=spec.default, **common)
    if isinstance(spec.default, str):
        return EnumProperty(items=spec.choices, default=spec.default, **common)
    bounds = {"min": spec.minimum} | ({"max": spec.maximum} if spec.maximum is not None else {})
    if isinstance(spec.default, int):
        return IntProperty(default=spec.default, **{key: int(value) for key, value in bounds.items()}, **common)
    if isinstance(spec.default, tuple):
        subtype = {"subtype": "DIRECTION"} if len(spec.default) == 3 else {}
        return FloatVectorProperty(size=len(spec.default), default=spec.default, precision=3, **subtype, **bounds,
                                   **common)
    return FloatProperty(default=spec.default, precision=4, **bounds, **common)


def _map_properties(table: tuple[ParamSpec, ...], source: str) -> dict:
    """For every paintable parameter: ``<name>_map`` (the vertex group or attribute painting it) and
    ``<name>_map_zero`` (its factor at weight 0), see core.painted_maps."""
    properties = {}
    for spec in table:
        if not spec.paintable:
            continue
        label = _label(spec.name)
        properties[spec.name + MAP_SUFFIX] = StringProperty(
            name=f"{label} Map",
            description=f"{source} painting {label}: weight 1 gets the full value, weight 0 the value times the "
                        "factor at weight 0; empty: the same value everywhere")
        properties[spec.name + AT_ZERO_SUFFIX] = FloatProperty(
            name="At Weight 0", default=DEFAULT_AT_ZERO, min=0.0, max=1.0, precision=3, subtype="FACTOR",
            description=f"{label} at weight 0 of its map, as a fraction of the value set above")
    return properties


class TangleClothSettings(PropertyGroup):
    """Cloth parameters (protocol names, SI units) and their painted maps (vertex groups)."""

    __annotations__ = {spec.name: _property_for(spec) for spec in CLOTH_PARAMS} \
        | _map_properties(CLOTH_PARAMS, "Vertex group")


class TangleSoftBodySettings(PropertyGroup):
    """Soft body parameters (protocol names, SI units) and their painted maps (vertex groups)."""

    __annotations__ = {spec.name: _property_for(spec) for spec in SOFTBODY_PARAMS} \
        | _map_properties(SOFTBODY_PARAMS, "Vertex group")


class TangleHairSettings(PropertyGroup):
    """Hair parameters (protocol names, SI units) and their painted maps (Curves point or curve attributes)."""

    __annotations__ = {spec.name: _property_for(spec) for spec in HAIR_PARAMS} \
        | _map_properties(HAIR_PARAMS, "Float attribute (point or curve domain) of the Curves")


class TangleColliderSettings(PropertyGroup):
    """Collider parameters (protocol names, SI units)."""

    __annotations__ = {spec.name: _property_for(spec) for spec in COLLIDER_PARAMS}


class TangleObjectSettings(PropertyGroup):
    """Per-object Tangle settings, ``Object.tangle``."""

    role: EnumProperty(name="Role", items=ROLE_ITEMS, default="NONE",
                       description="What this object is in the Tangle simulation")
    cloth: PointerProperty(type=TangleClothSettings)
    softbody: PointerProperty(type=TangleSoftBodySettings)
    hair: PointerProperty(type=TangleHairSettings)
    use_scene_wind: BoolProperty(
        name="Scene Wind", default=True,
        description="Hair and cloth: blow with the scene's Wind and Turbulence force fields (direction: a Wind "
                    "field's Z axis; strength as acceleration [m/s²]; noise × strength and a Turbulence field's "
                    "strength: gust amplitude [m/s²]) instead of the wind settings below, when the scene has any")
    bind_to_surface: BoolProperty(
        name="Bind Roots", default=True,
        description="Curves hair: roots follow the Curves' emitter Surface (its deformed triangles); off: roots "
                    "follow the hair object's own transform")
    pin_group: StringProperty(
        name="Pin Group",
        description="Vertex group whose vertices are pinned (weight 1 pins exactly, lower weights pin softly; "
                    "cloth and soft body). A pin holds a position, not an angle: one pinned row is a hinge; "
                    "pin two rows to clamp an edge")
    collider: PointerProperty(type=TangleColliderSettings)
    collider_shape: EnumProperty(name="Shape", items=COLLIDER_SHAPE_ITEMS, default="PLANE",
                                 description="Primitive shape fitted to the object")
    baked_topology: StringProperty(
        name="Baked Topology", options={"HIDDEN"},
        description="Topology hash of the mesh when it was baked (empty when not baked)")
    created_basis: BoolProperty(
        name="Created Basis", options={"HIDDEN"},
        description="The bake created the Basis shape key, so Free Bake removes it again")


class TangleProblem(PropertyGroup):
    """One problem found by the pre-bake check, shown in the Tangle Bake panel."""

    object_name: StringProperty(name="Object")
    message: StringProperty(name="Problem")
    blocking: BoolProperty(name="Blocking", default=True,
                           description="The bake cannot start until this is fixed (otherwise a warning)")


class TangleSceneSettings(PropertyGroup):
    """Scene-level bake settings and live bake status, ``Scene.tangle``."""

    server_address: StringProperty(
        name="Server", default=DEFAULT_SERVER_ADDRESS,
        description="'local': a solver on this machine, started by the first Bake and reused after (no port "
                    "is saved); or the ZeroMQ address of a Tangle solver server (python -m solver_server "
                    "--bind ADDRESS), e.g. tcp://gpu-box:5555")
    timeout: FloatProperty(name="Timeout", default=5.0, min=1.0, soft_max=600.0, unit="TIME_ABSOLUTE",
                           description="Seconds without any message from the server before the bake fails; "
                                       "the client pings every third of it, so a silent server is noticed "
                                       "within 3 heartbeats [s]")
    substeps: IntProperty(name="Substeps", default=4, min=1, soft_max=64,
                          description="Solver steps per frame")
    preroll: IntProperty(name="Pre-roll", default=0, min=0, max=10000, soft_max=240,
                         description="Frames simulated before the first baked frame with every object held at its "
                                     "first-frame pose, so hair falls from its groom and cloth settles on its body "
                                     "before the shot starts (none of them is baked)")
    use_frame_range: BoolProperty(name="Custom Frame Range", default=False,
                                  description="Bake this frame range instead of the scene's")
    frame_start: IntProperty(name="Start", default=1, description="First baked frame (the input state)")
    frame_end: IntProperty(name="End", default=48, description="Last baked frame")
    is_baking: BoolProperty(name="Baking", default=False, options={"SKIP_SAVE"})
    progress: FloatProperty(name="Progress", default=0.0, min=0.0, max=1.0, subtype="FACTOR",
                            options={"SKIP_SAVE"})
    status: StringProperty(name="Status", default="", description="Result of the last bake")
    live_stats: StringProperty(name="Solver", default="", options={"SKIP_SAVE"},
                               description="The solver's figures for the last baked frame")
    server_info: StringProperty(name="Server Info", default="", options={"SKIP_SAVE"},
                                description="What the server reported on the last connection test")
    last_error: StringProperty(name="Last Error", default="", description="Error of the last bake, if any")
    problems: CollectionProperty(type=TangleProblem, name="Problems",
                                 description="What must be fixed before baking (from the last check)")

    # ---- bake workflow: connection profile, output route, checkpoints ----
    server_profile: StringProperty(
        name="Profile", default="",
        description="Server profile from the Tangle add-on preferences (address + CURVE keys); "
                    "empty: use the Server address above without encryption")
    output_route: EnumProperty(
        name="Output", default="SHAPE_KEYS",
        items=(("SHAPE_KEYS", "Shape Keys", "One shape key per frame, stored in the .blend"),
               ("PC2", "PC2 Cache", "One PC2 file per object next to the .blend (folder <blend name>_tangle), "
                                    "played by a Mesh Cache modifier: for heavy meshes")),
        description="Where baked frames go")
    hair_cache: EnumProperty(
        name="Hair Cache", default="GEOMETRY_NODES",
        items=(("GEOMETRY_NODES", "Geometry Nodes Bake",
                "Curves hair baked into a Geometry Nodes bake packed in the .blend (a 'Tangle Hair Cache' modifier): "
                "small files, fast playback, unpack to disk or export to Alembic from Blender"),
               ("KEYFRAMES", "Keyframes", "Curves hair keyframed point by point (one F-curve per point coordinate)")),
        description="Where baked frames of Curves hair go")
    checkpoint_every: IntProperty(
        name="Checkpoint Every", default=5, min=1, soft_max=100,
        description="Store the solver state every N frames with the bake (and the last frame), so Resume and "
                    "Re-bake from a frame continue exactly without re-simulating from the start [frames]")


classes = (
    TangleClothSettings,
    TangleSoftBodySettings,
    TangleHairSettings,
    TangleColliderSettings,
    TangleProblem,
    TangleObjectSettings,
    TangleSceneSettings,
)


def attach() -> None:
    """Add ``Object.tangle`` and ``Scene.tangle`` (after the classes are registered)."""
    bpy.types.Object.tangle = PointerProperty(type=TangleObjectSettings)
    bpy.types.Scene.tangle = PointerProperty(type=TangleSceneSettings)


def detach() -> None:
    del bpy.types.Scene.tangle
    del bpy.types.Object.tangle
