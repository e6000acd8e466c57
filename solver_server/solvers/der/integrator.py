"""Implicit Euler in velocity form for all strands (seed 000 §2.2, §3.3, Algorithm 2).

Per step of length h, with q_t the generalized coordinates (positions and twist angles) and M the diagonal
generalized mass:

    g(v) = ½ (v − ṽ)ᵀ M (v − ṽ) + ½ h c vᵀ M v + E(q_t + h v),      ṽ = v_t + h M⁻¹ f_ext + M⁻¹ I
    ∇g   = M (v − ṽ) + h c M v + h ∇E,       ∇²g = (1 + h c) M + h² ∇²E

c is the mass-proportional damping [1/s] (the object's damping, plus on the vertices the air drag of the step,
lagged from its start velocities: ``der/air_drag.py``) and I the generalized contact impulse of the current
iteration.
Each iteration takes one (quasi-)Newton step with backtracking (Armijo) line search; kinematic DOFs
(clamped roots, pins) keep their prescribed velocities.  With `quasi_newton` the Hessian of the first
iteration is factorized once and reused (seed §3.3).  A contact handler (contact.py) may update I after
every global step (seed Algorithm 2 lines 10-13).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import warp as wp

from ...kernels import cuda_layout_on, float64_view, int32_view, launch, warp_device_of, warp_view
from ...kernels.segments import segment_sums
from .kernels import objective as objective_kernels
from .banded import BandedCholesky, NotPositiveDefinite, constrain_band, strand_blocks_of_model
from .energy import elastic_gradient_hessian, strand_energy_and_gradient
from .frames import normalize_rows
from .model import DerModel, element_subset, index_view
from .kernel_search import KernelLineSearch
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

    def converged(self) -> Any:
        """Whether the contacts accept ending the iteration: a bool, or a 0-d device bool that the caller reads."""

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
    mean_dv: float = 0.0             # [m/s] of the last iteration (a 0-d device array once set)
    factorizations: int = 0
    partial_factorizations: int = 0   # of them, refactorizations of the strands still moving only
    projected_hessian: bool = False
    line_search_fallbacks: int = 0   # line searches that failed (matrix refreshed, or iteration stopped)
    early_refreshes: int = 0         # refactorizations because most strands refused a stale matrix's full step
    bend_twist_assemblies: int = 0   # of the factorizations, those that assembled the bend-twist part too
    settled_strands: int = 0         # strands no longer searched at the end of the step (SETTLED_FRACTION; 0-d
    smallest_step: float = 1.0       # device arrays once set, like smallest_step: read with the frame's stats)
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
        # a strand's DOFs are contiguous, from 4 × its first vertex − its index (3 per vertex, 1 per edge)
        dof_starts = 4 * model.strand_offsets - xp.arange(model.n_strands + 1)
        self.dof_offsets = int32_view(xp, dof_starts)
        self.strand_dofs = xp.diff(dof_starts)                       # (S,) each strand's DOF count
        self.strand_vertex_dofs = 3.0 * (model.strand_offsets[1:] - model.strand_offsets[:-1])   # (S,)
        self.blocks = strand_blocks_of_model(xp, to_host, model)   # the strands' independent blocks of the band
        self.device = warp_device_of(model.strand_offsets)
        self.directions_finite = None     # on a device: 0-d bool, every Newton direction finite since the last read
        self.factors_valid = None         # on a device: 0-d bool, every deferred factorization sound since then
        self._bits = xp.asarray([1, 2, 4, 8, 16, 32], dtype=xp.int64)     # _read_flags' place values
        self._kernel_search = None      # KernelLineSearch, made at the first line search that runs in the kernel
        self._no_strands = int32_view(xp, xp.zeros(model.n_strands, dtype=xp.int32))   # no strand settled

    @property
    def _device_resident(self) -> bool:
        """Whether this step runs on the device path (CUDA's layout), where reading a device value stalls."""
        return cuda_layout_on(self.device)

    def _read_flags(self, *flags) -> list[bool]:
        """Host bools of 0-d device bool ``flags``, in one scalar read (bit k of one integer is flag k)."""
        xp = self.xp
        code = int(xp.sum(xp.stack(flags) * self._bits[:len(flags)]))
        return [bool(code >> k & 1) for k in range(len(flags))]

    def _factor(self, config, h, fixed_dofs, damping, stats: StepStats, soft_pins: SoftPins | None = None,
                exact: bool = False, previous: BandedCholesky | None = None, strands=None,
                kept: KeptBendTwistBand | None = None):
        """Factor of the system matrix at `config` (damping: the step's h·c, scalar or (n_dofs,)).  With a
        previous factor (LAPACK path) and a mask strands
        (S,) of fewer than SUBSET_FRACTION of the strands, only those strands' blocks are assembled and
        refactored; the others keep their previous (converged, unused) blocks.  kept: the step's bend–twist
        band of a Gauss–Newton matrix (assembled here if it has none yet; then only the stretch part is)."""
        xp, model = self.xp, self.model
        subset = None
        if previous is not None and strands is not None and not previous.on_kernel_path \
                and int(strands.sum()) < SUBSET_FRACTION * model.n_strands:
            subset = element_subset(xp, model, strands)
        diagonal = (1.0 + damping) * model.mass
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
                    # a Gauss–Newton matrix (Σ w ∇s∇sᵀ plus the mass) is positive definite by construction: on a
                    # device its test is read with the group's finite check after the substep, where a matrix
                    # made of non-finite or absurd values fails the job as the CPU's error does
                    deferred = self._device_resident and gauss_newton and not project
                    factor = BandedCholesky(xp, band, self.blocks, self._to_host, self._from_host,
                                            deferred_check=deferred)
                    if factor.valid is not None:
                        self.factors_valid = factor.valid if self.factors_valid is None \
                            else self.factors_valid & factor.valid
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

    def _refactor(self, problem: "_StepProblem", config, stats: StepStats, previous, moving, impulses, kept):
        """(factor of the step's matrix at `config` (see _factor), the contact handler's impulses solved again on it or
        None).  The factor is handed to the contact handler: the contacts' response J A⁻¹ Jᵀ must be that of
        the matrix the global steps use (a response left from an older matrix over- or under-shoots once edges
        have turned), and impulses it solved on the older response are solved again before a step applies
        them."""
        factor = self._factor(config, problem.h, problem.fixed_dofs, problem.damping, stats, problem.soft_pins,
                              previous=previous, strands=moving, kept=kept)
        resolved = None
        if impulses is not None:
            impulses.set_system(factor)
            resolve = getattr(impulses, "resolve_on_new_system", None)
            resolved = None if resolve is None else resolve()
        return factor, resolved

    def _line_search(self, problem: "_StepProblem", factor, gradient, v, target, current, point, path=None,
                     least_full_fraction=None, settled=None):
        """Backtracking Armijo search along d = −A⁻¹∇g, separately for every strand (g is a sum over strands), as
        one launch (kernel_search.KernelLineSearch: each strand backtracks inside the kernel).

        point: (potential (S,), elastic gradient (n_dofs,), configuration) at v.  Returns (alphas (S,), direction,
        the triple at the accepted velocities, accepted (S,) bool, the accepted velocities (n_dofs,)).  A strand
        whose direction is not a descent direction (converged, or all kinematic) is accepted with α = 0; a strand
        that finds no decrease is not accepted and gets α = 0; both keep their velocities.  path:
        (LengthPreservingPath, strands (S,) bool it bends) or None (straight).  least_full_fraction: if fewer than
        this fraction of the searched strands accept the full step while they are at least SUBSET_FRACTION of all
        strands, the caller refactors the matrix and searches again.  settled: (S,) bool strands not searched
        (accepted with α = 0).  Returns (the search's result, that refresh as a 0-d device bool, or None without a
        least_full_fraction): the caller reads it with the iteration's other flags."""
        xp, model = self.xp, self.model
        # the direction with its kinematic entries 0, each strand's slope ∇gᵀd, and which strands search (an
        # expected decrease below the objective's round-off cannot pass Armijo: such a strand has converged, keeps
        # its velocities (α = 0) and is not searched, which saves 10 system-wide backtracks), in one launch
        direction = xp.empty(model.n_dofs, dtype=xp.float64)
        slope = xp.empty(model.n_strands, dtype=xp.float64)
        searching = xp.empty(model.n_strands, dtype=xp.int32)
        non_finite = xp.zeros(1, dtype=xp.int32)
        launch(objective_kernels.search_directions, model.n_strands, inputs=[
            self.dof_offsets, problem.fixed_view(), float64_view(xp, factor.solve(gradient)),
            float64_view(xp, gradient), float64_view(xp, current),
            self._no_strands if settled is None else int32_view(xp, settled), warp_view(direction, wp.float64),
            warp_view(slope, wp.float64), warp_view(searching, wp.int32), warp_view(non_finite, wp.int32)],
            device=warp_device_of(direction))
        searching = searching > 0
        finite = non_finite[0] == 0
        if self._device_resident:
            # read after the substep with the group's finite check: a non-finite direction is never taken (no
            # strand accepts a NaN objective), and the job fails at that substep as on the CPU
            self.directions_finite = finite if self.directions_finite is None else self.directions_finite & finite
        elif not bool(finite):
            raise FloatingPointError("non-finite Newton direction in the DER solver")
        if self._kernel_search is None:
            self._kernel_search = KernelLineSearch(xp, model)
        alpha, accepted, accepted_v = self._kernel_search.search(problem, self.settings, v, direction, target,
                                                                 current, slope, searching, path)
        refresh = None
        if least_full_fraction is not None:
            searched_strands = searching.sum()
            full = (searching & accepted & (alpha == 1.0)).sum()
            refresh = (searched_strands >= SUBSET_FRACTION * model.n_strands) \
                & (full < least_full_fraction * searched_strands)
        if not self._device_resident:
            # on the CPU (where reads are free) only the strands that moved are evaluated again when they are few:
            # the others' velocities, frames, energies and gradient entries are the search's start point's
            moved = alpha > 0.0
            count = int(moved.sum())
            if count == 0:
                return (alpha, slope, direction, point, accepted, accepted_v), refresh
            if count < SUBSET_FRACTION * model.n_strands:
                return (alpha, slope, direction, problem.evaluate(accepted_v, moved, point), accepted,
                        accepted_v), refresh
        return (alpha, slope, direction, problem.evaluate(accepted_v), accepted, accepted_v), refresh

    @property
    def _detection_tolerance(self) -> float:
        """[m/s] the mean |Δv| below which the contacts are detected (with a contact_detection_tolerance; the
        tolerance itself once the free motion has converged)."""
        settings = self.settings
        return max(settings.contact_detection_tolerance or 0.0, settings.tolerance)

    def _detect_now(self, iteration: int, settled: bool) -> bool:
        """Whether the contacts are detected after this iteration: the seed does it after the first; with a
        contact_detection_tolerance, once the free motion has ``settled`` (converged to it, or stopped
        altogether), or after contact_detection_iterations."""
        settings = self.settings
        if settings.contact_detection_tolerance is None:
            return True
        return settled or iteration + 1 >= settings.contact_detection_iterations

    def step(self, state: DerState, h: float, gravity, fixed_dofs, fixed_velocity,
             impulses: ImpulseHandler | None = None, soft_pins: SoftPins | None = None,
             acceleration=None, drag=None) -> tuple[DerState, StepStats]:
        """Advance `state` by h [s].  gravity (3,) [m/s²]; fixed_dofs (F,) with velocities fixed_velocity (F,);
        acceleration: optional (N, 3) [m/s²] per-vertex external acceleration beside gravity (wind); drag:
        optional (n_dofs,) [1/s] velocity decay rate beside the model's damping (air drag), taken implicitly.

        Each iteration: refresh the matrix when due (``_refresh_matrix``), take a line-searched global step
        (``_global_step``), judge its progress and the matrix (``_judge_step``), let the contacts answer it
        (``_contact_round``), and once they predict no penetration check the end positions
        (``_check_end_positions``); the step ends at the tolerance with settled contacts, then the failsafe
        and the new state (``_finish``)."""
        problem = _StepProblem.of(self, state, h, gravity, fixed_dofs, soft_pins, acceleration, drag)
        v = problem.v_t.copy()
        v[fixed_dofs] = fixed_velocity
        it = _Iterate(v=v, point=problem.evaluate(v), impulse=self.xp.zeros(self.model.n_dofs),
                      resolves_each_round=bool(getattr(impulses, "resolves_each_round", False)))
        path = LengthPreservingPath(self.xp, self.model, state.positions, h, fixed_dofs) \
            if self.settings.length_preserving_path else None
        stats = StepStats()
        kept = KeptBendTwistBand()
        for iteration in range(self.settings.max_iterations):
            fresh = self._refresh_matrix(problem, it, iteration, stats, impulses, kept)
            searched, pushed, refresh, again = self._global_step(problem, it, fresh, stats, impulses, kept, path)
            while True:
                alpha, slope, _, it.point, accepted, v_new = searched
                moved = alpha > 0.0
                # seed eq. 4.3's mean |Δv| on the vertex velocities (twist rates are slaved to the shape, not m/s)
                change = self.xp.abs(v_new - it.v)[self.model.position_dofs]
                mean_dv = self.xp.mean(change)
                # strands without an Armijo decrease keep their velocities this iteration (an ascent step is never
                # taken); they move again once the impulses or the (refreshed) matrix change
                refused = ~accepted.all()
                # one read for the matrix's staleness (a refused or shortened step, or full steps that decreased g
                # more than the matrix predicted), whether anything moved, the free motion's convergence to the
                # tolerance and to the contact detection's tolerance, and whether most strands refused the full
                # step of a matrix refactored in an earlier iteration (then it is refactored now and the search
                # repeated, and the flags are read again)
                flags = [refused | self.xp.any((alpha < 1.0) & moved), self.xp.any(moved),
                         mean_dv < self.settings.tolerance, mean_dv < self._detection_tolerance]
                cheap = self._cheap_refresh(impulses)
                if not it.stale and not cheap:
                    flags.append(self._decreased_beyond_prediction(problem, it, searched, v_new))
                read = self._read_flags(*flags, *([] if refresh is None else [refresh]))
                if refresh is not None and read.pop():
                    searched, refresh = again(), None
                    continue
                break
            stats.line_search_fallbacks = stats.line_search_fallbacks + refused   # counted on the device
            it.moving = moved | ~accepted | pushed
            stats.mean_dv = mean_dv
            shortened, any_moved, converged, detectable, *decreased = read
            it.stale = it.stale or shortened
            if not any_moved and (impulses is None or it.contact_round is not None):
                stats.iterations = iteration + 1
                break
            self._judge_step(it, iteration, stats, searched, change, cheap or any(decreased))
            # whether the contacts accept ending the iteration matters only to an iteration that may end or check
            # its end positions: otherwise it is not read (on a device, a read less)
            asked = converged or self._end_check_due(it, stats, impulses)
            contact_just_found, contacts_settled = self._contact_round(it, iteration, impulses, v_new,
                                                                       detectable or not any_moved, asked)
            it.v = v_new
            if contacts_settled and not contact_just_found and self._check_end_positions(it, stats, impulses):
                continue
            if converged and contacts_settled and not contact_just_found:
                break
        return self._finish(problem, it, impulses), stats

    def _refresh_matrix(self, problem: "_StepProblem", it: "_Iterate", iteration: int, stats: StepStats, impulses,
                        kept: KeptBendTwistBand) -> bool:
        """Factor the matrix at the current iterate when there is none, without quasi-Newton, or when a stale
        one is due (every refresh_interval iterations, or at every contact round of a handler that solves its
        contact problem exactly on the factor's response J A⁻¹ Jᵀ: with a stale matrix that solve over- or
        under-shoots and the loop does not converge). Returns whether the matrix is fresh this iteration."""
        settings = self.settings
        refresh = it.stale and iteration > 0 and (
            (settings.refresh_interval > 0 and iteration % settings.refresh_interval == 0)
            or (it.contact_round is not None and it.resolves_each_round))
        fresh = it.factor is None or not settings.quasi_newton or refresh
        if fresh:
            it.factor, resolved = self._refactor(problem, it.point[2], stats, it.factor, it.moving, impulses, kept)
            it.impulse = it.impulse if resolved is None else resolved
            it.stale = False
        return fresh

    def _global_step(self, problem: "_StepProblem", it: "_Iterate", fresh: bool, stats: StepStats, impulses,
                     kept: KeptBendTwistBand, path):
        """The line-searched (quasi-)Newton step of every strand with the current impulses: (the line search's
        result (``_line_search``), pushed (S,) bool: the strands the impulses act on, the early refresh's flag
        (a 0-d device bool, or None where it is not asked), and a function of no arguments that refactors the
        matrix at the iterate and returns the search repeated on it, for when that flag reads true). Sets
        it.target and it.current (the objective per strand at the iterate)."""
        xp, model, settings = self.xp, self.model, self.settings
        target, gradient, current = problem.descent(it)
        # strands pushed by contact impulses search along the straight line (seed Algorithm 2) unless the
        # handler solves its contact problem again from the measured velocities every round: bending
        # their path moves the contact points by more than the impulses' linear response, which one
        # Jacobi step per round does not recover from (the hairball tangles)
        pushed = segment_sums(xp, xp.abs(it.impulse), self.dof_offsets) > 0.0
        bendable = xp.ones_like(pushed) if it.resolves_each_round else ~pushed
        bent = None if path is None else (path, bendable)
        # a matrix refactored in an earlier iteration whose full step most strands refuse is refreshed now
        # (when refreshes are on at all; the seed's never-refreshed variant keeps its matrix)
        early = FULL_STEP_FRACTION if settings.refresh_interval > 0 and not fresh else None
        skipped = None if it.settled is None else it.settled & ~pushed
        start = it.point
        searched, refresh = self._line_search(problem, it.factor, gradient, it.v, target, current, start, bent,
                                              early, skipped)
        it.target, it.current = target, current

        def again():
            # most strands refused the full step of a matrix refactored in an earlier iteration: refactor at the
            # iterate, solve the impulses again on it, and search again from the same start
            nonlocal target, gradient, current
            stats.early_refreshes += 1
            it.factor, resolved = self._refactor(problem, start[2], stats, it.factor, it.moving, impulses, kept)
            if resolved is not None:
                it.impulse = resolved
                target, gradient, current = problem.descent(it)
            it.stale = False
            searched_again, _ = self._line_search(problem, it.factor, gradient, it.v, target, current, start, bent,
                                                  settled=skipped)
            it.target, it.current = target, current
            return searched_again

        return searched, pushed, refresh, again

    def _judge_step(self, it: "_Iterate", iteration: int, stats: StepStats, searched, change,
                    refresh_due: bool) -> None:
        """The step's statistics (iterations), the strands that settled (``change`` (N, 3): |Δv| of the vertex
        velocities [m/s]), and whether the quasi-Newton matrix counts as stale: a line search had to shorten or
        refuse a step (set by the caller), or ``refresh_due``: a refresh is cheap (``_cheap_refresh``), or full
        steps decreased g by more than STALE_DECREASE_RATIO × the matrix's own prediction
        (``_decreased_beyond_prediction``, read with the iteration's flags where the matrix was neither stale nor
        cheap to refresh)."""
        xp, model, settings = self.xp, self.model, self.settings
        alpha, _, _, _, accepted, _ = searched
        moved = alpha > 0.0
        # figures for the frame's stats stay on the device (read at the frame's end)
        stats.smallest_step = xp.minimum(stats.smallest_step, xp.min(xp.where(moved, alpha, 1.0)))
        stats.iterations = iteration + 1
        strand_dv = segment_sums(xp, xp.sum(change, axis=1), index_view(model, "strand_offsets")) \
            / self.strand_vertex_dofs
        it.settled = accepted & (strand_dv < SETTLED_FRACTION * settings.tolerance)
        stats.settled_strands = it.settled.sum()
        it.stale = it.stale or refresh_due

    def _cheap_refresh(self, impulses) -> bool:
        """Whether a refresh of the matrix is cheap: Gauss–Newton matrices refreshed at all, and at most
        CHEAP_REFRESH_CONTACTS contacts so far."""
        settings = self.settings
        contacts = 0 if impulses is None else impulses.contact_count
        return (settings.quasi_newton and settings.quasi_newton_matrix == "gauss_newton"
                and settings.refresh_interval > 0 and contacts <= CHEAP_REFRESH_CONTACTS)

    def _decreased_beyond_prediction(self, problem: "_StepProblem", it: "_Iterate", searched, v_new):
        """0-d device bool: the strands that took full steps decreased g by more than STALE_DECREASE_RATIO × the
        matrix's own prediction ½|∇gᵀd| (the matrix is stiffer than the system: short steps and slow linear
        convergence, e.g. stretching along old tangents)."""
        xp = self.xp
        alpha, slope = searched[0], searched[1]
        full = alpha == 1.0
        predicted = -0.5 * xp.sum(xp.where(full, slope, 0.0))
        actual = xp.sum(xp.where(full, it.current - problem.objective(v_new, it.target, it.point[0]), 0.0))
        return (predicted > 0.0) & (actual > STALE_DECREASE_RATIO * predicted)

    def _contact_round(self, it: "_Iterate", iteration: int, impulses, v_new, settled: bool,
                       asked: bool = True) -> tuple[bool, bool]:
        """The contacts' answer to the global step v → v_new (seed Algorithm 2 lines 10–13): detection once it
        is due (``_detect_now``; ``settled``: the free motion converged to the detection tolerance or stopped),
        then new impulses every round. Returns (whether the round just found the first contacts with impulses (the
        loop then takes at least one more step), whether the contacts accept ending the iteration); the first
        round reads both at once. A later round reads the acceptance only when ``asked`` (else it answers False:
        the iteration neither ends nor checks its end positions, whatever the contacts say)."""
        if impulses is None:
            return False, True
        if it.contact_round is None and self._detect_now(iteration, settled):
            it.contact_round = 0
        if it.contact_round is None:
            return False, bool(impulses.converged())
        new_impulse = impulses.update(it.contact_round, it.v, v_new)
        if new_impulse is not None:
            it.impulse = new_impulse
        accepted = impulses.converged()
        first = it.contact_round == 0
        it.contact_round += 1
        found = self.xp.any(it.impulse != 0.0) if first else False
        if first and not isinstance(accepted, bool):
            return tuple(self._read_flags(found, accepted))
        return bool(found), bool(accepted) if asked or first else False

    @staticmethod
    def _end_check_due(it: "_Iterate", stats: StepStats, impulses) -> bool:
        """Whether ``_check_end_positions`` would test the end positions once the contacts settle."""
        return not (impulses is None or it.contact_round is None or it.end_checked
                    or not impulses.checks_end_positions or stats.relinearizations >= MAX_RELINEARIZATIONS)

    def _check_end_positions(self, it: "_Iterate", stats: StepStats, impulses) -> bool:
        """Once the contact set predicts no penetration: do the end positions keep every contact distance?
        (``StepContacts.relinearize``, once per set, at most MAX_RELINEARIZATIONS times a step.) Returns
        whether the set was written again (the loop then goes on with the new impulses)."""
        if not self._end_check_due(it, stats, impulses):
            return False
        it.end_checked = True
        relinearized = impulses.relinearize(it.v)
        if relinearized is None:
            return False
        it.impulse = relinearized
        stats.relinearizations += 1
        it.end_checked = False
        return True

    def _finish(self, problem: "_StepProblem", it: "_Iterate", impulses) -> DerState:
        """The new state at q_t + h v, after the contacts' failsafe (``keep_outside``); frames transported to
        where the vertices end."""
        xp, model = self.xp, self.model
        config = it.point[2]
        q = problem.q_t + problem.h * it.v
        positions = model.gather_positions(q)
        velocities = model.gather_positions(it.v)
        held = None if impulses is None else impulses.keep_outside(positions, velocities)
        if held is not None:
            # the colliders' last word moved some vertices: frames transported to where they are now (on the
            # device, chosen by its flag: the transport runs every step and the frames stay when nothing moved)
            positions, velocities, moved = held
            transported = transported_configuration(xp, model, problem.state, positions, model.gather_theta(q))
            if self._device_resident:
                transported.reference_u = xp.where(moved, transported.reference_u, config.reference_u)
                transported.reference_twist = xp.where(moved, transported.reference_twist, config.reference_twist)
            config = transported
        return DerState(
            positions=positions, velocities=velocities, theta=model.gather_theta(q),
            theta_velocity=model.gather_theta(it.v),
            tangents=_unit_tangents(xp, model, positions), reference_u=config.reference_u,
            reference_twist=config.reference_twist)


@dataclass
class _StepProblem:
    """One step's fixed data and its objective g(v) (the module docstring) per strand: q_t, v_t (n_dofs,) the
    coordinates and velocities at the start, free_velocity (n_dofs,) = v_t + h M⁻¹ f_ext, damping = h c (the
    model's damping plus the step's air drag; scalar or (n_dofs,)); dof_offsets (S + 1,) int32 view and strand_dofs
    (S,): the strands' contiguous DOF ranges."""

    xp: Any
    model: DerModel
    dof_offsets: Any
    strand_dofs: Any
    state: DerState
    h: float
    fixed_dofs: Any
    soft_pins: SoftPins | None
    q_t: Any
    v_t: Any
    free_velocity: Any
    damping: Any
    _damping_per_dof: Any = None
    _fixed_indicator: Any = None

    @classmethod
    def of(cls, solver: "ImplicitEulerSolver", state: DerState, h: float, gravity, fixed_dofs, soft_pins,
           acceleration, drag=None) -> "_StepProblem":
        xp, model = solver.xp, solver.model
        q_t = model.pack(state.positions, state.theta)
        v_t = model.pack(state.velocities, state.theta_velocity)
        external = xp.zeros(model.n_dofs)
        external[model.position_dofs] = model.vertex_mass[:, None] * xp.asarray(gravity, dtype=q_t.dtype)
        if acceleration is not None:
            external[model.position_dofs] += model.vertex_mass[:, None] * acceleration
        return cls(xp=xp, model=model, dof_offsets=solver.dof_offsets, strand_dofs=solver.strand_dofs, state=state,
                   h=h, fixed_dofs=fixed_dofs, soft_pins=soft_pins, q_t=q_t, v_t=v_t,
                   free_velocity=v_t + h * external / model.mass,
                   damping=h * (model.damping if drag is None else model.damping + drag))

    def evaluate(self, v, moved=None, base=None):
        """(potential per strand (S,) [J]: elastic energy plus the soft pins' springs; elastic gradient
        (n_dofs,); configuration) at q_t + h v. moved (S,) bool with base, the triple at velocities that equal v
        on every other strand: only the moved strands' frames, energies and gradient entries are computed, the
        others are base's (each strand's come from its own elements alone, so they are what a full evaluation
        gives, bit for bit)."""
        xp, model = self.xp, self.model
        q = self.q_t + self.h * v
        positions, theta = model.gather_positions(q), model.gather_theta(q)
        if moved is None:
            config = transported_configuration(xp, model, self.state, positions, theta)
            energy, elastic_gradient = strand_energy_and_gradient(xp, model, config)
        else:
            subset = element_subset(xp, model, moved)
            config = transported_configuration(xp, model, self.state, positions, theta, subset=subset, fill=base[2])
            energy, elastic_gradient = strand_energy_and_gradient(xp, model, config, subset)
            elastic_gradient = xp.where(xp.repeat(moved, self.strand_dofs), elastic_gradient, base[1])
        if self.soft_pins is not None:
            pin_strands = model.vertex_strand[self.soft_pins.vertices]
            energy = energy + self.soft_pins.strand_energy(xp, q, pin_strands, model.n_strands)
        if moved is not None:
            energy = xp.where(moved, energy, base[0])
        return energy, elastic_gradient, config

    def fixed_view(self):
        """(n_dofs,) int32 Warp view: 1 at the kinematic DOFs (made once per step)."""
        if self._fixed_indicator is None:
            self._fixed_indicator = self.xp.zeros(self.model.n_dofs, dtype=self.xp.int32)
            self._fixed_indicator[self.fixed_dofs] = 1
        return warp_view(self._fixed_indicator, wp.int32)

    def _damping_view(self):
        """The damping h c as a (n_dofs,) float64 Warp view (made once per step)."""
        if self._damping_per_dof is None:
            self._damping_per_dof = self.xp.empty(self.model.n_dofs, dtype=self.xp.float64)
            self._damping_per_dof[...] = self.damping        # a scalar, or the (n_dofs,) damping with air drag
        return warp_view(self._damping_per_dof, wp.float64)

    def objective(self, v, target, potential_per_strand):
        """g(v) per strand (S,): the strands are independent given the impulses, so each gets its own
        line search (one buckling strand does not shorten every other strand's step). One launch
        (``kernels.objective.strand_objective``)."""
        xp = self.xp
        objective = xp.empty(self.model.n_strands, dtype=xp.float64)
        launch(objective_kernels.strand_objective, self.model.n_strands, inputs=[
            self.dof_offsets, warp_view(self.model.mass, wp.float64), self._damping_view(),
            float64_view(xp, v), float64_view(xp, target), float64_view(xp, potential_per_strand),
            warp_view(objective, wp.float64)], device=warp_device_of(objective))
        return objective

    def descent(self, it: "_Iterate"):
        """(target velocity, ∇g, g per strand) at the iterate's v with its impulses (the target and the gradient
        in one launch: ``kernels.objective.descent_terms``)."""
        xp, mass = self.xp, self.model.mass
        v, elastic, elastic_gradient = it.v, it.point[0], it.point[1]
        target = xp.empty(self.model.n_dofs, dtype=xp.float64)
        gradient = xp.empty(self.model.n_dofs, dtype=xp.float64)
        launch(objective_kernels.descent_terms, self.model.n_dofs, inputs=[
            warp_view(mass, wp.float64), float64_view(xp, self.free_velocity), float64_view(xp, it.impulse),
            self._damping_view(), float64_view(xp, v), float64_view(xp, elastic_gradient), float(self.h),
            warp_view(target, wp.float64), warp_view(gradient, wp.float64)], device=warp_device_of(target))
        if self.soft_pins is not None:
            pulled = self.soft_pins.dofs.ravel()
            offset = (self.q_t + self.h * v)[pulled] - self.soft_pins.targets.ravel()
            gradient[pulled] += self.h * xp.repeat(self.soft_pins.stiffness, 3) * offset
        gradient[self.fixed_dofs] = 0.0
        return target, gradient, self.objective(v, target, elastic)


@dataclass
class _Iterate:
    """The Newton loop's state between iterations: v (n_dofs,) the velocities; point (potential (S,), elastic
    gradient, configuration) at v; impulse (n_dofs,) the generalized contact impulse; factor the matrix's;
    stale: the quasi-Newton matrix is due for a refresh; contact_round: rounds since detection (None before);
    end_checked: the current set's end positions were checked; moving (S,): strands that took a step, found
    no decrease or carry impulses in the last iteration; settled (S,): strands whose last step was below
    SETTLED_FRACTION × tolerance (not searched unless pushed); target, current: the last global step's target
    velocity and objective per strand."""

    v: Any
    point: Any
    impulse: Any
    resolves_each_round: bool = False
    factor: Any = None
    stale: bool = False
    contact_round: int | None = None
    end_checked: bool = False
    moving: Any = None
    settled: Any = None
    target: Any = None
    current: Any = None


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
