"""Painted maps: an object's ``maps`` scale paintable parameters point by point (protocol §2).

``object["maps"] = {param: f(N)}``: one factor per vertex (hair: per point) multiplying the object's
parameter of that name, e.g. ``{"bend_stiffness": w}`` makes the bending rigidity of vertex i
``w[i] · params["bend_stiffness"]``. Each solver spreads the factors over its elements (an edge takes
the mean of its two vertices, a triangle or tetrahedron the mean of its corners). Parameters marked
``paintable`` in params.py may be painted; a hair object only the ones its model uses.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import SceneError
from .params import HAIR_MODEL_PAINTABLE, PARAM_TABLES


def paintable(kind: str, params: dict[str, Any]) -> tuple[str, ...]:
    """Names of the parameters an object of ``kind`` with resolved ``params`` may paint."""
    names = tuple(spec.name for spec in PARAM_TABLES[kind] if spec.paintable)
    if kind == "hair":
        used = HAIR_MODEL_PAINTABLE[params["model"]]
        names = tuple(name for name in names if name in used)
    return names


def parse_maps(kind: str, raw: Any, params: dict[str, Any], count: int, object_id: str) -> dict[str, np.ndarray]:
    """Validated factors {param: (count,) float64} of an object's ``maps`` (None: no maps).

    Every factor is finite and ≥ 0, and > 0 for a parameter that must be positive (a density or a
    stretch stiffness); factor × parameter stays inside the parameter's range. Raises SceneError naming
    the object, the map and the first offending point.
    """
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise SceneError("'maps' must be a map {parameter: per-point factors}", object=object_id)
    allowed = paintable(kind, params)
    table = {spec.name: spec for spec in PARAM_TABLES[kind]}
    maps: dict[str, np.ndarray] = {}
    for name, values in raw.items():
        if name not in allowed:
            model = f" with model {params['model']!r}" if kind == "hair" else ""
            raise SceneError(f"map {name!r} cannot be painted on a {kind} object{model}; paintable: {list(allowed)}",
                             object=object_id)
        try:
            factors = np.asarray(values)
        except Exception as exc:  # ragged lists and the like
            raise SceneError(f"maps.{name} is not an array ({exc})", object=object_id) from exc
        if factors.dtype.kind not in "fiu" or factors.shape != (count,):
            raise SceneError(f"maps.{name} must hold one number per point, shape ({count},); got "
                             f"{factors.dtype} {tuple(factors.shape)}", object=object_id)
        factors = factors.astype(np.float64)
        spec = table[name]
        bad = ~np.isfinite(factors) | (factors <= 0 if spec.low_open else factors < 0)
        if np.any(bad):
            first = int(np.argmax(bad))
            need = "> 0" if spec.low_open else ">= 0"
            raise SceneError(f"maps.{name} must be finite and {need}; point {first} holds {factors[first]!r}",
                             object=object_id)
        scaled = factors * float(params[name])
        beyond = (scaled > spec.high) | (scaled < spec.low)
        if np.any(beyond):
            first = int(np.argmax(beyond))
            raise SceneError(f"maps.{name} scales {name} to {scaled[first]:g}{' ' + spec.unit if spec.unit else ''} "
                             f"at point {first}, outside [{spec.low:g}, {spec.high:g}]", object=object_id)
        maps[name] = factors
    return maps


def element_factors(factors: np.ndarray | None, elements: np.ndarray) -> np.ndarray | float:
    """Mean factor over the points of each element: factors (N,) or None, elements (E, k) indices ->
    (E,) (1.0 when the parameter is not painted)."""
    if factors is None:
        return 1.0
    return factors[elements].mean(axis=1)
