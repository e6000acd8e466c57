"""Cloth on a moving character: a 50 × 50 cloth (two corners pinned, self-collision on) falling onto Blender's Suzanne
while the head turns 60° and slides 0.3 m over 48 frames; Tangle's PD cloth vs Blender's own Cloth on the
identical scene, same run, with the contact quality figures.

Per solver, over all frames: vertices inside the head (|generalized winding number| > 0.5), the fastest
rise of the cloth's centre of mass after it first lands [m/s], the largest per-frame vertex jump once
settled (frame 24 on) [m], the 99th percentile of the vertices' per-frame acceleration once settled (the head
still turns) [m/frame²] over all of them and over those resting on the head (within 1 cm of it at the three
frames), the worst edge stretch (l / l_rest − 1), cloth edges passing through the head
(worst frame), intersecting cloth triangle pairs (worst frame), and ms per frame. Tangle runs in-process (no sockets); both at 4 substeps (Blender: quality 4).
With --render DIR, the last frame of both is rendered (Workbench) into DIR/suzanne_{tangle,blender}.png.

    .venv/bin/python -m benchmarks.suzanne_drape [--frames 48] [--resolution 50] [--flipped] [--render docs/images]
        [--device cpu|cuda|cuda-emulated] [--skip-blender]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from tests.physics.character_scenes import cloth_on_suzanne, turn_and_slide
from tests.physics.contact_metrics import (distance_to_surface, edge_stretch, edges_through_surface,
                                           intersecting_triangle_pairs, winding_numbers)

from benchmarks.kernel_warmup import print_kernel_warmup
from solver_server.devices import DEVICES
from benchmarks.workbench import render_still

SETTLED_FRAME = 24
RESTING_DISTANCE = 0.01   # [m] a cloth vertex this close to the head rests on it (the contact offset is 7 mm)


def head_pose(head_vertices, frame, frames):
    matrix = turn_and_slide(frame, frames)
    return head_vertices @ matrix[:3, :3].T + matrix[:3, 3]


def figures(frames_xyz, rest, triangles, head_vertices, head_triangles):
    """Contact quality figures of per-frame cloth positions (F, N, 3) (frame 1 first)."""
    count = len(frames_xyz)
    settled = min(SETTLED_FRAME, max(count - 2, 1))    # a short run (a quick device check) takes its last frames
    inside = [int((np.abs(winding_numbers(x, head_pose(head_vertices, f + 1, count), head_triangles)) > 0.5).sum())
              for f, x in enumerate(frames_xyz)]
    speed = np.diff(frames_xyz[:, :, 2].mean(axis=1)) * 24.0
    landed = int(np.argmax(speed > speed.min() + 0.5))
    jumps = np.linalg.norm(np.diff(frames_xyz[settled - 1:], axis=0), axis=2).max()
    # per-frame acceleration |x_{f+1} − 2 x_f + x_{f−1}| of every vertex once settled, while the head still turns
    acceleration = np.linalg.norm(np.diff(frames_xyz[settled - 1:], n=2, axis=0), axis=2)
    # the same for the vertices resting on the head (within RESTING_DISTANCE of it at all three frames): the
    # contact's own calm, apart from the free cloth swinging off the head
    near = np.array([distance_to_surface(frames_xyz[f], head_pose(head_vertices, f + 1, count), head_triangles,
                                         RESTING_DISTANCE) <= RESTING_DISTANCE
                     for f in range(settled - 1, count)])
    resting = near[:-2] & near[1:-1] & near[2:]
    return {"inside_max": max(inside), "com_rise_m_s": float(max(speed[landed:].max(), 0.0)),
            "settled_jump_m": float(jumps), "settled_acceleration_p99_m": float(np.percentile(acceleration, 99)),
            "resting_acceleration_p99_m": float(np.percentile(acceleration[resting], 99)) if resting.any() else 0.0,
            "stretch_worst": max(edge_stretch(x, rest, triangles) for x in frames_xyz),
            "edges_through_head_worst": max(edges_through_surface(x, triangles, head_pose(head_vertices, f + 1, count),
                                                                  head_triangles) for f, x in enumerate(frames_xyz)),
            "intersecting_pairs_worst": max(intersecting_triangle_pairs(x, triangles) for x in frames_xyz)}


def run_tangle(resolution, frames, flipped, device: str = "cpu"):
    """Tangle's drape on ``device`` (solver_server.devices.DEVICES): (positions (F, N, 3), s per frame, the worst
    unresolved counts, (rest, triangles, head vertices, head triangles))."""
    from solver_server.devices import backend_for
    from solver_server.simulation import Simulation

    scene, drive, rest, triangles, head_vertices, head_triangles = cloth_on_suzanne(resolution, frames, flipped=flipped)
    simulation = Simulation(scene, backend_for(device))
    out = [simulation.initial_frame()[1]["Cloth"]]
    started = time.perf_counter()
    left = {"self_contacts_left": 0, "collider_edges_left": 0, "strain_limit_left": 0}
    for frame in range(2, frames + 1):
        _, positions, stats = simulation.advance(drive(frame))
        out.append(positions["Cloth"])
        for key in left:
            left[key] = max(left[key], int(stats.get(key, 0)))
    elapsed = time.perf_counter() - started
    return np.array(out, float), elapsed / (frames - 1), left, (rest, triangles, head_vertices, head_triangles)


def add_pinned_cloth(scene, rest, triangles, pin_indices, quality: int = 4):
    """A Blender mesh object "Cloth" of ``rest`` (N, 3) [m] and ``triangles`` in ``scene`` with a Cloth modifier
    of that quality whose vertices ``pin_indices`` are pinned (vertex group "pin"); returns the object."""
    import bpy

    mesh = bpy.data.meshes.new("Cloth")
    mesh.from_pydata(np.asarray(rest).tolist(), [], np.asarray(triangles).tolist())
    cloth = bpy.data.objects.new("Cloth", mesh)
    scene.collection.objects.link(cloth)
    group = cloth.vertex_groups.new(name="pin")
    group.add([int(i) for i in pin_indices], 1.0, "REPLACE")
    settings = cloth.modifiers.new("Cloth", "CLOTH").settings
    settings.quality = quality
    settings.vertex_group_mass = "pin"
    return cloth


def add_keyed_head(scene, head_vertices, head_triangles, poses: dict):
    """A Blender mesh object "Suzanne" of ``head_vertices`` (N, 3) [m] and ``head_triangles`` in ``scene`` with a
    Collision modifier, keyed (LINEAR) at each frame of ``poses`` {frame: (4, 4) matrix} with that matrix's
    translation and turn about z; returns the object."""
    import bpy

    mesh = bpy.data.meshes.new("Suzanne")
    mesh.from_pydata(np.asarray(head_vertices).tolist(), [], np.asarray(head_triangles).tolist())
    head = bpy.data.objects.new("Suzanne", mesh)
    scene.collection.objects.link(head)
    head.modifiers.new("Collision", "COLLISION")
    for frame, matrix in poses.items():
        head.location = matrix[:3, 3]
        head.rotation_euler = (0.0, 0.0, float(np.arctan2(matrix[1, 0], matrix[0, 0])))
        head.keyframe_insert("location", frame=frame)
        head.keyframe_insert("rotation_euler", frame=frame)
    for curve in head.animation_data.action.fcurves:
        for key in curve.keyframe_points:
            key.interpolation = "LINEAR"
    return head


def run_blender(resolution, frames, flipped):
    import bpy

    scene_dict, _, rest, triangles, head_vertices, head_triangles = cloth_on_suzanne(resolution, frames,
                                                                                     flipped=flipped)
    cloth_spec = scene_dict["objects"][0]
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    cloth = add_pinned_cloth(scene, rest, triangles, cloth_spec["pins"]["indices"])
    modifier = cloth.modifiers["Cloth"]
    modifier.collision_settings.use_self_collision = True
    modifier.collision_settings.distance_min = 0.005
    modifier.collision_settings.self_distance_min = 0.005
    modifier.point_cache.frame_end = frames

    head = add_keyed_head(scene, head_vertices, head_triangles,
                          {frame: turn_and_slide(frame, frames) for frame in (1, frames)})
    head.collision.thickness_outer = 0.002

    scene.frame_start, scene.frame_end = 1, frames
    scene.frame_set(1)
    out = []
    started = time.perf_counter()
    for frame in range(1, frames + 1):
        scene.frame_set(frame)
        evaluated = cloth.evaluated_get(bpy.context.evaluated_depsgraph_get())
        positions = np.empty(len(evaluated.data.vertices) * 3)
        evaluated.data.vertices.foreach_get("co", positions)
        out.append(positions.reshape(-1, 3))
    elapsed = time.perf_counter() - started
    return np.array(out), elapsed / frames


def render(path, cloth_xyz, triangles, head_vertices, head_triangles, frame, frames):
    """Workbench image of the cloth at one frame over the posed head, from the front-left, above."""
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    for name, vertices, faces, color in (("Cloth", cloth_xyz, triangles, (0.8, 0.25, 0.2, 1.0)),
                                          ("Head", head_pose(head_vertices, frame, frames), head_triangles,
                                           (0.75, 0.75, 0.75, 1.0))):
        mesh = bpy.data.meshes.new(name)
        mesh.from_pydata(np.asarray(vertices).tolist(), [], np.asarray(faces).tolist())
        for polygon in mesh.polygons:
            polygon.use_smooth = True
        obj = bpy.data.objects.new(name, mesh)
        obj.color = color
        scene.collection.objects.link(obj)
    render_still(path, (-3.0, -4.5, 2.4), (0.1, 0.0, 0.2))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--resolution", type=int, default=50)
    parser.add_argument("--frames", type=int, default=48)
    parser.add_argument("--flipped", action="store_true", help="every triangle of the head flipped")
    parser.add_argument("--render", default=None, help="folder for the last-frame images")
    parser.add_argument("--skip-blender", action="store_true")
    parser.add_argument("--device", choices=DEVICES, default="cpu",
                        help="Tangle's solver backend (a GPU server without bpy: with --skip-blender)")
    args = parser.parse_args(argv)
    print_kernel_warmup("cuda:0" if args.device == "cuda" else "cpu")

    print(f"scene: {args.resolution}x{args.resolution} cloth, 2 pinned corners, self-collision, on Suzanne turning "
          f"60 deg and sliding 0.3 m, {args.frames} frames at 24 fps{' (head flipped)' if args.flipped else ''}")
    tangle, tangle_s, left, (rest, triangles, head_vertices, head_triangles) = run_tangle(
        args.resolution, args.frames, args.flipped, args.device)
    rows = {"tangle": (figures(tangle, rest, triangles, head_vertices, head_triangles), tangle_s, tangle)}
    print(f"tangle reported unresolved: {left}")
    if not args.skip_blender:
        blender, blender_s = run_blender(args.resolution, args.frames, args.flipped)
        rows["blender"] = (figures(blender, rest, triangles, head_vertices, head_triangles), blender_s, blender)
    for name, (figure, seconds, _) in rows.items():
        print(f"{name:8s}: {seconds * 1e3:7.1f} ms/frame | inside max {figure['inside_max']:4d} | "
              f"CoM rise after landing {figure['com_rise_m_s']:.3f} m/s | settled jump {figure['settled_jump_m']:.3f} m"
              f" | settled p99 acceleration {figure['settled_acceleration_p99_m'] * 100:.2f} cm/frame²"
              f" (resting on the head {figure['resting_acceleration_p99_m'] * 100:.2f})"
              f" | worst stretch {figure['stretch_worst'] * 100:5.1f} % | edges through the head "
              f"{figure['edges_through_head_worst']} | intersecting pairs {figure['intersecting_pairs_worst']}")
    if "blender" in rows:
        print(f"speed ratio: tangle is {rows['blender'][1] / tangle_s:.2f}x Blender's Cloth per frame")
    if args.render:
        from pathlib import Path

        folder = Path(args.render)
        folder.mkdir(parents=True, exist_ok=True)
        for name, (_, _, xyz) in rows.items():
            render(folder.resolve() / f"suzanne_{name}.png", xyz[-1], triangles, head_vertices, head_triangles,
                   args.frames, args.frames)


if __name__ == "__main__":
    main()
