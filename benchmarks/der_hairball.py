"""Seed 000 hairball: a sphere with 1000 clamped strands on its upper half (~40k DOF) turning once about its
vertical axis, dt = 1 ms, hair–hair and hair–sphere μ = 0.3.  Prints ms per step and contacts per step and
the ratio to the seed's figure (C++/OpenMP: 609 ms per step; ADONIS: 8931 ms per step).

    python -m benchmarks.der_hairball [--steps 20] [--strands 1000] [--vertices 10] [--iterations 50]
                                      [--length 0.12] [--radius 5e-5] [--warmup 0] [--warmup-dt 0.005]

At the defaults the strands barely touch: 1 contact per step after 1 s of the turn (50 warm-up steps of 20 ms),
10 with 0.3 m hair of radius 0.2 mm (session 17); the seed's ~5 500 contacts per step need a denser scene,
which issue 21 item 4 asks for and which is not built yet.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from solver_server.backend import get_backend
from solver_server.solvers.der import (ContactSettings, DerControl, DerMaterial, DerSolver, NewtonSettings,
                                       build_model, rest_state)

from benchmarks.kernel_warmup import print_kernel_warmup

SEED_MS_PER_STEP = 609.22
SEED_ADONIS_MS_PER_STEP = 8930.93
SEED_CONTACTS_PER_STEP = 5500


class SpinningSphere:
    """Sphere collider (centre, radius [m]) turning about +z at `spin` [rad/s]."""

    def __init__(self, radius: float, spin: float, friction: float):
        self.radius, self.spin, self.friction, self.thickness = radius, spin, friction, 0.0

    def signed_distance(self, xp, points):
        length = xp.linalg.norm(points, axis=1)
        return length - self.radius, points / length[:, None]

    def velocity(self, xp, points):
        return self.spin * xp.stack((-points[:, 1], points[:, 0], xp.zeros(points.shape[0])), axis=1)


def hairball(strands: int, vertices: int, sphere_radius: float, length: float):
    """Rest points (strands·vertices, 3) of straight radial strands rooted on the upper hemisphere."""
    index = np.arange(strands) + 0.5
    z = 1.0 - index / strands                          # uniform in z over the upper half: uniform in area
    azimuth = np.pi * (1.0 + 5.0 ** 0.5) * index       # golden-angle spiral
    ring = np.sqrt(1.0 - z * z)
    directions = np.stack((ring * np.cos(azimuth), ring * np.sin(azimuth), z), axis=1)
    along = sphere_radius + np.linspace(0.0, length, vertices)
    points = directions[:, None, :] * along[None, :, None]
    return points.reshape(-1, 3), np.arange(strands + 1) * vertices


def rotate_z(points, angle):
    c, s = np.cos(angle), np.sin(angle)
    return points @ np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]).T


def deepest_penetration(model, positions):
    """Strand–strand overlap at `positions` (N, 3) [m]: (deepest overlap of two non-adjacent edges relative to
    the smaller hair radius, number of edge pairs overlapping by more than 10 % of it)."""
    from solver_server.backend import neighbour_pairs
    from solver_server.solvers.der.geometry import segment_closest_points

    ev = model.edge_vertex
    start, end = positions[ev], positions[ev + 1]
    reach = 0.5 * np.linalg.norm(end - start, axis=1) + model.edge_radius
    pairs = neighbour_pairs(np, 0.5 * (start + end), 2.0 * reach.max())
    i, j = pairs[:, 0], pairs[:, 1]
    keep = (model.edge_strand[i] != model.edge_strand[j]) | (np.abs(ev[i] - ev[j]) > 1)
    i, j = i[keep], j[keep]
    _, _, distance = segment_closest_points(np, start[i], end[i], start[j], end[j])
    overlap = (model.edge_radius[i] + model.edge_radius[j] - distance) / np.minimum(model.edge_radius[i],
                                                                                      model.edge_radius[j])
    return (float(max(overlap.max(), 0.0)) if overlap.shape[0] else 0.0), int(np.sum(overlap > 0.1))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--strands", type=int, default=1000)
    parser.add_argument("--vertices", type=int, default=10)
    parser.add_argument("--length", type=float, default=0.12, help="hair length [m]")
    parser.add_argument("--radius", type=float, default=5e-5, help="hair radius [m]")
    parser.add_argument("--iterations", type=int, default=50, help="N_max of the global/local loop")
    parser.add_argument("--dt", type=float, default=1e-3)
    parser.add_argument("--warmup", type=int, default=0, help="untimed steps first (hair falls onto the sphere)")
    parser.add_argument("--warmup-dt", type=float, default=5e-3, help="step length of the untimed steps [s]")
    parser.add_argument("--matrix", choices=("exact", "gauss_newton"), default="gauss_newton",
                        help="quasi-Newton matrix (first-iteration exact Hessian or Gauss-Newton)")
    parser.add_argument("--refresh", type=int, default=4,
                        help="refactor the quasi-Newton matrix every this many iterations (0: seed, never)")
    parser.add_argument("--local-solver", choices=("jacobi", "gauss_seidel"), default="gauss_seidel",
                        help="contact local step: seed Jacobi, or Gauss-Seidel sweeps with the exact Delassus operator")
    args = parser.parse_args(argv)
    print_kernel_warmup()

    backend = get_backend("cpu")
    sphere_radius, length, period = 0.1, args.length, 5.0
    points, offsets = hairball(args.strands, args.vertices, sphere_radius, length)
    material = DerMaterial(radius=args.radius, young_modulus=3e9, shear_modulus=1e9, density=1300.0, damping=0.5)
    model = build_model(np, points, offsets, material)
    spin = 2.0 * np.pi / period
    sphere = SpinningSphere(sphere_radius, spin, friction=0.3)
    solver = DerSolver(model, backend, NewtonSettings(max_iterations=args.iterations, tolerance=1e-6, quasi_newton=True,
                                                      quasi_newton_matrix=args.matrix, refresh_interval=args.refresh),
                       colliders=[sphere], contact=ContactSettings(friction=0.3, collider_friction=0.3,
                                                                     local_solver=args.local_solver))
    state = rest_state(np, model)
    rest_targets = points[np.asarray(solver.fixed_vertices)]
    print(f"hairball: {args.strands} strands x {args.vertices} points, {model.n_dofs} DOF, dt = {args.dt * 1e3:g} ms, "
          f"mu = 0.3, sphere turning once in {period:g} s, quasi-Newton matrix: {args.matrix}, "
          f"refreshed every {args.refresh or 'never'} iterations")
    timings, cpu_timings, contacts, iterations = [], [], [], []
    clock = 0.0
    for step in range(args.warmup + args.steps):
        dt = args.warmup_dt if step < args.warmup else args.dt
        clock += dt
        control = DerControl(vertex_targets=rotate_z(rest_targets, spin * clock))
        out = state.copy()
        start, cpu_start = time.perf_counter(), time.process_time()
        stats = solver.step(state, out, control, None, dt)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        state = out
        if step >= args.warmup:
            timings.append(elapsed)
            cpu_timings.append(cpu)
            contacts.append(stats.get("contacts", 0))
            iterations.append(stats["iterations"])
    ms = 1e3 * float(np.mean(timings))
    deepest, deep_pairs = deepest_penetration(model, state.positions)
    print(f"strand-strand penetration at the end: deepest {deepest:.2f} hair radii, {deep_pairs} edge pairs deeper "
          f"than 10 % of the radius")
    print(f"timed steps: {args.steps} after {args.warmup} untimed steps of {args.warmup_dt * 1e3:g} ms "
          f"({clock:.3f} s simulated)")
    print(f"ms per step: {ms:.1f} (median {1e3 * float(np.median(timings)):.1f}; process CPU time "
          f"{1e3 * float(np.mean(cpu_timings)):.1f}: on a loaded machine the wall time includes waiting for a core); "
          f"contacts per step: "
          f"{np.mean(contacts):.0f} (max {max(contacts)}); iterations per step: {np.mean(iterations):.1f}")
    print(f"ratio to the seed's C++/OpenMP solver ({SEED_MS_PER_STEP:g} ms/step, ~{SEED_CONTACTS_PER_STEP} contacts): "
          f"{ms / SEED_MS_PER_STEP:.2f}x its time; to ADONIS ({SEED_ADONIS_MS_PER_STEP:g} ms/step): "
          f"{ms / SEED_ADONIS_MS_PER_STEP:.3f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
