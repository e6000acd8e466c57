"""Game-style particle-spring hair (seed 004) and the analytic colliders shared by the fast hair models."""

from ..strand_colliders import AnalyticColliders
from .settings import ParticleHairSettings, WindSettings
from .solver import ParticleHairSolver
from .state import ParticleState, StrandControl
from .group import build_group

__all__ = ["build_group", "AnalyticColliders", "ParticleHairSettings", "ParticleHairSolver", "ParticleState", "StrandControl",
           "WindSettings"]
