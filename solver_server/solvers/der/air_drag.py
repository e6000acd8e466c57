"""Air drag on DER hair: every free vertex slows at the drag rate of still air on its stretch of strand
(``kernels/air.py``), taken as extra mass-proportional damping of its position DOFs in the implicit step,
with the rate lagged from the step's start velocities. Twist DOFs keep the object's damping only."""

from __future__ import annotations

import numpy as np

from ..air_drag import StrandAirDrag
from .model import DerModel


class DerAirDrag:
    """The air drag of the vertices of one DER model (several hair objects merged). scale (N,): each vertex's
    object's air_drag setting."""

    def __init__(self, xp, model: DerModel, scale):
        self.xp = xp
        self.model = model
        half = 0.5 * model.rest_edge_length
        vertex_length = xp.zeros(model.n_vertices)
        vertex_length[model.edge_vertex] += half            # each vertex starts at most one edge ...
        vertex_length[model.edge_vertex + 1] += half        # ... and ends at most one
        weighted_radius = xp.zeros(model.n_vertices)
        weighted_radius[model.edge_vertex] += half * model.edge_radius
        weighted_radius[model.edge_vertex + 1] += half * model.edge_radius
        covered = vertex_length > 0.0
        safe_length = xp.where(covered, vertex_length, 1.0)
        self.points = StrandAirDrag(xp, xp.where(covered, weighted_radius / safe_length, 0.0),
                                    xp.where(covered, model.vertex_mass / safe_length, 0.0), scale)

    @classmethod
    def of_objects(cls, xp, model: DerModel, scales: list[float], vertex_counts) -> "DerAirDrag | None":
        """The drag of hair objects with air_drag ``scales`` and ``vertex_counts`` vertices each, or None when
        every scale is 0."""
        if not any(scale > 0.0 for scale in scales):
            return None
        return cls(xp, model, xp.asarray(np.repeat(np.asarray(scales, np.float64), vertex_counts)))

    def dof_rates(self, velocities, unit_tangents):
        """Drag rate (n_dofs,) [1/s]: the vertices' rates (velocities (N, 3) [m/s], unit vertex tangents (N, 3),
        ``wind.vertex_tangents``) on their position DOFs, 0 on the twist DOFs."""
        xp, model = self.xp, self.model
        rates = self.points.rates(velocities, unit_tangents)
        per_dof = xp.zeros(model.n_dofs)
        per_dof[model.position_dofs] = rates[:, None]
        return per_dof
