"""Point transforms between object local and world space with a 4x4 ``matrix_world``. Blender-free."""

from __future__ import annotations

import numpy as np


def to_world(local: np.ndarray, matrix_world: np.ndarray) -> np.ndarray:
    """(N, 3) local points [m] -> world with a (4, 4) matrix."""
    return np.asarray(local, np.float64) @ matrix_world[:3, :3].T + matrix_world[:3, 3]


def to_local(world: np.ndarray, matrix_world: np.ndarray) -> np.ndarray:
    """(N, 3) world points [m] -> object local (inverse of :func:`to_world`)."""
    return np.linalg.solve(matrix_world[:3, :3], (np.asarray(world, np.float64) - matrix_world[:3, 3]).T).T
