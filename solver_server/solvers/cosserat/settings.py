"""Parameters of the force-transport Cosserat strand model (seed 002) with units and defaults."""

from __future__ import annotations

import math
from dataclasses import dataclass

from solver_server.sim.errors import SceneError

from ..wind import WindSettings
from ..strand_settings import check_ranges, settings_from_hair_params


@dataclass(frozen=True)
class CosseratSettings:
    """radius [m], density [kg/m³], young_modulus E [Pa] (bending EI = E·πr⁴/4), shear_modulus G [Pa]
    (twist GJ = G·πr⁴/2), damping [1/s] decay rate of velocities relative to the root frame
    (mass-proportional, implicit), gravity_scale [-],
    collider_friction μ, max_step [s]: internal step (a step dt is split into equal steps ≤ max_step,
    shorter while a segment turns fast, see solver.MAX_TURN_PER_STEP; the default is stable for 50–200 segments per metre and E = 1–100 MPa, see
    docs/fast_hair.md), wind: see WindSettings.

    Strand–strand interaction (seed 002 §4.3, swept spheres around segments; 0 disables):
    interaction_inner_radius, interaction_outer_radius [m]; interaction_stiffness K [N/m]
    (F = K·P_inner·dir); interaction_damping D [N·s/m²] (F = −D·P_outer·Δv).
    """

    radius: float = 5.0e-5
    density: float = 1300.0
    young_modulus: float = 3.0e9
    shear_modulus: float = 1.0e9
    damping: float = 0.1
    gravity_scale: float = 1.0
    collider_friction: float = 0.3
    max_step: float = 5.0e-3
    interaction_inner_radius: float = 0.0
    interaction_outer_radius: float = 0.0
    interaction_stiffness: float = 2.0e-2
    interaction_damping: float = 2.0e-2
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
        settings = settings_from_hair_params(cls, params, lambda name: "cosserat_max_step" if name == "max_step" else name,
                                             WindSettings.from_object_params(params, object_id))
        positive = ("radius", "density", "young_modulus", "shear_modulus", "max_step")
        not_negative = ("damping", "collider_friction", "interaction_inner_radius", "interaction_outer_radius",
                        "interaction_stiffness", "interaction_damping")
        check_ranges([(name, getattr(settings, name), getattr(settings, name) > 0, "> 0") for name in positive]
                     + [(name, getattr(settings, name), getattr(settings, name) >= 0, ">= 0") for name in not_negative],
                     object_id)
        if settings.interaction_outer_radius < settings.interaction_inner_radius:
            raise SceneError("interaction_outer_radius must be >= interaction_inner_radius", object=object_id)
        return settings
