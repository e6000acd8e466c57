"""Drag of still air on a hair strand: a thin circular cylinder moving across itself.

A strand of radius r [m] moving with velocity v [m/s] feels per unit length the drag of a cylinder in
cross-flow at its speed across the strand, v⊥ = |v − (v·t̂) t̂| (t̂ the unit tangent):

    f = ½ ρ_air v⊥² (2r) C_d(Re) = ½ ρ_air ν · (Re C_d) · v⊥,        Re = 2 r v⊥ / ν,

against the motion. C_d(Re) is White's correlation C_d = 1 + 10 Re^(−2/3) (Viscous Fluid Flow, 1991;
1 ≤ Re ≤ 2·10⁵) and below Re = 1 Lamb's Oseen solution C_d = 8π / (Re (2.002 − ln Re)) scaled to meet White's
at Re = 1, so the drag is continuous in the speed. A strand of linear density λ [kg/m] then slows at the rate

    c = air_drag · ½ ρ_air ν (Re C_d) / λ        [1/s],    v̇ = −c v,

which the solvers take implicitly with c lagged from the start of the step (v ← v / (1 + c h)). The rate is
applied to the whole velocity: a strand sliding along itself (t̂ ∥ v) takes the low-Re rate of v⊥ ≈ 0. For a
hair of r = 0.1 mm and 1300 kg/m³: c ≈ 8 /s at 1 m/s, 3 /s at 12 cm/s, and a horizontal strand falls at about
1.1 m/s; fine hair (r = 0.05 mm) drifts down at about 0.57 m/s.
"""

from __future__ import annotations

import math

import warp as wp

wp.set_module_options({"enable_backward": False})   # forward only: no gradients are taken

AIR_DENSITY = 1.204
"""kg/m³: dry air at 20 °C and sea-level pressure."""
AIR_KINEMATIC_VISCOSITY = 1.516e-5
"""m²/s: dry air at 20 °C."""
LAMB_SCALE = 11.0 / (8.0 * math.pi / 2.002)
"""Lamb's Re·C_d scaled to White's value 11 at Re = 1."""
SMALLEST_REYNOLDS = 1.0e-12
"""Re floor for Lamb's logarithm (a strand at rest)."""

_VISCOSITY = wp.constant(wp.float64(AIR_KINEMATIC_VISCOSITY))
_HALF_DENSITY_VISCOSITY = wp.constant(wp.float64(0.5 * AIR_DENSITY * AIR_KINEMATIC_VISCOSITY))
_LAMB_NUMERATOR = wp.constant(wp.float64(LAMB_SCALE * 8.0 * math.pi))
_SMALLEST_REYNOLDS = wp.constant(wp.float64(SMALLEST_REYNOLDS))


@wp.func
def drag_number(reynolds: wp.float64) -> wp.float64:
    """Re·C_d of a circular cylinder in cross-flow at Reynolds number ``reynolds`` (the module docstring)."""
    if reynolds >= wp.float64(1.0):
        return reynolds + wp.float64(10.0) * wp.pow(reynolds, wp.float64(1.0) / wp.float64(3.0))
    slow = wp.max(reynolds, _SMALLEST_REYNOLDS)
    return _LAMB_NUMERATOR / (wp.float64(2.002) - wp.log(slow))


@wp.func
def air_drag_rate(velocity: wp.vec3d, tangent: wp.vec3d, radius: wp.float64, linear_density: wp.float64,
                  scale: wp.float64) -> wp.float64:
    """Drag rate c [1/s] of a strand point moving at ``velocity`` [m/s] along the unit ``tangent`` (zero: no
    direction known, the whole speed counts as across), of ``radius`` [m] and ``linear_density`` [kg/m]
    (≤ 0: a point without mass, rate 0), times ``scale`` (the air_drag setting)."""
    if linear_density <= wp.float64(0.0) or scale <= wp.float64(0.0):
        return wp.float64(0.0)
    across = velocity - wp.dot(velocity, tangent) * tangent
    reynolds = wp.float64(2.0) * radius * wp.length(across) / _VISCOSITY
    return scale * _HALF_DENSITY_VISCOSITY * drag_number(reynolds) / linear_density


@wp.kernel
def air_drag_rates(velocities: wp.array(dtype=wp.vec3d), tangents: wp.array(dtype=wp.vec3d),
                   radius: wp.array(dtype=wp.float64), linear_density: wp.array(dtype=wp.float64),
                   scale: wp.array(dtype=wp.float64), rates: wp.array(dtype=wp.float64)):
    """rates[i] = air_drag_rate of point i (every array (N,) per point)."""
    i = wp.tid()
    rates[i] = air_drag_rate(velocities[i], tangents[i], radius[i], linear_density[i], scale[i])
