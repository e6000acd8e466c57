"""Scene dict (protocol ``submit.body.scene``) -> validated, typed specs.

Every check raises :class:`SceneError` naming the object (and key) at fault. Arrays are
copied to float64 / int64 host arrays here; solvers never see the raw wire arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import SceneError
from .maps import parse_maps
from .params import KINDS, resolve_params

COLLIDER_SHAPES = ("plane", "sphere", "box", "torus")
MAX_SUBSTEPS = 1000
MAX_PREROLL = 10000   # frames of pre-roll at most (over 7 minutes at 24 fps)
MAX_ABS_VALUE = 1.0e6  # [m] coordinates, sizes and matrix entries beyond this are refused (wrong unit scale)


@dataclass(frozen=True)
class TimeSpec:
    """fps [1/s], inclusive frame range, substeps per frame, and the pre-roll: frames simulated before frame_start
    with every object held at its frame_start pose (the hair falls from its groom, a cloth settles on its body), so
    the shot starts at rest."""

    fps: float
    frame_start: int
    frame_end: int
    substeps: int
    preroll: int = 0

    @property
    def frame_dt(self) -> float:
        """Seconds per frame."""
        return 1.0 / self.fps


@dataclass
class ObjectSpec:
    """One validated scene object. Positions are world space [m].

    vertices: (N, 3) float64 (hair: the strand points), triangles: (F, 3) int64 or None,
    tets: (T, 4) int64 or None, pin_indices: (P,) int64, pin_weights: (P,) float64 in (0, 1],
    matrix_world: (4, 4) float64 at frame_start, shape: primitive collider description or None,
    maps: painted factors {param: (N,) float64} (sim/maps.py), raw: the original scene object (for
    solver-specific keys such as hair ``strand_offsets``).
    """

    id: str
    kind: str
    params: dict[str, Any]
    animated: bool
    matrix_world: np.ndarray
    vertices: np.ndarray | None = None
    triangles: np.ndarray | None = None
    tets: np.ndarray | None = None
    pin_indices: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    pin_weights: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    shape: dict | None = None
    maps: dict[str, np.ndarray] = field(default_factory=dict)
    raw: dict = field(default_factory=dict)


@dataclass
class SceneSpec:
    """gravity: (3,) [m/s²]; objects in scene order; solver: per-solver settings map."""

    gravity: np.ndarray
    time: TimeSpec
    objects: list[ObjectSpec]
    solver: dict[str, dict]

    def by_id(self, object_id: str) -> ObjectSpec:
        for spec in self.objects:
            if spec.id == object_id:
                return spec
        raise KeyError(object_id)


def _float_array(value: Any, shape_tail: tuple[int, ...], what: str, object_id: str | None,
                 limit: float | None = MAX_ABS_VALUE) -> np.ndarray:
    try:
        array = np.asarray(value)
    except Exception as exc:  # ragged lists and the like
        raise SceneError(f"{what} is not an array ({exc})", object=object_id) from exc
    if array.dtype.kind not in "fiu" or array.dtype == bool:
        raise SceneError(f"{what} must be a float array, got dtype {array.dtype}", object=object_id)
    if array.ndim != 1 + len(shape_tail) or tuple(array.shape[1:]) != shape_tail:
        expected = "(N, " + ", ".join(map(str, shape_tail)) + ")" if shape_tail else "(N,)"
        raise SceneError(f"{what} must have shape {expected}, got {tuple(array.shape)}", object=object_id)
    array = array.astype(np.float64)
    if not np.all(np.isfinite(array)):
        bad = int(np.argwhere(~np.isfinite(array).reshape(len(array), -1).all(axis=1))[0][0])
        raise SceneError(f"{what} contains NaN or Inf (first at row {bad})", object=object_id)
    if limit is not None and array.size and np.abs(array).max() > limit:
        bad = int(np.argmax(np.abs(array).reshape(len(array), -1).max(axis=1) > limit)) if array.ndim else 0
        raise SceneError(f"{what} holds {np.abs(array).max():.3g}, beyond {limit:g} (first at row {bad}); "
                         "coordinates and sizes are in metres: is the unit scale wrong?", object=object_id)
    return array


def _index_array(value: Any, width: int | None, count: int, what: str, object_id: str | None) -> np.ndarray:
    try:
        array = np.asarray(value)
    except Exception as exc:
        raise SceneError(f"{what} is not an array ({exc})", object=object_id) from exc
    if array.size == 0:
        return np.zeros((0, width) if width else (0,), np.int64)
    if array.dtype.kind not in "iu":
        raise SceneError(f"{what} must be an integer array, got dtype {array.dtype}", object=object_id)
    if width is not None and (array.ndim != 2 or array.shape[1] != width):
        raise SceneError(f"{what} must have shape (M, {width}), got {tuple(array.shape)}", object=object_id)
    if width is None and array.ndim != 1:
        raise SceneError(f"{what} must be one-dimensional, got shape {tuple(array.shape)}", object=object_id)
    array = array.astype(np.int64)
    if array.min() < 0 or array.max() >= count:
        raise SceneError(
            f"{what} has an index out of range [0, {count - 1}] (min {array.min()}, max {array.max()})",
            object=object_id,
        )
    return array


def _matrix(value: Any, object_id: str | None, what: str = "matrix_world") -> np.ndarray:
    if value is None:
        return np.eye(4)
    matrix = _float_array(value, (4,), what, object_id)
    if matrix.shape != (4, 4):
        raise SceneError(f"{what} must be a 4×4 matrix, got {matrix.shape}", object=object_id)
    if abs(np.linalg.det(matrix[:3, :3])) < 1e-12:
        raise SceneError(f"{what} is singular (zero scale?)", object=object_id)
    return matrix


def _parse_time(time: Any) -> TimeSpec:
    if not isinstance(time, dict):
        raise SceneError("scene 'time' must be a map {fps, frame_start, frame_end, substeps, preroll}")
    unknown = sorted(set(time) - {"fps", "frame_start", "frame_end", "substeps", "preroll"})
    if unknown:
        raise SceneError(f"unknown key {unknown[0]!r} in scene 'time'")
    fps = time.get("fps", 24)
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not math.isfinite(fps) or fps <= 0:
        raise SceneError(f"time.fps must be a positive number, got {fps!r}")
    ints = {}
    for key, default in (("frame_start", 1), ("frame_end", None), ("substeps", 4), ("preroll", 0)):
        value = time.get(key, default)
        if value is None:
            raise SceneError(f"time.{key} is required")
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise SceneError(f"time.{key} must be an integer, got {value!r}")
        ints[key] = int(value)
    if ints["frame_end"] < ints["frame_start"]:
        raise SceneError(f"time.frame_end ({ints['frame_end']}) is before time.frame_start ({ints['frame_start']})")
    if not 1 <= ints["substeps"] <= MAX_SUBSTEPS:
        raise SceneError(f"time.substeps must be in 1..{MAX_SUBSTEPS}, got {ints['substeps']}")
    if not 0 <= ints["preroll"] <= MAX_PREROLL:
        raise SceneError(f"time.preroll must be in 0..{MAX_PREROLL} frames, got {ints['preroll']}")
    return TimeSpec(float(fps), ints["frame_start"], ints["frame_end"], ints["substeps"], ints["preroll"])


def _parse_shape(shape: Any, object_id: str) -> dict:
    if not isinstance(shape, dict) or "type" not in shape:
        raise SceneError("'shape' must be a map with a 'type'", object=object_id)
    kind = shape["type"]
    fields = {
        "plane": {"normal": (0.0, 0.0, 1.0), "offset": 0.0, "point": None},
        "sphere": {"center": (0.0, 0.0, 0.0), "radius": 1.0},
        "box": {"center": (0.0, 0.0, 0.0), "size": (2.0, 2.0, 2.0)},
        "torus": {"center": (0.0, 0.0, 0.0), "major_radius": 1.0, "minor_radius": 0.25},
    }
    if kind not in fields:
        raise SceneError(f"shape.type {kind!r} is not one of {list(COLLIDER_SHAPES)}", object=object_id)
    unknown = sorted(set(shape) - set(fields[kind]) - {"type"})
    if unknown:
        raise SceneError(f"unknown key {unknown[0]!r} in {kind} shape; valid: {sorted(fields[kind])}",
                         object=object_id)
    parsed: dict[str, Any] = {"type": kind}
    if kind == "plane" and "point" in shape and "offset" in shape:
        raise SceneError("a plane takes 'point' or 'offset', not both", object=object_id)
    for key, default in fields[kind].items():
        value = shape.get(key, default)
        if value is None:
            continue
        if key == "point":
            default = (0.0, 0.0, 0.0)
        if isinstance(default, tuple):
            parsed[key] = _float_array(value, (), f"shape.{key}", object_id)
            if parsed[key].shape != (3,):
                raise SceneError(f"shape.{key} must have 3 components", object=object_id)
        else:
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) \
                    or not math.isfinite(float(value)):
                raise SceneError(f"shape.{key} must be a finite number, got {value!r}", object=object_id)
            parsed[key] = float(value)
    if kind == "plane" and np.linalg.norm(parsed["normal"]) < 1e-12:
        raise SceneError("plane shape.normal must not be zero", object=object_id)
    if kind == "plane" and "point" in parsed:
        parsed["offset"] = float(parsed.pop("point") @ parsed["normal"])
    if kind == "sphere" and parsed["radius"] <= 0:
        raise SceneError(f"sphere shape.radius must be > 0, got {parsed['radius']}", object=object_id)
    if kind == "box" and np.any(parsed["size"] <= 0):
        raise SceneError(f"box shape.size must be > 0 on every axis, got {parsed['size'].tolist()}",
                         object=object_id)
    if kind == "torus" and not (0 < parsed["minor_radius"] < parsed["major_radius"]):
        raise SceneError("torus needs 0 < minor_radius < major_radius", object=object_id)
    return parsed


def _parse_pins(pins: Any, count: int, object_id: str) -> tuple[np.ndarray, np.ndarray]:
    if pins is None:
        return np.zeros(0, np.int64), np.zeros(0, np.float64)
    if not isinstance(pins, dict) or "indices" not in pins:
        raise SceneError("'pins' must be a map {indices, weights?}", object=object_id)
    indices = _index_array(pins["indices"], None, count, "pins.indices", object_id)
    weights = pins.get("weights")
    if weights is None:
        weights = np.ones(len(indices))
    weights = _float_array(weights, (), "pins.weights", object_id) if len(indices) else np.zeros(0)
    if weights.shape != indices.shape:
        raise SceneError(f"pins.weights has {len(weights)} entries for {len(indices)} pins.indices",
                         object=object_id)
    if np.any(weights < 0) or np.any(weights > 1):
        raise SceneError("pins.weights must lie in [0, 1]", object=object_id)
    if len(np.unique(indices)) != len(indices):
        raise SceneError("pins.indices contains duplicates", object=object_id)
    keep = weights > 0
    return indices[keep], weights[keep]


def _parse_object(obj: Any, position: int) -> ObjectSpec:
    if not isinstance(obj, dict):
        raise SceneError(f"scene.objects[{position}] must be a map")
    object_id = obj.get("id")
    if not isinstance(object_id, str) or not object_id:
        raise SceneError(f"scene.objects[{position}] needs a non-empty string 'id'")
    kind = obj.get("kind")
    if kind not in KINDS:
        raise SceneError(f"unknown kind {kind!r}; expected one of {list(KINDS)}", object=object_id)
    params = resolve_params(kind, obj.get("params"), object_id)
    animated = obj.get("animated", False)
    if not isinstance(animated, bool):
        raise SceneError(f"'animated' must be true or false, got {animated!r}", object=object_id)
    spec = ObjectSpec(id=object_id, kind=kind, params=params, animated=animated,
                      matrix_world=_matrix(obj.get("matrix_world"), object_id), raw=obj)

    if kind == "hair":
        if "points" not in obj:
            raise SceneError("hair needs 'points' (N, 3)", object=object_id)
        spec.vertices = _float_array(obj["points"], (3,), "points", object_id)
        offsets = _index_array(obj.get("strand_offsets", [0, len(spec.vertices)]), None,
                               len(spec.vertices) + 1, "strand_offsets", object_id)
        if len(offsets) < 2 or offsets[0] != 0 or offsets[-1] != len(spec.vertices) or np.any(np.diff(offsets) < 2):
            raise SceneError("strand_offsets must start at 0, end at len(points) and give every strand ≥ 2 points",
                             object=object_id)
        spec.pin_indices, spec.pin_weights = _parse_pins(obj.get("pins"), len(spec.vertices), object_id)
        spec.maps = parse_maps(kind, obj.get("maps"), params, len(spec.vertices), object_id)
        return spec

    if kind == "collider" and obj.get("maps") is not None:
        raise SceneError("a collider takes no painted 'maps' (its friction and thickness are per object)",
                         object=object_id)
    if kind == "collider" and "shape" in obj and obj["shape"] is not None:
        spec.shape = _parse_shape(obj["shape"], object_id)
        return spec

    if "vertices" not in obj:
        raise SceneError(f"a {kind} object needs 'vertices' (N, 3)" +
                         (" or a primitive 'shape'" if kind == "collider" else ""), object=object_id)
    spec.vertices = _float_array(obj["vertices"], (3,), "vertices", object_id)
    count = len(spec.vertices)
    if count == 0:
        raise SceneError("'vertices' is empty", object=object_id)
    if "triangles" not in obj or obj["triangles"] is None:
        if kind != "softbody" or obj.get("tets") is None:
            raise SceneError(f"a {kind} object needs 'triangles' (F, 3)", object=object_id)
        spec.triangles = np.zeros((0, 3), np.int64)
    else:
        spec.triangles = _index_array(obj["triangles"], 3, count, "triangles", object_id)
    if len(spec.triangles):
        degenerate = (spec.triangles[:, 0] == spec.triangles[:, 1]) | (spec.triangles[:, 1] == spec.triangles[:, 2]) \
            | (spec.triangles[:, 0] == spec.triangles[:, 2])
        if np.any(degenerate):
            raise SceneError(f"triangle {int(np.argmax(degenerate))} repeats a vertex", object=object_id)
    if kind in ("cloth", "collider") and len(spec.triangles) == 0:
        raise SceneError("'triangles' is empty", object=object_id)
    if kind == "cloth" and spec.params.get("self_collision"):
        _check_self_collision_thickness(spec, object_id)
    if kind == "softbody" and obj.get("tets") is not None:
        spec.tets = _index_array(obj["tets"], 4, count, "tets", object_id)
        if len(spec.tets) == 0:
            raise SceneError("'tets' is empty", object=object_id)
    if kind != "collider":
        spec.pin_indices, spec.pin_weights = _parse_pins(obj.get("pins"), count, object_id)
        spec.maps = parse_maps(kind, obj.get("maps"), params, count, object_id)
    return spec


SELF_COLLISION_THICKNESS = 0.25   # most self-collision thickness per median rest edge length


def _check_self_collision_thickness(spec: ObjectSpec, object_id: str) -> None:
    """A self-colliding cloth keeps 2 × thickness between its own non-adjacent elements, some of which lie
    less than an edge length apart at rest: a thickness beyond SELF_COLLISION_THICKNESS × the median edge
    would push the cloth apart from its own rest shape (``benchmarks.parameter_sweep``: 1 m on 5 cm edges ran away)."""
    corners = spec.vertices[spec.triangles]
    edges = np.linalg.norm(corners - np.roll(corners, 1, axis=1), axis=2)
    median = float(np.median(edges))
    thickness = float(spec.params["thickness"])
    if thickness > SELF_COLLISION_THICKNESS * median:
        raise SceneError(f"thickness {thickness:g} m is too large for self-collision on edges of {median:.3g} m "
                         f"(median): at most {SELF_COLLISION_THICKNESS:g} × the edge length "
                         f"({SELF_COLLISION_THICKNESS * median:.3g} m), or the cloth pushes itself apart; lower "
                         f"the thickness or subdivide the mesh", object=object_id)


def parse_scene(scene: Any) -> SceneSpec:
    """Validate a protocol scene and return a :class:`SceneSpec`. Raises SceneError."""
    if not isinstance(scene, dict):
        raise SceneError("scene must be a map")
    unknown = sorted(set(scene) - {"gravity", "time", "objects", "solver"})
    if unknown:
        raise SceneError(f"unknown scene key {unknown[0]!r}")
    gravity = _float_array(scene.get("gravity", (0.0, 0.0, -9.81)), (), "gravity", None, limit=None)
    if gravity.shape != (3,):
        raise SceneError(f"gravity must have 3 components, got {gravity.shape}")
    time = _parse_time(scene.get("time"))
    objects_raw = scene.get("objects")
    if not isinstance(objects_raw, (list, tuple)) or not objects_raw:
        raise SceneError("scene.objects must be a non-empty list")
    objects = [_parse_object(obj, i) for i, obj in enumerate(objects_raw)]
    seen: set[str] = set()
    for spec in objects:
        if spec.id in seen:
            raise SceneError("duplicate object id", object=spec.id)
        seen.add(spec.id)
    if not any(spec.kind != "collider" for spec in objects):
        raise SceneError("scene has no simulated object (only colliders)")
    solver = scene.get("solver", {}) or {}
    if not isinstance(solver, dict) or not all(isinstance(v, dict) for v in solver.values()):
        raise SceneError("scene.solver must be a map of maps, e.g. {'pd': {'iterations': 10}}")
    return SceneSpec(gravity=gravity, time=time, objects=objects, solver=solver)
