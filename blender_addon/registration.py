"""The ``classes`` tuple and (un)registration of the Tangle extension (needs bpy)."""

import bpy

from . import properties
from .operators.bake import TANGLE_OT_bake, TANGLE_OT_cancel_bake
from .operators.connection import TANGLE_OT_test_connection
from .operators.free import TANGLE_OT_free_bake
from .panels import TANGLE_PT_bake, TANGLE_PT_object

classes = properties.classes + (
    TANGLE_OT_bake,
    TANGLE_OT_cancel_bake,
    TANGLE_OT_free_bake,
    TANGLE_OT_test_connection,
    TANGLE_PT_object,
    TANGLE_PT_bake,
)


def register() -> None:
    for cls in classes:
        bpy.utils.register_class(cls)
    properties.attach()


def unregister() -> None:
    properties.detach()
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
