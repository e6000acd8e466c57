"""The demo scene: what Tangle does best, in one 2 s shot. Suzanne (Blender's monkey, an open mesh with
separate eye shells) turns her head while a cotton cloth with self-collision falls over her and settles; a
second head turns from side to side while its long Elastic Rods hair (every strand simulated, with hair–hair
and hair–head friction contact) falls from the groom and flows with the turns; a jelly cube (soft body)
drops onto the floor and wobbles.

Builds the scene in (headless) bpy, and renders Workbench previews plus a contact sheet composed with
numpy. Used by ``python -m blender_addon.cli demo``.
"""

from __future__ import annotations

import math
from pathlib import Path

import bpy
import mathutils
import numpy as np

CLOTH_NAME = "Cloth"
CHARACTER_NAME = "Suzanne"
FLOOR_NAME = "Floor"
JELLY_NAME = "Jelly"
HEAD_NAME = "Head"
HAIR_NAME = "Hair"


def grid_mesh(name: str, vertices_per_side: int, size: float) -> bpy.types.Mesh:
    """A square grid mesh in the local XY plane centred on the origin: n² vertices, (n-1)² quads."""
    n = vertices_per_side
    coordinates = np.linspace(-size / 2, size / 2, n)
    x, y = np.meshgrid(coordinates, coordinates, indexing="xy")
    vertices = np.stack([x.ravel(), y.ravel(), np.zeros(n * n)], axis=1)
    corner = (np.arange(n - 1)[None, :] + n * np.arange(n - 1)[:, None]).ravel()
    quads = np.stack([corner, corner + 1, corner + n + 1, corner + n], axis=1)
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(vertices.tolist(), [], quads.tolist())
    mesh.validate()
    return mesh


def _material(name: str, rgba: tuple[float, float, float, float]) -> bpy.types.Material:
    material = bpy.data.materials.new(name)
    material.diffuse_color = rgba
    return material


def grow_hair(surface: bpy.types.Object, name: str, points_per_strand: int, length: float, min_height: float,
              max_strands: int | None = None, keep=None, groom=None) -> tuple[bpy.types.Object, list[int], np.ndarray]:
    """A Curves hair object on ``surface`` (a mesh with a UV map): one strand from the centroid of every loop
    triangle whose centroid is above ``min_height`` (object local z) and that ``keep(centroids (T, 3), normals
    (T, 3)) -> bool (T,)`` accepts (all by default), at most ``max_strands`` of them spread evenly over those
    triangles (in the order of their centroids' z, y, x); bound as Blender's hair tools bind it
    (``Curves.surface``, ``surface_uv_map`` and the per-strand ``surface_uv_coordinate``). ``groom(roots (S, 3),
    normals (S, 3), arc (P,)) -> (S, P, 3)`` lays the strands out in the surface's local space from their
    roots and the arc length [m] of each point (default: straight along the normal). Returns (object,
    triangle indices, world points (N, 3))."""
    mesh = surface.data
    mesh.calc_loop_triangles()
    local = np.empty(len(mesh.vertices) * 3)
    mesh.vertices.foreach_get("co", local)
    local = local.reshape(-1, 3)
    corners = np.empty(len(mesh.loop_triangles) * 3, np.int32)
    mesh.loop_triangles.foreach_get("vertices", corners)
    loops = np.empty(len(mesh.loop_triangles) * 3, np.int32)
    mesh.loop_triangles.foreach_get("loops", loops)
    uv_layer = mesh.uv_layers.active
    uvs = np.empty(len(mesh.loops) * 2)
    uv_layer.uv.foreach_get("vector", uvs)
    centroids = local[corners.reshape(-1, 3)].mean(axis=1)
    normals = np.empty(len(mesh.loop_triangles) * 3)
    mesh.loop_triangles.foreach_get("normal", normals)
    normals = normals.reshape(-1, 3)
    wanted = centroids[:, 2] > min_height
    if keep is not None:
        wanted &= keep(centroids, normals)
    # by position, not by triangle index: a new primitive's faces come in a different order in each session
    chosen = np.flatnonzero(wanted)
    chosen = chosen[np.lexsort(centroids[chosen].round(6).T)]      # last key first: z, then y, then x
    if max_strands is not None and len(chosen) > max_strands:
        chosen = chosen[np.linspace(0, len(chosen) - 1, max_strands).round().astype(int)]
    normals = normals[chosen]
    root_uvs = uvs.reshape(-1, 2)[loops.reshape(-1, 3)[chosen]].mean(axis=1)
    arc = np.linspace(0.0, length, points_per_strand)
    if groom is None:
        strands = centroids[chosen][:, None, :] + arc[None, :, None] * normals[:, None, :]
    else:
        strands = groom(centroids[chosen], normals, arc)
    points_local = strands.reshape(-1, 3)
    matrix = np.array(surface.matrix_world)
    points = points_local @ matrix[:3, :3].T + matrix[:3, 3]
    curves = bpy.data.hair_curves.new(name)
    curves.add_curves([points_per_strand] * len(chosen))
    curves.position_data.foreach_set("vector", points.astype(np.float32).ravel())
    curves.surface, curves.surface_uv_map = surface, uv_layer.name
    attribute = curves.attributes.new("surface_uv_coordinate", "FLOAT2", "CURVE")
    attribute.data.foreach_set("vector", root_uvs.astype(np.float32).ravel())
    hair = bpy.data.objects.new(name, curves)
    bpy.context.scene.collection.objects.link(hair)
    return hair, chosen.tolist(), points


def combed_over_sphere(radius: float, lift: float):
    """A ``grow_hair`` groom for a sphere of ``radius`` [m] centred on the local origin: each strand leaves
    its root along the normal, follows the scalp ``lift`` [m] above it down its meridian (away from the
    crown), and hangs straight down from the height where it reaches the side of the head."""
    def groom(roots, normals, arc):
        shell = radius + lift
        polar = np.arccos(np.clip(roots[:, 2] / np.linalg.norm(roots, axis=1), -1.0, 1.0))     # from +Z
        azimuth = np.arctan2(roots[:, 1], roots[:, 0])
        along = np.maximum(arc - lift, 0.0)                                  # arc length past the lift
        hang_polar = np.radians(100.0)                                       # just below the equator
        on_scalp = np.minimum(along[None, :] / shell, np.maximum(hang_polar - polar, 0.0)[:, None])
        angle = polar[:, None] + on_scalp
        points = shell * np.stack([np.sin(angle) * np.cos(azimuth)[:, None], np.sin(angle) * np.sin(azimuth)[:, None],
                                   np.cos(angle)], axis=-1)
        hanging = along[None, :] - on_scalp * shell                          # the rest hangs down
        points[..., 2] -= hanging
        first = roots[:, None, :] + arc[None, :, None] * normals[:, None, :]     # out along the normal
        return np.where((arc <= lift)[None, :, None], first, points)
    return groom


def _add_jelly(scene: bpy.types.Scene) -> bpy.types.Object:
    """A 0.35 m jelly cube, tilted, dropping from 0.8 m onto the floor beside the head with hair."""
    bpy.ops.mesh.primitive_cube_add(size=0.35, location=(1.3, -0.6, 0.8), rotation=(0.35, 0.25, 0.0))
    jelly = bpy.context.active_object
    jelly.name = jelly.data.name = JELLY_NAME
    jelly.data.materials.append(_material("Jelly", (0.3, 0.8, 0.35, 1.0)))
    jelly.tangle.role = "SOFTBODY"
    bpy.ops.tangle.apply_preset(preset="Jelly")
    # 45 kg of jelly: a real gelatin modulus (5 kPa) would splash flat, a firmer one wobbles and keeps its shape
    jelly.tangle.softbody.young_modulus = 2.0e5
    jelly.tangle.softbody.tet_resolution = 5
    return jelly


def _turning(obj: bpy.types.Object, frames: int, degrees: float, swings: float) -> None:
    """Key ``obj``'s rotation about Z: it turns ``degrees`` to one side and the other, ``swings`` times over
    ``frames`` (starting facing forward, so a bake from frame 1 starts from the modelled pose)."""
    rest = obj.rotation_euler.z
    for frame in range(1, frames + 1, 4):
        obj.rotation_euler.z = rest + math.radians(degrees) * math.sin(2.0 * math.pi * swings * (frame - 1) / frames)
        obj.keyframe_insert("rotation_euler", index=2, frame=frame)
    obj.rotation_euler.z = rest


def _turning_collider(name: str, skin: tuple[float, float, float, float], frames: int,
                      degrees: float) -> bpy.types.Object:
    """The mesh just added (the active object), named ``name``, smooth with a ``skin`` colour, a Mesh collider
    that turns ``degrees`` to each side and back once over ``frames``."""
    obj = bpy.context.active_object
    obj.name = obj.data.name = name
    obj.data.materials.append(_material(f"Skin {name}", skin))
    bpy.ops.object.shade_smooth()
    obj.tangle.role, obj.tangle.collider_shape = "COLLIDER", "MESH"
    _turning(obj, frames, degrees=degrees, swings=1.0)
    return obj


def _add_character_with_cloth(scene: bpy.types.Scene, frames: int, vertices_per_side: int) -> bpy.types.Object:
    """Suzanne (Blender's monkey: open, with separate eye shells) turning her head, as a mesh collider, and a
    cotton cloth dropped over her that settles and slides as she turns (self-collision on)."""
    bpy.ops.mesh.primitive_monkey_add(size=0.9, location=(-0.75, 0.2, 0.75))
    _turning_collider(CHARACTER_NAME, (0.9, 0.7, 0.55, 1.0), frames, degrees=35.0)

    cloth = bpy.data.objects.new(CLOTH_NAME, grid_mesh(CLOTH_NAME, vertices_per_side, 1.2))
    scene.collection.objects.link(cloth)
    cloth.location = (-0.75, 0.25, 1.25)
    cloth.rotation_euler = (0.0, 0.0, math.radians(20.0))
    cloth.data.materials.append(_material("Cloth", (0.85, 0.25, 0.2, 1.0)))
    for polygon in cloth.data.polygons:
        polygon.use_smooth = True
    cloth.tangle.role = "CLOTH"
    bpy.context.view_layer.objects.active = cloth
    bpy.ops.tangle.apply_preset(preset="Cotton")
    cloth.tangle.cloth.self_collision = True
    cloth.tangle.cloth.thickness = 0.004
    cloth.tangle.cloth.damping = 0.5
    return cloth


def _add_head_with_hair(scene: bpy.types.Scene, frames: int) -> tuple[bpy.types.Object, bpy.types.Object]:
    """A head turning from side to side with long Elastic Rods hair (every strand simulated: Discrete
    Elastic Rods with hair–hair and hair–head Coulomb friction contact) that falls from its groom onto the
    head and flows as the head turns."""
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.22, segments=24, ring_count=12, location=(0.85, 0.35, 1.0))
    head = _turning_collider(HEAD_NAME, (0.75, 0.55, 0.45, 1.0), frames, degrees=30.0)
    scene.frame_set(1)
    # a hairline: no hair on the face side (local −Y) below the crown
    def scalp(centroids, _normals):
        return (centroids[:, 1] > -0.1) | (centroids[:, 2] > 0.15)

    hair, _, _ = grow_hair(head, HAIR_NAME, points_per_strand=14, length=0.5, min_height=0.02, max_strands=120,
                           keep=scalp, groom=combed_over_sphere(0.22, 0.01))
    radius = hair.data.attributes.get("radius") or hair.data.attributes.new("radius", "FLOAT", "POINT")
    radius.data.foreach_set("value", np.tile(np.linspace(3.5e-3, 1.0e-3, 14), len(hair.data.curves)).astype(np.float32))
    hair.data.materials.append(_material(HAIR_NAME, (0.22, 0.12, 0.06, 1.0)))
    hair.tangle.role = "HAIR"
    bpy.context.view_layer.objects.active = hair
    bpy.ops.tangle.apply_preset(preset="Straight Fine")
    hair.tangle.hair.model = "der"
    # each simulated strand stands for a lock of hair: 0.2 mm thick, it falls and flows like hair and keeps the
    # hair–hair contacts few enough for a quick preview (0.03 mm strands need thousands for the same look)
    hair.tangle.hair.radius = 2.0e-4
    hair.tangle.hair.damping = 0.5
    return head, hair


def build_scene(frames: int = 48, vertices_per_side: int = 32, substeps: int = 4) -> bpy.types.Scene:
    """Replace the current file with the demo scene; returns the scene (frames 1..frames, 24 fps)."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    scene.render.fps, scene.render.fps_base = 24, 1.0
    scene.tangle.substeps = substeps

    bpy.ops.mesh.primitive_plane_add(size=30.0)
    floor = bpy.context.active_object
    floor.name = FLOOR_NAME
    floor.data.materials.append(_material("Floor", (0.8, 0.8, 0.78, 1.0)))
    floor.tangle.role, floor.tangle.collider_shape = "COLLIDER", "PLANE"

    _add_character_with_cloth(scene, frames, vertices_per_side)
    _add_head_with_hair(scene, frames)
    _add_jelly(scene)
    scene.frame_set(1)

    camera = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
    scene.collection.objects.link(camera)
    camera.location = (0.9, -3.9, 2.0)
    look_at = mathutils.Vector((0.05, 0.1, 0.75))
    camera.rotation_euler = (look_at - camera.location).to_track_quat("-Z", "Y").to_euler()
    camera.data.lens = 40.0
    scene.camera = camera
    sun = bpy.data.objects.new("Sun", bpy.data.lights.new("Sun", type="SUN"))
    scene.collection.objects.link(sun)
    sun.rotation_euler = (math.radians(40.0), math.radians(10.0), math.radians(30.0))

    render = scene.render
    render.engine = "BLENDER_WORKBENCH"
    render.resolution_x, render.resolution_y, render.resolution_percentage = 640, 400, 100
    render.image_settings.file_format = "PNG"
    render.use_stamp = True
    for stamp in ("date", "time", "render_time", "filename", "memory", "camera", "lens", "scene", "marker",
                  "frame_range", "hostname", "sequencer_strip"):
        setattr(render, f"use_stamp_{stamp}", False)
    render.use_stamp_frame = True
    shading = scene.display.shading
    shading.light, shading.color_type = "STUDIO", "MATERIAL"
    shading.show_shadows, shading.show_cavity = True, True
    scene.display.shadow_focus = 0.2
    return scene


def render_previews(scene: bpy.types.Scene, frames: list[int], out_dir: Path) -> list[Path]:
    """Render ``frames`` with Workbench to ``out_dir/preview_NNNN.png``; returns the paths."""
    paths = []
    for frame in frames:
        scene.frame_set(frame)
        path = out_dir / f"preview_{frame:04d}.png"
        scene.render.filepath = str(path)
        bpy.ops.render.render(write_still=True)
        paths.append(path)
    return paths


def contact_sheet(paths: list[Path], out_path: Path, columns: int = 3, gap: int = 8) -> Path:
    """Tile the images at ``paths`` (same size) into one PNG, first image top-left, composed in numpy."""
    tiles = []
    for path in paths:
        image = bpy.data.images.load(str(path), check_existing=False)
        width, height = image.size
        pixels = np.empty(width * height * 4, dtype=np.float32)
        image.pixels.foreach_get(pixels)
        tiles.append(pixels.reshape(height, width, 4))
        bpy.data.images.remove(image)
    height, width = tiles[0].shape[:2]
    rows = math.ceil(len(tiles) / columns)
    sheet_height, sheet_width = rows * height + (rows + 1) * gap, columns * width + (columns + 1) * gap
    sheet = np.ones((sheet_height, sheet_width, 4), dtype=np.float32)
    for index, tile in enumerate(tiles):
        row, column = divmod(index, columns)
        bottom = sheet_height - (row + 1) * (height + gap)  # Blender images store the bottom row first
        left = gap + column * (width + gap)
        sheet[bottom:bottom + height, left:left + width] = tile
    image = bpy.data.images.new("tangle_contact_sheet", sheet_width, sheet_height, alpha=True)
    image.pixels.foreach_set(sheet.ravel())
    image.filepath_raw = str(out_path)
    image.file_format = "PNG"
    image.save()
    bpy.data.images.remove(image)
    return out_path
