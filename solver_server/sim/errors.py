"""Errors raised while building or running a simulation.

Both carry the id of the scene object they concern (``object``) so the server can
forward it in its ``error`` message; ``SimulationError`` also carries the frame.
"""

from __future__ import annotations


class SceneError(ValueError):
    """The submitted scene is invalid (bad arrays, unknown or absurd parameters)."""

    def __init__(self, message: str, object: str | None = None):
        self.message = message
        self.object = object
        prefix = f"object {object!r}: " if object is not None else ""
        super().__init__(prefix + message)


class SimulationError(RuntimeError):
    """The simulation failed while advancing (NaN/Inf, missing drive data, divergence)."""

    def __init__(self, message: str, object: str | None = None, frame: int | None = None):
        self.message = message
        self.object = object
        self.frame = frame
        where = []
        if object is not None:
            where.append(f"object {object!r}")
        if frame is not None:
            where.append(f"frame {frame}")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)
