"""Discrete Elastic Rods hair solver with Newton-based Coulomb friction contact (seed 000)."""

from .group import build_group
from .model import DerMaterial, build_model
from .settings import ContactSettings, NewtonSettings
from .solver import DerSolver
from .state import DerControl, DerState, rest_state

__all__ = ["ContactSettings", "DerControl", "DerMaterial", "DerSolver", "DerState", "NewtonSettings", "build_group",
           "build_model", "rest_state"]
