"""Force-transport Cosserat strands (seed 002): reduced coordinates, tip-to-root force transport."""

from .settings import CosseratSettings
from .solver import CosseratSolver
from .state import CosseratControl, CosseratState
from .group import build_group

__all__ = ["build_group", "CosseratControl", "CosseratSettings", "CosseratSolver", "CosseratState"]
