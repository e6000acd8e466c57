"""Blender-free logic of the Tangle add-on (no ``import bpy`` anywhere in this package).

Everything here works on numpy arrays and plain Python values so it can be tested with plain pytest
and reused by pipeline scripts that bake without Blender.
"""
