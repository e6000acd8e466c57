"""The DER line search's backtracking as one Warp launch (kernels.line_search.armijo_backtracking, a thread per
strand): what ``ImplicitEulerSolver._line_search`` runs on a device, where a backtracking loop on the host reads
the device after every trial."""

from __future__ import annotations

import warp as wp

from ...kernels import int32_view, launch_split, warp_device_of, warp_view
from .kernels import line_search as search_kernels
from .model import DerModel, index_view
from .retraction import SHORTEST_EDGE_FRACTION


class KernelLineSearch:
    """Per-strand Armijo backtracking of one model on its device: the model's constant data and the scratch
    arrays, made once."""

    def __init__(self, xp, model: DerModel):
        self.xp, self.model = xp, model

        def floats(array):
            return warp_view(xp.ascontiguousarray(array, dtype=xp.float64), wp.float64)

        constants = search_kernels.StrandModel()
        constants.strand_offsets = index_view(model, "strand_offsets")
        constants.vertex_dof = index_view(model, "vertex_dof")
        constants.stiffness = floats(model.stretch_stiffness)
        constants.rest_length = floats(model.rest_edge_length)
        constants.bend_weight = floats(model.bend_weight.reshape(-1, 4))
        constants.rest_bend = floats(model.rest_bend.reshape(-1, 4))
        constants.twist_weight = floats(model.twist_weight)
        constants.rest_twist = floats(model.rest_twist)
        self._no_vertex = int32_view(xp, xp.zeros(model.n_vertices, dtype=xp.int32))
        self._no_edge = int32_view(xp, xp.zeros(model.n_edges, dtype=xp.int32))
        self.constants = constants
        self.trial_v = xp.zeros(model.n_dofs)
        self.positions = xp.zeros((model.n_vertices, 3))
        self.reference_u = xp.zeros((model.n_edges, 3))
        self.reference_twist = xp.zeros(max(int(model.bend_vertex.shape[0]), 1))
        self.alpha = xp.zeros(model.n_strands)
        self.accepted = xp.zeros(model.n_strands, dtype=xp.int32)
        self._no_pins = self._pin_views(xp.zeros(0, dtype=xp.int64), xp.zeros(0), xp.zeros((0, 3)))
        self._pin_order = None      # (the soft pins' vertex array, its order by vertex)
        self._step = None           # (the step's problem, its StepData)
        self._no_path = (warp_view(xp.zeros((0, 3)), wp.vec3d), warp_view(xp.zeros(0), wp.float64))
        self._views = {name: warp_view(getattr(self, name), kind) for name, kind in (
            ("trial_v", wp.float64), ("positions", wp.vec3d), ("reference_u", wp.vec3d),
            ("reference_twist", wp.float64), ("alpha", wp.float64), ("accepted", wp.int32))}

    def search(self, problem, settings, v, direction, target, current, slope, searching, path=None):
        """(α (S,), accepted (S,) bool, the accepted velocities (n_dofs,)) of the backtracking from ``v`` along
        ``direction`` (n_dofs,) for the strands ``searching`` (S,) bool (the others accepted with α = 0), against
        ``current`` (S,) g at v and ``slope`` (S,) ∇gᵀd. problem: the step (integrator._StepProblem: h, q_t, the
        mass and damping, the base state); settings: NewtonSettings (armijo, backtrack, max_backtracks); path:
        (LengthPreservingPath, strands (S,) bool it bends) or None."""
        xp, model = self.xp, self.model
        step = self._step_data(problem)
        constants = self.constants
        if path is None:
            bendable = xp.zeros(model.n_strands, dtype=xp.int32)
            constants.vertex_fixed, constants.edge_kinematic = self._no_vertex, self._no_edge
            step.current_edges, step.current_lengths = self._no_path      # read only where a strand bends
        else:
            line, strands = path
            bendable = (line.strand_eligible & strands & searching).astype(xp.int32)
            constants.vertex_fixed = line.vertex_fixed_view
            constants.edge_kinematic = line.edge_kinematic_view
            edges, lengths = line.edges_at(v)
            step.current_edges = warp_view(xp.ascontiguousarray(edges, dtype=xp.float64), wp.vec3d)
            step.current_lengths = warp_view(xp.ascontiguousarray(lengths, dtype=xp.float64), wp.float64)
        views = self._views
        launch_split(search_kernels.armijo_backtracking, model.n_strands, warp_device_of(self.trial_v), [], [
            constants, step, int32_view(xp, searching), int32_view(xp, bendable),
            warp_view(xp.ascontiguousarray(v, dtype=xp.float64), wp.float64),
            warp_view(xp.ascontiguousarray(direction, dtype=xp.float64), wp.float64),
            warp_view(xp.ascontiguousarray(target, dtype=xp.float64), wp.float64),
            warp_view(xp.ascontiguousarray(current, dtype=xp.float64), wp.float64),
            warp_view(xp.ascontiguousarray(slope, dtype=xp.float64), wp.float64),
            float(settings.armijo), float(settings.backtrack), int(settings.max_backtracks),
            views["trial_v"], views["positions"], views["reference_u"], views["reference_twist"], views["alpha"],
            views["accepted"]])
        return self.alpha.copy(), self.accepted > 0, self.trial_v.copy()

    def _step_data(self, problem) -> "search_kernels.StepData":
        """The kernel's StepData of ``problem`` (integrator._StepProblem), made at its first search and kept for the
        step's later searches (all but the path's edges, which each search sets)."""
        if self._step is not None and self._step[0] is problem:
            return self._step[1]
        xp, model = self.xp, self.model

        def floats(array, kind=wp.float64):
            return warp_view(xp.ascontiguousarray(array, dtype=xp.float64), kind)

        step = search_kernels.StepData()
        step.h = float(problem.h)
        step.q_t = floats(problem.q_t)
        step.x_t = floats(problem.state.positions, wp.vec3d)
        step.mass = floats(model.mass)
        step.damping = floats(xp.zeros(model.n_dofs) + problem.damping)
        step.base_tangents = floats(problem.state.tangents, wp.vec3d)
        step.base_u = floats(problem.state.reference_u, wp.vec3d)
        step.base_twist = floats(problem.state.reference_twist)
        step.shortest_fraction = SHORTEST_EDGE_FRACTION
        step.pin_offsets, step.pin_dof, step.pin_stiffness, step.pin_target = self._pins(problem.soft_pins)
        self._step = (problem, step)
        return step

    def _pins(self, soft_pins):
        """The kernel's soft-pin views (offsets per strand, first DOF, stiffness, target) of ``soft_pins``
        (integrator.SoftPins or None), sorted by vertex so that every strand's pins are consecutive."""
        if soft_pins is None:
            return self._no_pins
        xp = self.xp
        if self._pin_order is None or self._pin_order[0] is not soft_pins.vertices:
            self._pin_order = (soft_pins.vertices, xp.argsort(soft_pins.vertices, kind="stable"))
        order = self._pin_order[1]
        return self._pin_views(soft_pins.vertices[order], xp.asarray(soft_pins.stiffness)[order],
                               soft_pins.targets[order])

    def _pin_views(self, vertices, stiffness, targets):
        xp, model = self.xp, self.model
        offsets = xp.searchsorted(vertices, model.strand_offsets).astype(xp.int32)
        return (warp_view(xp.ascontiguousarray(offsets), wp.int32),
                int32_view(xp, model.vertex_dof[vertices]),
                warp_view(xp.ascontiguousarray(stiffness, dtype=xp.float64), wp.float64),
                warp_view(xp.ascontiguousarray(targets, dtype=xp.float64).reshape(-1, 3), wp.vec3d))


__all__ = ["KernelLineSearch"]
