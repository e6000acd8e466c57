"""Small scenes that exercise every solver's device code: collisions, contact, pins, tets (plain wire dicts)."""

from __future__ import annotations

import numpy as np

from tests.physics.scenes import box_tets, cloth_object, grid, scene


def _sphere(center, radius, friction=0.3):
    return {"id": "Ball", "kind": "collider", "shape": {"type": "sphere", "center": list(center), "radius": radius},
            "matrix_world": np.eye(4), "params": {"friction": friction, "thickness": 0.0}}


def _floor(height=0.0):
    return {"id": "Floor", "kind": "collider", "shape": {"type": "plane", "normal": [0, 0, 1], "offset": height},
            "params": {"friction": 0.5}}


def _mesh_collider():
    """A tilted square of two triangles at z ≈ 0.8 (triangle-mesh collider: KD-tree broad phase)."""
    vertices = np.array([[-1.0, -1.0, 0.75], [2.0, -1.0, 0.85], [2.0, 2.0, 0.85], [-1.0, 2.0, 0.75]])
    return {"id": "Ramp", "kind": "collider", "vertices": vertices, "triangles": np.array([[0, 1, 2], [0, 2, 3]], np.int32),
            "params": {"friction": 0.2, "thickness": 0.002}}


def pd_cloth(global_mode="cholesky"):
    vertices, triangles, index = grid(9, 9, size=0.4, height=0.95)
    cloth = cloth_object(vertices, triangles, pins=[int(index[0, 0]), int(index[-1, 0])],
                         params={"friction": 0.3, "strain_limits": [0.9, 1.1], "self_collision": True})
    return scene([cloth, _sphere((0.2, 0.2, 0.8), 0.12), _mesh_collider()], frame_end=5, substeps=2,
                 solver={"pd": {"iterations": 6, "global": global_mode}})


def pd_softbody():
    vertices, tets, triangles, _ = box_tets((3, 2, 2), (0.3, 0.2, 0.2), origin=(0.0, 0.0, 0.05))
    jelly = {"id": "Jelly", "kind": "softbody", "vertices": vertices, "triangles": triangles, "tets": tets,
             "params": {"young_modulus": 2e4, "poisson_ratio": 0.3, "strain_limits": [0.95, 1.05], "friction": 0.4}}
    return scene([jelly, _floor()], frame_end=5, substeps=2, solver={"pd": {"iterations": 6}})


def hair(model, frames=5):
    """Two rows of strands falling onto a sphere, crossing each other (strand-strand contact for DER)."""
    strands, points = 4, 7
    positions = np.zeros((strands, points, 3))
    positions[:, :, 0] = np.linspace(0.0, 0.12, points)
    positions[:, :, 1] = np.arange(strands)[:, None] * 0.004
    positions[:, :, 2] = 1.0 + (np.arange(strands)[:, None] % 2) * 0.002
    params = {"model": model, "radius": 1e-3, "young_modulus": 1e8, "shear_modulus": 4e7, "damping": 2.0}
    strand_hair = {"id": "Hair", "kind": "hair", "points": positions.reshape(-1, 3),
                   "strand_offsets": np.arange(strands + 1, dtype=np.int32) * points,
                   "matrix_world": np.eye(4), "params": params}
    solver = {"der": {"max_iterations": 10, "tolerance": 1e-6}} if model == "der" else None
    return scene([strand_hair, _sphere((0.08, 0.006, 0.946), 0.05)], frame_end=frames, substeps=2, solver=solver)


SCENARIOS = {
    "pd_cloth_cholesky": pd_cloth,
    "pd_cloth_a_jacobi": lambda: pd_cloth("a_jacobi"),
    "pd_softbody": pd_softbody,
    "der": lambda: hair("der"),
    "particles": lambda: hair("particles"),
    "cosserat": lambda: hair("cosserat"),
}
