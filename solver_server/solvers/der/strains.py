"""Bend and twist strains of DER elements and their exact derivatives (values and jets).

A bend/twist element sits at an interior vertex i with local variables (k = 8):
e^{i-1} (slots 0-2), e^i (slots 3-5), θ^{i-1} (slot 6), θ^i (slot 7).

* curvature binormal (seed eq. 2.4): (κb)_i = 2 e^{i-1} × e^i / (|ē^{i-1}||ē^i| + e^{i-1}·e^i)
  (rest lengths in the first denominator term, as in Bergou et al. 2008)
* material curvatures (seed eq. 2.5): ω_i^j = ((κb)_i · m1^j, (κb)_i · m2^j), j ∈ {i−1, i}
* twist: τ_i = θ^i − θ^{i−1} + r_i with r_i the reference twist of the time-parallel reference frames
"""

from __future__ import annotations

from . import jet as J
from .frames import cross3, frame_jets, material_directors, row_lengths, tangent_jet

LOCAL_VARIABLES = 8
SLOT_E0, SLOT_E1, SLOT_THETA0, SLOT_THETA1 = 0, 3, 6, 7


def curvature_binormal_value(xp, e0, e1, rest_length_product):
    denominator = rest_length_product + xp.einsum("nc,nc->n", e0, e1)
    return 2.0 * cross3(xp, e0, e1) / denominator[:, None]


def bend_strain_values(xp, e0, e1, rest_length_product, frame0, frame1):
    """Material curvatures omega (B, 2, 2): [edge j∈{i−1, i}, component c∈{m1, m2}].

    frame0/frame1: (u, v, θ) of edges i−1 and i, arrays (B, 3), (B, 3), (B,).
    """
    kb = curvature_binormal_value(xp, e0, e1, rest_length_product)
    omegas = []
    for u, v, theta in (frame0, frame1):
        m1, m2 = material_directors(xp, u, v, theta)
        omegas.append(xp.stack((xp.einsum("nc,nc->n", kb, m1), xp.einsum("nc,nc->n", kb, m2)), axis=1))
    return xp.stack(omegas, axis=1)


def bend_strain_jets(xp, e0, e1, rest_length_product, frame0, frame1, with_hessian: bool):
    """Jets of the four material curvatures, ordered [(j=0,c=0), (0,1), (1,0), (1,1)]."""
    k = LOCAL_VARIABLES
    edge0 = J.linear_vector(xp, e0, SLOT_E0, k, with_hessian)
    edge1 = J.linear_vector(xp, e1, SLOT_E1, k, with_hessian)
    denominator = J.dot(xp, edge0, edge1)
    denominator = J.Jet(denominator.value + rest_length_product, denominator.grad, denominator.hess)
    kb = J.mul(xp, J.reciprocal(xp, denominator), J.scale(J.cross(xp, edge0, edge1), 2.0))
    jets = []
    for edge, slot_e, slot_theta, (u, v, theta) in ((e0, SLOT_E0, SLOT_THETA0, frame0),
                                                      (e1, SLOT_E1, SLOT_THETA1, frame1)):
        m1, m2 = frame_jets(xp, edge, u, v, theta, slot_e, slot_theta, k, with_hessian)
        jets.append(J.dot(xp, kb, m1))
        jets.append(J.dot(xp, kb, m2))
    return jets


def reference_twist_jet(xp, e0, e1, u0, u1, twist_value, with_hessian: bool):
    """Jet of the reference twist r_i (value replaced by the unwrapped `twist_value` (B,))."""
    k = LOCAL_VARIABLES
    a = tangent_jet(xp, e0, SLOT_E0, k, with_hessian)
    b = tangent_jet(xp, e1, SLOT_E1, k, with_hessian)
    v0 = cross3(xp, a.value, u0)
    v1 = cross3(xp, b.value, u1)
    p, _ = frame_jets(xp, e0, u0, v0, None, SLOT_E0, None, k, with_hessian)
    q, _ = frame_jets(xp, e1, u1, v1, None, SLOT_E1, None, k, with_hessian)
    # P(a→b) p = (a·b) p − a (b·p) + (c·p) c / (1 + a·b),  c = a × b
    c = J.cross(xp, a, b)
    d = J.dot(xp, a, b)
    one_plus_d = J.Jet(1.0 + d.value, d.grad, d.hess)
    transported = J.add(J.sub(J.mul(xp, d, p), J.mul(xp, J.dot(xp, b, p), a)),
                        J.mul(xp, J.mul(xp, J.dot(xp, c, p), J.reciprocal(xp, one_plus_d)), c))
    cos_r = J.dot(xp, transported, q)
    sin_r = J.dot(xp, J.cross(xp, transported, q), b)
    return J.constant_shift(J.atan2(xp, sin_r, cos_r), twist_value)


def twist_strain_jet(xp, e0, e1, u0, u1, reference_twist, theta0, theta1, with_hessian: bool):
    """Jet of τ = θ^i − θ^{i−1} + r_i."""
    k = LOCAL_VARIABLES
    r = reference_twist_jet(xp, e0, e1, u0, u1, reference_twist, with_hessian)
    grad = r.grad.copy()
    grad[:, SLOT_THETA1] += 1.0
    grad[:, SLOT_THETA0] -= 1.0
    return J.Jet(theta1 - theta0 + reference_twist, grad, r.hess)


def bend_twist_gradients(xp, e0, e1, rest_length_product, frame0, frame1):
    """Closed-form values and gradients (over the 8 local variables) of the four material curvatures and of
    the reference twist (equal to the jets' gradients; kernels.bend_twist computes the same per element, and
    the tests assemble the Gauss–Newton Hessian from these as its reference):

        ∂ω/∂e^{i−1} = (2 e^i × m − ω e^i)/D,   ∂ω/∂e^i = (−2 e^{i−1} × m − ω e^{i−1})/D   (m ⊥-transport terms
        vanish since κb ⊥ t), ∂ω^j_1/∂θ^j = ω^j_2, ∂ω^j_2/∂θ^j = −ω^j_1;
        ∂r/∂e^{i−1} = κb̂/(2|e^{i−1}|), ∂r/∂e^i = κb̂/(2|e^i|), κb̂ = 2 t^{i−1} × t^i / (1 + t^{i−1}·t^i).

    Returns (omega (B, 4), omega_grad (B, 4, 8), twist_grad (B, 8)).
    """
    n = e0.shape[0]
    denominator = rest_length_product + xp.einsum("nc,nc->n", e0, e1)
    kb = 2.0 * cross3(xp, e0, e1) / denominator[:, None]
    omega = xp.zeros((n, 4), dtype=e0.dtype)
    grad = xp.zeros((n, 4, LOCAL_VARIABLES), dtype=e0.dtype)
    for j, (u, v, theta) in enumerate((frame0, frame1)):
        m1, m2 = material_directors(xp, u, v, theta)
        for c, m in enumerate((m1, m2)):
            row = 2 * j + c
            omega[:, row] = xp.einsum("nc,nc->n", kb, m)
            grad[:, row, SLOT_E0:SLOT_E0 + 3] = (2.0 * cross3(xp, e1, m) - omega[:, row, None] * e1) / denominator[:, None]
            grad[:, row, SLOT_E1:SLOT_E1 + 3] = (-2.0 * cross3(xp, e0, m) - omega[:, row, None] * e0) / denominator[:, None]
        slot_theta = SLOT_THETA0 if j == 0 else SLOT_THETA1
        grad[:, 2 * j, slot_theta] = omega[:, 2 * j + 1]
        grad[:, 2 * j + 1, slot_theta] = -omega[:, 2 * j]
    length0 = row_lengths(xp, e0)
    length1 = row_lengths(xp, e1)
    t0, t1 = e0 / length0[:, None], e1 / length1[:, None]
    kb_unit = 2.0 * cross3(xp, t0, t1) / (1.0 + xp.einsum("nc,nc->n", t0, t1))[:, None]
    twist_grad = xp.zeros((n, LOCAL_VARIABLES), dtype=e0.dtype)
    twist_grad[:, SLOT_E0:SLOT_E0 + 3] = kb_unit / (2.0 * length0[:, None])
    twist_grad[:, SLOT_E1:SLOT_E1 + 3] = kb_unit / (2.0 * length1[:, None])
    twist_grad[:, SLOT_THETA0] = -1.0
    twist_grad[:, SLOT_THETA1] = 1.0
    return omega, grad, twist_grad
