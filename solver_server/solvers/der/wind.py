"""Wind on DER hair: the wind pushes a strand across itself.

For a hair object with wind w(t) = direction · (strength + amplitude · sin(2π t / period)) [m/s²]
(``solvers/wind.py``, the field the fast hair models and cloth take), a vertex with unit tangent t̂ (the
normalized sum of its edges' tangents at the start of the step) takes the component across the strand,

    a = w − (w · t̂) t̂,

the way air flowing past a thin cylinder pushes it: a strand along the wind feels none, a strand across
it all. The acceleration is explicit (tangents at the start of the step) and enters the implicit Euler step
as an external force M a beside gravity. The vertex tangents (``vertex_tangents``) serve the air drag too.
"""

from __future__ import annotations

import numpy as np

from ..wind import WindField, WindSettings


class StrandWind:
    """Per-vertex wind of the strands of one DER solver (several hair objects merged).

    winds: one WindSettings per hair object; vertex_object (N,) the object of every vertex."""

    def __init__(self, xp, winds: list[WindSettings], vertex_object: np.ndarray):
        self.xp = xp
        self.field = WindField(xp, winds, vertex_object)

    @classmethod
    def of_objects(cls, xp, winds: list[WindSettings], vertex_counts) -> "StrandWind | None":
        """The wind of hair objects with ``vertex_counts`` vertices each, or None when none has any."""
        if not any(wind.blows for wind in winds):
            return None
        return cls(xp, winds, np.repeat(np.arange(len(winds)), vertex_counts))

    def acceleration(self, unit_tangents, time: float):
        """Wind acceleration (N, 3) [m/s²] of every vertex for its unit tangent (N, 3) (``vertex_tangents``) at
        ``time`` [s]."""
        xp = self.xp
        wind = self.field.vectors(time)
        return wind - xp.sum(wind * unit_tangents, axis=1)[:, None] * unit_tangents


def vertex_tangents(xp, tangents, edge_vertex, n_vertices: int):
    """Unit tangent (N, 3) of every vertex: the normalized sum of the unit tangents (E, 3) of the edges that
    start (edge_vertex (E,)) or end at it."""
    along = xp.zeros((n_vertices, 3), dtype=tangents.dtype)
    along[edge_vertex] += tangents          # each vertex starts at most one edge ...
    along[edge_vertex + 1] += tangents      # ... and ends at most one: no repeated index per update
    length = xp.sqrt(xp.sum(along * along, axis=1))
    return along / xp.maximum(length, 1e-300)[:, None]
