"""A Workbench still of the current bpy scene for the benchmarks' renders: a camera at ``camera_location``
aimed at ``target`` [m], object colours under studio light."""

from __future__ import annotations


def render_still(path, camera_location, target, resolution=(640, 480)) -> None:
    """Render the current scene to ``path`` (PNG) from a new camera aimed at ``target``."""
    import bpy

    scene = bpy.context.scene
    camera = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
    scene.collection.objects.link(camera)
    camera.location = camera_location
    aim_at = bpy.data.objects.new("Target", None)
    aim_at.location = target
    scene.collection.objects.link(aim_at)
    aim = camera.constraints.new("TRACK_TO")
    aim.target = aim_at
    aim.track_axis, aim.up_axis = "TRACK_NEGATIVE_Z", "UP_Y"
    scene.camera = camera
    scene.render.engine = "BLENDER_WORKBENCH"
    scene.display.shading.color_type = "OBJECT"
    scene.display.shading.light = "STUDIO"
    scene.render.resolution_x, scene.render.resolution_y = resolution
    scene.render.filepath = str(path)
    bpy.ops.render.render(write_still=True)
