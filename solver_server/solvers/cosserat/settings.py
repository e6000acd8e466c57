"""Parameters of the force-transport Cosserat strand model (seed 002) with units; defaults and ranges are the
hair parameter table's (``sim.params``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...sim.errors import SceneError
from ..strand_settings import check_settings, hair_default, settings_from_hair_params
from ..wind import WindSettings


@dataclass(frozen=True)
class CosseratSettings:
    """radius [m], density [kg/m³], young_modulus E [Pa] (bending EI = E·πr⁴/4), shear_modulus G [Pa]
    (twist GJ = G·πr⁴/2), damping [1/s] decay rate of velocities relative to the root frame
    (mass-proportional, implicit), air_drag [-] the drag of still air on the nodes (``kernels/air.py``; 1: air,
    0: none), gravity_scale [-],
    collider_friction μ, max_step [s]: internal step (a step dt is split into equal steps ≤ max_step,
    shorter while a segment turns fast, see solver.MAX_TURN_PER_STEP; the default is stable for 50–200
    segments per metre and E = 1–100 MPa, see docs/fast_hair.md), wind: see WindSettings.

    Strand–strand interaction (seed 002 §4.3, swept spheres around segments; 0 disables):
    interaction_inner_radius, interaction_outer_radius [m]; interaction_stiffness K [N/m]
    (F = K·P_inner·dir); interaction_damping D [N·s/m²] (F = −D·P_outer·Δv).
    """

    radius: float = hair_default("radius")
    density: float = hair_default("density")
    young_modulus: float = hair_default("young_modulus")
    shear_modulus: float = hair_default("shear_modulus")
    damping: float = hair_default("damping")
    air_drag: float = hair_default("air_drag")
    gravity_scale: float = hair_default("gravity_scale")
    collider_friction: float = hair_default("collider_friction")
    max_step: float = hair_default("cosserat_max_step")
    interaction_inner_radius: float = hair_default("interaction_inner_radius")
    interaction_outer_radius: float = hair_default("interaction_outer_radius")
    interaction_stiffness: float = hair_default("interaction_stiffness")
    interaction_damping: float = hair_default("interaction_damping")
    wind: WindSettings = WindSettings()

    @property
    def area(self) -> float:
        return math.pi * self.radius ** 2

    @property
    def bend_stiffness(self) -> float:
        """EI [N·m²]."""
        return self.young_modulus * math.pi * self.radius ** 4 / 4.0

    @property
    def twist_stiffness(self) -> float:
        """GJ [N·m²]."""
        return self.shear_modulus * math.pi * self.radius ** 4 / 2.0

    @classmethod
    def from_params(cls, params: dict, object_id: str | None = None) -> "CosseratSettings":
        """From a hair object's params; Cosserat-only keys carry a ``cosserat_`` prefix
        (``cosserat_max_step``), interaction keys are named as above."""
        wind = WindSettings.from_object_params(params, object_id)
        settings = settings_from_hair_params(cls, params, protocol_key, wind)
        check_settings(settings, protocol_key, object_id)
        if settings.interaction_outer_radius < settings.interaction_inner_radius:
            raise SceneError("interaction_outer_radius must be >= interaction_inner_radius", object=object_id)
        return settings


def protocol_key(name: str) -> str:
    """The hair parameter that sets CosseratSettings field ``name``."""
    return "cosserat_max_step" if name == "max_step" else name
