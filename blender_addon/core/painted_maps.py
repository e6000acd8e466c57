"""Painted maps, Blender-free: weights painted in a vertex group (meshes) or a point/curve attribute
(Curves hair) become the protocol's per-point factors (``object["maps"]``, solver_server/sim/maps.py).

As in Blender Cloth's stiffness groups, weight 1 gets the parameter's full value and weight 0 the value
times ``at_zero`` (a fraction in [0, 1]); weights in between blend linearly. Points outside the group
weigh 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .param_table import HAIR_MODEL_PAINTABLE, ParamSpec
from .validation import Problem

MAP_SUFFIX = "_map"              # property holding the vertex group / attribute name of a parameter's map
AT_ZERO_SUFFIX = "_map_zero"     # property holding the factor at weight 0
DEFAULT_AT_ZERO = 0.1


@dataclass(frozen=True)
class MapSetting:
    """One parameter's map as set on an object: ``source`` names the vertex group or attribute ('' when the
    parameter is not painted); ``at_zero`` is the factor at weight 0."""

    parameter: str
    source: str
    at_zero: float


def paintable(table: tuple[ParamSpec, ...], model: str | None = None) -> tuple[ParamSpec, ...]:
    """The paintable parameters of a role's table; for hair only those ``model`` uses."""
    specs = tuple(spec for spec in table if spec.paintable)
    if model is not None:
        specs = tuple(spec for spec in specs if spec.name in HAIR_MODEL_PAINTABLE[model])
    return specs


def factors(weights: np.ndarray, at_zero: float) -> np.ndarray:
    """(N,) float32 factors from (N,) weights: at_zero + (1 − at_zero)·w, weights clipped to [0, 1]."""
    weights = np.clip(np.asarray(weights, np.float64).reshape(-1), 0.0, 1.0)
    return (at_zero + (1.0 - at_zero) * weights).astype(np.float32)


def check_maps(object_id: str, settings: list[MapSetting], table: tuple[ParamSpec, ...], params: dict,
               sources: list[str], model: str | None = None, what: str = "vertex group") -> list[Problem]:
    """Problems of an object's painted maps: a source that does not exist or a factor at weight 0 that takes a
    parameter below its minimum (blocking); a map the hair model does not use (a warning: it is not sent).

    sources: the vertex groups (or attributes) the object has; what: how a source is called in messages."""
    specs = {spec.name: spec for spec in table}
    used = {spec.name for spec in paintable(table, model)}
    problems = []
    for setting in settings:
        if not setting.source:
            continue
        spec = specs[setting.parameter]
        label = setting.parameter.replace("_", " ")
        if setting.parameter not in used:
            problems.append(Problem(object_id, f"the {label} map '{setting.source}' is not used by the {model} hair "
                                               "model and is not sent", blocking=False))
            continue
        if setting.source not in sources:
            problems.append(Problem(object_id, f"the {label} map's {what} '{setting.source}' does not exist"))
        low = setting.at_zero * float(params[setting.parameter])
        if low < spec.minimum or (spec.minimum > 0.0 and setting.at_zero <= 0.0):
            problems.append(Problem(object_id, f"the {label} map's factor at weight 0 ({setting.at_zero:g}) takes "
                                               f"{label} to {low:g}, below its minimum {spec.minimum:g}; raise it "
                                               "above 0"))
    return problems



def map_settings(settings, table: tuple[ParamSpec, ...]) -> list[MapSetting]:
    """The map settings of every paintable parameter of ``table`` read from a role's property group (any object
    with ``<name>_map`` and ``<name>_map_zero`` attributes)."""
    return [MapSetting(spec.name, getattr(settings, spec.name + MAP_SUFFIX), getattr(settings, spec.name + AT_ZERO_SUFFIX))
            for spec in table if spec.paintable]
