"""Parameter tables the add-on exposes, mirroring ``solver_server/sim/params.py`` (the source of truth).

Each entry names the protocol key, its default, unit, soft range and tooltip. ``properties.py`` builds
the Blender properties from these tables, and ``tests/addon_core/test_param_table.py`` checks that
names and defaults agree with the server's table, so a change on one side fails a test. (The server
package is not shipped inside the extension zip, hence the mirror.)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ParamSpec:
    """One protocol parameter: ``name`` is the wire key, ``default`` a float, bool or (min, max) pair."""

    name: str
    default: float | bool | tuple[float, float]
    unit: str
    description: str
    minimum: float = 0.0
    maximum: float | None = None

    @property
    def tooltip(self) -> str:
        return f"{self.description} [{self.unit}]" if self.unit else self.description


_SIMULATED_COMMON: tuple[ParamSpec, ...] = (
    ParamSpec("friction", 0.3, "μ", "Coulomb friction coefficient against colliders", 0.0, 10.0),
    ParamSpec("thickness", 0.002, "m", "Contact offset kept from collider surfaces", 0.0, 1.0),
    ParamSpec("damping", 0.1, "1/s", "Velocity drag rate (air resistance)", 0.0, 1000.0),
    ParamSpec("pin_stiffness", 1.0e4, "N/m",
              "Stiffness of a pin whose vertex weight is below 1 (weight 1 pins exactly)", 1e-6, 1.0e12),
)

CLOTH_PARAMS: tuple[ParamSpec, ...] = _SIMULATED_COMMON + (
    ParamSpec("density", 0.2, "kg/m²", "Mass per unit area of the cloth", 1e-6, 1.0e4),
    ParamSpec("stretch_stiffness", 1000.0, "N/m", "Resistance to stretching (membrane Young's modulus × thickness)",
              1e-6, 1.0e9),
    ParamSpec("shear_stiffness", 0.0, "N/m", "Resistance to in-plane shearing of triangles; 0 disables", 0.0, 1.0e9),
    ParamSpec("bend_stiffness", 0.0, "N·m", "Resistance to bending (bending rigidity); 0 disables", 0.0, 1.0e3),
    ParamSpec("strain_limits", (1.0, 1.0), "ratio",
              "Stretch ratios (min ≤ 1 ≤ max) that cost no energy, relative to the rest length", 1e-3, 10.0),
    ParamSpec("self_collision", False, "", "Collide the cloth with itself"),
)

COLLIDER_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec("friction", 0.3, "μ", "Coulomb friction coefficient of the collider surface", 0.0, 10.0),
    ParamSpec("thickness", 0.0, "m", "Contact offset added to the collider surface", 0.0, 1.0),
)


def defaults(table: tuple[ParamSpec, ...]) -> dict[str, object]:
    """The wire defaults of a table as a plain dict (pairs become lists, as msgpack sends them)."""
    return {spec.name: list(spec.default) if isinstance(spec.default, tuple) else spec.default for spec in table}
