"""Parameter tables per object kind: the one source of truth for names, defaults, units, ranges.

Every key of ``object["params"]`` is optional; missing keys take the default below. Unknown
keys and absurd values raise :class:`SceneError` naming the object and the key. The add-on's
property defaults mirror these tables (a test checks they agree).

Units are SI (Blender meters). Stiffness semantics (used by the PD solver, see
``solver_server/solvers/pd/solver.py`` ``build_constraints`` for the mapping to constraint weights):

- cloth ``stretch_stiffness`` [N/m]: membrane (2D) Young's modulus, i.e. force per unit width
  per unit strain (E_3D × thickness).
- cloth ``shear_stiffness`` [N/m]: membrane shear modulus (0 disables the triangle constraint).
- cloth ``bend_stiffness`` [N·m]: plate bending rigidity D, energy (D/2)(κ1+κ2)² per area
  (0 disables bending).
- softbody ``young_modulus`` [Pa], ``poisson_ratio`` [-].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .errors import SceneError


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: name, default, unit, doc and its valid range.

    type: "float" | "int" | "bool" | "choice" | "range2" ([min, max] pair of floats) | "vector3" (3 floats)
    low/high: closed bounds (floats), ``low_open``: the lower bound itself is invalid.
    """

    name: str
    default: Any
    unit: str
    doc: str
    type: str = "float"
    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    choices: tuple = ()
    paintable: bool = False     # an object's ``maps`` may scale it per point (sim/maps.py)


def _common_simulated(damping: float) -> tuple[ParamSpec, ...]:
    """The parameters of every simulated PD role; ``damping`` [1/s]: the role's default velocity drag rate."""
    return (
        ParamSpec("friction", 0.3, "", "Coulomb friction coefficient μ against colliders", low=0.0, high=10.0,
                  paintable=True),
        ParamSpec("thickness", 0.002, "m", "contact offset kept from collider surfaces", low=0.0, high=1.0),
        ParamSpec("damping", damping, "1/s", "velocity drag rate: v ← v / (1 + damping·h) per substep", low=0.0,
                  high=1000.0),
        ParamSpec("pin_stiffness", 1.0e4, "N/m",
                  "stiffness of a pin with vertex weight w < 1 (ω = w·pin_stiffness); weight 1 is an exact pin",
                  low=0.0, high=1.0e12, low_open=True),
        ParamSpec("unpin_frame", 0, "", "frame from which the pins let go and the object moves freely (0: never)",
                  type="int", low=0, high=10**7),
        ParamSpec("pin_pull_speed", 0.0, "m/s", "fastest a pin follows its target: a target that jumps is pulled "
                  "in at this speed (0: at once)", low=0.0, high=1.0e4),
    )


def _wind(applied: str) -> tuple[ParamSpec, ...]:
    """The uniform, sine-varying wind of an object (solvers/wind.py); ``applied`` says how its solver takes it."""
    return (
        ParamSpec("wind_direction", (1.0, 0.0, 0.0), "", f"wind direction ({applied})", type="vector3",
                  low=-1.0e3, high=1.0e3),
        ParamSpec("wind_strength", 0.0, "m/s²", "mean wind acceleration", low=-1e3, high=1e3),
        ParamSpec("wind_amplitude", 0.0, "m/s²", "amplitude of the sine-varying wind", low=0.0, high=1e3),
        ParamSpec("wind_period", 2.0, "s", "period of the wind's sine variation", low=0.0, high=1e4, low_open=True),
    )


# cloth: 1 /s, about what air takes from a sheet swinging at walking speed (a cotton sheet broadside at 1 m/s
# loses a few per second; Blender's cloth defaults to an air viscosity of 1), so free edges calm within a second
CLOTH = _common_simulated(1.0) + (
    ParamSpec("density", 0.2, "kg/m²", "areal density (mass per unit area)", low=0.0, high=1.0e4, low_open=True,
              paintable=True),
    ParamSpec("stretch_stiffness", 1000.0, "N/m", "membrane Young's modulus × thickness (edge springs)",
              low=0.0, high=1.0e9, low_open=True, paintable=True),
    ParamSpec("shear_stiffness", 0.0, "N/m", "membrane shear modulus (triangle strain); 0 disables",
              low=0.0, high=1.0e9, paintable=True),
    ParamSpec("bend_stiffness", 0.0, "N·m", "bending rigidity (mean-value Laplacian); 0 disables",
              low=0.0, high=1.0e3, paintable=True),
    ParamSpec("strain_limits", (1.0, 1.0), "",
              "[σmin, σmax]: edge/triangle stretch ratios that cost no energy (1 ≤ σmax, 0 < σmin ≤ 1); no "
              "edge gets longer than max(σmax, 1 + solver.pd.strain_limit_slack) (a hard cap)",
              type="range2", low=0.0, high=10.0, low_open=True),
    ParamSpec("self_collision", False, "", "vertex–triangle self collision", type="bool"),
    ParamSpec("air_drag", 0.0, "", "drag of still air on the faces moving along their normals, as on a flat plate "
              "(1: air at 20 °C; 0: none)", low=0.0, high=100.0),
    *_wind("along the faces' normals"),
)

SOFTBODY = _common_simulated(0.1) + (
    # at least air's: a body lighter than air and stiffer than steel is ill-conditioned beyond any substep count
    # (``tests/physics/test_parameter_extremes``: a 1 g/m³ diamond-stiff block flung out of a 1 m contact offset)
    ParamSpec("density", 1000.0, "kg/m³", "volumetric density", low=1.0, high=1.0e5, paintable=True),
    ParamSpec("young_modulus", 1.0e5, "Pa", "Young's modulus E", low=0.0, high=1.0e12, low_open=True,
              paintable=True),
    ParamSpec("poisson_ratio", 0.3, "", "Poisson ratio ν (volume preservation)", low=0.0, high=0.49),
    ParamSpec("strain_limits", (1.0, 1.0), "",
              "[σmin, σmax]: principal stretches of a tetrahedron that cost no energy",
              type="range2", low=0.0, high=10.0, low_open=True),
    ParamSpec("tet_resolution", 8, "", "embedding lattice cells along the longest axis (when no tets are given)",
              type="int", low=1, high=200),
)

HAIR = (
    ParamSpec("model", "der", "", "hair solver", type="choice", choices=("der", "cosserat", "particles")),
    ParamSpec("friction", 0.1, "", "hair–hair Coulomb friction coefficient μ", low=0.0, high=10.0),
    ParamSpec("collider_friction", 0.3, "", "hair–collider Coulomb friction coefficient μ", low=0.0, high=10.0),
    # radius and offset at most 1 cm (a thick braid): beyond, strands placed a few cm apart start deep inside
    # each other and the colliders, which no step can resolve gently (``benchmarks.parameter_sweep``: runaways at 1 m)
    ParamSpec("thickness", 0.0, "m", "extra contact offset", low=0.0, high=0.01),
    ParamSpec("damping", 0.1, "1/s", "extra velocity drag rate beside the air drag", low=0.0, high=1000.0),
    ParamSpec("air_drag", 1.0, "", "drag of still air on the strands, as on a thin cylinder of the strand's radius "
              "(1: air at 20 °C; 0: none); fine hair settles within a second", low=0.0, high=100.0),
    ParamSpec("radius", 5.0e-5, "m", "strand radius", low=0.0, high=0.01, low_open=True),
    # density from foam to metal, moduli up to diamond's: a strand lighter than air and stiffer than steel is
    # ill-conditioned beyond any substep count (``benchmarks.parameter_sweep``: featherweight stiff strands ran away)
    ParamSpec("density", 1300.0, "kg/m³", "strand material density", low=10.0, high=1.0e5, paintable=True),
    ParamSpec("young_modulus", 3.0e9, "Pa", "Young's modulus", low=0.0, high=1.0e12, low_open=True, paintable=True),
    ParamSpec("shear_modulus", 1.0e9, "Pa", "shear modulus (twist)", low=0.0, high=1.0e12, low_open=True,
              paintable=True),
    ParamSpec("pin_stiffness", 1.0e4, "N/m", "stiffness of a pin with weight w < 1", low=0.0, high=1.0e12,
              low_open=True),
    ParamSpec("collide_with_other_hair", True, "",
              "der: collide with the strands of the other DER hair objects (off: own strands and colliders only)",
              type="bool"),
    ParamSpec("guide_count", 0, "", "simulate this many k-means guide strands, interpolate the rest (0: all; der: "
              "clamped roots only)", type="int", low=0, high=10**7),
    *_wind("every hair model: the fast ones on every particle, der across the strand"),
    # Fast strand models (docs/fast_hair.md); ignored by "der".
    ParamSpec("gravity_scale", 1.0, "", "multiplies the scene gravity (particles, cosserat)", low=0.0, high=100.0),
    ParamSpec("particle_stiffness", 2.0e4, "1/s²", "neighbour spring k/m (particles)", low=0.0, high=1e9,
              low_open=True, paintable=True),
    ParamSpec("particle_bend_stiffness", 1.0e4, "1/s²", "second-neighbour spring k/m (particles)", low=0.0, high=1e9,
              paintable=True),
    ParamSpec("particle_angle_stiffness", 5.0e4, "1/s²",
              "turning-angle spring k/m at every interior particle (particles; keeps strands from kinking)",
              low=0.0, high=1e9, paintable=True),
    ParamSpec("particle_stretch_scale", 0.1, "", "strain where the quadratic stretch response equals the linear one",
              low=0.0, high=10.0, low_open=True),
    ParamSpec("particle_max_stretch", 1.1, "", "distance clamp: max segment length / rest length", low=1.0, high=10.0),
    ParamSpec("particle_teleport_speed", 10.0, "m/s", "root speed above which root motion is discarded", low=0.0,
              high=1e6, low_open=True),
    ParamSpec("particle_teleport_recovery", 0.25, "s", "fade time of the rigid constraint after a teleport", low=0.0,
              high=100.0, low_open=True),
    ParamSpec("particle_rest_speed", 1.0e-4, "m/s", "particles slower than this rest", low=0.0, high=10.0),
    ParamSpec("cosserat_max_step", 5.0e-3, "s", "internal step of the Cosserat model", low=0.0, high=1.0,
              low_open=True),
    ParamSpec("interaction_inner_radius", 0.0, "m", "swept-sphere inner radius (cosserat; 0 with outer 0: off)",
              low=0.0, high=1.0),
    ParamSpec("interaction_outer_radius", 0.0, "m", "swept-sphere outer radius (cosserat; 0: off)", low=0.0, high=1.0),
    ParamSpec("interaction_stiffness", 2.0e-2, "N/m", "K of F = K·P_inner·dir", low=0.0, high=1e9),
    ParamSpec("interaction_damping", 2.0e-2, "N·s/m²", "D of F = −D·P_outer·Δv", low=0.0, high=1e9),
)

# The painted maps each hair model uses (the others would be silently ignored, so they are refused).
HAIR_MODEL_PAINTABLE: dict[str, tuple[str, ...]] = {
    "der": ("density", "young_modulus", "shear_modulus"),
    "cosserat": ("density", "young_modulus", "shear_modulus"),
    "particles": ("particle_stiffness", "particle_bend_stiffness", "particle_angle_stiffness"),
}

COLLIDER = (
    ParamSpec("friction", 0.3, "", "Coulomb friction coefficient μ (a contact uses the mean of both objects' μ)",
              low=0.0, high=10.0),
    ParamSpec("thickness", 0.0, "m", "contact offset of the collider surface", low=0.0, high=1.0),
)

PARAM_TABLES: dict[str, tuple[ParamSpec, ...]] = {
    "cloth": CLOTH,
    "softbody": SOFTBODY,
    "hair": HAIR,
    "collider": COLLIDER,
}

KINDS = tuple(PARAM_TABLES)


def defaults(kind: str) -> dict[str, Any]:
    """All defaults of ``kind`` as a plain dict (for documentation and the add-on mirror test)."""
    return {spec.name: spec.default for spec in PARAM_TABLES[kind]}


def default_of(kind: str, name: str) -> Any:
    """The table's default of parameter ``name`` of ``kind`` (KeyError for a name the table lacks): the
    solvers' settings dataclasses take their defaults from here."""
    return {spec.name: spec for spec in PARAM_TABLES[kind]}[name].default


def check_values(kind: str, values: dict[str, Any], object_id: str | None = None) -> None:
    """Check ``values`` {table name: value} of ``kind`` against the table's types and ranges: SceneError naming
    the object and the key for the first one outside (the same rules as a scene's params)."""
    table = {spec.name: spec for spec in PARAM_TABLES[kind]}
    for name, value in values.items():
        _resolve_one(table[name], value, object_id)


def _finite_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _check_bounds(spec: ParamSpec, number: float, object_id: str | None, label: str) -> None:
    too_low = number <= spec.low if spec.low_open else number < spec.low
    if too_low or number > spec.high:
        lower = "(" if spec.low_open else "["
        raise SceneError(
            f"parameter {label!r} = {number!r} is outside the valid range {lower}{spec.low}, {spec.high}]"
            + (f" [{spec.unit}]" if spec.unit else ""),
            object=object_id,
        )


def _resolve_one(spec: ParamSpec, value: Any, object_id: str | None) -> Any:
    name = spec.name
    if spec.type == "bool":
        if isinstance(value, bool) or (hasattr(value, "dtype") and value.dtype == bool):
            return bool(value)
        raise SceneError(f"parameter {name!r} must be true or false, got {value!r}", object=object_id)
    if spec.type == "choice":
        if value not in spec.choices:
            raise SceneError(f"parameter {name!r} = {value!r} is not one of {list(spec.choices)}", object=object_id)
        return value
    if spec.type == "vector3":
        try:
            vector = [_finite_number(v) for v in value]
        except TypeError:
            vector = []
        if len(vector) != 3 or any(v is None for v in vector):
            raise SceneError(f"parameter {name!r} must be three finite numbers [x, y, z], got {value!r}",
                             object=object_id)
        for axis, component in enumerate(vector):
            _check_bounds(spec, component, object_id, f"{name}[{axis}]")
        return tuple(vector)
    if spec.type == "range2":
        try:
            pair = [_finite_number(v) for v in value]
        except TypeError:
            pair = []
        if len(pair) != 2 or any(v is None for v in pair):
            raise SceneError(f"parameter {name!r} must be a pair of finite numbers [min, max], got {value!r}",
                             object=object_id)
        low, high = pair
        _check_bounds(spec, low, object_id, name + "[0]")
        _check_bounds(spec, high, object_id, name + "[1]")
        if not (low <= 1.0 <= high):
            raise SceneError(f"parameter {name!r} = [{low}, {high}] must satisfy min ≤ 1 ≤ max", object=object_id)
        return (low, high)
    number = _finite_number(value)
    if number is None:
        raise SceneError(f"parameter {name!r} must be a finite number, got {value!r}", object=object_id)
    if spec.type == "int":
        if number != int(number):
            raise SceneError(f"parameter {name!r} must be an integer, got {value!r}", object=object_id)
        number = int(number)
    _check_bounds(spec, number, object_id, name)
    return number


def resolve_params(kind: str, params: dict | None, object_id: str | None = None) -> dict[str, Any]:
    """Validate ``params`` of an object of ``kind`` and fill defaults.

    Raises SceneError naming the object and the key for unknown keys, wrong types and
    out-of-range values (negative density, NaN, stiffness ≤ 0, ...).
    """
    if kind not in PARAM_TABLES:
        raise SceneError(f"unknown kind {kind!r}; expected one of {list(KINDS)}", object=object_id)
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise SceneError(f"'params' must be a map, got {type(params).__name__}", object=object_id)
    table = {spec.name: spec for spec in PARAM_TABLES[kind]}
    unknown = sorted(str(key) for key in params if key not in table)
    if unknown:
        raise SceneError(
            f"unknown parameter {unknown[0]!r} for a {kind} object; valid keys: {sorted(table)}", object=object_id
        )
    return {name: _resolve_one(spec, params[name], object_id) if name in params else spec.default
            for name, spec in table.items()}
