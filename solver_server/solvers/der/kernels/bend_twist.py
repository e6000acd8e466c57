"""Warp kernel of the DER bend and twist energy and its gradient (energy.strand_energy_and_gradient: the
line search's objective), per strand, added straight into the gradient.

At an interior vertex i with edges e⁰ = x_i − x_{i−1}, e¹ = x_{i+1} − x_i, reference directors u^j, v^j = t^j × u^j
and twist angles θ^j: material directors m₁ = cos θ u + sin θ v, m₂ = −sin θ u + cos θ v, curvature binormal
κb = 2 e⁰ × e¹ / (|ē⁰||ē¹| + e⁰·e¹), curvatures ω^j_c = κb · m^j_c, bend energy Σ w (ω − ω̄)², twist energy
½ k τ² with τ = θ¹ − θ⁰ + r − r̄. The gradient in closed form (strains.bend_twist_gradients' derivatives,
summed without forming them: with a = 2 w (ω − ω̄), Σ a (2 e¹ × m − ω e¹)/D = (2 e¹ × Σ a m − (Σ a ω) e¹)/D,
two cross products instead of eight; the reference twist's ∂r/∂e = κb̂/(2|e|)),
mapped from the local variables [e⁰, e¹, θ⁰, θ¹] onto the element's 11 DOFs [x_{i−1}, θ⁰, x_i, θ¹, x_{i+1}].
A thread owns a strand: its elements are consecutive and share DOFs only with each other.

With ``with_band`` the kernel also adds the Gauss–Newton Hessian Σ_s w_s ∇s ∇sᵀ of the five strains s (the four
curvatures, weight 2 w, and the twist, weight k) over the element's 11 DOFs into the lower band storage
(``band[d, j] = H[j + d, j]``, energy.py): the quasi-Newton matrix of the integrator, written straight into
the band (tests/physics_der/test_energy_derivatives.py checks it against the array form built from
strains.bend_twist_gradients).
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False})   # forward only: no gradients are taken


@wp.func
def directors(u: wp.vec3d, v: wp.vec3d, theta: wp.float64):
    """(m₁, m₂) = (cos θ u + sin θ v, −sin θ u + cos θ v) (frames.material_directors)."""
    c = wp.cos(theta)
    s = wp.sin(theta)
    return c * u + s * v, -s * u + c * v


vec11d = wp.types.vector(length=11, dtype=wp.float64)


@wp.func
def element_vector(g_e0: wp.vec3d, g_e1: wp.vec3d, g_theta0: wp.float64, g_theta1: wp.float64):
    """A gradient over the local variables [e⁰, e¹, θ⁰, θ¹] on the element's DOFs [x_{i−1}, θ⁰, x_i, θ¹, x_{i+1}]
    (e⁰ = x_i − x_{i−1}, e¹ = x_{i+1} − x_i)."""
    out = vec11d()
    for axis in range(3):
        out[axis] = -g_e0[axis]
        out[4 + axis] = g_e0[axis] - g_e1[axis]
        out[8 + axis] = g_e1[axis]
    out[3] = g_theta0
    out[7] = g_theta1
    return out


@wp.func
def add_outer_to_band(band: wp.array2d(dtype=wp.float64), dof: int, weight: wp.float64, g: vec11d):
    """band += weight · g gᵀ on the 11 DOFs from ``dof``, lower band storage (band[p − q, dof + q] = H[p, q])."""
    for p in range(11):
        scaled = weight * g[p]
        for q in range(p + 1):
            band[p - q, dof + q] = band[p - q, dof + q] + scaled * g[q]


@wp.func
def curvature_vector(e0: wp.vec3d, e1: wp.vec3d, director: wp.vec3d, omega: wp.float64, denominator: wp.float64,
                     g_theta0: wp.float64, g_theta1: wp.float64):
    """∇ω over the element's DOFs for the curvature ω = κb · m of director m (strains.bend_twist_gradients)."""
    two = wp.float64(2.0)
    return element_vector((two * wp.cross(e1, director) - omega * e1) / denominator,
                          (-two * wp.cross(e0, director) - omega * e0) / denominator, g_theta0, g_theta1)


@wp.func
def element_strains(e0: wp.vec3d, e1: wp.vec3d, u0: wp.vec3d, u1: wp.vec3d, theta0: wp.float64, theta1: wp.float64,
                    rest_product: wp.float64):
    """The element's curvatures ω = (κb·m₁⁰, κb·m₂⁰, κb·m₁¹, κb·m₂¹), the denominator D = |ē⁰||ē¹| + e⁰·e¹ of κb and
    the material directors (m₁⁰, m₂⁰, m₁¹, m₂¹), from its edges, reference directors and twist angles."""
    two = wp.float64(2.0)
    t0 = e0 / wp.length(e0)
    t1 = e1 / wp.length(e1)
    denominator = rest_product + wp.dot(e0, e1)
    kb = two * wp.cross(e0, e1) / denominator
    m01, m02 = directors(u0, wp.cross(t0, u0), theta0)
    m11, m12 = directors(u1, wp.cross(t1, u1), theta1)
    omega = wp.vec4d(wp.dot(kb, m01), wp.dot(kb, m02), wp.dot(kb, m11), wp.dot(kb, m12))
    return omega, denominator, m01, m02, m11, m12


@wp.kernel
def bend_twist_terms(first: int, strands: wp.array(dtype=wp.int32), strand_offsets: wp.array(dtype=wp.int32),
                     bend_vertex: wp.array(dtype=wp.int32), bend_edges: wp.array2d(dtype=wp.int32),
                     bend_dof: wp.array(dtype=wp.int32), positions: wp.array(dtype=wp.vec3d),
                     theta: wp.array(dtype=wp.float64), reference_u: wp.array(dtype=wp.vec3d),
                     reference_twist: wp.array(dtype=wp.float64), rest_edge_length: wp.array(dtype=wp.float64),
                     bend_weight: wp.array2d(dtype=wp.float64), rest_bend: wp.array2d(dtype=wp.float64),
                     twist_weight: wp.array(dtype=wp.float64), rest_twist: wp.array(dtype=wp.float64),
                     energy: wp.array(dtype=wp.float64), gradient: wp.array(dtype=wp.float64), with_band: int,
                     band: wp.array2d(dtype=wp.float64)):
    """Adds strand s = strands[first + tid]'s bend + twist energy [J] to energy[s], its gradient into
    ``gradient`` (n_dofs,) and, when with_band, its Gauss–Newton Hessian into ``band`` (11, n_dofs). bend_weight,
    rest_bend (B, 4) in the order [(j=0, m₁), (0, m₂), (1, m₁), (1, m₂)]."""
    strand = strands[wp.tid() + first]
    zero = wp.float64(0.0)
    one = wp.float64(1.0)
    two = wp.float64(2.0)
    total = zero
    # a strand of n vertices has n − 2 interior vertices: its elements start at offset − 2·strand
    for element in range(strand_offsets[strand] - 2 * strand, strand_offsets[strand + 1] - 2 * strand - 2):
        vertex = bend_vertex[element]
        previous_edge = bend_edges[element, 0]
        next_edge = bend_edges[element, 1]
        e0 = positions[vertex] - positions[vertex - 1]
        e1 = positions[vertex + 1] - positions[vertex]
        length0 = wp.length(e0)
        length1 = wp.length(e1)
        t0 = e0 / length0
        t1 = e1 / length1
        omega, denominator, m01, m02, m11, m12 = element_strains(
            e0, e1, reference_u[previous_edge], reference_u[next_edge], theta[previous_edge], theta[next_edge],
            rest_edge_length[previous_edge] * rest_edge_length[next_edge])
        weighted_director = wp.vec3d(zero, zero, zero)
        weighted_omega = zero
        bend = zero
        a = wp.vec4d(zero, zero, zero, zero)
        for r in range(4):
            difference = omega[r] - rest_bend[element, r]
            bend = bend + bend_weight[element, r] * difference * difference
            a[r] = two * bend_weight[element, r] * difference
        weighted_director = a[0] * m01 + a[1] * m02 + a[2] * m11 + a[3] * m12
        weighted_omega = a[0] * omega[0] + a[1] * omega[1] + a[2] * omega[2] + a[3] * omega[3]
        tau = theta[next_edge] - theta[previous_edge] + reference_twist[element] - rest_twist[element]
        twist_coefficient = twist_weight[element] * tau
        total = total + bend + wp.float64(0.5) * twist_weight[element] * tau * tau
        kb_unit = two * wp.cross(t0, t1) / (one + wp.dot(e0, e1) / (length0 * length1))
        g_e0 = (two * wp.cross(e1, weighted_director) - weighted_omega * e1) / denominator \
            + (twist_coefficient / (two * length0)) * kb_unit
        g_e1 = (-two * wp.cross(e0, weighted_director) - weighted_omega * e0) / denominator \
            + (twist_coefficient / (two * length1)) * kb_unit
        g_theta0 = a[0] * omega[1] - a[1] * omega[0] - twist_coefficient
        g_theta1 = a[2] * omega[3] - a[3] * omega[2] + twist_coefficient
        dof = bend_dof[element]
        for axis in range(3):
            gradient[dof + axis] = gradient[dof + axis] - g_e0[axis]
            gradient[dof + 4 + axis] = gradient[dof + 4 + axis] + (g_e0[axis] - g_e1[axis])
            gradient[dof + 8 + axis] = gradient[dof + 8 + axis] + g_e1[axis]
        gradient[dof + 3] = gradient[dof + 3] + g_theta0
        gradient[dof + 7] = gradient[dof + 7] + g_theta1
        if with_band != 0:
            add_outer_to_band(band, dof, two * bend_weight[element, 0],
                              curvature_vector(e0, e1, m01, omega[0], denominator, omega[1], zero))
            add_outer_to_band(band, dof, two * bend_weight[element, 1],
                              curvature_vector(e0, e1, m02, omega[1], denominator, -omega[0], zero))
            add_outer_to_band(band, dof, two * bend_weight[element, 2],
                              curvature_vector(e0, e1, m11, omega[2], denominator, zero, omega[3]))
            add_outer_to_band(band, dof, two * bend_weight[element, 3],
                              curvature_vector(e0, e1, m12, omega[3], denominator, zero, -omega[2]))
            add_outer_to_band(band, dof, twist_weight[element],
                              element_vector(kb_unit / (two * length0), kb_unit / (two * length1), -one, one))
    energy[strand] = energy[strand] + total
