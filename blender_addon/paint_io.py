"""bpy side of painted maps: read vertex-group weights (meshes) and point or curve attributes (Curves hair)
and turn them into the wire ``maps`` of an object (core.painted_maps has the Blender-free rules)."""

from __future__ import annotations

import bpy
import numpy as np

from .core import scene_export
from .core.painted_maps import AT_ZERO_SUFFIX, MAP_SUFFIX, factors, paintable
from .core.param_table import ParamSpec

ATTRIBUTE_DTYPES = {"FLOAT": np.float32, "INT": np.int32, "BOOLEAN": bool}


def vertex_group_weights(obj: bpy.types.Object, group_name: str, what: str = "vertex group") -> np.ndarray:
    """(N,) float64 weight of every vertex of the mesh in ``group_name`` (0 outside the group)."""
    group = obj.vertex_groups.get(group_name)
    if group is None:
        raise scene_export.ExportError(f"{what} '{group_name}' does not exist", obj.name)
    group_index = group.index
    weights = np.zeros(len(obj.data.vertices))
    # bpy exposes vertex-group membership only per vertex; this runs once per bake, not per frame.
    pairs = [(vertex.index, element.weight) for vertex in obj.data.vertices for element in vertex.groups
             if element.group == group_index]
    if pairs:
        indices, values = zip(*pairs)
        weights[np.asarray(indices)] = values
    return weights


def curves_attribute_weights(obj: bpy.types.Object, name: str) -> np.ndarray:
    """(N,) float64 per point of a Curves object's attribute ``name`` (a curve-domain attribute gives every
    point its strand's value)."""
    if obj.type != "CURVES":
        raise scene_export.ExportError(f"painted hair maps are read from Curves attributes; this {obj.type} "
                                       f"object has none (map '{name}'): convert it to Curves", obj.name)
    curves = obj.data
    attribute = curves.attributes.get(name)
    if attribute is None:
        raise scene_export.ExportError(f"attribute '{name}' does not exist on the Curves", obj.name)
    if attribute.data_type not in ATTRIBUTE_DTYPES or attribute.domain not in {"POINT", "CURVE"}:
        raise scene_export.ExportError(f"attribute '{name}' is a {attribute.data_type} attribute on the "
                                       f"{attribute.domain} domain; a map needs one number (Float, Integer or "
                                       "Boolean) per point or per curve", obj.name)
    values = np.empty(len(attribute.data), ATTRIBUTE_DTYPES[attribute.data_type])
    attribute.data.foreach_get("value", values)
    values = values.astype(np.float64)
    if attribute.domain == "CURVE":
        offsets = np.empty(len(curves.curves) + 1, np.int32)
        curves.curve_offset_data.foreach_get("value", offsets)
        values = np.repeat(values, np.diff(offsets))
    return values


def painted_maps(obj: bpy.types.Object, settings, table: tuple[ParamSpec, ...],
                 model: str | None = None) -> dict[str, np.ndarray]:
    """{parameter: (N,) factors} of every painted parameter of ``settings`` (a role's property group) that
    the object's solver uses (for hair: its ``model``)."""
    maps = {}
    for spec in paintable(table, model):
        source = getattr(settings, spec.name + MAP_SUFFIX)
        if not source:
            continue
        what = f"{spec.name.replace('_', ' ')} map vertex group"
        weights = (vertex_group_weights(obj, source, what) if obj.type == "MESH"
                   else curves_attribute_weights(obj, source))
        maps[spec.name] = factors(weights, getattr(settings, spec.name + AT_ZERO_SUFFIX))
    return maps
