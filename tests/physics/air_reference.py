"""The air drag law of ``solver_server/kernels/air.py`` written in numpy from its docstring: the oracle the
drag tests and the fast models' whole-array references compare the kernels with."""

from __future__ import annotations

import math

import numpy as np

from solver_server.kernels.air import AIR_DENSITY, AIR_KINEMATIC_VISCOSITY

HALF_DENSITY_VISCOSITY = 0.5 * AIR_DENSITY * AIR_KINEMATIC_VISCOSITY


def drag_number(reynolds):
    """Re·C_d of a cylinder in cross-flow: White's 1 + 10 Re^(−2/3) from Re = 1, Lamb's Oseen solution scaled to
    meet it below."""
    reynolds = np.asarray(reynolds, np.float64)
    white = reynolds + 10.0 * np.cbrt(reynolds)
    lamb_scale = 11.0 / (8.0 * math.pi / 2.002)
    lamb = lamb_scale * 8.0 * math.pi / (2.002 - np.log(np.maximum(reynolds, 1e-12)))
    return np.where(reynolds >= 1.0, white, lamb)


def drag_rates(velocities, tangents, radius, linear_density, scale=1.0):
    """Drag rate [1/s] of points at velocities (..., 3) with unit tangents (..., 3), radius [m] and linear
    density [kg/m] (≤ 0: rate 0), times ``scale``."""
    velocities, tangents = np.asarray(velocities, np.float64), np.asarray(tangents, np.float64)
    across = velocities - np.sum(velocities * tangents, axis=-1, keepdims=True) * tangents
    reynolds = 2.0 * radius * np.sqrt(np.sum(across * across, axis=-1)) / AIR_KINEMATIC_VISCOSITY
    density = np.asarray(linear_density, np.float64)
    safe = np.where(density > 0.0, density, 1.0)
    return np.where(density > 0.0, scale * HALF_DENSITY_VISCOSITY * drag_number(reynolds) / safe, 0.0)
