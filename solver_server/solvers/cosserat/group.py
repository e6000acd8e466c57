"""Registry entry for hair with ``params.model == "cosserat"``: one CosseratSolver per object."""

from __future__ import annotations

import logging

import numpy as np

from ..registry_types import checked_state_array
from ..strand_group import StrandGroup
from . import quaternion as quat
from .settings import CosseratSettings
from .solver import CosseratSolver
from .state import CosseratControl

log = logging.getLogger(__name__)


class CosseratHairGroup(StrandGroup):
    """All Cosserat-model hair objects of a scene. Checkpoint per object i: ``object<i>_<field>`` for every
    CosseratState array, ``_time`` [s], and the strand-interaction candidate list (``_pairs`` (n, 2),
    ``_anchor`` (S, P, 3) [m]; absent when not built yet) so the restored run sums the same pairs in the
    same order."""

    model = "cosserat"
    STATE_FIELDS = ("orientations", "joint_velocities", "root_positions", "root_rotations", "root_velocities",
                    "root_angular_velocities", "collider_anchor")
    STAT_KEYS = ("contacts", "recovered_inside")
    finite_field = "orientations"

    def make_solver(self, strands, object_id, scene, xp):
        settings = CosseratSettings.from_params(strands.params, object_id)
        rest, layout = strands.simulated
        return CosseratSolver(rest, layout, settings, scene.gravity, xp, painted=strands.simulated_maps)

    def control(self, strands, solver, inputs, colliders):
        xp = self.backend.xp
        roots, rotations = strands.simulated_root_frames(inputs.poses)
        return CosseratControl(xp.asarray(roots), xp.asarray(quat.from_matrices(rotations)), colliders)

    def output_positions(self, solver, state):
        return solver.positions(state)

    def extra_state_arrays(self, index, solver, state):
        cache = None if solver.interaction is None else solver.interaction.verlet_list()
        if cache is None:
            return {}
        to_host = self.backend.to_host
        pairs, anchor = cache
        return {f"object{index}_pairs": np.asarray(to_host(pairs), np.int64).reshape(-1, 2),
                f"object{index}_anchor": np.asarray(to_host(anchor), np.float64)}

    def checked_extra_state(self, index, strands, solver, state, arrays):
        if solver.interaction is None or f"object{index}_pairs" not in arrays:
            return None
        anchor_shape = tuple(solver.positions(state).shape)
        return (checked_state_array(arrays, f"object{index}_pairs", (None, 2), np.int64, strands.id),
                checked_state_array(arrays, f"object{index}_anchor", anchor_shape, np.float64, strands.id))

    def apply_extra_state(self, solver, value):
        if solver.interaction is not None:
            xp = self.backend.xp
            pairs, anchor = value if value is not None else (None, None)
            solver.interaction.restore_verlet_list(None if pairs is None else xp.asarray(pairs),
                                                   None if anchor is None else xp.asarray(anchor))

    def finish_frame(self) -> dict:
        """At a frame's end: strands with a node inside a mesh collider's closed shell laid out of it
        (``laid_out_strands``, ``_lay_state_outside``); strand-interaction candidate pairs that did not fit a
        device's buffer during the frame (one read per object; their lists are built again, larger, at the next
        step) reported as ``interaction_pairs_dropped`` and logged."""
        stats = self._lay_state_outside()
        dropped = {strands.id: solver.interaction.take_dropped() for strands, solver in zip(self.objects, self.solvers)
                   if solver.interaction is not None}
        dropped = {object_id: count for object_id, count in dropped.items() if count}
        for object_id, count in dropped.items():
            log.warning("%s: %d strand-interaction candidate pairs did not fit the device's list this frame; "
                        "the list is built again, larger, at the next step", object_id, count)
        if dropped:
            stats["interaction_pairs_dropped"] = sum(dropped.values())
        return stats

    def _lay_state_outside(self) -> dict:
        """The contact push is a force on an articulated chain: a node that a fast strand carried deep under the
        skin (a tip swung into the head beside an ear) can have its contact anchor, the point it crossed the skin,
        farther from the node before it than their segment's length, so the end-of-substep turn-out cannot bring
        it back and it stays inside frame after frame. At a frame's end such strands are laid out of the closed
        shells from the root as drawn children are (``StrandObject.laid_outside``, one winding test of every free
        node) and their segments turned onto the laid nodes (``CosseratSolver.lay_onto``, velocities kept): the
        state, its checkpoint and the frame drawn agree, and the frame after starts outside. Returns
        {"laid_out_strands": count} when any was laid."""
        colliders = self.colliders
        if colliders is None or not colliders.has_meshes:
            return {}
        xp = self.backend.xp
        laid_count = 0
        for strands, solver, state in zip(self.objects, self.solvers, self.states):
            laid, rows = strands.laid_outside(solver.positions(state), colliders, solver.settings.radius, xp)
            count = int(xp.count_nonzero(rows))
            if count:
                solver.lay_onto(state, laid, rows)
                laid_count += count
        return {"laid_out_strands": laid_count} if laid_count else {}


def build_group(specs, backend, scene) -> CosseratHairGroup:
    """Registry factory (solver_server.solvers registry, ``("hair", "cosserat")``)."""
    return CosseratHairGroup(specs, backend, scene)
