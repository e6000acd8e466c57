"""Static data of a set of discrete elastic rods (all strands of the hair objects
that share one solver, flattened with offsets).

Generalized coordinates, per strand, interleaved: [x_0 (3), θ^0, x_1 (3), θ^1, ..., θ^{n-2}, x_{n-1} (3)],
strands concatenated.  A strand with n vertices has 4n − 1 DOFs, so vertex v of strand s starts at DOF
4v − s and its outgoing edge's twist angle is DOF 4v − s + 3.  With this ordering every bend/twist element
touches 11 consecutive DOFs and every stretch element 7, so the whole system matrix is banded with
half-bandwidth 10 (block diagonal over strands).

Units: positions m, radius m, Young's / shear modulus Pa, density kg/m³, damping 1/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...backend import repeat_each
from ...kernels import int32_view
from ...sim.params import default_of
from .frames import reference_twist_value, space_parallel_frames
from .strains import bend_strain_values

BAND_WIDTH = 11  # rows of lower band storage: half-bandwidth 10 + the diagonal


class DerInputError(ValueError):
    """Bad strand input; the message names the problem (the caller adds the object id)."""


@dataclass
class DerMaterial:
    radius: Any = default_of("hair", "radius")                  # m, scalar or per vertex (N,)
    young_modulus: Any = default_of("hair", "young_modulus")    # Pa (human hair ~ 1-5 GPa), scalar or per vertex
    shear_modulus: Any = default_of("hair", "shear_modulus")    # Pa, scalar or per vertex (N,)
    density: Any = default_of("hair", "density")                # kg/m³, scalar or per vertex (N,)
    # 1/s, mass-proportional (air drag like); the material alone is the seed's undamped rod, a scene's hair
    # object passes the parameter table's damping
    damping: float = 0.0
    bend_ratio: float = 1.0          # B2 / B1: anisotropy of the cross-section (1 = round)


@dataclass
class DerModel:
    xp: Any
    n_vertices: int
    n_strands: int
    n_edges: int
    n_dofs: int
    strand_offsets: Any      # (S+1,) vertex offsets
    vertex_strand: Any       # (N,)
    vertex_dof: Any          # (N,) first DOF of the vertex position
    edge_vertex: Any         # (E,) first vertex of each edge
    edge_strand: Any         # (E,)
    edge_local: Any          # (E,) index of the edge inside its strand
    edge_dof: Any            # (E,) DOF of the twist angle
    bend_vertex: Any         # (B,) interior vertex of each bend/twist element
    bend_edges: Any          # (B, 2) previous and next edge
    bend_dof: Any            # (B,) first of the 11 consecutive DOFs
    rest_positions: Any      # (N, 3)
    rest_edge_length: Any    # (E,)
    voronoi_length: Any      # (B,) half the sum of the two rest edge lengths
    rest_bend: Any           # (B, 2, 2) rest material curvatures omega[j, c] for edge j∈{prev,next}
    rest_twist: Any          # (B,)
    stretch_stiffness: Any   # (E,) E·A [N]
    bend_stiffness: Any      # (E, 2) E·I1, E·I2 [N·m²]
    twist_stiffness: Any     # (E,) G·J [N·m²]
    edge_radius: Any         # (E,)
    vertex_mass: Any         # (N,) kg
    edge_inertia: Any        # (E,) kg·m² (twist)
    mass: Any                # (n_dofs,) diagonal of the generalized mass matrix
    damping: float
    rest_u: Any              # (E, 3) space-parallel reference directors at rest
    position_dofs: Any       # (N, 3) DOF index of each vertex coordinate
    bend_weight: Any         # (B, 2, 2) B^j_c / (4 l̄_i): E_bend = Σ bend_weight (ω − ω̄)²
    twist_weight: Any        # (B,) k_t / l̄_i (k_t averaged over the element's two edges)

    def gather_positions(self, q):
        return q[self.position_dofs]

    def gather_theta(self, q):
        return q[self.edge_dof]

    def pack(self, positions, theta):
        q = self.xp.zeros(self.n_dofs, dtype=positions.dtype)
        q[self.position_dofs] = positions
        q[self.edge_dof] = theta
        return q


@dataclass
class ElementSubset:
    """The stretch elements (edges) and bend/twist elements of a set of strands, and those strands: index
    arrays (e,), (b,), (s,)."""
    edges: Any
    bends: Any
    strands: Any


def index_view(model: DerModel, name: str):
    """Warp int32 view of the model's integer array ``name`` (strand_offsets, vertex_dof, bend_edges, ...), made
    once per model: the element kernels read these on every call. "strands" is every strand's index."""
    cache = model.__dict__.setdefault("_index_views", {})
    if name not in cache:
        xp = model.xp
        cache[name] = int32_view(xp, xp.arange(model.n_strands) if name == "strands" else getattr(model, name))
    return cache[name]


def strands_view(model: DerModel, subset: ElementSubset | None):
    """Warp int32 view of the strands a kernel visits: every strand, or subset.strands."""
    return index_view(model, "strands") if subset is None else int32_view(model.xp, subset.strands)


def element_subset(xp, model: DerModel, strands) -> ElementSubset:
    """Elements of the strands marked in the bool mask strands (S,) (every element lies in one strand)."""
    return ElementSubset(edges=xp.nonzero(strands[model.edge_strand])[0],
                         bends=xp.nonzero(strands[model.vertex_strand[model.bend_vertex]])[0],
                         strands=xp.nonzero(strands)[0])


def _validate(xp, points, strand_offsets):
    if points.ndim != 2 or points.shape[1] != 3:
        raise DerInputError(f"points must have shape (N, 3), got {tuple(points.shape)}")
    if strand_offsets.ndim != 1 or strand_offsets.shape[0] < 2:
        raise DerInputError("strand_offsets must be a 1-D array of length S+1 >= 2")
    if int(strand_offsets[0]) != 0 or int(strand_offsets[-1]) != points.shape[0]:
        raise DerInputError(f"strand_offsets must start at 0 and end at the number of points {points.shape[0]}")
    counts = xp.diff(strand_offsets)
    if bool(xp.any(counts < 3)):
        bad = int(xp.nonzero(counts < 3)[0][0])
        raise DerInputError(f"strand {bad} has {int(counts[bad])} points; a DER strand needs at least 3")
    if not bool(xp.all(xp.isfinite(points))):
        raise DerInputError("points contain NaN or infinite values")


def build_model(xp, points, strand_offsets, material: DerMaterial) -> DerModel:
    """Model from rest points (N, 3) [m] and strand vertex offsets (S+1,); the rest shape is the input shape."""
    points = xp.asarray(points, dtype=xp.float64)
    strand_offsets = xp.asarray(strand_offsets, dtype=xp.int64)
    _validate(xp, points, strand_offsets)
    n_vertices = points.shape[0]
    n_strands = strand_offsets.shape[0] - 1
    counts = xp.diff(strand_offsets)
    vertex_strand = repeat_each(xp, xp.arange(n_strands), counts)
    vertex_local = xp.arange(n_vertices) - strand_offsets[vertex_strand]
    vertex_dof = 4 * xp.arange(n_vertices) - vertex_strand
    is_edge_start = vertex_local < counts[vertex_strand] - 1
    edge_vertex = xp.nonzero(is_edge_start)[0]
    edge_strand = vertex_strand[edge_vertex]
    edge_local = vertex_local[edge_vertex]
    edge_dof = vertex_dof[edge_vertex] + 3
    n_edges = edge_vertex.shape[0]
    n_dofs = 4 * n_vertices - n_strands
    has_both = (vertex_local > 0) & (vertex_local < counts[vertex_strand] - 1)
    bend_vertex = xp.nonzero(has_both)[0]
    edge_of_vertex = xp.cumsum(is_edge_start) - 1        # edge starting at a vertex (valid where is_edge_start)
    bend_next = edge_of_vertex[bend_vertex]
    bend_edges = xp.stack((bend_next - 1, bend_next), axis=1)
    bend_dof = vertex_dof[bend_vertex - 1]

    edges = points[edge_vertex + 1] - points[edge_vertex]
    rest_edge_length = xp.linalg.norm(edges, axis=1)
    if bool(xp.any(rest_edge_length <= 0.0)):
        bad = int(edge_vertex[xp.nonzero(rest_edge_length <= 0.0)[0][0]])
        raise DerInputError(f"points {bad} and {bad + 1} coincide (zero-length segment)")
    tangents = edges / rest_edge_length[:, None]
    strand_first_edge = (strand_offsets[:-1] - xp.arange(n_strands))[edge_strand]
    rest_u = space_parallel_frames(xp, tangents, edge_local, strand_first_edge)
    rest_v = xp.cross(tangents, rest_u)

    per_edge = {}   # radius, moduli and density per vertex -> the mean of each edge's two vertices
    for name in ("radius", "young_modulus", "shear_modulus", "density"):
        values = xp.broadcast_to(xp.asarray(getattr(material, name), dtype=xp.float64), (n_vertices,))
        if not bool(xp.all(values > 0.0)):
            raise DerInputError(f"{name} must be positive (got {float(xp.min(values))})")
        per_edge[name] = 0.5 * (values[edge_vertex] + values[edge_vertex + 1])
    if material.damping < 0.0:
        raise DerInputError(f"damping must be >= 0, got {material.damping}")
    edge_radius = per_edge["radius"]
    area = xp.pi * edge_radius ** 2
    second_moment = 0.25 * xp.pi * edge_radius ** 4
    stretch_stiffness = per_edge["young_modulus"] * area
    bend_stiffness = (per_edge["young_modulus"] * second_moment)[:, None] * xp.asarray([1.0, material.bend_ratio])
    twist_stiffness = per_edge["shear_modulus"] * 2.0 * second_moment
    edge_mass = per_edge["density"] * area * rest_edge_length
    vertex_mass = xp.zeros(n_vertices)
    vertex_mass += xp.bincount(edge_vertex, weights=0.5 * edge_mass, minlength=n_vertices)
    vertex_mass += xp.bincount(edge_vertex + 1, weights=0.5 * edge_mass, minlength=n_vertices)
    edge_inertia = 0.5 * edge_mass * edge_radius ** 2
    position_dofs = vertex_dof[:, None] + xp.arange(3)
    mass = xp.zeros(n_dofs)
    mass[position_dofs] = vertex_mass[:, None]
    mass[edge_dof] = edge_inertia

    voronoi_length = 0.5 * (rest_edge_length[bend_edges[:, 0]] + rest_edge_length[bend_edges[:, 1]])
    rest_bend = bend_strain_values(
        xp, edges[bend_edges[:, 0]], edges[bend_edges[:, 1]],
        rest_edge_length[bend_edges[:, 0]] * rest_edge_length[bend_edges[:, 1]],
        (rest_u[bend_edges[:, 0]], rest_v[bend_edges[:, 0]], xp.zeros(bend_vertex.shape[0])),
        (rest_u[bend_edges[:, 1]], rest_v[bend_edges[:, 1]], xp.zeros(bend_vertex.shape[0])))
    rest_twist = reference_twist_value(xp, tangents[bend_edges[:, 0]], tangents[bend_edges[:, 1]],
                                       rest_u[bend_edges[:, 0]], rest_u[bend_edges[:, 1]])
    bend_weight = 0.25 * bend_stiffness[bend_edges] / voronoi_length[:, None, None]
    twist_weight = 0.5 * (twist_stiffness[bend_edges[:, 0]] + twist_stiffness[bend_edges[:, 1]]) / voronoi_length
    return DerModel(
        xp=xp, n_vertices=n_vertices, n_strands=n_strands, n_edges=n_edges, n_dofs=n_dofs,
        strand_offsets=strand_offsets, vertex_strand=vertex_strand, vertex_dof=vertex_dof,
        edge_vertex=edge_vertex, edge_strand=edge_strand, edge_local=edge_local, edge_dof=edge_dof,
        bend_vertex=bend_vertex, bend_edges=bend_edges, bend_dof=bend_dof, rest_positions=points.copy(),
        rest_edge_length=rest_edge_length, voronoi_length=voronoi_length, rest_bend=rest_bend,
        rest_twist=rest_twist, stretch_stiffness=stretch_stiffness, bend_stiffness=bend_stiffness,
        twist_stiffness=twist_stiffness, edge_radius=edge_radius, vertex_mass=vertex_mass,
        edge_inertia=edge_inertia, mass=mass, damping=float(material.damping), rest_u=rest_u,
        position_dofs=position_dofs, bend_weight=bend_weight, twist_weight=twist_weight)
