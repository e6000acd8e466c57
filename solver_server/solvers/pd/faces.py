"""The faces of a merged PD model's cloth objects on the solver's device: their triangles and the vertex–face
incidence, for the forces that act on faces along their normals (wind: ``wind.py``; still air: ``air.py``)."""

from __future__ import annotations

import numpy as np
import scipy.sparse


class ClothFaces:
    """triangles (F, 3) merged particle indices; incidence (n, F) sparse, 1 where a particle is a corner of a face.
    Both on the backend's device."""

    def __init__(self, backend, triangles: np.ndarray, particle_count: int):
        xp = backend.xp
        self.xp = xp
        self.triangles = xp.asarray(np.ascontiguousarray(triangles, dtype=np.int64))
        count = len(triangles)
        incidence = scipy.sparse.csr_matrix((np.ones(3 * count), (triangles.ravel(), np.repeat(np.arange(count), 3))),
                                            shape=(particle_count, count))
        self.incidence = backend.sparse.csr_matrix(incidence) if backend.name != "cpu" else incidence

    def area_vectors(self, q):
        """(F, 3) [m²]: each face's normal times twice its area, at positions q (n, 3) [m]."""
        a, b, c = (q[self.triangles[:, k]] for k in range(3))
        return self.xp.cross(b - a, c - a)

    def normals(self, q):
        """(unit normals (F, 3), twice the areas (F,) [m²]) of the faces at positions q (n, 3) [m]."""
        xp = self.xp
        normal = self.area_vectors(q)
        double_area = xp.sqrt(xp.sum(normal * normal, axis=1))
        return normal / xp.maximum(double_area, 1e-300)[:, None], double_area

    def vertex_normals(self, q):
        """(unit area-weighted normals (n, 3), projected areas (n,) [m²]) of the particles at positions q (n, 3):
        a third of the sum of their faces' area vectors, so a crumpled patch shows less area than it has (zero
        rows for particles on no face)."""
        xp = self.xp
        summed = self.incidence @ self.area_vectors(q)
        length = xp.sqrt(xp.sum(summed * summed, axis=1))
        return summed / xp.maximum(length, 1e-300)[:, None], length / 6.0
