"""Hair on a moving character: strands groomed on Blender's Suzanne (exported from real bpy) while the head
turns 60° and slides 0.3 m over 18 frames and then holds still until frame 48; every Tangle hair model (DER,
Cosserat, particles; each also with 40 guides and the rest interpolated), and Blender's own particle Hair
Dynamics on the same head as the anchor, in the same run.

Scene (``tests/physics/character_scenes.hair_on_character``): 300 strands of 12 points and 25 cm, radius
0.1 mm, rooted on the upper half of the head (area-weighted random points, each strand straight out along its
face normal tilted up), μ = 0.3 against the head, 4 substeps at 24 fps. Blender: a hair particle system of
300 strands of the same length and points on the same upper half (its own random roots), Hair Dynamics at
quality 4, the head a Collision object with the same keyframed motion.

Per model, over all frames: points inside the head (|generalized winding number| > 0.5, roots left out), the
worst segment strain (|l / l_rest − 1|), the roots' largest distance from where the skin carries them, the
largest jump of a point in one frame after frame 8 measured in the head's own frame (the head's motion taken
out) and in the world less the head's own motion of that point over the same frame, the largest tip motion in
one frame 24 frames after the head stopped (frame 42 on), the frame from which every tip moves less than 5 mm a frame
(run with more ``--frames`` to see it), how many strands still move that much from frame 42 on and how many of those
rest on the head (the others swing or tip over in free air), with the head at rest (frame 24 on) each strand's largest point move in one
frame (the largest, and how many strand-frames exceed 50 mm), and seconds per frame. ``--preroll N`` gives the
scene a pre-roll of N frames (``time.preroll``: Tangle's hair falls from its straight-out groom on the still head
before frame 1), so the settling figures measure the answer to the head's motion rather than the fall from the
groom.

    .venv/bin/python -m benchmarks.hair_on_character [--frames 48] [--strands 300] [--models der,cosserat,...]
        [--skip-blender] [--flipped] [--eased] [--preroll 48] [--render docs/images]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.der_vs_blender_hair import add_hair_dynamics
from benchmarks.kernel_warmup import print_kernel_warmup
from benchmarks.suzanne_drape import add_keyed_head
from benchmarks.workbench import render_still
from tests.physics.character_scenes import hair_on_character, held_motion
from tests.physics.contact_metrics import distance_to_surface, winding_numbers

MOTION_FRAMES = 18
JUMP_FROM = 8                  # the bar on per-frame jumps applies from this frame on
SETTLE_AFTER = 24              # frames after the head stops
SETTLED_TIP_MOTION = 0.005     # [m] a frame: the bar's settled hair
RESTING_ON_HEAD = 0.003        # [m]: a strand with a free point this close to the head rests on it
REST_FROM = 24                 # the head at rest since MOTION_FRAMES: strand hops counted from here
RENDER_FRAMES = (8, 18, 48)
PATH_STEPS_LOG2 = 4            # Blender's drawn hair path: 2^4 segments per strand, read back with co_hair


def _head_at(head_vertices, frame, eased: bool = False):
    pose = held_motion(frame, MOTION_FRAMES, eased=eased)
    return head_vertices @ pose[:3, :3].T + pose[:3, 3]


def figures(positions, rest, points, head_vertices, head_triangles, eased: bool = False):
    """The quality figures of hair positions (F, N, 3) [m] (frame 1 first), rest points (N, 3), points per
    strand; ``eased``: the head moved on ``held_motion``'s eased motion."""
    frames = len(positions)
    strands = positions.reshape(frames, -1, points, 3)
    rest_strands = rest.reshape(-1, points, 3)
    inside = []
    for index, frame in enumerate(strands):
        free = frame[:, 1:].reshape(-1, 3)
        inside.append(int((np.abs(winding_numbers(free, _head_at(head_vertices, index + 1, eased), head_triangles)) > 0.5)
                          .sum()))
    rest_lengths = np.linalg.norm(np.diff(rest_strands, axis=1), axis=2)
    strain = np.abs(np.linalg.norm(np.diff(strands, axis=2), axis=3) / rest_lengths - 1.0)
    local = np.empty_like(strands)
    drift = 0.0
    for index in range(frames):
        pose = held_motion(index + 1, MOTION_FRAMES, eased=eased)
        local[index] = (strands[index] - pose[:3, 3]) @ pose[:3, :3]        # in the head's frame
        drift = max(drift, float(np.linalg.norm(local[index, :, 0] - rest_strands[:, 0], axis=1).max()))
    jumps = np.linalg.norm(np.diff(local, axis=0), axis=3)                   # (F − 1, S, P)
    beyond_head = 0.0
    for index in range(JUMP_FROM - 1, frames - 1):
        # world jump less the head's own motion of the point over the same frame (where the head carries it)
        pose = held_motion(index + 2, MOTION_FRAMES, eased=eased)
        carried = local[index] @ pose[:3, :3].T + pose[:3, 3]
        world = np.linalg.norm(strands[index + 1] - strands[index], axis=-1)
        beyond_head = max(beyond_head, float((world - np.linalg.norm(carried - strands[index], axis=-1)).max()))
    settle_from = MOTION_FRAMES + SETTLE_AFTER
    # with the head at rest, each strand's largest point move in a frame: a drawn strand that hops between two
    # layouts shows here (anywhere along it, not only at its tip)
    at_rest = jumps[REST_FROM - 1:].max(axis=2) if frames > REST_FROM else np.zeros((0, 0))
    unsettled, resting = _unsettled(strands, jumps, settle_from, head_vertices, head_triangles, eased)
    return {"unsettled_strands": unsettled, "unsettled_resting_on_head": resting,
            "rest_hop_max_m": float(at_rest.max()) if at_rest.size else None,
            "rest_hops_over_50mm": int((at_rest > 0.05).sum()),
            "inside": inside, "inside_max": max(inside), "strain_worst": float(strain.max()),
            "strain_p99": float(np.percentile(strain, 99)), "root_drift_m": drift,
            "jump_after_8_m": float(jumps[JUMP_FROM - 1:].max()) if frames > JUMP_FROM else None,
            "jump_beyond_head_m": beyond_head if frames > JUMP_FROM else None,
            "settled_tip_motion_m": float(jumps[settle_from - 1:, :, -1].max()) if frames > settle_from else None,
            "settled_from_frame": _settled_from(jumps[:, :, -1].max(axis=1))}


def _unsettled(strands, jumps, settle_from: int, head_vertices, head_triangles, eased: bool):
    """(strands whose tip moves SETTLED_TIP_MOTION or more in a frame from ``settle_from`` on, how many of them rest
    on the head at the last frame: a free point within RESTING_ON_HEAD of it), or (None, None) for a run that ends
    before. Strands that move in free air swing or tip over about their root; those on the head slide."""
    if len(strands) <= settle_from:
        return None, None
    moving = np.nonzero(jumps[settle_from - 1:, :, -1].max(axis=0) >= SETTLED_TIP_MOTION)[0]
    free = strands[-1, moving, 1:].reshape(-1, 3)
    near = distance_to_surface(free, _head_at(head_vertices, len(strands), eased), head_triangles, RESTING_ON_HEAD)
    return int(moving.size), int(np.isfinite(near.reshape(moving.size, -1)).any(axis=1).sum())


def _settled_from(tip_moves) -> int | None:
    """The first frame after the head stops (MOTION_FRAMES) from which no tip moves SETTLED_TIP_MOTION or more in any
    later frame of the run, given the largest tip move of each frame (F − 1,) [m]; None if the last frame still
    does."""
    later_worst = np.maximum.accumulate(tip_moves[::-1])[::-1]          # the largest move from each frame on
    settled = np.nonzero(later_worst[MOTION_FRAMES - 1:] < SETTLED_TIP_MOTION)[0]
    return int(settled[0]) + MOTION_FRAMES if settled.size else None


def head_stop_carry(head_vertices, eased: bool = False) -> float:
    """The largest distance [m] a head vertex moves in the head's last frame of motion (frame MOTION_FRAMES − 1 →
    MOTION_FRAMES): what a point that kept the head's speed for one frame after the dead stop adds to the jump."""
    return float(np.linalg.norm(_head_at(head_vertices, MOTION_FRAMES, eased)
                                - _head_at(head_vertices, MOTION_FRAMES - 1, eased), axis=1).max())


def run_tangle(model: str, strands: int, frames: int, guides: int, flipped: bool = False, eased: bool = False,
               preroll: int = 0):
    """Hair positions (frames, S·P, 3) [m], s per frame, rest points, points per strand, and the failsafe's vertex
    moves. ``preroll``: the scene's pre-roll (``time.preroll``: frames simulated before frame 1 with the head at
    rest, the hair falling from its straight-out groom there); its time is not counted."""
    from solver_server.backend import get_backend
    from solver_server.simulation import Simulation

    scene, drive, rest, offsets, head_vertices, head_triangles = hair_on_character(
        model, strands, frames=frames, motion_frames=MOTION_FRAMES, guide_count=guides, flipped=flipped, eased=eased)
    scene["time"]["preroll"] = preroll
    simulation = Simulation(scene, get_backend("cpu"))
    out = [simulation.initial_frame()[1]["Hair"]]
    seconds, failsafe = [], 0
    for frame in range(2, frames + 1):
        started = time.perf_counter()
        _, positions, stats = simulation.advance(drive(frame))
        seconds.append(time.perf_counter() - started)
        out.append(positions["Hair"])
        failsafe += int(stats.get("failsafe_vertices", 0))
    return np.array(out, np.float64), float(np.mean(seconds)), rest, int(np.diff(offsets)[0]), failsafe


def run_blender(strands: int, frames: int, points: int, eased: bool = False):
    """Blender's particle Hair Dynamics on the same head and motion: (positions (F, S·P, 3), s per frame)."""
    import bpy

    _, _, _, _, head_vertices, head_triangles = hair_on_character("der", strands, frames=frames)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.fps = 24
    keyed = range(1, MOTION_FRAMES + 1) if eased else (1, MOTION_FRAMES)      # linear keys between: every frame
    head = add_keyed_head(scene, head_vertices, head_triangles,
                          {frame: held_motion(frame, MOTION_FRAMES, eased=eased) for frame in keyed})
    system = add_hair_dynamics(head, strands, 0.25, points - 1, 4, frames, min_height=0.0,
                               display_step=PATH_STEPS_LOG2)
    system.cloth.collision_settings.collision_quality = 2
    scene.frame_start, scene.frame_end = 1, frames
    scene.frame_set(1)
    out, seconds = [], []
    for frame in range(1, frames + 1):
        started = time.perf_counter()
        scene.frame_set(frame)
        if frame > 1:
            seconds.append(time.perf_counter() - started)
        evaluated = head.evaluated_get(bpy.context.evaluated_depsgraph_get())
        particles = evaluated.particle_systems[0]
        # the drawn path (2^PATH_STEPS_LOG2 segments along the simulated keys), resampled to `points` points
        steps = 2 ** PATH_STEPS_LOG2
        path = np.array([[particles.co_hair(evaluated, particle_no=i, step=k) for k in range(steps + 1)]
                         for i in range(len(particles.particles))], np.float64)
        where = np.linspace(0.0, steps, points)
        low = np.minimum(where.astype(int), steps - 1)
        fraction = (where - low)[None, :, None]
        out.append((path[:, low] + fraction * (path[:, low + 1] - path[:, low])).reshape(-1, 3))
    rest = out[0]
    return np.array(out), float(np.mean(seconds)), rest


def render(path, hair_xyz, points, head_vertices, head_triangles, frame, eased: bool = False):
    """Workbench image of the strands (tubes of 2.5 mm so they read at this size) over the posed head."""
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    mesh = bpy.data.meshes.new("Head")
    mesh.from_pydata(_head_at(head_vertices, frame, eased).tolist(), [], np.asarray(head_triangles).tolist())
    for polygon in mesh.polygons:
        polygon.use_smooth = True
    head = bpy.data.objects.new("Head", mesh)
    head.color = (0.75, 0.75, 0.75, 1.0)
    scene.collection.objects.link(head)
    curve = bpy.data.curves.new("Hair", "CURVE")
    curve.dimensions, curve.bevel_depth = "3D", 0.0025
    for strand in np.asarray(hair_xyz).reshape(-1, points, 3):
        spline = curve.splines.new("POLY")
        spline.points.add(points - 1)
        spline.points.foreach_set("co", np.hstack([strand, np.ones((points, 1))]).ravel())
    hair = bpy.data.objects.new("Hair", curve)
    hair.color = (0.35, 0.2, 0.1, 1.0)
    scene.collection.objects.link(hair)
    render_still(path, (-3.2, -4.2, 2.6), (0.15, 0.0, 0.3))


def _print(name, figure, seconds, failsafe=None):
    settled, jump, beyond = figure["settled_tip_motion_m"], figure["jump_after_8_m"], figure["jump_beyond_head_m"]
    print(f"{name:22s}: {seconds:6.3f} s/frame | inside max {figure['inside_max']:4d} | worst strain "
          f"{figure['strain_worst'] * 100:6.1f} % (p99 {figure['strain_p99'] * 100:4.1f} %) | root drift "
          f"{figure['root_drift_m'] * 1e3:6.2f} mm | jump after frame {JUMP_FROM} "
          f"{'-' if jump is None else f'{jump:.3f} m'} (head frame; beyond the head's motion "
          f"{'-' if beyond is None else f'{beyond:.3f} m'}) | settled tip motion "
          f"{'-' if settled is None else f'{settled * 1e3:.1f} mm'}"
          + ("" if failsafe is None else f" | failsafe moves {failsafe}"))
    hop, settled_from = figure["rest_hop_max_m"], figure["settled_from_frame"]
    print(f"{'':22s}  with the head at rest (frame {REST_FROM} on): largest point move in a frame "
          f"{'-' if hop is None else f'{hop * 1e3:.1f} mm'}, strand-frames above 50 mm {figure['rest_hops_over_50mm']}; "
          f"every tip under {SETTLED_TIP_MOTION * 1e3:.0f} mm a frame from frame "
          f"{'- (not in this run)' if settled_from is None else settled_from}"
          + ("" if figure["unsettled_strands"] is None else
             f"; strands still moving then {figure['unsettled_strands']}, of them resting on the head "
             f"{figure['unsettled_resting_on_head']} (the others swing or tip over in free air)"))
    print(f"{'':22s}  inside per frame: {figure['inside']}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=48)
    parser.add_argument("--strands", type=int, default=300)
    parser.add_argument("--models", default="der,cosserat,particles,der+guides,cosserat+guides,particles+guides")
    parser.add_argument("--skip-blender", action="store_true")
    parser.add_argument("--flipped", action="store_true", help="the head's triangles in the reverse winding")
    parser.add_argument("--render", default=None,
                        help=f"folder for DER, DER on guides (and Blender) images at frames {RENDER_FRAMES}")
    parser.add_argument("--eased", action="store_true",
                        help="the head's turn and slide on a smoothstep (starts and stops at rest) instead of linear")
    parser.add_argument("--preroll", type=int, default=0, metavar="FRAMES",
                        help="the scene's pre-roll (time.preroll): Tangle's hair first falls from its groom for this "
                             "many frames on the still head; the shot's frames and figures start after them")
    args = parser.parse_args(argv)
    print_kernel_warmup()
    print(f"scene: {args.strands} strands x 12 points, 25 cm, r 0.1 mm, on Suzanne turning 60 deg and sliding 0.3 m "
          f"over {MOTION_FRAMES} frames{' (eased)' if args.eased else ''}, then still until frame {args.frames}; "
          "4 substeps, 24 fps")
    _, _, _, _, head_vertices, head_triangles = hair_on_character("der", args.strands, frames=args.frames)
    print(f"the head's fastest point moves {head_stop_carry(head_vertices, args.eased):.3f} m in its last frame of "
          "motion: a point that only carries on at that speed for one frame after the head stops scores that as its "
          "jump" + (f"; Tangle's hair first falls for a pre-roll of {args.preroll} frames on the still head"
                    if args.preroll else ""))
    runs = {}
    for name in args.models.split(","):
        model, _, guided = name.partition("+")
        positions, seconds, rest, points, failsafe = run_tangle(model, args.strands, args.frames, 40 if guided else 0,
                                                                args.flipped, args.eased, args.preroll)
        runs[name] = positions
        _print(f"tangle {name}", figures(positions, rest, points, head_vertices, head_triangles, args.eased), seconds,
               failsafe)
    blender = None
    if not args.skip_blender:
        blender, seconds, rest = run_blender(args.strands, args.frames, 12, args.eased)
        _print("blender hair dynamics", figures(blender, rest, 12, head_vertices, head_triangles, args.eased), seconds)
    if args.render:
        from pathlib import Path

        folder = Path(args.render).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        for frame in RENDER_FRAMES:
            for name in ("der", "der+guides"):
                if name in runs and frame <= args.frames:
                    render(folder / f"hair_{name.replace('+', '_')}_f{frame:02d}.png", runs[name][frame - 1], 12,
                           head_vertices, head_triangles, frame, args.eased)
            if blender is not None and frame <= args.frames:
                render(folder / f"hair_blender_f{frame:02d}.png", blender[frame - 1], 12, head_vertices,
                       head_triangles, frame, args.eased)


if __name__ == "__main__":
    main()
