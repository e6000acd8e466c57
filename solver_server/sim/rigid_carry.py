"""Points carried rigidly (in fact affinely) by an object's transform from its rest pose to a new one."""

from __future__ import annotations

import numpy as np


def carry_matrix(matrix: np.ndarray, matrix_rest: np.ndarray) -> np.ndarray:
    """(4, 4) transform taking world points of the rest pose (object matrix ``matrix_rest``) to the pose with
    object matrix ``matrix``: matrix · matrix_rest⁻¹."""
    return matrix @ np.linalg.inv(matrix_rest)


def carry_points(points: np.ndarray, matrix: np.ndarray, matrix_rest: np.ndarray) -> np.ndarray:
    """World points (n, 3) [m] of the rest pose moved with the object to the pose with object matrix
    ``matrix`` (both matrices (4, 4), world from object)."""
    carry = carry_matrix(matrix, matrix_rest)
    return points @ carry[:3, :3].T + carry[:3, 3]
