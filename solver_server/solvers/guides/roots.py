"""Where the strand roots are at a given instant: carried by the hair object's matrix_world or
bound to the deformed triangles of an emitter surface (scene ``roots``: triangle + barycentric).

Both give, per strand, a rigid map rest → now of the root frame: x_now = R (x_rest − root_rest) +
root_now, used to move the pinned root points (particles) and the clamped root segment (Cosserat).
"""

from __future__ import annotations

import numpy as np

from solver_server.sim.errors import SceneError
from solver_server.sim.rigid_carry import carry_matrix, carry_points


def _triangle_frames(vertices, triangles):
    """(S, 3, 3) orthonormal frames [e1 e2 n] (columns) of triangles (S, 3) of vertices (V, 3)."""
    a, b, c = (vertices[triangles[:, k]] for k in range(3))
    e1 = b - a
    e1 /= np.maximum(np.linalg.norm(e1, axis=1, keepdims=True), 1e-300)
    normal = np.cross(b - a, c - a)
    normal /= np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-300)
    e2 = np.cross(normal, e1)
    return np.stack([e1, e2, normal], axis=-1)


class RootBinding:
    """Root frames of the S strands of one hair object (host numpy).

    rest_roots: (S, 3) rest root points [m]. ``frames(poses)`` -> (roots (S, 3), rotations (S, 3, 3)).
    """

    def __init__(self, spec, scene, rest_roots: np.ndarray):
        self.object_id = spec.id
        self.matrix_rest = spec.matrix_world
        self.rest_roots = np.asarray(rest_roots, np.float64)
        self.surface = None
        roots = spec.raw.get("roots") if isinstance(spec.raw, dict) else None
        if roots is None:
            return
        strands = len(self.rest_roots)
        try:
            surface_id = roots["surface"]
            surface = scene.by_id(surface_id)
        except (KeyError, TypeError) as exc:
            raise SceneError(f"roots.surface names no object of the scene ({exc})", object=spec.id) from exc
        if surface.vertices is None or surface.triangles is None:
            raise SceneError(f"roots.surface {surface_id!r} is not a triangle mesh", object=spec.id)
        triangles = np.asarray(roots.get("triangles"))
        weights = np.asarray(roots.get("barycentric"), np.float64)
        if triangles.shape != (strands,) or weights.shape != (strands, 3):
            raise SceneError(f"roots needs triangles ({strands},) and barycentric ({strands}, 3), got "
                             f"{triangles.shape} and {weights.shape}", object=spec.id)
        if triangles.min() < 0 or triangles.max() >= len(surface.triangles):
            raise SceneError("roots.triangles has an index out of range of the surface's triangles", object=spec.id)
        self.surface = surface
        self.triangles = surface.triangles[triangles.astype(np.int64)]
        self.weights = weights
        self.rest_frames = _triangle_frames(surface.vertices, self.triangles)
        self.rest_surface_roots = np.einsum("sk,skd->sd", weights, surface.vertices[self.triangles])
        self.offsets = self.rest_roots - self.rest_surface_roots

    def frames(self, poses) -> tuple[np.ndarray, np.ndarray]:
        """Root points (S, 3) [m] and rest → now rotations (S, 3, 3) for ``poses`` (id -> ObjectPose)."""
        strands = len(self.rest_roots)
        if self.surface is None:
            pose = poses.get(self.object_id)
            matrix = self.matrix_rest if pose is None else pose.matrix
            carry = carry_matrix(matrix, self.matrix_rest)
            linear = carry[:3, :3]
            u, _, vt = np.linalg.svd(linear)
            rotation = u @ vt
            roots = self.rest_roots @ linear.T + carry[:3, 3]
            return roots, np.broadcast_to(rotation, (strands, 3, 3)).copy()
        pose = poses.get(self.surface.id)
        if pose is None or pose.vertices is None:
            matrix = self.surface.matrix_world if pose is None else pose.matrix
            vertices = carry_points(self.surface.vertices, matrix, self.surface.matrix_world)
        else:
            vertices = pose.vertices
        frames = _triangle_frames(vertices, self.triangles)
        rotations = frames @ np.transpose(self.rest_frames, (0, 2, 1))
        surface_roots = np.einsum("sk,skd->sd", self.weights, vertices[self.triangles])
        return surface_roots + np.einsum("sij,sj->si", rotations, self.offsets), rotations
