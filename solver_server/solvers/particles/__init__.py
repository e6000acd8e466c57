"""Game-style particle-spring hair (seed 004) and the analytic colliders shared by the fast hair models."""

from .colliders import ColliderSet
from .settings import ParticleHairSettings, WindSettings
from .solver import ParticleHairSolver, ParticleState, StrandControl
from .group import build_group

__all__ = ["build_group", "ColliderSet", "ParticleHairSettings", "ParticleHairSolver", "ParticleState", "StrandControl",
           "WindSettings"]
