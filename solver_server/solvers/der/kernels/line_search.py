"""Warp kernel of the DER line search's backtracking (integrator.ImplicitEulerSolver._line_search on a device), a
thread per strand: the strand's Armijo backtracking along its Newton direction runs inside the kernel, so a line
search is one launch with no read of the device between its trials.

Per trial α (1, then × ``backtrack`` up to ``max_backtracks`` times): the strand's velocities v + α d, bent onto the
length-preserving path where the strand takes it (retraction.bend_strand), its positions and twist angles at
q_t + h v, its reference frames transported in time (frame.transport_strand), its elastic energy (stretching and
bend–twist, as kernels.stretch and kernels.bend_twist compute it) and the objective
g = Σ ½ m ((v − target)² + c v²) + E + Σ ½ k ‖x − x̂‖² over its DOFs and soft pins
(integrator._StepProblem.objective); the first trial with
g ≤ g(v) + armijo · α · slope is taken. A strand with no such trial keeps its velocities (α = 0, not accepted).
"""

from __future__ import annotations

import warp as wp

from .bend_twist import element_strains
from .frame import transport_strand
from .retraction import bend_strand

wp.set_module_options({"enable_backward": False})   # forward only: no gradients are taken


@wp.struct
class StrandModel:
    """The model's constant data the search reads: strand offsets (S + 1), each vertex's first DOF (N,), per edge
    (E,) stretching stiffness [N] and rest length [m], per bend element (B,) its bend weights and rest curvatures
    (B, 4), twist weight [N·m] and rest twist; the length-preserving path's kinematic vertices (N,) and edges (E,)."""
    strand_offsets: wp.array(dtype=wp.int32)
    vertex_dof: wp.array(dtype=wp.int32)
    stiffness: wp.array(dtype=wp.float64)
    rest_length: wp.array(dtype=wp.float64)
    bend_weight: wp.array2d(dtype=wp.float64)
    rest_bend: wp.array2d(dtype=wp.float64)
    twist_weight: wp.array(dtype=wp.float64)
    rest_twist: wp.array(dtype=wp.float64)
    vertex_fixed: wp.array(dtype=wp.int32)
    edge_kinematic: wp.array(dtype=wp.int32)


@wp.struct
class StepData:
    """One step's data: h [s], q_t (n_dofs,) the coordinates at its start, the start positions x_t (N, 3) [m], the
    mass (n_dofs,), the damping h·c (n_dofs,), the base state's tangents (E, 3), reference directors (E, 3) and
    reference twists (B,), the path's edges and lengths (E,) at the search's start, and the soft pins sorted by
    vertex: strand s's pins are pin_offsets[s] to pin_offsets[s + 1] (S + 1), each with its vertex's first DOF,
    stiffness [N/m] and target (P, 3) [m]."""
    h: wp.float64
    q_t: wp.array(dtype=wp.float64)
    x_t: wp.array(dtype=wp.vec3d)
    mass: wp.array(dtype=wp.float64)
    damping: wp.array(dtype=wp.float64)
    base_tangents: wp.array(dtype=wp.vec3d)
    base_u: wp.array(dtype=wp.vec3d)
    base_twist: wp.array(dtype=wp.float64)
    current_edges: wp.array(dtype=wp.vec3d)
    current_lengths: wp.array(dtype=wp.float64)
    shortest_fraction: wp.float64
    pin_offsets: wp.array(dtype=wp.int32)
    pin_dof: wp.array(dtype=wp.int32)
    pin_stiffness: wp.array(dtype=wp.float64)
    pin_target: wp.array(dtype=wp.vec3d)


@wp.func
def strand_objective(strand: int, model: StrandModel, step: StepData, v: wp.array(dtype=wp.float64),
                     target: wp.array(dtype=wp.float64), positions: wp.array(dtype=wp.vec3d),
                     reference_u: wp.array(dtype=wp.vec3d), reference_twist: wp.array(dtype=wp.float64)):
    """g of one strand at velocities ``v`` (n_dofs,): its positions, frames and energy written into the scratch
    arrays on the way (its entries only)."""
    begin = model.strand_offsets[strand]
    end = model.strand_offsets[strand + 1]
    h = step.h
    half = wp.float64(0.5)
    total = wp.float64(0.0)
    for vertex in range(begin, end):
        dof = model.vertex_dof[vertex]
        positions[vertex] = wp.vec3d(step.q_t[dof] + h * v[dof], step.q_t[dof + 1] + h * v[dof + 1],
                                     step.q_t[dof + 2] + h * v[dof + 2])
    for dof in range(model.vertex_dof[begin], model.vertex_dof[end - 1] + 3):
        difference = v[dof] - target[dof]
        total = total + half * step.mass[dof] * (difference * difference + step.damping[dof] * v[dof] * v[dof])
    for pin in range(step.pin_offsets[strand], step.pin_offsets[strand + 1]):
        dof = step.pin_dof[pin]
        offset = wp.vec3d(step.q_t[dof] + h * v[dof], step.q_t[dof + 1] + h * v[dof + 1],
                          step.q_t[dof + 2] + h * v[dof + 2]) - step.pin_target[pin]
        total = total + half * step.pin_stiffness[pin] * wp.dot(offset, offset)
    transport_strand(strand, model.strand_offsets, positions, step.base_tangents, step.base_u, step.base_twist,
                     reference_u, reference_twist)
    one = wp.float64(1.0)
    for vertex in range(begin, end - 1):
        edge = vertex - strand
        strain = wp.length(positions[vertex + 1] - positions[vertex]) / model.rest_length[edge] - one
        total = total + half * model.stiffness[edge] * strain * strain * model.rest_length[edge]
    for vertex in range(begin + 1, end - 1):
        element = vertex - 1 - 2 * strand
        previous_edge = vertex - 1 - strand
        next_edge = vertex - strand
        theta0 = step.q_t[model.vertex_dof[vertex - 1] + 3] + h * v[model.vertex_dof[vertex - 1] + 3]
        theta1 = step.q_t[model.vertex_dof[vertex] + 3] + h * v[model.vertex_dof[vertex] + 3]
        omega, denominator, m01, m02, m11, m12 = element_strains(
            positions[vertex] - positions[vertex - 1], positions[vertex + 1] - positions[vertex],
            reference_u[previous_edge], reference_u[next_edge], theta0, theta1,
            model.rest_length[previous_edge] * model.rest_length[next_edge])
        for r in range(4):
            difference = omega[r] - model.rest_bend[element, r]
            total = total + model.bend_weight[element, r] * difference * difference
        tau = theta1 - theta0 + reference_twist[element] - model.rest_twist[element]
        total = total + half * model.twist_weight[element] * tau * tau
    return total


@wp.kernel
def armijo_backtracking(first: int, model: StrandModel, step: StepData, searching: wp.array(dtype=wp.int32),
                        bendable: wp.array(dtype=wp.int32), v: wp.array(dtype=wp.float64),
                        direction: wp.array(dtype=wp.float64), target: wp.array(dtype=wp.float64),
                        current: wp.array(dtype=wp.float64), slope: wp.array(dtype=wp.float64),
                        armijo: wp.float64, backtrack: wp.float64, max_backtracks: int,
                        trial_v: wp.array(dtype=wp.float64), positions: wp.array(dtype=wp.vec3d),
                        reference_u: wp.array(dtype=wp.vec3d), reference_twist: wp.array(dtype=wp.float64),
                        alpha_out: wp.array(dtype=wp.float64), accepted_out: wp.array(dtype=wp.int32)):
    """Strand ``first + tid``: trial_v (n_dofs,) gets its accepted velocities (v where none was accepted),
    alpha_out (S,) the step taken (0 where none), accepted_out (S,) 1 where a trial passed or the strand was not
    searched (searching 0: accepted with α = 0), 0 where no trial passed. bendable (S,): 1 where the trial
    velocities are bent onto the length-preserving path. The scratch arrays positions, reference_u and
    reference_twist hold the last trial's values."""
    strand = wp.tid() + first
    begin = model.strand_offsets[strand]
    first_dof = model.vertex_dof[begin]
    stop_dof = model.vertex_dof[model.strand_offsets[strand + 1] - 1] + 3
    alpha = wp.float64(1.0)
    accepted = int(0)
    if searching[strand] != 0:
        for _ in range(max_backtracks):
            for dof in range(first_dof, stop_dof):
                trial_v[dof] = v[dof] + alpha * direction[dof]
            if bendable[strand] != 0:
                bend_strand(strand, model.strand_offsets, model.vertex_dof, model.vertex_fixed, model.edge_kinematic,
                            step.x_t, step.h, step.current_edges, step.current_lengths, step.shortest_fraction,
                            trial_v, trial_v)
            objective = strand_objective(strand, model, step, trial_v, target, positions, reference_u,
                                         reference_twist)
            if objective <= current[strand] + armijo * alpha * slope[strand]:
                accepted = 1
                break
            alpha = alpha * backtrack
    if accepted == 0:
        for dof in range(first_dof, stop_dof):
            trial_v[dof] = v[dof]
        alpha = wp.float64(0.0)
        if searching[strand] == 0:
            accepted = 1
    alpha_out[strand] = alpha
    accepted_out[strand] = accepted
