"""Discrete Elastic Rods hair solver with Newton-based Coulomb friction contact (seed 000)."""

from .contact import ContactSettings
from .group import build_group
from .integrator import NewtonSettings
from .model import DerMaterial, build_model
from .solver import DerControl, DerSolver
from .state import DerState, rest_state

__all__ = ["ContactSettings", "DerControl", "DerMaterial", "DerSolver", "DerState", "NewtonSettings", "build_group",
           "build_model", "rest_state"]
