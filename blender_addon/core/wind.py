"""Blender Wind force fields -> the fast hair models' wind parameters. Blender-free.

Each field is given by its world direction (the field object's local +Z axis), its ``strength`` and its
``noise``. Strengths are taken as accelerations [m/s²] (the fast models apply wind as an acceleration on
every particle); the fields add up as vectors; ``noise`` (Blender's random variation of the field)
becomes the amplitude of the models' sine-varying gust, ``noise × |strength|`` [m/s²]. Falloff, shape
and flow of Blender's fields are not modelled: the wind is uniform in space.
"""

from __future__ import annotations

import numpy as np


def scene_wind(directions: np.ndarray, strengths: np.ndarray, noises: np.ndarray) -> dict[str, object] | None:
    """Wind parameters from K fields: directions (K, 3) (any length), strengths (K,), noises (K,).

    Returns {"wind_direction": [x, y, z] unit, "wind_strength": float, "wind_amplitude": float}, or None
    when there is no field or they cancel out."""
    directions = np.asarray(directions, np.float64).reshape(-1, 3)
    if len(directions) == 0:
        return None
    lengths = np.linalg.norm(directions, axis=1, keepdims=True)
    units = np.divide(directions, lengths, out=np.zeros_like(directions), where=lengths > 0)
    strengths = np.asarray(strengths, np.float64).reshape(-1)
    total = (units * strengths[:, None]).sum(axis=0)
    magnitude = float(np.linalg.norm(total))
    if magnitude < 1e-12:
        return None
    amplitude = float((np.abs(strengths) * np.asarray(noises, np.float64).reshape(-1)).sum())
    return {"wind_direction": (total / magnitude).tolist(), "wind_strength": magnitude, "wind_amplitude": amplitude}
