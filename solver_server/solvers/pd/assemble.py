"""Cloth / soft-body ObjectSpecs -> one merged ParticleModel (lumped masses, per-vertex params)."""

from __future__ import annotations

import numpy as np
import scipy.sparse
import scipy.spatial

from ...sim.builder import ObjectSpec
from ...sim.errors import SceneError
from ...sim.model import ObjectSlot, ParticleModel
from .constraints import tet_rest_frames, triangle_areas


def _cloth_masses(spec: ObjectSpec) -> np.ndarray:
    """Lumped mass [kg] = density [kg/m²] × one third of the adjacent triangle areas."""
    areas = triangle_areas(spec.vertices, spec.triangles)
    if np.any(areas < 1e-14):
        raise SceneError(f"triangle {int(np.argmax(areas < 1e-14))} has zero area", object=spec.id)
    mass = np.bincount(spec.triangles.ravel(), weights=np.repeat(areas / 3.0, 3), minlength=len(spec.vertices))
    mass *= spec.params["density"]
    loose = mass <= 0
    if np.any(loose):
        mass[loose] = mass[~loose].mean()  # loose vertices fall freely with an average mass
    return mass


def oriented_tets(rest: np.ndarray, tets: np.ndarray, object_id: str) -> np.ndarray:
    """Tets with positive rest volume det(x0−x3, x1−x3, x2−x3)/6: negatively oriented ones get their
    first two vertices swapped; degenerate (zero-volume) tets are a SceneError."""
    _, volume = tet_rest_frames(rest, tets)
    scale = np.abs(volume).max() if len(volume) else 1.0
    degenerate = np.abs(volume) <= 1e-12 * scale
    if np.any(degenerate):
        raise SceneError(f"tetrahedron {int(np.argmax(degenerate))} is degenerate (zero volume)", object=object_id)
    tets = tets.copy()
    flip = volume < 0
    tets[flip, 0], tets[flip, 1] = tets[flip, 1], tets[flip, 0].copy()
    return tets


def _tet_masses(rest: np.ndarray, tets: np.ndarray, density: float, object_id: str) -> np.ndarray:
    """Lumped mass [kg] = density [kg/m³] × one quarter of the adjacent (positively oriented) tet volumes."""
    _, volume = tet_rest_frames(rest, tets)
    mass = np.bincount(tets.ravel(), weights=np.repeat(volume / 4.0, 4), minlength=len(rest)) * density
    loose = mass <= 0
    if np.any(loose):
        raise SceneError(f"{int(loose.sum())} vertices belong to no tetrahedron", object=object_id)
    return mass


def boundary_faces(tets: np.ndarray) -> np.ndarray:
    """Outward boundary triangles (F, 3) of a positively oriented tet mesh (faces used once)."""
    faces = np.concatenate([tets[:, [0, 2, 1]], tets[:, [0, 1, 3]], tets[:, [1, 2, 3]], tets[:, [0, 3, 2]]])
    _, first, counts = np.unique(np.sort(faces, axis=1), axis=0, return_index=True, return_counts=True)
    return faces[first[counts == 1]]


def surface_volume(vertices: np.ndarray, triangles: np.ndarray) -> float:
    """Volume [m³] enclosed by a closed, outward-oriented triangle surface (divergence theorem)."""
    a, b, c = (vertices[triangles[:, k]] for k in range(3))
    return float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0)


def _particle_maps(spec: ObjectSpec, rest: np.ndarray, embedded: bool) -> dict[str, np.ndarray]:
    """The object's painted factors per simulated particle: its own vertices, or for a soft body embedded
    in a lattice each lattice node takes the factors of its nearest surface vertex."""
    if not spec.maps or not embedded:
        return dict(spec.maps)
    _, nearest = scipy.spatial.cKDTree(spec.vertices).query(rest)
    return {name: factors[nearest] for name, factors in spec.maps.items()}


def _merged_maps(per_object: list[dict[str, np.ndarray]], counts: list[int]) -> dict[str, np.ndarray]:
    """{param: (n,) factors} over the merged particles, 1 on objects that do not paint ``param``."""
    names = sorted({name for maps in per_object for name in maps})
    return {name: np.concatenate([maps.get(name, np.ones(count)) for maps, count in zip(per_object, counts)])
            for name in names}


def build_particle_model(specs: list[ObjectSpec]) -> ParticleModel:
    """Merge cloth and soft-body objects into one ParticleModel with per-object slots."""
    slots, rests, masses, thick, fric, damp = [], [], [], [], [], []
    triangles, triangle_slot, tets, tet_slot = [], [], [], []
    pin_idx, pin_w, pin_slot, params = [], [], [], []
    embeddings, painted = [], []
    offset = 0
    for slot_index, spec in enumerate(specs):
        embedding = None
        if spec.kind == "cloth":
            rest = spec.vertices
            mass = _cloth_masses(spec)
            triangles.append(spec.triangles + offset)
            triangle_slot.append(np.full(len(spec.triangles), slot_index))
            local_pins, weights = spec.pin_indices, spec.pin_weights
        elif spec.kind == "softbody":
            if spec.tets is not None:
                rest = spec.vertices
                local_tets = oriented_tets(rest, spec.tets, spec.id)
                local_pins, weights = spec.pin_indices, spec.pin_weights
            else:
                from .tetgen import embed_in_lattice  # noqa: PLC0415 (only soft bodies without tets)

                lattice = embed_in_lattice(spec.id, spec.vertices, spec.triangles, spec.params["tet_resolution"])
                rest, local_tets = lattice.nodes, lattice.tets
                embedding = lattice.weights  # (N_out, n_nodes)
                local_pins, weights = lattice.pins_for(spec.pin_indices, spec.pin_weights)
            mass = _tet_masses(rest, local_tets, spec.params["density"], spec.id)
            if embedding is not None:
                # the lattice covers more than the surface: keep the true mass density × enclosed volume (its
                # size: a closed surface whose normals all point inward encloses the same volume, negatively
                # signed, which made every mass negative and the system indefinite)
                mass *= abs(surface_volume(spec.vertices, spec.triangles)) * spec.params["density"] / mass.sum()
            tets.append(local_tets + offset)
            tet_slot.append(np.full(len(local_tets), slot_index))
        else:
            raise SceneError(f"kind {spec.kind!r} is not simulated by Projective Dynamics", object=spec.id)
        count = len(rest)
        maps = _particle_maps(spec, rest, embedding is not None)
        if "density" in maps:
            mass = mass * maps["density"]     # lumped: the density painted at each particle
        painted.append(maps)
        surface = spec.triangles if len(spec.triangles) else boundary_faces(local_tets)
        slots.append(ObjectSlot(id=spec.id, kind=spec.kind, start=offset, stop=offset + count,
                                rest_output=spec.vertices, matrix_rest=spec.matrix_world, animated=spec.animated,
                                surface_triangles=np.asarray(surface, np.int64), output_maps=dict(spec.maps)))
        embeddings.append(embedding)
        rests.append(rest)
        masses.append(mass)
        thick.append(np.full(count, spec.params["thickness"]))
        fric.append(spec.params["friction"] * maps.get("friction", np.ones(count)))
        damp.append(np.full(count, spec.params["damping"]))
        pin_idx.append(local_pins + offset)
        pin_w.append(weights)
        pin_slot.append(np.full(len(local_pins), slot_index))
        params.append(spec.params)
        offset += count
    total = offset
    for slot, embedding in zip(slots, embeddings):
        if embedding is not None:
            shifted = scipy.sparse.csr_matrix(embedding)
            slot.embedding = scipy.sparse.hstack([
                scipy.sparse.csr_matrix((shifted.shape[0], slot.start)), shifted,
                scipy.sparse.csr_matrix((shifted.shape[0], total - slot.stop))]).tocsr()
    cat = lambda parts, shape: np.concatenate(parts) if parts else np.zeros(shape)  # noqa: E731
    return ParticleModel(
        slots=slots, rest=np.concatenate(rests), mass=np.concatenate(masses),
        thickness=np.concatenate(thick), friction=np.concatenate(fric), damping=np.concatenate(damp),
        triangles=cat(triangles, (0, 3)).astype(np.int64), triangle_slot=cat(triangle_slot, (0,)).astype(np.int64),
        tets=cat(tets, (0, 4)).astype(np.int64), tet_slot=cat(tet_slot, (0,)).astype(np.int64),
        pin_indices=cat(pin_idx, (0,)).astype(np.int64), pin_weights=cat(pin_w, (0,)).astype(float),
        pin_slot=cat(pin_slot, (0,)).astype(np.int64), params=params,
        painted=_merged_maps(painted, [len(rest) for rest in rests]))
