"""Force-transport Cosserat strands (seed 002): reduced coordinates, tip-to-root force transport."""

from .settings import CosseratSettings
from .solver import CosseratControl, CosseratSolver, CosseratState

__all__ = ["CosseratControl", "CosseratSettings", "CosseratSolver", "CosseratState"]
