"""Registry entry for hair with ``params.model == "particles"``: one ParticleHairSolver per object."""

from __future__ import annotations

from ..strand_group import StrandGroup
from .settings import ParticleHairSettings
from .solver import ParticleHairSolver
from .state import StrandControl


class ParticleHairGroup(StrandGroup):
    """All particle-model hair objects of a scene. Checkpoint per object i: ``object<i>_positions``,
    ``_velocities`` (S, P, 3) [m], [m/s], ``_rigidity`` (S,) (teleport recovery) and ``_time`` [s]
    (drives the wind)."""

    model = "particles"
    STATE_FIELDS = ("positions", "velocities", "rigidity")
    STAT_KEYS = ("contacts", "teleported_strands")

    def make_solver(self, strands, object_id, scene, xp):
        settings = ParticleHairSettings.from_params({**strands.params, "particle_pinned_points": strands.pinned},
                                                    object_id)
        rest, layout = strands.simulated
        return ParticleHairSolver(rest, layout, settings, scene.gravity, xp, painted=strands.simulated_maps)

    def control(self, strands, solver, inputs, colliders):
        return StrandControl(self.backend.xp.asarray(strands.root_targets(inputs.poses)), colliders)

    def output_positions(self, solver, state):
        return state.positions


def build_group(specs, backend, scene) -> ParticleHairGroup:
    """Registry factory (solver_server.solvers registry, ``("hair", "particles")``)."""
    return ParticleHairGroup(specs, backend, scene)
