"""``scene["solver"]["pd"]`` settings: names, defaults, validation."""

from __future__ import annotations

from ...sim.errors import SceneError

GLOBAL_SOLVERS = ("cholesky", "jacobi", "a_jacobi")

DEFAULTS = {
    "iterations": 10,          # local/global iterations per substep (seed: 2 … 10)
    "global": "cholesky",      # "cholesky" | "jacobi" | "a_jacobi"
    "order": 1,                # A-Jacobi order l (1 … 3); "jacobi" forces 1
    "jacobi_iterations": 30,   # Jacobi sweeps per global step
    "chebyshev_start": 10,     # S
    "gamma": 0.9,              # γ under-relaxation
    "rho": None,               # ρ spectral radius estimate of Rˡ (None: power iteration)
    "self_collision_iterations": 6,
    "contact_forces": True,    # collider contact (and friction) as forces inside the iterations
    "strain_limit_iterations": 16,   # Jacobi passes of the hard cloth edge limit per call; 0 disables it
    "strain_limit_slack": 0.02,      # hard limit: no cloth edge longer than max(σmax, 1 + slack) × rest length
    "strain_limit_global": True,     # each round of limit passes starts with a solve through the PD factor
    "pin_stiffening_rings": 8,       # cloth edges within this many hops of an exact pin are stiffened (0/1: off)
}


def resolve_pd_settings(settings: dict | None) -> dict:
    """Validate and fill defaults; raises SceneError naming the bad key."""
    settings = dict(settings or {})
    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        raise SceneError(f"unknown solver.pd setting {unknown[0]!r}; valid: {sorted(DEFAULTS)}")
    out = {**DEFAULTS, **settings}

    def integer(key, low, high):
        value = out[key]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise SceneError(f"solver.pd.{key} must be an integer in {low}..{high}, got {value!r}")

    integer("iterations", 1, 1000)
    integer("order", 1, 3)
    integer("jacobi_iterations", 1, 10000)
    integer("chebyshev_start", 0, 10000)
    integer("self_collision_iterations", 0, 100)
    integer("strain_limit_iterations", 0, 10000)
    integer("pin_stiffening_rings", 0, 1000)
    slack = out["strain_limit_slack"]
    if isinstance(slack, bool) or not isinstance(slack, (int, float)) or not 0 <= slack <= 10:
        raise SceneError(f"solver.pd.strain_limit_slack must be a number in [0, 10], got {slack!r}")
    if not isinstance(out["strain_limit_global"], bool):
        raise SceneError("solver.pd.strain_limit_global must be true or false")
    if not isinstance(out["contact_forces"], bool):
        raise SceneError("solver.pd.contact_forces must be true or false")
    if out["global"] not in GLOBAL_SOLVERS:
        raise SceneError(f"solver.pd.global must be one of {list(GLOBAL_SOLVERS)}, got {out['global']!r}")
    if not isinstance(out["gamma"], (int, float)) or not 0 < out["gamma"] <= 2:
        raise SceneError(f"solver.pd.gamma must be in (0, 2], got {out['gamma']!r}")
    if out["rho"] is not None and (not isinstance(out["rho"], (int, float)) or not 0 <= out["rho"] < 1):
        raise SceneError(f"solver.pd.rho must be in [0, 1), got {out['rho']!r}")
    if out["global"] == "jacobi":
        out["order"] = 1
    return out
