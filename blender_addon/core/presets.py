"""Material presets per role, in protocol parameter names and SI units. Blender-free.

Values are physically motivated starting points (units as in ``param_table``):

- cloth: ``density`` [kg/m²] is the fabric weight (silk ~60 g/m², denim ~400 g/m²);
  ``stretch_stiffness`` / ``shear_stiffness`` [N/m] membrane moduli (E × thickness);
  ``bend_stiffness`` [N·m] plate bending rigidity (fabrics ~1e-6 … 1e-3).
- soft body: ``density`` [kg/m³]; ``young_modulus`` [Pa] (gelatin ~5 kPa, flesh ~50 kPa, soft rubber
  ~1 MPa); ``poisson_ratio`` near 0.5 for water-based and rubbery materials (volume preserving).
- hair: ``radius`` [m] of one hair (fine 30 µm, coarse 60 µm), keratin ``density`` 1300 kg/m³ and
  moduli of a few GPa. Waves and curls come from the groom's rest shape (the solver keeps rest
  curvature); their presets raise friction (curly hair tangles and clumps) and damping.
"""

from __future__ import annotations

CLOTH_PRESETS: dict[str, dict[str, object]] = {
    "Silk": {"density": 0.06, "stretch_stiffness": 800.0, "shear_stiffness": 40.0, "bend_stiffness": 1.0e-6,
             "friction": 0.2, "damping": 1.0},
    "Cotton": {"density": 0.15, "stretch_stiffness": 2000.0, "shear_stiffness": 200.0, "bend_stiffness": 1.0e-5,
               "friction": 0.4, "damping": 1.0},
    "Denim": {"density": 0.4, "stretch_stiffness": 8000.0, "shear_stiffness": 1000.0, "bend_stiffness": 1.0e-4,
              "friction": 0.5, "damping": 2.0},
    "Leather": {"density": 0.9, "stretch_stiffness": 20000.0, "shear_stiffness": 5000.0, "bend_stiffness": 1.0e-3,
                "friction": 0.6, "damping": 3.0},
    "Rubber": {"density": 0.8, "stretch_stiffness": 1500.0, "shear_stiffness": 500.0, "bend_stiffness": 2.0e-4,
               "friction": 0.9, "damping": 2.0},
}

SOFTBODY_PRESETS: dict[str, dict[str, object]] = {
    "Jelly": {"density": 1050.0, "young_modulus": 5.0e3, "poisson_ratio": 0.45, "friction": 0.5, "damping": 0.5},
    "Rubber": {"density": 1100.0, "young_modulus": 1.0e6, "poisson_ratio": 0.45, "friction": 0.9, "damping": 0.2},
    "Flesh": {"density": 1060.0, "young_modulus": 5.0e4, "poisson_ratio": 0.45, "friction": 0.6, "damping": 1.0},
}

HAIR_PRESETS: dict[str, dict[str, object]] = {
    "Straight Fine": {"radius": 3.0e-5, "density": 1300.0, "young_modulus": 3.0e9, "shear_modulus": 1.0e9,
                      "friction": 0.1, "collider_friction": 0.2, "damping": 0.2},
    "Straight Coarse": {"radius": 6.0e-5, "density": 1300.0, "young_modulus": 4.0e9, "shear_modulus": 1.3e9,
                        "friction": 0.2, "collider_friction": 0.3, "damping": 0.2},
    "Wavy": {"radius": 4.0e-5, "density": 1300.0, "young_modulus": 3.0e9, "shear_modulus": 1.0e9,
             "friction": 0.25, "collider_friction": 0.3, "damping": 0.3},
    "Curly": {"radius": 4.0e-5, "density": 1300.0, "young_modulus": 2.5e9, "shear_modulus": 0.8e9,
              "friction": 0.35, "collider_friction": 0.4, "damping": 0.5},
}

PRESETS: dict[str, dict[str, dict[str, object]]] = {
    "CLOTH": CLOTH_PRESETS,
    "SOFTBODY": SOFTBODY_PRESETS,
    "HAIR": HAIR_PRESETS,
}

# Object.tangle pointer holding the parameters of each role
SETTINGS_GROUP = {"CLOTH": "cloth", "SOFTBODY": "softbody", "HAIR": "hair"}


def preset_values(role: str, name: str) -> dict[str, object]:
    """The parameter values of preset ``name`` for ``role``; KeyError with the valid names otherwise."""
    table = PRESETS.get(role)
    if table is None:
        raise KeyError(f"role {role!r} has no presets; roles with presets: {sorted(PRESETS)}")
    if name not in table:
        raise KeyError(f"no {role.lower()} preset {name!r}; valid: {sorted(table)}")
    return dict(table[name])
