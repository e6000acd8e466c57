"""Warp kernel of the DER length-preserving search path (retraction.LengthPreservingPath.bend), a thread per
strand: the trial point's edges keep their directions and take the lengths the linear model predicts,
and the strand is rebuilt from its root by summing them (see retraction.py for why)."""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False})   # forward only: no gradients are taken


@wp.func
def bend_strand(strand: int, strand_offsets: wp.array(dtype=wp.int32), vertex_dof: wp.array(dtype=wp.int32),
                vertex_fixed: wp.array(dtype=wp.int32), edge_kinematic: wp.array(dtype=wp.int32),
                x_t: wp.array(dtype=wp.vec3d), h: wp.float64, current_edges: wp.array(dtype=wp.vec3d),
                current_lengths: wp.array(dtype=wp.float64), shortest_fraction: wp.float64,
                v_trial: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64)):
    """The position DOFs of one strand's free vertices in ``out`` replaced by the velocities that reach the rebuilt
    strand in the step h [s] (``out`` may be ``v_trial`` itself: a vertex is read before it is written)."""
    inverse_h = wp.float64(1.0) / h
    begin = strand_offsets[strand]
    dof = vertex_dof[begin]
    root = x_t[begin] + h * wp.vec3d(v_trial[dof], v_trial[dof + 1], v_trial[dof + 2])
    if vertex_fixed[begin] == 0:
        moved = (root - x_t[begin]) * inverse_h
        for axis in range(3):
            out[dof + axis] = moved[axis]
    previous = root
    total = wp.vec3d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0))
    for vertex in range(begin, strand_offsets[strand + 1] - 1):
        edge_index = vertex - strand
        dof = vertex_dof[vertex + 1]
        trial = x_t[vertex + 1] + h * wp.vec3d(v_trial[dof], v_trial[dof + 1], v_trial[dof + 2])
        edge = trial - previous
        if edge_kinematic[edge_index] == 0:
            current = current_edges[edge_index]
            length = current_lengths[edge_index]
            predicted = wp.max(length + wp.dot(current, edge - current) / length, shortest_fraction * length)
            edge = edge * (predicted / wp.length(edge))
        total = total + edge
        if vertex_fixed[vertex + 1] == 0:
            moved = (root + total - x_t[vertex + 1]) * inverse_h
            for axis in range(3):
                out[dof + axis] = moved[axis]
        previous = trial


@wp.kernel
def bend_path(first: int, eligible: wp.array(dtype=wp.int32), strand_offsets: wp.array(dtype=wp.int32),
              vertex_dof: wp.array(dtype=wp.int32), vertex_fixed: wp.array(dtype=wp.int32),
              edge_kinematic: wp.array(dtype=wp.int32), x_t: wp.array(dtype=wp.vec3d), h: wp.float64,
              current_edges: wp.array(dtype=wp.vec3d), current_lengths: wp.array(dtype=wp.float64),
              shortest_fraction: wp.float64, v_trial: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64)):
    """out (n_dofs,) holds v_trial; the position DOFs of strand first + tid's free vertices are replaced by
    the velocities that reach the rebuilt strand in the step h [s] (strands not eligible stay unchanged)."""
    strand = wp.tid() + first
    if eligible[strand] == 0:
        return
    bend_strand(strand, strand_offsets, vertex_dof, vertex_fixed, edge_kinematic, x_t, h, current_edges,
                current_lengths, shortest_fraction, v_trial, out)
