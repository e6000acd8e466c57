"""Writes tests/data/suzanne.npz: Blender's Suzanne (``bpy.ops.mesh.primitive_monkey_add``, triangulated,
size 2 m, object space) as exported by real bpy. Run with the project's venv:
``.venv/bin/python tests/data/export_suzanne.py``. Kept in the repository so the contact tests need no bpy."""

from pathlib import Path

import bpy  # noqa: I001  (bpy first: it puts bmesh on the path)
import bmesh
import numpy as np

bpy.ops.wm.read_factory_settings(use_empty=True)
bpy.ops.mesh.primitive_monkey_add(size=2.0)
mesh = bpy.context.active_object.data
work = bmesh.new()
work.from_mesh(mesh)
bmesh.ops.triangulate(work, faces=work.faces[:])
work.to_mesh(mesh)
work.free()
vertices = np.array([v.co[:] for v in mesh.vertices], np.float64)
triangles = np.array([p.vertices[:] for p in mesh.polygons], np.int32)
np.savez_compressed(Path(__file__).with_name("suzanne.npz"), vertices=vertices, triangles=triangles)
print(vertices.shape, triangles.shape)
