"""Warp kernels of the implicit step's objective g(v) and its gradient (integrator._StepProblem), in the order of
the array expressions they replace (the same products and sums, so the same numbers):

    target = v_free + λ / m,   ∇g = m (v − target) + (h c) m v + h ∇E,
    g_s = Σ_{k in strand s} ½ m_k ((v_k − target_k)² + (h c)_k v_k²) + E_s   (added in order from zero).
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False})   # forward only: no gradients are taken


@wp.kernel
def descent_terms(mass: wp.array(dtype=wp.float64), free_velocity: wp.array(dtype=wp.float64),
                  impulse: wp.array(dtype=wp.float64), damping: wp.array(dtype=wp.float64),
                  v: wp.array(dtype=wp.float64), elastic_gradient: wp.array(dtype=wp.float64), h: wp.float64,
                  target: wp.array(dtype=wp.float64), gradient: wp.array(dtype=wp.float64)):
    """Per DOF i: the target velocity and the objective's gradient (module docstring)."""
    i = wp.tid()
    goal = free_velocity[i] + impulse[i] / mass[i]
    target[i] = goal
    gradient[i] = mass[i] * (v[i] - goal) + damping[i] * mass[i] * v[i] + h * elastic_gradient[i]


@wp.kernel
def strand_objective(offsets: wp.array(dtype=wp.int32), mass: wp.array(dtype=wp.float64),
                     damping: wp.array(dtype=wp.float64), v: wp.array(dtype=wp.float64),
                     target: wp.array(dtype=wp.float64), potential: wp.array(dtype=wp.float64),
                     objective: wp.array(dtype=wp.float64)):
    """Per strand s: g_s (module docstring) over its DOFs offsets[s] .. offsets[s + 1]."""
    s = wp.tid()
    total = wp.float64(0.0)
    for k in range(offsets[s], offsets[s + 1]):
        difference = v[k] - target[k]
        total += wp.float64(0.5) * mass[k] * (difference * difference + damping[k] * v[k] * v[k])
    objective[s] = total + potential[s]


@wp.kernel
def search_directions(offsets: wp.array(dtype=wp.int32), fixed: wp.array(dtype=wp.int32),
                      solved: wp.array(dtype=wp.float64), gradient: wp.array(dtype=wp.float64),
                      current: wp.array(dtype=wp.float64), settled: wp.array(dtype=wp.int32),
                      direction: wp.array(dtype=wp.float64), slope: wp.array(dtype=wp.float64),
                      searching: wp.array(dtype=wp.int32), non_finite: wp.array(dtype=wp.int32)):
    """Per strand s: the Newton direction d = −A⁻¹∇g (``solved`` = A⁻¹∇g) with the kinematic DOFs' entries 0, the
    slope ∇gᵀd of the strand (added in order from zero), and whether its line search runs: a descent direction
    whose expected decrease is above the objective's round-off (1e-12 |g_s|), on a strand not ``settled``;
    non_finite[0] counts the non-finite entries of d."""
    s = wp.tid()
    total = wp.float64(0.0)
    for k in range(offsets[s], offsets[s + 1]):
        d = -solved[k]
        if fixed[k] != 0:
            d = wp.float64(0.0)
        direction[k] = d
        if wp.isnan(d) or wp.isinf(d):
            wp.atomic_add(non_finite, 0, 1)
        total += gradient[k] * d
    slope[s] = total
    searching[s] = 0
    if total < wp.float64(0.0) and -total > wp.float64(1e-12) * wp.abs(current[s]) and settled[s] == 0:
        searching[s] = 1
