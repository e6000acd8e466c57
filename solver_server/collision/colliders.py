"""Collider objects of a scene and the seed's ResolveCollision (Algorithm 2 lines 2 and 12).

A collider is kinematic: its pose (``matrix_world``) and, for meshes, its deformed vertices
are set for every substep by the Simulation (linearly interpolated drive data). Projection
pushes every point closer than (point thickness + collider thickness) to the surface out
along the surface normal and reports the push depth, used by the Coulomb friction step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import warp as wp

from ..kernels import launch_items, warp_device_of, warp_view
from ..sim.builder import ObjectSpec
from ..sim.rigid_carry import carry_points
from . import primitive_kernels
from .mesh import CONTACT_PASSES, EDGE_CONTACT_COUNTS
from .primitive_kernels import packed_parameters
from .primitives import PRIMITIVES


@dataclass
class Contacts:
    """Result of one projection pass over all colliders (arrays on the backend device).

    depth: (n,) [m] total normal push applied (0 where no contact); normal: (n, 3) outward
    surface normal of the last contact; surface_motion: (n, 3) [m] displacement of the touched
    surface point over this substep; friction: (n,) Coulomb μ of the contact; mask: (n,) bool.
    """

    depth: object
    normal: object
    surface_motion: object
    friction: object
    mask: object

    @property
    def count(self):
        """How many points a collider touched: a 0-d device array (read it on the host at a frame boundary)."""
        return self.mask.sum()


class Collider:
    """One kinematic collider: a primitive shape or a triangle mesh (see collision.mesh)."""

    def __init__(self, spec: ObjectSpec):
        self.id = spec.id
        self.friction = float(spec.params["friction"])
        self.thickness = float(spec.params["thickness"])
        self.matrix_rest = spec.matrix_world
        self.matrix = spec.matrix_world
        self.matrix_previous = spec.matrix_world
        self._undo_move = None  # (previous, matrix, xp, dtype, linear (3, 3), shift (3,)) on the device
        if spec.shape is not None:
            self.geometry = PRIMITIVES[spec.shape["type"]](spec.shape, spec.matrix_world)
            self.is_mesh = False
        else:
            from .mesh import MeshGeometry  # noqa: PLC0415

            self.geometry = MeshGeometry(spec.id, spec.vertices, spec.triangles)
            self.is_mesh = True

    def set_pose(self, matrix: np.ndarray, vertices: np.ndarray | None) -> None:
        """Move the collider to its pose at the next substep (world space)."""
        self.matrix_previous = self.matrix
        self.matrix = matrix
        if self.is_mesh:
            if vertices is None:
                vertices = carry_points(self.geometry.rest_vertices, matrix, self.matrix_rest)
            self.geometry.set_vertices(vertices)
        else:
            self.geometry.set_matrix(matrix)

    def surface_motion(self, xp, points, selection=None):
        """(n, 3) displacement over the last substep of the surface material at ``points``
        (for meshes: the rows ``selection`` (bool mask, None: all) of the last signed-distance query)."""
        if self.is_mesh:
            return self.geometry.surface_motion(xp, selection)
        if self.matrix is self.matrix_previous or np.array_equal(self.matrix, self.matrix_previous):
            return xp.zeros_like(points)
        cached = self._undo_move
        if cached is None or cached[0] is not self.matrix_previous or cached[1] is not self.matrix \
                or cached[2] is not xp or cached[3] != points.dtype:
            back = self.matrix_previous @ np.linalg.inv(self.matrix)   # uploaded once per pose change
            cached = (self.matrix_previous, self.matrix, xp, points.dtype,
                      xp.asarray(back[:3, :3].T, dtype=points.dtype), xp.asarray(back[:3, 3], dtype=points.dtype))
            self._undo_move = cached
        back_linear, back_shift = cached[4], cached[5]
        return points - (points @ back_linear + back_shift)


TELEPORT_SPEED = 100.0   # [m/s] a mesh collider vertex faster than this over a substep is teleported, not swept


class ColliderSet:
    """All colliders of a scene; :meth:`project` is ResolveCollision for a batch of points."""

    def __init__(self, specs: list[ObjectSpec]):
        self.teleported: list[str] = []   # ids of the mesh colliders teleported at the current substep
        self.colliders = [Collider(spec) for spec in specs]
        self.by_id = {collider.id: collider for collider in self.colliders}
        # scene order as runs: a mesh collider alone, or consecutive primitives projected in one launch
        self.runs: list[list[Collider]] = []
        for collider in self.colliders:
            if collider.is_mesh or not self.runs or self.runs[-1][0].is_mesh:
                self.runs.append([collider])
            else:
                self.runs[-1].append(collider)
        self._parameters: dict[int, tuple] = {}   # run index -> (poses, xp, device parameter rows)

    def _run_parameters(self, xp, number: int):
        """The primitive run ``number``'s parameter rows (primitive_kernels.packed_parameters) on ``xp``'s
        device, uploaded once per pose of its colliders."""
        run = self.runs[number]
        poses = tuple((id(collider.matrix), id(collider.matrix_previous)) for collider in run)
        cached = self._parameters.get(number)
        if cached is not None and cached[0] == poses and cached[1] is xp:
            return cached[2]
        rows = xp.asarray(np.stack([packed_parameters(collider) for collider in run]))
        self._parameters[number] = (poses, xp, rows, run)   # the colliders keep the matrices (ids) alive
        return rows

    def __len__(self) -> int:
        return len(self.colliders)

    def set_poses(self, poses: dict[str, tuple[np.ndarray, np.ndarray | None]], dt: float | None = None) -> None:
        """poses: id -> (matrix_world (4, 4), vertices (N, 3) or None) at the next substep, dt [s] its length.

        A mesh collider whose vertices move faster than TELEPORT_SPEED over the substep is teleported
        (an animation cut or a keyframe jump, not motion): it is not swept through the scene, so it
        neither drags everything on its path along nor flings it; the solvers recover points that
        the new pose encloses (``teleported`` holds the ids for this substep)."""
        self.teleported = []
        for collider in self.colliders:
            matrix, vertices = poses.get(collider.id, (collider.matrix, None))
            collider.set_pose(matrix, vertices)
            if dt and collider.is_mesh:
                geometry = collider.geometry
                if geometry.previous is not geometry.vertices:
                    step = np.sqrt(((geometry.vertices - geometry.previous) ** 2).sum(axis=1).max())
                    if step > TELEPORT_SPEED * dt:
                        geometry.previous = geometry.vertices
                        self.teleported.append(collider.id)

    def project(self, xp, points, thickness, friction, start=None, interval=(0.0, 1.0),
                passes: int = CONTACT_PASSES, lists: str | None = "points") -> tuple[object, Contacts]:
        """Push ``points`` (n, 3) out of every collider.

        thickness: (n,) [m] per-point contact offset; friction: (n,) per-point μ; start: (n, 3) [m] the
        points at the start of the substep. Mesh colliders are two-sided: with ``start`` a point is kept
        on the side it started on by CCD against the moving triangles (``MeshGeometry.resolve``);
        without it, only points closer than their offset are pushed out along their own gap direction.
        interval: the part (begin, end) of the substep over which the points moved start → points (mesh
        colliders; fractions, see ``MeshGeometry.resolve``); primitives are taken at the current pose. passes:
        a mesh's CCD and proximity passes per point at most (``MeshGeometry.resolve``). lists: the name of the
        candidate lists a mesh keeps for the query, None for none (``MeshGeometry.resolve``).
        Returns (projected points (n, 3), Contacts). Rows are updated with masks (``xp.where``), not
        with ``nonzero`` index lists, so on a GPU a collider costs no device -> host synchronization.
        """
        n = len(points)
        dtype = points.dtype
        points = xp.array(points, dtype=xp.float64, order="C")      # a copy: projected in place
        thickness = xp.ascontiguousarray(thickness, dtype=xp.float64)
        friction = xp.ascontiguousarray(friction, dtype=xp.float64)
        device = warp_device_of(points)
        depth = normal = motion = mu = touched = outputs = None
        for number, run in enumerate(self.runs):
            if run[0].is_mesh:
                collider = run[0]
                pushed, push, surface_normal, surface_motion, _ = collider.geometry.resolve(
                    xp, points if start is None else start, points, thickness + collider.thickness, interval, passes,
                    lists)
                inside = push > 0
                if depth is None:
                    # the first collider: a point it did not push keeps its own position, push 0 and zero normal
                    # and motion in the outputs already (MeshGeometry.resolve): they are taken as they are
                    points, depth, normal, motion = pushed, push, surface_normal, surface_motion
                    mu = xp.where(inside, 0.5 * (friction + collider.friction), 0.0)
                    touched = inside.astype(xp.int32)
                    continue
                inside_3 = inside[:, None]
                points[...] = xp.where(inside_3, pushed, points)
                depth[...] = depth + xp.where(inside, push, 0.0)
                normal[...] = xp.where(inside_3, surface_normal, normal)
                motion[...] = xp.where(inside_3, surface_motion, motion)
                mu[...] = xp.where(inside, 0.5 * (friction + collider.friction), mu)
                touched[...] = xp.where(inside, 1, touched)
                continue
            if depth is None:
                depth, normal, motion, mu, touched = _no_contacts(xp, n)
            if outputs is None:
                outputs = [warp_view(points, wp.vec3d), warp_view(depth, wp.float64), warp_view(normal, wp.vec3d),
                           warp_view(motion, wp.vec3d), warp_view(mu, wp.float64), warp_view(touched, wp.int32)]
            rows = self._run_parameters(xp, number)
            launch_items(primitive_kernels.project_on_primitives, n, device,
                         [warp_view(rows, wp.float64), warp_view(thickness, wp.float64),
                          warp_view(friction, wp.float64)], outputs, split=True)
        if depth is None:                           # no colliders
            depth, normal, motion, mu, touched = _no_contacts(xp, n)
        if dtype != xp.float64:
            points, depth, normal, motion, mu = (array.astype(dtype) for array in (points, depth, normal, motion, mu))
        return points, Contacts(depth=depth, normal=normal, surface_motion=motion, friction=mu, mask=touched > 0)

    def primitive_contact_forces(self, xp, candidates, q, q_start, previous, gain, thickness, friction, movable):
        """The PD contact local step on the ``candidates`` (m,) int32 of n contact points, in one launch
        (``primitive_kernels.contact_forces``); every collider must be a primitive (no meshes).

        q, q_start: (n, 3) [m] the points now and at the substep start; previous: (m, 3) [N] the candidates'
        forces of the last iteration (k·Δy); gain k [kg/s²], thickness [m], friction, movable (0/1): (n,) per point.
        Returns (forces (m, 3), point forces (n, 3): the candidates' forces times movable, 0 elsewhere; for
        points that are their own particles, the particle forces)."""
        force = xp.empty((len(candidates), 3), dtype=xp.float64)
        particle_force = xp.zeros((len(q), 3), dtype=xp.float64)
        device = warp_device_of(q)
        rows = self._run_parameters(xp, 0)
        inputs = [warp_view(rows, wp.float64), warp_view(candidates, wp.int32), warp_view(q, wp.vec3d),
                  warp_view(q_start, wp.vec3d), warp_view(previous, wp.vec3d),
                  *(warp_view(values, wp.float64) for values in (gain, thickness, friction, movable))]
        launch_items(primitive_kernels.contact_forces, len(candidates), device, inputs,
                     [warp_view(force, wp.vec3d), warp_view(particle_force, wp.vec3d)], split=True)
        return force, particle_force

    def primitive_contact_planes(self, xp, q, thickness, band: float, movable):
        """Contact planes (``primitive_kernels.contact_planes``) of points q (n, 3) [m] that are their own
        particles, every collider a primitive: (point (n, 3) [m], unit normal (n, 3), zero off contact)."""
        point = xp.empty((len(q), 3), dtype=xp.float64)
        normal = xp.empty((len(q), 3), dtype=xp.float64)
        rows = self._run_parameters(xp, 0)
        launch_items(primitive_kernels.contact_planes, len(q), warp_device_of(q),
                     [warp_view(rows, wp.float64), warp_view(thickness, wp.float64), wp.float64(band),
                      warp_view(movable, wp.float64), warp_view(q, wp.vec3d)],
                     [warp_view(point, wp.vec3d), warp_view(normal, wp.vec3d)], split=True)
        return point, normal

    @property
    def has_meshes(self) -> bool:
        return any(collider.is_mesh for collider in self.colliders)

    def resolve_edges(self, xp, start, points, point_edges, thickness, inverse_mass, interval=(0.0, 1.0)):
        """One Jacobi pass of edge–edge contact between the points' edges and every mesh collider's edges.

        start, points: (n, 3) [m] at the substep start and now (or at the start and the end of ``interval``,
        the part of the substep a solver's shorter step covers); point_edges: Warp int32 (E, 2) view;
        thickness (n,) [m]; inverse_mass (n,) (0: the point does not move). Returns (correction (n, 3) [m]
        averaged per point, touched (n,) bool, counts (EDGE_CONTACT_COUNTS,) int32 device array: the edge pairs in
        contact, those that had crossed during the substep, the points' edges that passed through a mesh at the
        start and the pairs deep in their reach (``MeshGeometry.add_edge_corrections``), crossed (n,) bool: the
        points of edges that had crossed)."""
        n = points.shape[0]
        start = xp.ascontiguousarray(start, dtype=xp.float64)
        points = xp.ascontiguousarray(points, dtype=xp.float64)
        correction = xp.zeros((n, 3), dtype=xp.float64)
        count = xp.zeros(n, dtype=xp.int32)
        contacts = xp.zeros(EDGE_CONTACT_COUNTS, dtype=xp.int32)
        crossed_point = xp.zeros(n, dtype=xp.int32)
        for collider in self.colliders:
            if collider.is_mesh:
                reach = xp.ascontiguousarray(thickness + collider.thickness, dtype=xp.float64)
                collider.geometry.add_edge_corrections(xp, start, points, point_edges, reach, inverse_mass,
                                                       correction, count, contacts, crossed_point, interval)
        return correction / xp.maximum(count, 1)[:, None], count > 0, contacts, crossed_point > 0

    def inside(self, xp, points):
        """(n,) bool: points (n, 3) [m] inside some collider's solid: below a plane or inside a primitive (signed
        distance), or inside a closed mesh shell (generalized winding number, every shell wound outward: flipped
        shells count)."""
        inside = xp.zeros(points.shape[0], dtype=bool)
        for collider in self.colliders:
            if collider.is_mesh:
                inside |= collider.geometry.recover_inside(xp, points, xp.zeros(points.shape[0]))[1]
            else:
                inside |= collider.geometry.signed_distance(xp, points)[0] < 0.0
        return inside

    def recover_inside(self, xp, points, thickness):
        """Points (n, 3) that start a job inside a closed mesh shell, moved out (see
        ``MeshGeometry.recover_inside``); thickness (n,) [m]. Returns (points, recovered (n,) bool)."""
        recovered = xp.zeros(points.shape[0], dtype=bool)
        for collider in self.colliders:
            if collider.is_mesh:
                points, inside = collider.geometry.recover_inside(xp, points, thickness + collider.thickness)
                recovered = recovered | inside
        return points, recovered


def _no_contacts(xp, n: int):
    """(depth (n,), normal (n, 3), motion (n, 3), μ (n,), touched (n,) int32) of n points no collider touched."""
    return (xp.zeros(n, dtype=xp.float64), xp.zeros((n, 3), dtype=xp.float64), xp.zeros((n, 3), dtype=xp.float64),
            xp.zeros(n, dtype=xp.float64), xp.zeros(n, dtype=xp.int32))


def apply_friction(xp, positions, start, contacts: Contacts):
    """Coulomb friction on a substep's displacement (position-level, static and kinetic).

    positions: (n, 3) end-of-substep positions; start: (n, 3) positions at the substep start.
    For contact points the displacement relative to the touched surface is split into normal
    and tangential parts. With the normal push depth d (the position-level normal impulse
    h²·λ/m), the tangential slip Δt is cancelled when |Δt| ≤ μ·d (static friction) and
    shortened by μ·d otherwise (kinetic friction). On an incline this gives exactly:
    stick when tan θ ≤ μ, else acceleration g (sin θ − μ cos θ). Rows without contact are unchanged.
    """
    normal = contacts.normal
    relative = positions - start - contacts.surface_motion
    tangential = relative - (relative * normal).sum(axis=1)[:, None] * normal
    slip = xp.sqrt((tangential * tangential).sum(axis=1))
    limit = contacts.friction * contacts.depth
    scale = xp.where(slip <= limit, 1.0, limit / xp.maximum(slip, 1e-30))
    return xp.where(contacts.mask[:, None], positions - scale[:, None] * tangential, positions)
