"""Air drag of hair strands on the solver's device: the per-point rates of ``kernels/air.py`` for the strand
solvers that take them as a velocity decay (DER's damping, the Cosserat nodes' drag force); particle hair
evaluates the same device function inside its own substep kernel."""

from __future__ import annotations

import warp as wp

from ..kernels import launch, warp_device_of, warp_view
from ..kernels.air import air_drag_rates


class StrandAirDrag:
    """Drag rates of N strand points: radius (N,) [m], linear_density (N,) [kg/m] (0 for points without mass),
    scale (N,) the air_drag setting of each point's object; all on ``xp``'s device."""

    def __init__(self, xp, radius, linear_density, scale):
        self.xp = xp
        columns = [xp.ascontiguousarray(xp.asarray(values, dtype=xp.float64)) for values in (radius, linear_density,
                                                                                            scale)]
        self.count = columns[0].shape[0]
        self.device = warp_device_of(columns[0])
        self._columns = columns                      # the arrays the views point into, kept alive
        self._views = [warp_view(values, wp.float64) for values in columns]

    def rates(self, velocities, tangents):
        """Drag rate (N,) [1/s] of every point at velocities (N, 3) [m/s] with unit tangents (N, 3) (zero rows:
        no direction, the whole speed counts as across the strand)."""
        xp = self.xp
        rates = xp.empty(self.count, dtype=xp.float64)
        launch(air_drag_rates, rates.shape[0], [warp_view(xp.ascontiguousarray(velocities), wp.vec3d),
                                                warp_view(xp.ascontiguousarray(tangents), wp.vec3d), *self._views,
                                                warp_view(rates, wp.float64)], self.device)
        return rates
