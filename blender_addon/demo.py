"""The demo scene: a cloth sheet pinned at two corners, swept by an animated sphere, above a floor; a
jelly cube (soft body) dropping onto the floor; a head sphere with hair (a Curves object bound to it
through its UV map, fast particle model with guide interpolation) swaying from side to side; a second
swaying head whose hair is simulated strand by strand with Discrete Elastic Rods and hair–hair friction.

Builds the scene in (headless) bpy, and renders Workbench previews plus a contact sheet composed with
numpy. Used by ``python -m blender_addon.cli demo``.
"""

from __future__ import annotations

import math
from pathlib import Path

import bpy
import mathutils
import numpy as np

CLOTH_NAME = "Sheet"
SPHERE_NAME = "Ball"
FLOOR_NAME = "Floor"
PIN_GROUP = "pins"
JELLY_NAME = "Jelly"
HEAD_NAME = "Head"
HAIR_NAME = "Hair"
RODS_HEAD_NAME = "Head Rods"
RODS_HAIR_NAME = "Hair Rods"


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
              max_strands: int | None = None) -> tuple[bpy.types.Object, list[int], np.ndarray]:
    """A Curves hair object on ``surface`` (a mesh with a UV map): one straight strand along the normal
    from the centroid of every loop triangle whose centroid is above ``min_height`` (object local z),
    bound as Blender's hair tools bind it (``Curves.surface``, ``surface_uv_map`` and the per-strand
    ``surface_uv_coordinate``). Returns (object, triangle indices, world points (N, 3))."""
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
    chosen = np.flatnonzero(centroids[:, 2] > min_height)[:max_strands]
    normals = np.empty(len(mesh.loop_triangles) * 3)
    mesh.loop_triangles.foreach_get("normal", normals)
    normals = normals.reshape(-1, 3)[chosen]
    root_uvs = uvs.reshape(-1, 2)[loops.reshape(-1, 3)[chosen]].mean(axis=1)
    steps = np.linspace(0.0, length, points_per_strand)
    points_local = (centroids[chosen][:, None, :] + steps[None, :, None] * normals[:, None, :]).reshape(-1, 3)
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


def _add_jelly(scene: bpy.types.Scene) -> bpy.types.Object:
    """A 0.5 m jelly cube, tilted, dropping from 0.9 m onto the floor (right of the sheet)."""
    bpy.ops.mesh.primitive_cube_add(size=0.5, location=(1.5, -0.5, 0.9), rotation=(0.35, 0.25, 0.0))
    jelly = bpy.context.active_object
    jelly.name = jelly.data.name = JELLY_NAME
    jelly.data.materials.append(_material("Jelly", (0.3, 0.8, 0.35, 1.0)))
    jelly.tangle.role = "SOFTBODY"
    bpy.ops.tangle.apply_preset(preset="Jelly")
    # 131 kg of jelly: a real gelatin modulus (5 kPa) would splash flat, a firmer one wobbles and keeps its shape
    jelly.tangle.softbody.young_modulus = 3.0e5
    jelly.tangle.softbody.tet_resolution = 6
    return jelly


def _add_swaying_head(scene: bpy.types.Scene, name: str, location: tuple[float, float, float],
                      keys: tuple[tuple[int, float], ...], skin: tuple[float, float, float, float]) -> bpy.types.Object:
    """A 0.25 m UV sphere mesh collider at ``location`` whose y follows ``keys`` ((frame, y [m]), ...)."""
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.25, segments=24, ring_count=12, location=location)
    head = bpy.context.active_object
    head.name = head.data.name = name
    head.data.materials.append(_material(f"Skin {name}", skin))
    bpy.ops.object.shade_smooth()
    head.tangle.role, head.tangle.collider_shape = "COLLIDER", "MESH"
    for frame, y in keys:
        head.location.y = y
        head.keyframe_insert("location", frame=frame)
    scene.frame_set(1)
    return head


def _hair_on(head: bpy.types.Object, name: str, points_per_strand: int, min_height: float,
             max_strands: int | None, rgba: tuple[float, float, float, float]) -> bpy.types.Object:
    """0.3 m straight strands grown on ``head`` above ``min_height``, Hair role, Straight Coarse preset."""
    hair, _, _ = grow_hair(head, name, points_per_strand=points_per_strand, length=0.3, min_height=min_height,
                           max_strands=max_strands)
    hair.data.materials.append(_material(name, rgba))
    hair.tangle.role = "HAIR"
    bpy.context.view_layer.objects.active = hair
    bpy.ops.tangle.apply_preset(preset="Straight Coarse")
    return hair


def _add_head_with_hair(scene: bpy.types.Scene, frames: int) -> tuple[bpy.types.Object, bpy.types.Object]:
    """A head sphere swaying left and right (front left of the sheet) with 0.3 m hair strands on its top."""
    keys = ((1, -1.3), (frames // 3, -0.7), (2 * frames // 3, -1.5), (frames, -1.1))
    head = _add_swaying_head(scene, HEAD_NAME, (-1.6, -1.3, 0.9), keys, (0.9, 0.7, 0.55, 1.0))
    hair = _hair_on(head, HAIR_NAME, 8, 0.08, None, (0.35, 0.2, 0.1, 1.0))
    # Fast preview model: 24 k-means guide strands simulated (particle hair), the others interpolated on
    # the server (the Elastic Rods model of the second head simulates every strand).
    hair.tangle.hair.model, hair.tangle.hair.guide_count = "particles", 24
    hair.tangle.hair.radius = 1.0e-3
    return head, hair


def _add_head_with_elastic_rods(scene: bpy.types.Scene, frames: int) -> tuple[bpy.types.Object, bpy.types.Object]:
    """A second head (left of the sheet) swaying faster, with Elastic Rods hair: every strand simulated
    (Discrete Elastic Rods), hair–hair Coulomb friction contact and contact with the head."""
    keys = ((1, 0.4), (frames // 4, 0.9), (frames // 2, 0.2), (3 * frames // 4, 0.8), (frames, 0.4))
    head = _add_swaying_head(scene, RODS_HEAD_NAME, (-2.4, 0.4, 0.9), keys, (0.75, 0.55, 0.45, 1.0))
    hair = _hair_on(head, RODS_HAIR_NAME, 8, 0.05, 96, (0.75, 0.6, 0.25, 1.0))
    hair.tangle.hair.model = "der"
    # 0.5 mm strands (clumps): they bend under their weight and keep the bake short; 0.12 mm hair drapes
    # more but multiplies the hair–hair contacts (demo bake 249 s instead of 59 s on 2 cores)
    hair.tangle.hair.radius = 5.0e-4
    return head, hair


def build_scene(frames: int = 48, vertices_per_side: int = 40, substeps: int = 8) -> bpy.types.Scene:
    """Replace the current file with the demo scene; returns the scene (frames 1..frames, 24 fps)."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    scene.render.fps, scene.render.fps_base = 24, 1.0
    scene.tangle.substeps = substeps

    # Cloth: a 2 m sheet held at the two corners of its back edge, 1.9 m above the floor.
    sheet = bpy.data.objects.new(CLOTH_NAME, grid_mesh(CLOTH_NAME, vertices_per_side, 2.0))
    scene.collection.objects.link(sheet)
    sheet.location = (0.0, 0.0, 1.9)
    sheet.data.materials.append(_material("Cloth", (0.85, 0.25, 0.2, 1.0)))
    n = vertices_per_side
    pins = sheet.vertex_groups.new(name=PIN_GROUP)
    pins.add([n * (n - 1), n * n - 1], 1.0, "REPLACE")  # the two corners at local y = +1
    for polygon in sheet.data.polygons:
        polygon.use_smooth = True
    settings = sheet.tangle
    settings.role, settings.pin_group = "CLOTH", PIN_GROUP
    settings.cloth.stretch_stiffness = 2000.0
    settings.cloth.damping = 0.5

    # Animated sphere collider under the sheet: the sheet falls onto it and is dragged along.
    bpy.ops.mesh.primitive_uv_sphere_add(radius=0.35, segments=48, ring_count=24)
    ball = bpy.context.active_object
    ball.name = SPHERE_NAME
    ball.data.materials.append(_material("Ball", (0.25, 0.45, 0.85, 1.0)))
    bpy.ops.object.shade_smooth()
    ball.tangle.role, ball.tangle.collider_shape = "COLLIDER", "SPHERE"
    ball.tangle.collider.friction = 0.4
    for frame, location in ((1, (-0.9, -0.3, 0.75)), (frames, (1.0, 0.5, 0.75))):
        ball.location = location
        ball.keyframe_insert("location", frame=frame)

    # Floor plane collider.
    bpy.ops.mesh.primitive_plane_add(size=30.0)
    floor = bpy.context.active_object
    floor.name = FLOOR_NAME
    floor.data.materials.append(_material("Floor", (0.8, 0.8, 0.78, 1.0)))
    floor.tangle.role, floor.tangle.collider_shape = "COLLIDER", "PLANE"

    _add_jelly(scene)
    _add_head_with_hair(scene, frames)
    _add_head_with_elastic_rods(scene, frames)

    # Camera and light.
    camera = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
    scene.collection.objects.link(camera)
    camera.location = (4.4, -4.4, 3.3)
    look_at = mathutils.Vector((0.0, 0.2, 0.8))
    camera.rotation_euler = (look_at - camera.location).to_track_quat("-Z", "Y").to_euler()
    camera.data.lens = 36.0
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
