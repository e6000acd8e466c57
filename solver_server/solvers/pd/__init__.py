"""Projective Dynamics for cloth and soft bodies (seed 001)."""

from .group import build_group
from .solver import PDSolver
from .state import PDControl, PDState

__all__ = ["build_group", "PDControl", "PDSolver", "PDState"]
