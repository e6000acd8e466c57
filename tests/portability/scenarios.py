"""Small scenes that exercise every solver's device code: collisions, contact, pins, tets (plain wire dicts)."""

from __future__ import annotations

import numpy as np

from solver_server.simulation import Simulation
from solver_server.solvers.der import banded, contact_space
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
    vertices, triangles, index = grid(9, 9, size=0.4, height=0.93)   # lands on the ball within the 5 frames
    cloth = cloth_object(vertices, triangles, pins=[int(index[0, 0]), int(index[-1, 0])],
                         params={"friction": 0.3, "strain_limits": [0.9, 1.1], "self_collision": True})
    return scene([cloth, _sphere((0.2, 0.2, 0.8), 0.12), _mesh_collider()], frame_end=5, substeps=2,
                 solver={"pd": {"iterations": 6, "global": global_mode}})


def pd_cloth_on_ball():
    """A cloth pinned at two corners falling over a ball, hard strain limits, the Cholesky global step: every
    collider a primitive, no self-collision (the device-resident PD substep)."""
    vertices, triangles, index = grid(9, 9, size=0.4, height=0.93)
    cloth = cloth_object(vertices, triangles, pins=[int(index[0, 0]), int(index[-1, 0])],
                         params={"friction": 0.3, "strain_limits": [0.9, 1.05]})
    return scene([cloth, _sphere((0.2, 0.2, 0.8), 0.12)], frame_end=5, substeps=2, solver={"pd": {"iterations": 6}})


def pd_softbody():
    vertices, tets, triangles, _ = box_tets((3, 2, 2), (0.3, 0.2, 0.2), origin=(0.0, 0.0, 0.05))
    jelly = {"id": "Jelly", "kind": "softbody", "vertices": vertices, "triangles": triangles, "tets": tets,
             "params": {"young_modulus": 2e4, "poisson_ratio": 0.3, "strain_limits": [0.95, 1.05], "friction": 0.4}}
    return scene([jelly, _floor()], frame_end=5, substeps=2, solver={"pd": {"iterations": 6}})


def pd_mixed():
    """A cloth and a soft body in one PD group (merged system), the cloth falling onto the soft body in a
    gusty wind (cloth wind on the cloth's triangles only)."""
    softbody_scene = pd_softbody()
    vertices, triangles, _ = grid(6, 6, size=0.3, height=0.35)
    cloth = cloth_object(vertices, triangles, params={"friction": 0.3, "wind_direction": [0.3, 0.0, 1.0],
                                                      "wind_strength": 2.0, "wind_amplitude": 1.0})
    return scene([cloth, *softbody_scene["objects"]], frame_end=5, substeps=2, solver={"pd": {"iterations": 6}})


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


def cosserat_interaction():
    """Cosserat hair with strand-strand swept-sphere interaction switched on (strands 2-4 mm apart)."""
    hair_scene = hair("cosserat")
    hair_scene["objects"][0]["params"].update({"interaction_inner_radius": 0.002, "interaction_outer_radius": 0.004})
    return hair_scene


def der_crossing():
    """Two DER strands of one object crossing 4 mm apart: the lower pinned at both ends, the upper free
    and falling onto it (strand–strand contact: CCD broad phase, edge-edge impulses)."""
    n = 7
    lower = np.stack([np.linspace(-0.05, 0.05, n), np.zeros(n), np.full(n, 1.0)], 1)
    upper = np.stack([np.zeros(n), np.linspace(-0.05, 0.05, n), np.full(n, 1.004)], 1)
    crossing = {"id": "Hair", "kind": "hair", "points": np.concatenate([lower, upper]),
                "strand_offsets": np.array([0, n, 2 * n], np.int32),
                "pins": {"indices": np.array([0, 1, n - 2, n - 1], np.int32), "weights": np.ones(4)},
                "params": {"model": "der", "radius": 1e-3, "young_modulus": 1e8, "damping": 2.0, "friction": 0.3}}
    return scene([crossing], frame_end=5, substeps=2, solver={"der": {"max_iterations": 10, "tolerance": 1e-6}})


def collider_zoo(model):
    """Box, torus and triangle-mesh colliders under a soft body made from a closed surface (lattice
    embedding, no tets given) and under hair of ``model``."""
    from tests.physics.scenes import uv_sphere

    surface, surface_triangles = uv_sphere(rings=6, segments=10, radius=0.06, center=(0.3, 0.3, 0.96))
    ball = {"id": "Jelly", "kind": "softbody", "vertices": surface, "triangles": surface_triangles,
            "params": {"young_modulus": 5e4, "friction": 0.3}}
    box = {"id": "Crate", "kind": "collider", "shape": {"type": "box", "center": [0.3, 0.3, 0.85], "size": [0.2, 0.2, 0.1]},
           "matrix_world": np.eye(4), "params": {"friction": 0.4}}
    ring = {"id": "Ring", "kind": "collider", "shape": {"type": "torus", "center": [0.06, 0.006, 0.97],
                                                          "major_radius": 0.04, "minor_radius": 0.02},
            "matrix_world": np.eye(4), "params": {"friction": 0.3}}
    objects = [ball, box, ring, _mesh_collider()]
    hair_scene = hair(model)
    objects.append(hair_scene["objects"][0])
    return scene(objects, frame_end=5, substeps=2, solver={"pd": {"iterations": 6}, **hair_scene.get("solver", {})})


def _turn(angle):
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def animated_hair(model, lift: float = 0.08, guides: bool | None = None):
    """Strands rooted on an animated, deforming scalp mesh (roots follow its driven vertices) next to a
    sphere that moves into them; with ``guides`` (default: the fast models) 2 guides are simulated and the other
    strands interpolated. lift [rad]: the strands' angle off the scalp (0: lying in its plane)."""
    scalp = np.array([[0.0, 0.0, 1.0], [0.2, 0.0, 1.0], [0.0, 0.2, 1.0], [0.2, 0.2, 1.0]])
    scalp_triangles = np.array([[0, 1, 2], [1, 3, 2]], np.int32)
    barycentric = np.array([[0.6, 0.2, 0.2], [0.2, 0.6, 0.2], [0.2, 0.2, 0.6], [0.4, 0.3, 0.3]])
    root_triangles = np.array([0, 0, 1, 1], np.int32)
    roots = np.einsum("sk,skd->sd", barycentric, scalp[scalp_triangles[root_triangles]])
    points = 7
    # along +x, raised off the scalp, onto which they fall: strands lying exactly in the scalp's plane and across
    # its edges meet them in coplanar contacts that only rounding decides (a GPU's fused multiply-adds decide them
    # otherwise: tests/portability/test_fused_multiply_adds.py)
    length = np.linspace(0.0, 0.12, points)
    along = np.stack([length * np.cos(lift), np.zeros(points), length * np.sin(lift)], axis=1)
    strand_points = (roots[:, None, :] + along[None]).reshape(-1, 3)
    params = {"model": model, "radius": 1e-3, "young_modulus": 1e8, "shear_modulus": 4e7, "damping": 2.0}
    if model != "der" if guides is None else guides:
        params["guide_count"] = 2
    strand_hair = {"id": "Hair", "kind": "hair", "points": strand_points,
                   "strand_offsets": np.arange(len(roots) + 1, dtype=np.int32) * points, "matrix_world": np.eye(4),
                   "roots": {"surface": "Scalp", "triangles": root_triangles, "barycentric": barycentric},
                   "params": params}
    ball = _sphere((0.1, 0.1, 0.85), 0.05)
    ball["animated"] = True
    scalp_object = {"id": "Scalp", "kind": "collider", "vertices": scalp, "triangles": scalp_triangles,
                    "animated": True, "params": {"friction": 0.3, "thickness": 0.0}}
    solver = {"der": {"max_iterations": 10, "tolerance": 1e-6}} if model == "der" else None

    def drive(frame):
        ball_matrix = np.eye(4)
        ball_matrix[2, 3] = 0.03 * (frame - 1)
        return {"Ball": {"matrix_world": ball_matrix},
                "Scalp": {"matrix_world": np.eye(4), "vertices": scalp @ _turn(0.05 * (frame - 1)).T}}

    return scene([strand_hair, ball, scalp_object], frame_end=5, substeps=2, solver=solver), drive


def animated_cloth():
    """Jacobi global step; pins follow an animated cloth object; a sphere collider rises into the cloth."""
    vertices, triangles, index = grid(8, 8, size=0.4, height=0.95)
    cloth = cloth_object(vertices, triangles, pins=[int(index[0, 0]), int(index[-1, 0])],
                         params={"friction": 0.3}, animated=True, matrix_world=np.eye(4))
    ball = _sphere((0.2, 0.2, 0.75), 0.1)
    ball["animated"] = True

    def drive(frame):
        cloth_matrix, ball_matrix = np.eye(4), np.eye(4)
        cloth_matrix[0, 3] = 0.01 * (frame - 1)
        ball_matrix[2, 3] = 0.04 * (frame - 1)
        return {"Cloth": {"matrix_world": cloth_matrix}, "Ball": {"matrix_world": ball_matrix}}

    return scene([cloth, ball], frame_end=5, substeps=2, solver={"pd": {"iterations": 6, "global": "jacobi"}}), drive


def _static(build):
    return lambda: (build(), None)


SCENARIOS = {
    "pd_cloth_cholesky": _static(pd_cloth),
    "pd_cloth_a_jacobi": _static(lambda: pd_cloth("a_jacobi")),
    "pd_cloth_jacobi_animated": animated_cloth,
    "pd_cloth_on_ball": _static(pd_cloth_on_ball),
    "pd_softbody": _static(pd_softbody),
    "pd_cloth_and_softbody": _static(pd_mixed),
    "der": _static(lambda: hair("der")),
    "particles": _static(lambda: hair("particles")),
    "cosserat": _static(lambda: hair("cosserat")),
    "cosserat_interaction": _static(cosserat_interaction),
    "der_animated_roots": lambda: animated_hair("der"),
    "der_strand_contact": _static(der_crossing),
    "colliders_der": _static(lambda: collider_zoo("der")),
    "colliders_particles": _static(lambda: collider_zoo("particles")),
    "colliders_cosserat": _static(lambda: collider_zoo("cosserat")),
    "der_guides_animated": lambda: animated_hair("der", guides=True),
    "particles_guides_animated": lambda: animated_hair("particles"),
    "cosserat_guides_animated": lambda: animated_hair("cosserat"),
}
"""name -> () -> (scene dict, drive: frame -> drive.body["objects"], or None)."""


def run_frames(name, backend):
    """Frames (frame, positions by object id, stats) of the scenario `name` simulated on `backend`."""
    scene, drive = SCENARIOS[name]()
    simulation = Simulation(scene, backend)
    frames = [simulation.initial_frame()]
    for frame in range(simulation.frame_start + 1, simulation.frame_end + 1):
        frames.append(simulation.advance(drive(frame) if drive else None))
    return frames


def use_device_algorithms_on_cpu(set_attribute=setattr) -> None:
    """The CPU reference of the device tests takes the device's algorithms where the CPU has its own: DER's band
    Cholesky through the kernel path (LAPACK sums in another order, 1e-15 relative, which contact iterations stopped at
    N_max amplify to centimetres in der_animated_roots; LAPACK against the kernel path is compared directly in
    tests/physics_der/test_banded_device.py), and DER's contact sweeps colour after colour as CUDA and the emulated
    device run them (the CPU's sequential Gauss-Seidel is another local solver, the same solution only once
    converged). set_attribute: setattr, or a test's monkeypatch.setattr (undone after the test)."""
    set_attribute(banded, "FORCE_KERNEL_PATH", True)
    set_attribute(contact_space, "SEQUENTIAL_ON_CPU", False)
