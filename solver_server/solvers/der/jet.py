"""Second-order forward derivatives ("jets") over a small set of local variables, batched over elements.

A `Jet` carries a value together with its exact gradient and Hessian with respect to the `k` local
variables of an element (for a DER bend/twist element: the two edge vectors and the two twist angles,
k = 8).  Every operation applies the exact product / chain rule, so energies built from jets have analytic
gradients and Hessians without per-element Python loops.

Shapes: a scalar jet has value (n,), grad (n, k), hess (n, k, k); a vector jet has value (n, 3),
grad (n, 3, k), hess (n, 3, k, k).  `hess` is None when only first derivatives are wanted (cheaper).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Jet:
    value: Any
    grad: Any
    hess: Any | None


def cross3(xp, a, b):
    """Cross product along axis 1 of arrays shaped (n, 3, ...) (trailing axes broadcast)."""
    a0, a1, a2 = a[:, 0], a[:, 1], a[:, 2]
    b0, b1, b2 = b[:, 0], b[:, 1], b[:, 2]
    return xp.stack((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0), axis=1)


def _outer_sym(xp, ga, gb):
    """ga_i gb_j + gb_i ga_j for scalar gradients shaped (n, k)."""
    outer = ga[:, :, None] * gb[:, None, :]
    return outer + xp.swapaxes(outer, 1, 2)


def add(a: Jet, b: Jet) -> Jet:
    hess = None if a.hess is None or b.hess is None else a.hess + b.hess
    return Jet(a.value + b.value, a.grad + b.grad, hess)


def sub(a: Jet, b: Jet) -> Jet:
    hess = None if a.hess is None or b.hess is None else a.hess - b.hess
    return Jet(a.value - b.value, a.grad - b.grad, hess)


def scale(a: Jet, factor) -> Jet:
    """Multiply a scalar or vector jet by a constant (float or per-element array shaped (n,))."""
    if hasattr(factor, "ndim") and factor.ndim == 1:
        f_val = factor.reshape((-1,) + (1,) * (a.value.ndim - 1))
        f_grad = factor.reshape((-1,) + (1,) * (a.grad.ndim - 1))
        f_hess = None if a.hess is None else factor.reshape((-1,) + (1,) * (a.hess.ndim - 1))
    else:
        f_val = f_grad = f_hess = factor
    hess = None if a.hess is None else a.hess * f_hess
    return Jet(a.value * f_val, a.grad * f_grad, hess)


def dot(xp, a: Jet, b: Jet) -> Jet:
    """Scalar jet a·b of two vector jets."""
    value = xp.einsum("nc,nc->n", a.value, b.value)
    grad = xp.einsum("nck,nc->nk", a.grad, b.value) + xp.einsum("nc,nck->nk", a.value, b.grad)
    hess = None
    if a.hess is not None and b.hess is not None:
        mixed = xp.einsum("nci,ncj->nij", a.grad, b.grad)
        hess = (xp.einsum("ncij,nc->nij", a.hess, b.value) + xp.einsum("nc,ncij->nij", a.value, b.hess)
                + mixed + xp.swapaxes(mixed, 1, 2))
    return Jet(value, grad, hess)


def cross(xp, a: Jet, b: Jet) -> Jet:
    """Vector jet a×b of two vector jets."""
    value = cross3(xp, a.value, b.value)
    grad = cross3(xp, a.grad, b.value[:, :, None]) + cross3(xp, a.value[:, :, None], b.grad)
    hess = None
    if a.hess is not None and b.hess is not None:
        mixed = cross3(xp, a.grad[:, :, :, None], b.grad[:, :, None, :])
        mixed_t = cross3(xp, a.grad[:, :, None, :], b.grad[:, :, :, None])
        hess = (cross3(xp, a.hess, b.value[:, :, None, None]) + cross3(xp, a.value[:, :, None, None], b.hess)
                + mixed + mixed_t)
    return Jet(value, grad, hess)


def mul(xp, s: Jet, a: Jet) -> Jet:
    """Product of a scalar jet s with a scalar or vector jet a."""
    if a.value.ndim == 1:
        value = s.value * a.value
        grad = s.grad * a.value[:, None] + s.value[:, None] * a.grad
        hess = None
        if s.hess is not None and a.hess is not None:
            hess = (s.hess * a.value[:, None, None] + s.value[:, None, None] * a.hess
                    + _outer_sym(xp, s.grad, a.grad))
        return Jet(value, grad, hess)
    value = s.value[:, None] * a.value
    grad = s.grad[:, None, :] * a.value[:, :, None] + s.value[:, None, None] * a.grad
    hess = None
    if s.hess is not None and a.hess is not None:
        mixed = s.grad[:, None, :, None] * a.grad[:, :, None, :]
        hess = (s.hess[:, None] * a.value[:, :, None, None] + s.value[:, None, None, None] * a.hess
                + mixed + xp.swapaxes(mixed, 2, 3))
    return Jet(value, grad, hess)


def reciprocal(xp, s: Jet) -> Jet:
    """1/s for a scalar jet (s must stay away from zero)."""
    inv = 1.0 / s.value
    d1 = -inv * inv
    grad = d1[:, None] * s.grad
    hess = None
    if s.hess is not None:
        d2 = 2.0 * inv * inv * inv
        hess = d1[:, None, None] * s.hess + d2[:, None, None] * s.grad[:, :, None] * s.grad[:, None, :]
    return Jet(inv, grad, hess)


def atan2(xp, y: Jet, x: Jet) -> Jet:
    """Angle atan2(y, x) of two scalar jets (derivatives do not depend on the branch)."""
    r2 = x.value * x.value + y.value * y.value
    d_y = x.value / r2
    d_x = -y.value / r2
    grad = d_y[:, None] * y.grad + d_x[:, None] * x.grad
    hess = None
    if x.hess is not None and y.hess is not None:
        r4 = r2 * r2
        d_yy = -2.0 * x.value * y.value / r4
        d_xx = -d_yy
        d_xy = (y.value * y.value - x.value * x.value) / r4
        hess = (d_y[:, None, None] * y.hess + d_x[:, None, None] * x.hess
                + d_yy[:, None, None] * y.grad[:, :, None] * y.grad[:, None, :]
                + d_xx[:, None, None] * x.grad[:, :, None] * x.grad[:, None, :]
                + d_xy[:, None, None] * _outer_sym(xp, x.grad, y.grad))
    return Jet(xp.arctan2(y.value, x.value), grad, hess)


def constant_shift(a: Jet, value) -> Jet:
    """Same derivatives, value replaced (used to carry an unwrapped angle)."""
    return Jet(value, a.grad, a.hess)


def linear_vector(xp, value, slot: int, k: int, with_hessian: bool) -> Jet:
    """Vector jet of a local variable that IS a 3-vector occupying variables slot..slot+2."""
    n = value.shape[0]
    grad = xp.zeros((n, 3, k), dtype=value.dtype)
    grad[:, 0, slot] = 1.0
    grad[:, 1, slot + 1] = 1.0
    grad[:, 2, slot + 2] = 1.0
    hess = xp.zeros((n, 3, k, k), dtype=value.dtype) if with_hessian else None
    return Jet(value, grad, hess)
