"""Blender Wind and Turbulence force fields -> Tangle's wind parameters (hair of every model and cloth).
Blender-free.

Each field is given by its world direction (the field object's local +Z axis), its ``strength`` and its
``noise``. Strengths are taken as accelerations [m/s²] (the solvers apply wind as an acceleration: on every
particle of the fast hair models, across the strand for DER hair, along the face normals for cloth).
Wind fields add up as vectors; ``noise`` (Blender's random variation of the field) becomes the amplitude
of the sine-varying gust, ``noise × |strength|`` [m/s²]. A Turbulence field (a random flow in Blender) adds
``|strength|`` to that gust amplitude; alone, it blows as a gust along its own Z axis. Falloff, shape and
flow of Blender's fields and the spatial variation of turbulence are not modelled: the wind is uniform in
space.
"""

from __future__ import annotations

import numpy as np


def scene_wind(directions: np.ndarray, strengths: np.ndarray, noises: np.ndarray,
               turbulent=None) -> dict[str, object] | None:
    """Wind parameters from K fields: directions (K, 3) (any length), strengths (K,), noises (K,),
    turbulent (K,) bool: Turbulence rather than Wind fields (default: none).

    Returns {"wind_direction": [x, y, z] unit, "wind_strength": float, "wind_amplitude": float}, or None
    when there is no field or they cancel out."""
    directions = np.asarray(directions, np.float64).reshape(-1, 3)
    if len(directions) == 0:
        return None
    lengths = np.linalg.norm(directions, axis=1, keepdims=True)
    units = np.divide(directions, lengths, out=np.zeros_like(directions), where=lengths > 0)
    strengths = np.asarray(strengths, np.float64).reshape(-1)
    turbulent = np.zeros(len(directions), bool) if turbulent is None else np.asarray(turbulent, bool).reshape(-1)
    steady = ~turbulent
    total = (units[steady] * strengths[steady, None]).sum(axis=0)
    amplitude = float((np.abs(strengths[steady]) * np.asarray(noises, np.float64).reshape(-1)[steady]).sum())
    amplitude += float(np.abs(strengths[turbulent]).sum())
    magnitude = float(np.linalg.norm(total))
    if magnitude >= 1e-12:
        return {"wind_direction": (total / magnitude).tolist(), "wind_strength": magnitude, "wind_amplitude": amplitude}
    if amplitude < 1e-12 or not turbulent.any():
        return None
    # turbulence only: a gust along the strongest Turbulence field's axis
    axis = units[turbulent][int(np.argmax(np.abs(strengths[turbulent])))]
    if not np.any(axis):
        return None
    return {"wind_direction": axis.tolist(), "wind_strength": 0.0, "wind_amplitude": amplitude}
