"""Warp kernel of the DER stretching energy (energy.py): per strand, its edges' energy, gradient and
Hessian blocks added straight into the gradient and the lower band.

E_stretch = Σ_edges ½ k_s (|e|/|ē| − 1)² |ē| over the DOFs [x_v, θ, x_{v+1}] of an edge (θ does not enter):
gradient ∓ k_s (|e|/|ē| − 1) t on the two vertices (t = e/|e|), Hessian blocks ±B with
B = (k_s/|ē|) t tᵀ + k_s (1/|ē| − 1/|e|)(1 − t tᵀ) (the second term clamped at 0 with ``project``: a
compressed edge's negative curvature dropped). A thread owns a strand (consecutive edges share a vertex, so
no two threads add to one DOF); lower band storage band[d, j] = H[j + d, j].
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False})   # forward only: no gradients are taken


@wp.kernel
def stretch_terms(first: int, strands: wp.array(dtype=wp.int32), strand_offsets: wp.array(dtype=wp.int32),
                  vertex_dof: wp.array(dtype=wp.int32), positions: wp.array(dtype=wp.vec3d),
                  stiffness: wp.array(dtype=wp.float64), rest_length: wp.array(dtype=wp.float64),
                  with_hessian: int, project: int, energy: wp.array(dtype=wp.float64),
                  gradient: wp.array(dtype=wp.float64), band: wp.array2d(dtype=wp.float64)):
    """energy[s] = the stretching energy [J] of strand s = strands[first + tid]; its gradient [N] added into
    ``gradient`` (n_dofs,) and, with_hessian, its Hessian blocks into ``band`` (11, n_dofs)."""
    strand = strands[wp.tid() + first]
    zero = wp.float64(0.0)
    half = wp.float64(0.5)
    one = wp.float64(1.0)
    total = zero
    for vertex in range(strand_offsets[strand], strand_offsets[strand + 1] - 1):
        edge = vertex - strand                           # every strand has one edge fewer than vertices
        vector = positions[vertex + 1] - positions[vertex]
        length = wp.length(vector)
        t = vector / length
        k = stiffness[edge]
        rest = rest_length[edge]
        strain = length / rest - one
        force = k * strain
        total = total + half * force * strain * rest
        dof = vertex_dof[vertex]
        for axis in range(3):
            gradient[dof + axis] = gradient[dof + axis] - force * t[axis]
            gradient[dof + 4 + axis] = gradient[dof + 4 + axis] + force * t[axis]
        if with_hessian != 0:
            lateral = k * (one / rest - one / length)
            if project != 0:
                lateral = wp.max(lateral, zero)
            along = wp.outer(t, t)
            block = (k / rest) * along + lateral * (wp.identity(n=3, dtype=wp.float64) - along)
            for row in range(3):
                for column in range(3):
                    if column <= row:
                        band[row - column, dof + column] = band[row - column, dof + column] + block[row, column]
                        band[row - column, dof + 4 + column] = band[row - column, dof + 4 + column] \
                            + block[row, column]
                    band[4 + row - column, dof + column] = band[4 + row - column, dof + column] - block[row, column]
    energy[strand] = total
