"""Implicit Euler in velocity form for all strands (seed 000 §2.2, §3.3, Algorithm 2).

Per step of length h, with q_t the generalized coordinates (positions and twist angles) and M the diagonal
generalized mass:

    g(v) = ½ (v − ṽ)ᵀ M (v − ṽ) + ½ h c vᵀ M v + E(q_t + h v),      ṽ = v_t + h M⁻¹ f_ext + M⁻¹ I
    ∇g   = M (v − ṽ) + h c M v + h ∇E,       ∇²g = (1 + h c) M + h² ∇²E

c is the mass-proportional damping [1/s] and I the generalized contact impulse of the current iteration.
Each iteration takes one (quasi-)Newton step with backtracking (Armijo) line search; kinematic DOFs
(clamped roots, pins) keep their prescribed velocities.  With `quasi_newton` the Hessian of the first
iteration is factorized once and reused (seed §3.3).  A contact handler (contact.py) may update I after
every global step (seed Algorithm 2 lines 10-13).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from .banded import BandedCholesky, NotPositiveDefinite, constrain_band, strand_blocks_of_model
from .energy import Configuration, elastic_gradient_hessian, strand_energy_and_gradient
from .frames import normalize_rows
from .model import DerModel, element_subset
from .retraction import LengthPreservingPath
from .settings import NewtonSettings
from .state import DerState, transported_configuration


# the line search evaluates only the strands it still searches when they are fewer than this fraction
SUBSET_FRACTION = 0.5
# a quasi-Newton matrix counts as stale once full steps decrease g by more than this × its predicted decrease
# (an exact matrix on a quadratic gives 1; one twice too stiff gives 1.5)
STALE_DECREASE_RATIO = 1.25
# with refreshes on, a matrix whose full step fewer than this fraction of the searched strands accept, when
# they are at least SUBSET_FRACTION of all strands, is refactored at once and the search restarts along the
# new direction (backtracking along a direction the stale matrix got wrong cost 3-4 more evaluations of most
# strands and a short step; with fewer strands searching, backtracking evaluates only them and is cheaper
# than a refactorization and, in contact, a new Delassus operator)
FULL_STEP_FRACTION = 0.8
# a strand without contact impulses whose last accepted step changed its vertex velocities by less than this
# fraction of the tolerance (mean |Δv| over its own vertices) has settled and is no longer searched: given the
# impulses the strands are independent, so its remaining (linearly converging) corrections stay below the
# tolerance, while searching it kept every line search and refactorization system-wide
SETTLED_FRACTION = 0.1
# Gauss–Newton matrix: the bend–twist part is assembled at a step's first factorization and kept by the
# step's refreshes, which reassemble only the stretch part.  A matrix goes stale within a step through its
# stretch blocks (k/l t tᵀ: at frame-rate substeps k/l is ~4e6 × the inertia M/h² of the 1 000 × 20 benchmark
# hair, so edges turning by a microradian already matter), while the bend–twist blocks (EI/l³ ≈ 76 × M/h²)
# change little: same iterations, 11–18 % less time per step (docs/der.md §7)
KEEP_BEND_TWIST_BAND = True
# with at most this many contacts in the step, a matrix that took a step is refreshed at the next refresh
# iteration even when it is not stale: a Gauss–Newton matrix at the current iterate converges in about half
# the iterations (benchmark hair: 14 -> 7 per substep at ~50 contacts, 5-7 -> 5 without contact), and a
# refresh costs one stretch assembly and LAPACK factorization (~20 ms at 83 000 DOF) plus a Delassus operator
# of the contacts; above ~500 contacts the operators cost more than the iterations saved (+10 % at ~650, +14 %
# at ~1 800; docs/der.md §7)
CHEAP_REFRESH_CONTACTS = 400
# times a step's contact loop, once its set predicts no penetration, writes its contacts again at the end
# positions it predicts (StepContacts.relinearize) and goes on, when pairs of edges there are closer than their
# contact distance or a vertex's path there reaches a collider (each set's end positions are checked once)
MAX_RELINEARIZATIONS = 2


@dataclass
class SoftPins:
    """Zero-length springs E = ½ k ‖x − x̂‖² (seed §4.1) on vertex coordinates.

    vertices (P,): pinned vertices; dofs (P, 3): their DOF indices; stiffness (P,) [N/m]; targets (P, 3) [m]
    at the end of the step."""
    vertices: Any
    dofs: Any
    stiffness: Any
    targets: Any

    def strand_energy(self, xp, q, vertex_strand_of_pin, n_strands):
        """Spring energy per strand (S,) [J]."""
        offset = q[self.dofs] - self.targets
        return xp.bincount(vertex_strand_of_pin, weights=0.5 * self.stiffness * xp.sum(offset * offset, axis=1),
                           minlength=n_strands)


class ImpulseHandler(Protocol):
    def set_system(self, factor: BandedCholesky) -> None:
        """The factorized system matrix of the global steps from now on (its inverse is the contacts'
        response); called after every factorization."""

    def resolve_on_new_system(self) -> Any:
        """The impulses of the last round solved again on the factor just set (same measured velocities):
        generalized impulse (n_dofs,), or None when the handler does not solve on the factor's response."""

    def update(self, iteration: int, velocity_before, velocity_after) -> Any:
        """Generalized impulse (n_dofs,) [kg·m/s] to use in the next global step (None: no contact).
        iteration counts the contact rounds: 0 detects the contacts along velocity_after."""

    def converged(self) -> bool:
        """Whether the contacts accept ending the iteration."""

    @property
    def resolves_each_round(self) -> bool:
        """Whether every update solves the contact problem of the measured velocities anew (so strands it
        pushes may follow the length-preserving path), rather than taking one local step."""

    @property
    def contact_count(self) -> int:
        """Contacts of the step so far (0 before the detection)."""

    @property
    def checks_end_positions(self) -> bool:
        """Whether ``relinearize`` has anything to test at the end positions (a contact, or a collider)."""

    def keep_outside(self, positions, velocities):
        """The step's end positions (N, 3) [m] and velocities (N, 3) [m/s] corrected where a vertex or an edge
        still crosses a collider (a failsafe after the contact loop), or None when nothing crosses."""


@dataclass
class StepStats:
    iterations: int = 0
    mean_dv: float = 0.0
    factorizations: int = 0
    partial_factorizations: int = 0   # of them, refactorizations of the strands still moving only
    projected_hessian: bool = False
    line_search_fallbacks: int = 0   # line searches that failed (matrix refreshed, or iteration stopped)
    early_refreshes: int = 0         # refactorizations because most strands refused a stale matrix's full step
    bend_twist_assemblies: int = 0   # of the factorizations, those that assembled the bend-twist part too
    settled_strands: int = 0         # strands no longer searched at the end of the step (SETTLED_FRACTION)
    smallest_step: float = 1.0
    relinearizations: int = 0        # times the settled contact set was written again at the end positions
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"iterations": self.iterations, "mean_dv": self.mean_dv, "factorizations": self.factorizations,
                "partial_factorizations": self.partial_factorizations,
                "projected_hessian": self.projected_hessian, "line_search_fallbacks": self.line_search_fallbacks,
                "early_refreshes": self.early_refreshes, "settled_strands": self.settled_strands,
                "bend_twist_assemblies": self.bend_twist_assemblies,
                "smallest_step": self.smallest_step, "relinearizations": self.relinearizations,
                **self.extra}


class KeptBendTwistBand:
    """The bend–twist part of one step's Gauss–Newton matrix (lower band (11, n_dofs), elastic, unscaled),
    assembled at the step's first factorization and reused by its refreshes (KEEP_BEND_TWIST_BAND)."""

    def __init__(self):
        self.band = None


class ImplicitEulerSolver:
    """Velocity-form implicit Euler with (quasi-)Newton iterations over the whole banded system."""

    def __init__(self, xp, to_host, from_host, model: DerModel, settings: NewtonSettings):
        if settings.quasi_newton_matrix not in ("exact", "gauss_newton"):
            raise ValueError(f"quasi_newton_matrix must be 'exact' or 'gauss_newton', got {settings.quasi_newton_matrix!r}")
        self.xp = xp
        self._to_host = to_host
        self._from_host = from_host
        self.model = model
        self.settings = settings
        dof_strand = xp.zeros(model.n_dofs, dtype=xp.int64)
        dof_strand[model.position_dofs] = model.vertex_strand[:, None]
        dof_strand[model.edge_dof] = model.edge_strand
        self.dof_strand = dof_strand
        self.strand_vertex_dofs = 3.0 * (model.strand_offsets[1:] - model.strand_offsets[:-1])   # (S,)
        self.blocks = strand_blocks_of_model(xp, to_host, model)   # the strands' independent blocks of the band

    def _factor(self, config, h, fixed_dofs, stats: StepStats, soft_pins: SoftPins | None = None,
                exact: bool = False, previous: BandedCholesky | None = None, strands=None,
                kept: KeptBendTwistBand | None = None):
        """Factor of the system matrix at `config`.  With a previous factor (LAPACK path) and a mask strands
        (S,) of fewer than SUBSET_FRACTION of the strands, only those strands' blocks are assembled and
        refactored; the others keep their previous (converged, unused) blocks.  kept: the step's bend–twist
        band of a Gauss–Newton matrix (assembled here if it has none yet; then only the stretch part is)."""
        xp, model = self.xp, self.model
        subset = None
        if previous is not None and strands is not None and not previous.on_xp_path \
                and int(strands.sum()) < SUBSET_FRACTION * model.n_strands:
            subset = element_subset(xp, model, strands)
        diagonal = (1.0 + h * model.damping) * model.mass
        if soft_pins is not None:
            diagonal = diagonal.copy()
            diagonal[soft_pins.dofs.ravel()] += h * h * xp.repeat(soft_pins.stiffness, 3)
        gauss_newton = (self.settings.quasi_newton and self.settings.quasi_newton_matrix == "gauss_newton"
                        and not exact)
        for project in (False, True):
            if gauss_newton and kept is not None and KEEP_BEND_TWIST_BAND and not project:
                if kept.band is None:
                    _, kept.band = elastic_gradient_hessian(xp, model, config, gauss_newton=True,
                                                            parts=("bend_twist",))
                    stats.bend_twist_assemblies += 1
                _, band = elastic_gradient_hessian(xp, model, config, gauss_newton=True, subset=subset,
                                                   parts=("stretch",))
                band += kept.band
            else:
                _, band = elastic_gradient_hessian(xp, model, config, with_hessian=True, project=project,
                                                   gauss_newton=gauss_newton, subset=subset)
                stats.bend_twist_assemblies += 1
            band *= h * h
            band[0] += diagonal
            constrain_band(xp, band, fixed_dofs)
            try:
                if subset is None:
                    factor = BandedCholesky(xp, band, self.blocks, self._to_host, self._from_host)
                else:
                    factor = previous.refactored(band, self._to_host(strands))
                    stats.partial_factorizations += 1
            except NotPositiveDefinite:
                continue
            stats.factorizations += 1
            stats.projected_hessian = stats.projected_hessian or project
            return factor
        raise NotPositiveDefinite("system matrix not positive definite even with projected Hessians"
                                  + _degeneracy_report(xp, model, config, band))

    def _refactor(self, config, h, fixed_dofs, stats: StepStats, soft_pins, previous, moving, impulses, kept):
        """(factor of the matrix at `config` (see _factor), the contact handler's impulses solved again on it or
        None).  The factor is handed to the contact handler: the contacts' response J A⁻¹ Jᵀ must be that of
        the matrix the global steps use (a response left from an older matrix over- or under-shoots once edges
        have turned), and impulses it solved on the older response are solved again before a step applies
        them."""
        factor = self._factor(config, h, fixed_dofs, stats, soft_pins, previous=previous, strands=moving, kept=kept)
        resolved = None
        if impulses is not None:
            impulses.set_system(factor)
            resolve = getattr(impulses, "resolve_on_new_system", None)
            resolved = None if resolve is None else resolve()
        return factor, resolved

    def _line_search(self, factor, gradient, fixed_dofs, v, target, current, point, evaluate, objective,
                     path=None, least_full_fraction=None, settled=None):
        """Backtracking Armijo search along d = −A⁻¹∇g, separately for every strand (g is a sum over strands).

        point: (potential (S,), elastic gradient (n_dofs,), configuration) at v; evaluate(v) gives the same
        triple at a trial velocity.  Returns (alphas (S,), direction, the triple at the accepted step, merged
        strand by strand, accepted (S,) bool, the accepted velocities (n_dofs,)).  A strand whose direction is
        not a descent direction (converged, or all kinematic) is accepted with α = 0; a strand that finds no
        decrease is not accepted and gets α = 0; both keep their part of `point`, so nothing is evaluated
        again after the search.  path: (LengthPreservingPath, strands (S,) bool it bends) or None (straight).
        least_full_fraction: if fewer than this fraction of the searched strands accept the full step while
        they are at least SUBSET_FRACTION of all strands, the search gives up at once and returns None (the
        caller refactors the matrix).  settled: (S,) bool strands not searched (accepted with α = 0)."""
        xp, settings, model = self.xp, self.settings, self.model
        direction = -factor.solve(gradient)
        direction[fixed_dofs] = 0.0
        if not bool(xp.all(xp.isfinite(direction))):
            raise FloatingPointError("non-finite Newton direction in the DER solver")
        slope = xp.bincount(self.dof_strand, weights=gradient * direction, minlength=model.n_strands)
        # an expected decrease below the objective's round-off cannot pass Armijo: such a strand has
        # converged, keeps its velocities (α = 0) and is not searched (saves 10 system-wide backtracks)
        searching = (slope < 0.0) & (-slope > 1e-12 * xp.abs(current))
        if settled is not None:
            searching &= ~settled
        alpha = xp.where(searching, 1.0, 0.0)
        accepted = ~searching
        accepted_v = v
        start_edges = None if path is None else path[0].edges_at(v)
        for _ in range(settings.max_backtracks):
            if not bool(searching.any()):
                break
            trial_v = v + alpha[self.dof_strand] * direction
            if path is not None:
                trial_v = path[0].bend(trial_v, start_edges, path[1] & searching)
            trial = evaluate(trial_v, searching, point)
            ok = searching & (objective(trial_v, target, trial[0]) <= current + settings.armijo * alpha * slope)
            if least_full_fraction is not None:
                searched_strands = int(searching.sum())
                if searched_strands >= SUBSET_FRACTION * model.n_strands \
                        and int(ok.sum()) < least_full_fraction * searched_strands:
                    return None
                least_full_fraction = None
            point = self._merge(ok, trial, point)
            accepted_v = xp.where(ok[self.dof_strand], trial_v, accepted_v)
            accepted |= ok
            searching &= ~ok
            alpha = xp.where(searching, alpha * settings.backtrack, alpha)
        alpha = xp.where(accepted, alpha, 0.0)
        return alpha, slope, direction, point, accepted, accepted_v

    def _detect_now(self, iteration: int, mean_dv: float, moving: bool) -> bool:
        """Whether the contacts are detected after this iteration: the seed does it after the first; with a
        contact_detection_tolerance, once the free motion has converged to it (or after
        contact_detection_iterations, or once it has converged or stopped altogether)."""
        settings = self.settings
        if settings.contact_detection_tolerance is None:
            return True
        return (mean_dv < max(settings.contact_detection_tolerance, settings.tolerance) or not moving
                or iteration + 1 >= settings.contact_detection_iterations)

    def _merge(self, take, new, old):
        """(potential, elastic gradient, configuration) with the strands `take` (S,) from `new`, others `old`."""
        xp, model = self.xp, self.model
        if bool(take.all()):
            return new
        if not bool(take.any()):
            return old
        new_config, old_config = new[2], old[2]
        on_vertex, on_edge = take[model.vertex_strand], take[model.edge_strand]
        on_bend = on_vertex[model.bend_vertex]
        config = Configuration(positions=xp.where(on_vertex[:, None], new_config.positions, old_config.positions),
                               theta=xp.where(on_edge, new_config.theta, old_config.theta),
                               reference_u=xp.where(on_edge[:, None], new_config.reference_u, old_config.reference_u),
                               reference_twist=xp.where(on_bend, new_config.reference_twist,
                                                        old_config.reference_twist))
        return (xp.where(take, new[0], old[0]), xp.where(take[self.dof_strand], new[1], old[1]), config)

    def step(self, state: DerState, h: float, gravity, fixed_dofs, fixed_velocity,
             impulses: ImpulseHandler | None = None, soft_pins: SoftPins | None = None,
             acceleration=None) -> tuple[DerState, StepStats]:
        """Advance `state` by h [s].  gravity (3,) [m/s²]; fixed_dofs (F,) with velocities fixed_velocity (F,);
        acceleration: optional (N, 3) [m/s²] per-vertex external acceleration beside gravity (wind)."""
        xp, model, settings = self.xp, self.model, self.settings
        mass = model.mass
        q_t = model.pack(state.positions, state.theta)
        v_t = model.pack(state.velocities, state.theta_velocity)
        external = xp.zeros(model.n_dofs)
        external[model.position_dofs] = model.vertex_mass[:, None] * xp.asarray(gravity, dtype=q_t.dtype)
        if acceleration is not None:
            external[model.position_dofs] += model.vertex_mass[:, None] * acceleration
        free_velocity = v_t + h * external / mass
        impulse = xp.zeros(model.n_dofs)
        damping = h * model.damping

        def evaluate(v, strands=None, fill=None):
            """(potential per strand (S,) [J]: elastic energy plus the soft pins' springs; elastic gradient
            (n_dofs,); configuration) at q_t + h v.  strands (S,) bool with fill (a point): only those strands
            are evaluated (the others' parts are meaningless), worth it when few strands still move."""
            q = q_t + h * v
            subset = None
            if strands is not None and int(strands.sum()) < SUBSET_FRACTION * model.n_strands:
                subset = element_subset(xp, model, strands)
            config = transported_configuration(xp, model, state, model.gather_positions(q), model.gather_theta(q),
                                               subset, None if subset is None else fill[2])
            energy, elastic_gradient = strand_energy_and_gradient(xp, model, config, subset)
            if soft_pins is not None:
                pin_strands = model.vertex_strand[soft_pins.vertices]
                energy = energy + soft_pins.strand_energy(xp, q, pin_strands, model.n_strands)
            return energy, elastic_gradient, config

        def objective(v, target, potential_per_strand):
            """g(v) per strand (S,): the strands are independent given the impulses, so each gets its own
            line search (one buckling strand does not shorten every other strand's step)."""
            difference = v - target
            kinetic = 0.5 * mass * (difference * difference + damping * v * v)
            return xp.bincount(self.dof_strand, weights=kinetic, minlength=model.n_strands) + potential_per_strand

        v = v_t.copy()
        v[fixed_dofs] = fixed_velocity
        path = LengthPreservingPath(xp, model, state.positions, h, fixed_dofs) \
            if settings.length_preserving_path else None
        stats = StepStats()
        factor = None
        kept = KeptBendTwistBand()
        # Gauss–Newton matrices refreshed at all are also refreshed when merely cheap (CHEAP_REFRESH_CONTACTS);
        # the seed's never-refreshed variant and the exact first-iteration Hessian keep their matrices
        cheap_refreshes = (settings.quasi_newton and settings.quasi_newton_matrix == "gauss_newton"
                           and settings.refresh_interval > 0)
        # the quasi-Newton matrix is refreshed (every refresh_interval iterations) only when it has shown to
        # be stale since the last factorization: a line search had to shorten or refuse a step, or full steps
        # decreased g by more than STALE_DECREASE_RATIO × the matrix's own prediction ½|∇gᵀd| (the matrix is
        # stiffer than the system: short steps and slow linear convergence, e.g. stretching along old tangents)
        # — or, with cheap_refreshes, when a refresh is cheap (few contacts)
        stale = False
        contact_round = None
        end_checked = False          # the end positions of the current contact set were checked (relinearize)
        resolves_each_round = bool(getattr(impulses, "resolves_each_round", False))
        moving = None   # strands that took a step, found no decrease, or carry impulses in the last iteration
        settled = None  # strands whose last step was below SETTLED_FRACTION × tolerance (not searched unless pushed)
        point = evaluate(v)
        for iteration in range(settings.max_iterations):
            elastic, elastic_grad, config = point
            # a handler that solves its contact problem exactly on the factor's response (J A⁻¹ Jᵀ) needs that
            # response to be the system's: a stale matrix is refreshed at every contact round then (with a
            # stale one the exact solve over- or under-shoots and the loop does not converge)
            refresh = stale and iteration > 0 and (
                (settings.refresh_interval > 0 and iteration % settings.refresh_interval == 0)
                or (contact_round is not None and resolves_each_round))
            fresh = factor is None or not settings.quasi_newton or refresh
            if fresh:
                factor, resolved = self._refactor(config, h, fixed_dofs, stats, soft_pins, factor, moving,
                                                  impulses, kept)
                impulse = impulse if resolved is None else resolved
                stale = False

            def descent_problem():
                """(target velocity, ∇g, g per strand) at v with the current impulses."""
                target = free_velocity + impulse / mass
                gradient = mass * (v - target) + damping * mass * v + h * elastic_grad
                if soft_pins is not None:
                    pulled = soft_pins.dofs.ravel()
                    offset = (q_t + h * v)[pulled] - soft_pins.targets.ravel()
                    gradient[pulled] += h * xp.repeat(soft_pins.stiffness, 3) * offset
                gradient[fixed_dofs] = 0.0
                return target, gradient, objective(v, target, elastic)

            target, gradient, current = descent_problem()
            # strands pushed by contact impulses search along the straight line (seed Algorithm 2) unless the
            # handler solves its contact problem again from the measured velocities every round: bending
            # their path moves the contact points by more than the impulses' linear response, which one
            # Jacobi step per round does not recover from (the hairball tangles)
            pushed = xp.bincount(self.dof_strand, weights=xp.abs(impulse), minlength=model.n_strands) > 0.0
            bendable = xp.ones_like(pushed) if resolves_each_round else ~pushed
            bent = None if path is None else (path, bendable)
            # a matrix refactored in an earlier iteration whose full step most strands refuse is refreshed now
            # (when refreshes are on at all; the seed's never-refreshed variant keeps its matrix)
            early = FULL_STEP_FRACTION if settings.refresh_interval > 0 and not fresh else None
            skipped = None if settled is None else settled & ~pushed
            searched = self._line_search(factor, gradient, fixed_dofs, v, target, current, point, evaluate,
                                         objective, bent, early, skipped)
            if searched is None:
                stats.early_refreshes += 1
                factor, resolved = self._refactor(config, h, fixed_dofs, stats, soft_pins, factor, moving,
                                                  impulses, kept)
                if resolved is not None:
                    impulse = resolved
                    target, gradient, current = descent_problem()
                stale = False
                searched = self._line_search(factor, gradient, fixed_dofs, v, target, current, point, evaluate,
                                             objective, bent, settled=skipped)
            alpha, slope, direction, point, accepted, v_new = searched
            if not bool(accepted.all()):
                # strands without an Armijo decrease keep their velocities this iteration (an ascent step is
                # never taken); they move again once the impulses or the (refreshed) matrix change
                stats.line_search_fallbacks += 1
            moved = alpha > 0.0
            moving = moved | ~accepted | pushed
            stale = stale or not bool(accepted.all()) or bool(xp.any(alpha[moved] < 1.0))
            if not bool(moved.any()) and (impulses is None or contact_round is not None):
                stats.iterations = iteration + 1
                break
            if bool(moved.any()):
                stats.smallest_step = min(stats.smallest_step, float(alpha[moved].min()))
            stats.iterations = iteration + 1
            # seed eq. 4.3 on the vertex velocities (twist rates are slaved to the shape and are not in m/s)
            change = xp.abs(v_new - v)[model.position_dofs]
            stats.mean_dv = float(xp.mean(change))
            strand_dv = xp.bincount(model.vertex_strand, weights=xp.sum(change, axis=1),
                                    minlength=model.n_strands) / self.strand_vertex_dofs
            settled = accepted & (strand_dv < SETTLED_FRACTION * settings.tolerance)
            stats.settled_strands = int(settled.sum())
            contacts = 0 if impulses is None else impulses.contact_count
            if not stale and cheap_refreshes and contacts <= CHEAP_REFRESH_CONTACTS:
                stale = True    # not stale, but cheap to refresh (CHEAP_REFRESH_CONTACTS)
            if not stale:
                full = alpha == 1.0
                predicted = -0.5 * float(xp.sum(slope[full]))
                actual = float(xp.sum((current - objective(v_new, target, point[0]))[full]))
                stale = predicted > 0.0 and actual > STALE_DECREASE_RATIO * predicted
            if impulses is not None and contact_round is None and self._detect_now(iteration, stats.mean_dv,
                                                                                  bool(moved.any())):
                contact_round = 0
            contact_just_found = False
            if contact_round is not None:
                new_impulse = impulses.update(contact_round, v, v_new)
                if new_impulse is not None:
                    impulse = new_impulse
                contact_just_found = contact_round == 0 and bool(xp.any(impulse != 0.0))
                contact_round += 1
            v = v_new
            contacts_settled = impulses is None or impulses.converged()
            if contacts_settled and contact_round is not None and not contact_just_found and not end_checked \
                    and impulses.checks_end_positions and stats.relinearizations < MAX_RELINEARIZATIONS:
                # the set predicts no penetration: do the end positions keep every contact distance?
                end_checked = True
                relinearized = impulses.relinearize(v)
                if relinearized is not None:
                    impulse = relinearized
                    stats.relinearizations += 1
                    end_checked = False
                    continue
            if stats.mean_dv < settings.tolerance and contacts_settled and not contact_just_found:
                break
        config = point[2]
        q = q_t + h * v
        positions = model.gather_positions(q)
        velocities = model.gather_positions(v)
        held = None if impulses is None else impulses.keep_outside(positions, velocities)
        if held is not None:
            # the colliders' last word moved some vertices: frames transported to where they are now
            positions, velocities = held
            config = transported_configuration(xp, model, state, positions, model.gather_theta(q))
        new_state = DerState(
            positions=positions, velocities=velocities, theta=model.gather_theta(q),
            theta_velocity=model.gather_theta(v),
            tangents=_unit_tangents(xp, model, positions), reference_u=config.reference_u,
            reference_twist=config.reference_twist)
        return new_state, stats


def _unit_tangents(xp, model, positions):
    edges = positions[model.edge_vertex + 1] - positions[model.edge_vertex]
    return normalize_rows(xp, edges)


def _degeneracy_report(xp, model, config, band) -> str:
    """What makes a system matrix unfactorable, for the error message: non-finite entries, or the
    shortest and longest edge relative to rest (with its strand)."""
    edges = config.positions[model.edge_vertex + 1] - config.positions[model.edge_vertex]
    ratio = xp.linalg.norm(edges, axis=1) / model.rest_edge_length
    shortest, longest = int(xp.argmin(ratio)), int(xp.argmax(ratio))
    finite = bool(xp.all(xp.isfinite(band)))
    return (f" ({'finite' if finite else 'NON-FINITE'} entries; shortest edge {float(ratio[shortest]):.3g}× rest "
            f"in strand {int(model.edge_strand[shortest])}, longest {float(ratio[longest]):.3g}× rest in strand "
            f"{int(model.edge_strand[longest])})")
