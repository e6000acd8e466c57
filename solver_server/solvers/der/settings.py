"""The DER solver's settings: NewtonSettings (the implicit step's Newton loop) and ContactSettings (hair–hair and
hair–collider contact). The dataclass defaults are the seed's algorithm (Algorithms 2–3: Jacobi local step,
detection after the first iteration); a scene's hair object starts from ``SCENE_NEWTON_DEFAULTS`` and
``SCENE_CONTACT_DEFAULTS`` instead (the settings the scene-level solver is tuned and tested with, group.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class NewtonSettings:
    max_iterations: int = 50
    tolerance: float = 1e-6          # mean |Δv| over the vertex velocity components [m/s] that ends the iteration
    quasi_newton: bool = True
    # matrix of the quasi-Newton variant: "exact" (first-iteration Hessian, seed §3.3) or "gauss_newton"
    # (Σ w ∇s∇sᵀ over the strains: positive semi-definite and about as cheap as a gradient)
    quasi_newton_matrix: str = "exact"
    # quasi-Newton: refactor the matrix at the current iterate every this many iterations (0: never, the
    # seed's variant). Stiff stretching makes the first-iteration matrix stale once edges rotate in a step.
    refresh_interval: int = 0
    # search along the length-preserving path (retraction.py) instead of the straight line, on strands
    # without contact impulses: turning edges no longer stretch the trial points, 2-3× fewer iterations at
    # frame-rate steps, same solution
    length_preserving_path: bool = True
    # when contacts are detected (CCD from x_t along the step) and the impulse loop starts: None = after the
    # first iteration (seed Algorithm 2); a value [m/s] = once the free motion's mean |Δv| is below it (or
    # after contact_detection_iterations).  At frame-rate steps the first iterate is far from the end-of-step
    # motion: contacts found along it are the wrong ones, and resolving them while the strands still turn
    # costs tens of iterations
    contact_detection_tolerance: float | None = None
    contact_detection_iterations: int = 8
    armijo: float = 1e-4
    backtrack: float = 0.5
    max_backtracks: int = 10


@dataclass
class ContactSettings:
    friction: float = 0.3                     # hair–hair μ
    collider_friction: float | None = None    # hair–collider μ (averaged with the collider's own `friction`)
    thickness: float = 0.0                    # extra contact distance [m] added to the hair radii
    self_collision: bool = True
    # pairs closer than (1 + proximity) × contact distance during the step join the contact set (a slack
    # contact carries no impulse, but it is there when the other contacts' impulses push the pair together)
    proximity: float = 0.5
    # local response of a contact: "rigid_rod" (seed eq. 3.3: each edge a rigid rod, a vertex a point mass) or
    # "delassus" (exact response J A⁻¹ Jᵀ of the factorized global system, from the band of A⁻¹)
    response: str = "delassus"
    # the global/local loop also continues while a contact predicts a deeper penetration than this fraction
    # of the hair radius (the smaller one for a pair; seed: mean |Δv| only)
    penetration_tolerance: float = 0.02
    # a pair of edges that the settled contact loop's end positions put deeper than this fraction of the
    # smaller radius inside its contact distance gets a contact there and the loop goes on (StepContacts.relinearize)
    end_penetration_tolerance: float = 0.1
    # continuous collision detection of vertices against colliders on the first iteration (collider_ccd.py);
    # off: colliders are only tested at the predicted end positions (a fast vertex can pass a thin collider)
    collider_ccd: bool = True
    # [m/s] a vertex inside a collider's solid (a groom that starts through the ground or a body) is pushed out
    # at most this fast relative to the surface, so it comes out over a few frames with its strand instead of
    # every such vertex jumping onto the surface at once (which folds the strand's segments to zero length)
    recovery_speed: float = 0.5
    # the local step after each global step: "jacobi" (seed Algorithm 3: one step per contact, all at once,
    # with `response`) or "gauss_seidel" (the contact problem of the linear model u = u_now + W Δλ with the
    # exact Delassus operator W = J A⁻¹ Jᵀ solved by projected Gauss–Seidel sweeps, contact_space.py)
    local_solver: str = "jacobi"
    gauss_seidel_sweeps: int = 50
    # the sweeps stop once no contact's relative velocity changes in a sweep by more than this fraction of
    # the velocity that would move it by penetration_tolerance × radius over the step
    gauss_seidel_tolerance: float = 0.1
    # at most this many colours (sequential updates per sweep); contacts beyond share colours with
    # neighbours and step with their block scaled by the number sharing (contact_space.py)
    gauss_seidel_colours: int = 24


# what a scene's DER hair runs with where its ``scene.solver["der"]`` does not say otherwise: quasi-Newton on
# the Gauss–Newton matrix refreshed every 4 iterations (docs/der.md §3), contacts detected once the free motion
# settles, and the Gauss–Seidel contact solve (it converges where the seed's Jacobi step ends dense substeps at
# N_max)
SCENE_NEWTON_DEFAULTS = {"quasi_newton_matrix": "gauss_newton", "refresh_interval": 4,
                         "contact_detection_tolerance": 1e-4}
SCENE_CONTACT_DEFAULTS = {"response": "delassus", "local_solver": "gauss_seidel"}
