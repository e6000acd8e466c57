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
    """One protocol parameter: ``name`` is the wire key, ``default`` a float, int, bool, str (one of
    ``choices``: (wire value, label, description) triples) or a tuple (a [min, max] pair or a 3-vector)."""

    name: str
    default: float | int | bool | str | tuple[float, ...]
    unit: str
    description: str
    minimum: float = 0.0
    maximum: float | None = None
    choices: tuple[tuple[str, str, str], ...] = ()
    paintable: bool = False     # a vertex group (mesh) or attribute (Curves) may scale it per point

    @property
    def tooltip(self) -> str:
        return f"{self.description} [{self.unit}]" if self.unit else self.description


_SIMULATED_BEFORE_DAMPING: tuple[ParamSpec, ...] = (
    ParamSpec("friction", 0.3, "μ", "Coulomb friction coefficient against colliders", 0.0, 10.0, paintable=True),
    ParamSpec("thickness", 0.002, "m", "Contact offset kept from collider surfaces", 0.0, 1.0),
)
_SIMULATED_AFTER_DAMPING: tuple[ParamSpec, ...] = (
    ParamSpec("pin_stiffness", 1.0e4, "N/m",
              "Stiffness of a pin whose vertex weight is below 1 (weight 1 pins exactly)", 1e-6, 1.0e12),
    ParamSpec("unpin_frame", 0, "frame", "Frame from which the pinned vertices let go and the object falls "
              "freely (a cape torn off, a flag released); 0 keeps the pins for the whole bake", 0, 10_000_000),
    ParamSpec("pin_pull_speed", 0.0, "m/s", "Fastest a pinned vertex follows what pins it: a target that jumps "
              "(a cut in the animation, a pose snapped into place) is pulled in at this speed, slower motion is "
              "followed exactly; 0 follows at once", 0.0, 1.0e4),
)


def _simulated_common(damping: float) -> tuple[ParamSpec, ...]:
    """The parameters of cloth and soft bodies; ``damping`` [1/s]: the role's default (the server's)."""
    return _SIMULATED_BEFORE_DAMPING + (
        ParamSpec("damping", damping, "1/s", "Velocity drag rate (air resistance)", 0.0, 1000.0),
    ) + _SIMULATED_AFTER_DAMPING


def _wind(applied: str) -> tuple[ParamSpec, ...]:
    """The wind parameters (set from the scene's Wind and Turbulence fields with Scene Wind, core.wind)."""
    return (
        ParamSpec("wind_direction", (1.0, 0.0, 0.0), "", f"Wind direction in world space ({applied})", -1.0, 1.0),
        ParamSpec("wind_strength", 0.0, "m/s²", "Mean wind acceleration", -1.0e3, 1.0e3),
        ParamSpec("wind_amplitude", 0.0, "m/s²", "Amplitude of the sine-varying wind (gusts)", 0.0, 1.0e3),
        ParamSpec("wind_period", 2.0, "s", "Period of the wind's sine variation", 1e-3, 1.0e4),
    )


CLOTH_PARAMS: tuple[ParamSpec, ...] = _simulated_common(1.0) + (
    ParamSpec("density", 0.2, "kg/m²", "Mass per unit area of the cloth", 1e-6, 1.0e4, paintable=True),
    ParamSpec("stretch_stiffness", 1000.0, "N/m", "Resistance to stretching (membrane Young's modulus × thickness)",
              1e-6, 1.0e9, paintable=True),
    ParamSpec("shear_stiffness", 0.0, "N/m", "Resistance to in-plane shearing of triangles; 0 disables", 0.0, 1.0e9,
              paintable=True),
    ParamSpec("bend_stiffness", 0.0, "N·m", "Resistance to bending (bending rigidity); 0 disables", 0.0, 1.0e3,
              paintable=True),
    ParamSpec("strain_limits", (1.0, 1.0), "ratio",
              "Hard cap on stretch: no edge gets longer than max × its rest length (a cloth whose max is 1 gets "
              "2 % of room), however hard it is pulled. Between min and max (min ≤ 1 ≤ max) an edge stretches or shrinks freely; beyond them "
              "Stretch Stiffness pulls it back (min below 1 lets the cloth crumple freely)", 1e-3, 10.0),
    ParamSpec("self_collision", False, "", "Collide the cloth with itself"),
    ParamSpec("air_drag", 0.0, "ratio", "Drag of still air on the cloth as on a flat plate moving along its normal "
              "(1: air; 0: none): a sheet dropped flat floats down at about 1.7 m/s instead of falling like a "
              "stone, and a cape swept through the air billows", 0.0, 100.0),
    *_wind("along the cloth's face normals, so a sheet edge-on to it feels none"),
)

SOFTBODY_PARAMS: tuple[ParamSpec, ...] = _simulated_common(0.1) + (
    ParamSpec("density", 1000.0, "kg/m³", "Mass per unit volume (water 1000, rubber 1100, gelatin 1050)",
              1.0, 1.0e5, paintable=True),
    ParamSpec("young_modulus", 1.0e5, "Pa", "Stiffness of the material (Young's modulus E): jelly 1e3–1e4, "
              "flesh 1e4–1e5, soft rubber 1e6", 1e-6, 1.0e12, paintable=True),
    ParamSpec("poisson_ratio", 0.3, "ratio", "Volume preservation (Poisson ratio ν): 0 compressible, "
              "0.49 nearly incompressible", 0.0, 0.49),
    ParamSpec("strain_limits", (1.0, 1.0), "ratio",
              "Stretch a tetrahedron takes freely (min ≤ 1 ≤ max, principal stretches); beyond it Young's "
              "Modulus resists. A soft range, not a hard cap", 1e-3, 10.0),
    ParamSpec("tet_resolution", 8, "cells", "Embedding lattice cells along the longest axis of the object "
              "(the server builds the tetrahedra)", 1, 200),
)

HAIR_MODEL_ITEMS: tuple[tuple[str, str, str], ...] = (
    ("der", "Elastic Rods", "Discrete Elastic Rods with Newton friction contact (accurate, hair–hair contact)"),
    ("cosserat", "Cosserat", "Force-transport Cosserat strands (fast; for guide strands with a wisp radius)"),
    ("particles", "Particles", "Game-style particle springs (fastest preview)"),
)

HAIR_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec("model", "der", "", "Hair solver", choices=HAIR_MODEL_ITEMS),
    ParamSpec("friction", 0.1, "μ", "Hair–hair Coulomb friction coefficient", 0.0, 10.0),
    ParamSpec("collider_friction", 0.3, "μ", "Hair–collider Coulomb friction coefficient", 0.0, 10.0),
    ParamSpec("thickness", 0.0, "m", "Extra contact offset kept from collider surfaces", 0.0, 0.01),
    ParamSpec("damping", 0.1, "1/s", "Extra velocity drag rate beside the air drag", 0.0, 1000.0),
    ParamSpec("air_drag", 1.0, "ratio", "Drag of still air on the strands as on a thin cylinder of their radius "
              "(1: air; 0: none); fine hair settles within a second", 0.0, 100.0),
    ParamSpec("radius", 5.0e-5, "m", "Strand radius (a human hair is 2–6e-5 m; a guide wisp a few mm)",
              1e-9, 0.01),
    ParamSpec("density", 1300.0, "kg/m³", "Strand material density (keratin 1300)", 10.0, 1.0e5, paintable=True),
    ParamSpec("young_modulus", 3.0e9, "Pa", "Bending stiffness of the material (Young's modulus; hair 1–5e9)",
              1e-6, 1.0e12, paintable=True),
    ParamSpec("shear_modulus", 1.0e9, "Pa", "Twisting stiffness of the material (shear modulus)", 1e-6, 1.0e12,
              paintable=True),
    ParamSpec("pin_stiffness", 1.0e4, "N/m",
              "Stiffness of a pin whose vertex weight is below 1 (weight 1 pins exactly)", 1e-6, 1.0e12),
    ParamSpec("collide_with_other_hair", True, "",
              "DER: collide with the strands of the other DER hair objects (off: own strands and colliders only)"),
    ParamSpec("guide_count", 0, "strands", "Simulate this many guide strands (k-means) and interpolate the rest; "
              "0 simulates every strand (DER: with clamped roots, not with pins)", 0, 10_000_000),
    ParamSpec("gravity_scale", 1.0, "ratio", "Cosserat / Particles: multiplies the scene gravity", 0.0, 100.0),
    *_wind("every particle of the fast models, across the strand for DER"),
    ParamSpec("particle_stiffness", 2.0e4, "1/s²", "Particles: neighbour spring stiffness per unit mass (k/m)",
              1e-6, 1.0e9, paintable=True),
    ParamSpec("particle_bend_stiffness", 1.0e4, "1/s²",
              "Particles: second-neighbour spring stiffness per unit mass (keeps chains straight)", 0.0, 1.0e9,
              paintable=True),
    ParamSpec("particle_angle_stiffness", 5.0e4, "1/s²",
              "Particles: turning-angle stiffness per unit mass at every particle (keeps strands from kinking)",
              0.0, 1.0e9, paintable=True),
    ParamSpec("particle_stretch_scale", 0.1, "ratio",
              "Particles: strain where the quadratic stretch response equals the linear one", 1e-6, 10.0),
    ParamSpec("particle_max_stretch", 1.1, "ratio", "Particles: distance clamp, every segment stays within [1 / this, this] × its rest length",
              1.0, 10.0),
    ParamSpec("particle_teleport_speed", 10.0, "m/s",
              "Particles: root speed above which root motion is discarded (teleport)", 1e-6, 1.0e6),
    ParamSpec("particle_teleport_recovery", 0.25, "s",
              "Particles: fade time of the rigid constraint after a teleport", 1e-6, 100.0),
    ParamSpec("particle_rest_speed", 1.0e-4, "m/s", "Particles: particles slower than this rest", 0.0, 10.0),
    ParamSpec("cosserat_max_step", 5.0e-3, "s", "Cosserat: internal time step", 1e-6, 1.0),
    ParamSpec("interaction_inner_radius", 0.0, "m",
              "Cosserat: swept-sphere inner radius of strand–strand repulsion (0 with outer 0: off)", 0.0, 1.0),
    ParamSpec("interaction_outer_radius", 0.0, "m", "Cosserat: swept-sphere outer radius (viscous zone; 0: off)",
              0.0, 1.0),
    ParamSpec("interaction_stiffness", 2.0e-2, "N/m", "Cosserat: repulsion K of F = K·P_inner·dir", 0.0, 1.0e9),
    ParamSpec("interaction_damping", 2.0e-2, "N·s/m²", "Cosserat: viscous D of F = −D·P_outer·Δv", 0.0, 1.0e9),
)

# The painted maps each hair model uses (mirrors the server's HAIR_MODEL_PAINTABLE).
HAIR_MODEL_PAINTABLE: dict[str, tuple[str, ...]] = {
    "der": ("density", "young_modulus", "shear_modulus"),
    "cosserat": ("density", "young_modulus", "shear_modulus"),
    "particles": ("particle_stiffness", "particle_bend_stiffness", "particle_angle_stiffness"),
}

COLLIDER_PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec("friction", 0.3, "μ", "Coulomb friction coefficient of the collider surface", 0.0, 10.0),
    ParamSpec("thickness", 0.0, "m", "Contact offset added to the collider surface", 0.0, 1.0),
)


def defaults(table: tuple[ParamSpec, ...]) -> dict[str, object]:
    """The wire defaults of a table as a plain dict (pairs become lists, as msgpack sends them)."""
    return {spec.name: list(spec.default) if isinstance(spec.default, tuple) else spec.default for spec in table}
