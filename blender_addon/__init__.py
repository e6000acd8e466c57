"""Tangle Blender extension: hair, cloth and soft bodies simulated by the Tangle solver server.

This module only registers. The bpy-dependent modules are imported inside ``register()`` so that
``blender_addon.core`` (Blender-free logic) can be imported and tested without Blender; the
``classes`` tuple lives in ``registration.py``.
"""


def register():
    from . import registration

    registration.register()


def unregister():
    from . import registration

    registration.unregister()
