"""The one place that finds the ``protocol`` package.

Inside the built extension zip it is vendored next to this file as ``<extension>/protocol/``
(imported relatively, because Blender loads extensions as ``bl_ext.<repo>.tangle``); in the source
tree it is the top-level ``protocol`` package. Blender-free.
"""

from __future__ import annotations

import importlib
import importlib.util

_VENDORED = f"{__package__}.protocol"

PROTOCOL_PACKAGE = _VENDORED if importlib.util.find_spec(_VENDORED) is not None else "protocol"

SolverError = importlib.import_module(f"{PROTOCOL_PACKAGE}.errors").SolverError


def solver_client_class():
    """``protocol.client.SolverClient`` (imported on first use: it needs pyzmq)."""
    return importlib.import_module(f"{PROTOCOL_PACKAGE}.client").SolverClient
