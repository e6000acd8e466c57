"""A hair object prepared for the fast strand models: layout, padded rest points, pinned root
count and root binding. Shared by the particle and Cosserat solver groups."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from solver_server.sim.errors import SceneError

from .drawing import (BLEND_CHANGE_PER_FRAME, DEVIATION_RELAX_PER_FRAME, DrawnStrands, bounded_blend,
                      carried_deviation, carried_layings)
from .interpolation import GuideInterpolator
from .layout import StrandLayout
from .roots import RootBinding
from .selection import assign_guides, select_guides


# times an interpolated point is moved out of the closed shell it is in, at most (shells inside shells)
NESTED_SHELLS = 3
# a segment that would end inside a shell first turns about its start onto the plane through its nearest exit
# (facing the way out there, LIFT_OVERSHOOT times as far out as the exit), to the point of that circle on its
# sphere nearest its end, up to LIFT_ROUNDS times while it is still inside (in a crease each lift goes out through
# one face and the next through the other). The end moves about as far as the skin makes it and follows the skin
# continuously, so a strand drawn from one frame to the next does not hop between trial turns (a tip a fraction of a
# millimetre under the skin is turned by the trials below by their fixed fractions, centimetres at the tip)
LIFT_OVERSHOOT = 1.5
LIFT_ROUNDS = 16
# then how far it turns from its own direction towards (and past) the point where it came out, in the order
# tried: fractions of the turn onto that direction
OUTWARD_TURNS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
EXIT_TURNS = (0.25, 0.5, 0.75, 1.0, 1.5)
# where no turn leaves the shells (a thin fold: the ear against the head), the segment takes the one of these
# 26 directions (cube faces, edges and corners) that ends outside and is nearest its own
AROUND = np.array([(x, y, z) for x in (-1, 0, 1) for y in (-1, 0, 1) for z in (-1, 0, 1) if (x, y, z) != (0, 0, 0)],
                  dtype=np.float64)
AROUND /= np.linalg.norm(AROUND, axis=1)[:, None]
AROUND_TURNS = (0.25, 0.5, 0.75)   # fractions of the turn from its own direction onto that one, in the order tried


@dataclass
class StrandObject:
    """id; layout; rest (S, P, 3) padded rest points [m]; pinned: root points per strand that
    follow the root kinematically (1 or 2); binding: RootBinding; params: resolved hair params;
    interpolator: GuideInterpolator when only guide strands are simulated (params ``guide_count``
    > 0, or the hair object's ``guides``: artist-chosen strand indices), else None; maps: painted factors
    {param: (N,)} per point (sim/maps.py)."""

    id: str
    layout: StrandLayout
    rest: np.ndarray
    pinned: int
    binding: RootBinding
    params: dict
    interpolator: GuideInterpolator | None = None
    maps: dict = field(default_factory=dict)

    @classmethod
    def from_spec(cls, spec, scene, model: str, xp=np) -> "StrandObject":
        """xp: the backend's array module; the guide interpolator keeps its arrays there."""
        offsets = np.asarray(spec.raw.get("strand_offsets", [0, len(spec.vertices)]))
        layout = StrandLayout.from_offsets(offsets, len(spec.vertices), spec.id)
        rest = layout.pad(spec.vertices)
        pinned = cls._pinned_root_points(spec, layout, model)
        binding = RootBinding(spec, scene, rest[:, 0])
        params = dict(spec.params)
        interpolator = None
        guides = spec.raw.get("guides")
        count = int(params.get("guide_count", 0) or 0)
        if guides is not None and len(guides):
            guides = np.unique(np.asarray(guides, np.int64))
            if guides.min() < 0 or guides.max() >= layout.strand_count:
                raise SceneError(f"guides has a strand index outside 0..{layout.strand_count - 1}", object=spec.id)
        elif 0 < count < layout.strand_count:
            guides = select_guides(rest, layout, count)
        else:
            guides = None
        if guides is not None:
            interpolator = GuideInterpolator(rest, layout, assign_guides(rest, layout, guides), xp)
        return cls(spec.id, layout, rest, pinned, binding, params, interpolator, dict(spec.maps))

    @property
    def simulated(self) -> tuple[np.ndarray, StrandLayout]:
        """Rest points (G, P, 3) and layout of the strands that are simulated (guides or all)."""
        if self.interpolator is None:
            return self.rest, self.layout
        guides = self.interpolator.assignment.guides
        layout = StrandLayout(offsets=np.zeros(1, np.int64), gather=self.layout.gather[guides],
                              valid=self.layout.valid[guides])
        return self.rest[guides], layout

    @property
    def simulated_maps(self) -> dict[str, np.ndarray]:
        """Painted factors {param: (G, P)} padded like the simulated strands' rest points (host float64)."""
        padded = {name: self.layout.pad(factors) for name, factors in self.maps.items()}
        if self.interpolator is None:
            return padded
        guides = self.interpolator.assignment.guides
        return {name: factors[guides] for name, factors in padded.items()}

    def draw(self, simulated_points, poses, xp=np, colliders=None, radius: float = 0.0,
             previous: DrawnStrands | None = None) -> DrawnStrands:
        """Every strand (S, P, 3) padded [m] drawn from the simulated (G, P, 3) points: children are interpolated
        from the guides at the instant of ``poses``.

        Given ``previous``, the drawing of the frame before, a child moves beyond its guides' mean by at most
        BLEND_CHANGE_PER_FRAME rest segment lengths a point (``drawing.bounded_blend``). With ``colliders`` (a
        collision.ColliderSet posed at that instant) every interpolated child is kept out of its closed mesh shells:
        laid out of them afresh at the first drawing (``laid_outside``), and after it carried over from
        ``previous`` (``_carried``). The simulated strands are drawn as simulated; the pinned root points stay
        where the skin puts them."""
        if self.interpolator is None:
            return DrawnStrands(simulated_points, simulated_points, simulated_points)
        roots, rotations = self.root_frames(poses)
        rotations = xp.asarray(rotations)
        blend, mean = self.interpolator.shapes(simulated_points, xp.asarray(roots), rotations)
        if previous is not None:
            blend = bounded_blend(xp, blend, mean, previous,
                                  xp.asarray(BLEND_CHANGE_PER_FRAME * self.rest_segment_length), self.pinned)
        if colliders is None or not colliders.has_meshes:
            return DrawnStrands(blend, blend, mean, rotations)
        if previous is None:
            return DrawnStrands(self.laid_outside(blend, colliders, radius, xp)[0], blend, mean, rotations)
        return DrawnStrands(self._carried(blend, rotations, previous, colliders, radius, xp), blend, mean, rotations)

    def _carried(self, blend, rotations, previous: DrawnStrands, colliders, radius: float, xp):
        """Children (S, P, 3) [m] of ``blend`` (S, P, 3) [m] drawn from ``previous``: their deviation from the blend
        drawn then, turned with their root frames (``rotations`` (S, 3, 3) now) and shortened by
        DEVIATION_RELAX_PER_FRAME rest segment lengths a point where that stays out of the shells, else whole
        (``drawing.carried_layings``); what then enters a shell is laid out of it (``laid_outside``, towards where
        it was drawn before)."""
        carried, relaxed = carried_layings(xp, blend, carried_deviation(xp, rotations, previous),
                                           xp.asarray(DEVIATION_RELAX_PER_FRAME * self.rest_segment_length),
                                           self.pinned)
        entering = self._entering(relaxed, colliders, radius, xp)
        candidate = xp.where(entering[:, None, None], carried, relaxed)
        # the relaxed strands kept were just tested: only the carried ones are tested again
        return self.laid_outside(candidate, colliders, radius, xp, previous.points, suspects=entering)[0]

    def _entering(self, points, colliders, radius: float, xp):
        """(S,) bool: the strands (S, P, 3) [m] with a free point inside a closed shell of ``colliders`` (one winding
        test of every free point)."""
        free = points[:, self.pinned:]
        _, inside = colliders.recover_inside(xp, xp.ascontiguousarray(free.reshape(-1, 3)),
                                             xp.full(free.shape[0] * free.shape[1], float(radius)))
        return inside.reshape(free.shape[:2]).any(axis=1)

    @cached_property
    def rest_segment_length(self) -> np.ndarray:
        """(S,) [m]: every strand's mean rest segment length, the unit of how far a child's drawing may change in a
        frame (``drawing.DEVIATION_RELAX_PER_FRAME``, ``drawing.BLEND_CHANGE_PER_FRAME``)."""
        segments = np.linalg.norm(np.diff(self.rest, axis=1), axis=2)              # (S, P − 1), padding 0
        return segments.sum(axis=1) / np.maximum(self.layout.valid.sum(axis=1) - 1, 1)

    def laid_outside(self, points, colliders, radius: float, xp, previous=None, suspects=None):
        """Strands (S, P, 3) [m] laid again from the root, point by point, outside the closed mesh shells of
        ``colliders``: a child blended from two guides that lie on a curved scalp, or on either side of an ear,
        cuts through the head between them. Each point is placed along its (blended) segment from the
        point before; one that lands inside a shell (``ColliderSet.recover_inside``, by winding number: no
        history is needed) keeps its segment's length and turns out of the shells (``_way_out``). The segments
        after it keep their own directions: turning the rest of the strand with it made a long lever of every
        turn, and a turn that changed from one frame to the next threw the tip (the largest jump after frame 8
        on Suzanne, Cosserat guides, 0.21 → 0.28 m). One test of every point finds the strands to lay; the
        others are kept exactly as they are. ``previous`` (S, P, 3) [m]: where the strands were drawn the frame
        before (or None): a segment that plunges straight into the skin has no direction of its own to lie along,
        and one taken from the blend swings round from frame to frame (a child's tip hopped 16 cm a frame with
        the head at rest); it lies towards where its end was drawn before. ``suspects`` (S,) bool: the only strands
        that may enter a shell (the others are known to lie outside: not tested again), or None (every strand).
        Returns (points (S, P, 3), laid (S,) bool: the strands laid)."""
        if suspects is None:
            entering = self._entering(points, colliders, radius, xp)
        else:
            entering = xp.zeros(points.shape[0], dtype=bool)
            suspected = xp.nonzero(suspects)[0]
            if suspected.shape[0]:
                entering[suspected] = self._entering(points[suspected], colliders, radius, xp)
        if not bool(entering.any()):
            return points, entering
        rows = xp.nonzero(entering)[0]
        walked = points.copy()
        walked[rows] = self._walked_strands(points[rows], colliders, radius, xp,
                                            None if previous is None else previous[rows])
        return walked, entering

    def _walked_strands(self, points, colliders, radius: float, xp, previous=None):
        """``laid_outside`` of strands (S, P, 3) [m] that enter a shell, laid point by point from the root."""
        reach = xp.full(points.shape[0], float(radius))

        def out_of_shells(candidate):
            # a point pushed out of one shell can land in another (out of an eyeball, into the head): repeat
            moved, inside = colliders.recover_inside(xp, xp.ascontiguousarray(candidate), reach)
            for _ in range(NESTED_SHELLS - 1):
                if not bool(inside.any()):
                    break
                moved, again = colliders.recover_inside(xp, moved, reach)
                if not bool(again.any()):
                    break
            return moved, inside

        drawn_before = previous
        placed = [points[:, k] for k in range(self.pinned)]
        start = placed[-1]
        heading = _unit(xp, placed[-1] - placed[-2]) if self.pinned > 1 else _unit(xp, points[:, 1] - points[:, 0])
        for k in range(self.pinned, points.shape[1]):
            candidate = points[:, k] + (start - points[:, k - 1])    # exact where nothing before it moved
            moved, inside = out_of_shells(candidate)
            if bool(inside.any()):
                rows = xp.nonzero(inside)[0]          # the output is drawn once a frame: index the few inside
                candidate = candidate.copy()
                hint = None if drawn_before is None else drawn_before[rows, k]
                exit_point = _entry_exit(colliders, start[rows], candidate[rows], moved[rows], reach[rows], xp)
                candidate[rows] = self._way_out(colliders, start[rows], candidate[rows], exit_point, reach[rows],
                                                xp, heading[rows], hint)
            placed.append(candidate)
            heading = _unit(xp, candidate - start)
            start = candidate
        return xp.stack(placed, axis=1)

    def _way_out(self, colliders, start, own_end, out_end, reach, xp, heading=None, hint=None):
        """(r, 3) [m]: where segments from ``start`` (r, 3) that end inside a shell at ``own_end`` (r, 3), which
        came out of the shells at ``out_end`` (r, 3), end instead: at their own length, turned about their start
        onto the tangent planes of the nearest exits (``_lifted_out``, leaning along ``heading`` (r, 3), the unit
        direction of the segment before, as deep as the end is, or towards ``hint`` (r, 3) [m], where the end was
        drawn the frame before); where those leave the end inside, turned from
        their own direction towards the point where they came out by the least of OUTWARD_TURNS that ends outside,
        else (a fold of the skin between: the ear's root) onto the way out of the shell at the exit (own end ->
        exit point) by the least of EXIT_TURNS, else along the nearest way out (``_nearest_way_out``); where nothing
        ends outside, where it came out, or if that is inside too, on the point before it (a length error rather
        than a point inside)."""
        own, out = _unit(xp, own_end - start), _unit(xp, out_end - start)
        length = xp.sqrt(xp.sum((own_end - start) ** 2, axis=-1))[:, None]
        _, out_inside = colliders.recover_inside(xp, xp.ascontiguousarray(out_end), reach)
        exit_way = _unit(xp, out_end - own_end)
        lifted, open_rows = _lifted_out(colliders, start, own_end, out_end, length, reach, xp, heading, hint)
        choice = xp.where(open_rows[:, None], xp.where(out_inside[:, None], start, out_end), lifted)
        directions = [own + turn * (out - own) for turn in OUTWARD_TURNS]
        directions += [own + turn * (exit_way - own) for turn in EXIT_TURNS]
        choice, open_rows = _first_outside(colliders, start, length, reach, directions, choice, open_rows, xp)
        if not bool(open_rows.any()):
            return choice
        return xp.where(open_rows[:, None], self._nearest_way_out(colliders, start, own, length, reach, choice, xp),
                        choice)

    @staticmethod
    def _nearest_way_out(colliders, start, own, length, reach, fallback, xp):
        """(r, 3) [m]: for segments from ``start`` (r, 3) of ``length`` (r, 1) [m] whose turns towards the way out
        all end inside a shell, the end along the one of the AROUND directions that ends outside and is nearest
        their own direction ``own`` (r, 3) unit, then turned back towards ``own`` by the least of AROUND_TURNS
        that still ends outside (the kink no sharper than it must be); ``fallback`` (r, 3) where none does."""
        rows = xp.arange(start.shape[0])
        directions = xp.asarray(AROUND)                                                  # (D, 3)
        trials = start[:, None, :] + directions[None, :, :] * length[:, :, None]          # (r, D, 3)
        _, inside = colliders.recover_inside(xp, xp.ascontiguousarray(trials.reshape(-1, 3)),
                                             xp.repeat(reach, directions.shape[0]))
        inside = inside.reshape(trials.shape[:2])
        best = xp.argmax(xp.where(inside, -xp.inf, own @ directions.T), axis=1)
        found = ~inside[rows, best]
        way = directions[best]
        # from the nearest to own to the nearest to the way out
        end, _ = _first_outside(colliders, start, length, reach, [own + turn * (way - own) for turn in AROUND_TURNS],
                                trials[rows, best], found, xp)
        return xp.where(found[:, None], end, fallback)

    @staticmethod
    def _pinned_root_points(spec, layout: StrandLayout, model: str) -> int:
        """1 or 2: how many points at the root of every strand are pinned.

        No ``pins`` key: 2 (clamped root, DESIGN §2). Otherwise the pins must be exactly the first
        K points of every strand with weight 1 — the fast models support root pins only."""
        if "pins" not in spec.raw or spec.raw.get("pins") is None:
            return 2
        indices = np.sort(spec.pin_indices)
        for count in (2, 1):
            expected = np.sort((layout.offsets[:-1, None] + np.arange(count)[None]).ravel())
            if np.array_equal(indices, expected) and np.all(spec.pin_weights == 1.0):
                if model == "cosserat" and count == 1:
                    raise SceneError("the cosserat hair model needs clamped roots (the first two points of "
                                     "every strand pinned, or no 'pins'); got the root point only", object=spec.id)
                return count
        raise SceneError(f"the {model} hair model supports root pins only (the first 1 or 2 points of every "
                         "strand with weight 1, or no 'pins' for clamped roots); free strands and other pins "
                         "need model 'der'", object=spec.id)

    def root_frames(self, poses):
        """(roots (S, 3), rotations (S, 3, 3)) at the instant of ``poses``."""
        return self.binding.frames(poses)

    def root_targets(self, poses) -> np.ndarray:
        """(G, pinned, 3) world positions of the pinned root points of the simulated strands."""
        roots, rotations = self.simulated_root_frames(poses)
        rest = self.simulated[0]
        local = rest[:, :self.pinned] - rest[:, :1]
        return roots[:, None, :] + np.einsum("sij,skj->ski", rotations, local)

    def simulated_root_frames(self, poses):
        """(roots (G, 3), rotations (G, 3, 3)) of the simulated strands."""
        roots, rotations = self.root_frames(poses)
        if self.interpolator is None:
            return roots, rotations
        guides = self.interpolator.assignment.guides
        return roots[guides], rotations[guides]


def _first_outside(colliders, start, length, reach, directions, choice, open_rows, xp):
    """Segments from ``start`` (r, 3) of ``length`` (r, 1) [m] tried along ``directions`` (each (r, 3), in order):
    the rows still ``open_rows`` (r,) bool take the first end outside every closed shell. Returns (the ends
    (r, 3), ``choice`` where no direction ended outside; the rows still open)."""
    for direction in directions:
        if not bool(open_rows.any()):
            break
        trial = xp.ascontiguousarray(start + _unit(xp, direction) * length)
        _, trial_inside = colliders.recover_inside(xp, trial, reach)
        taken = open_rows & ~trial_inside
        choice = xp.where(taken[:, None], trial, choice)
        open_rows = open_rows & ~taken
    return choice, open_rows


def _lifted_out(colliders, start, end, exit_point, length, reach, xp, heading=None, hint=None):
    """Segments from ``start`` (r, 3) whose ``end`` (r, 3) lies inside a shell, whose nearest way out leads to
    ``exit_point`` (r, 3) (``reach`` (r,) [m] outside the skin), turned about their start: the end moved to the
    nearest point of the circle where the segment's sphere (radius ``length`` (r, 1) [m]) meets the plane facing
    the way out LIFT_OVERSHOOT times as far out as the exit, repeated from the new end's own exit while it is
    inside, LIFT_ROUNDS times at most. The first round takes the point nearest the end moved along ``heading``
    (r, 3) unit (the strand's direction before the segment, or None) by the end's depth: a segment that plunges
    into the skin has its end close to the circle's axis, where the nearest point swings round the circle with the
    least change, and it then lies along the skin the way the strand was going. With a ``hint`` (r, 3) [m] (where the
    end was drawn the frame before) the end is moved towards the hint instead, by the same depth: a plunging segment
    then lies on the side it was drawn on, and one barely inside still moves barely. An end right behind its start
    along the way out (no nearest point on the circle) stays. Returns (the ends (r, 3), (r,) bool: the rows still
    inside)."""
    open_rows = xp.ones(start.shape[0], dtype=bool)
    toward = end
    if hint is not None:
        heading = _unit(xp, hint - end)
    if heading is not None:
        toward = end + xp.sqrt(xp.sum((exit_point - end) ** 2, axis=-1))[:, None] * heading
    for _ in range(LIFT_ROUNDS):
        way = _unit(xp, exit_point - end)
        plane = end + LIFT_OVERSHOOT * (exit_point - end)
        height = xp.minimum(xp.sum((plane - start) * way, axis=-1)[:, None], length)
        centre = start + height * way
        radius = xp.sqrt(xp.maximum(length * length - height * height, 0.0))
        offset = toward - centre
        offset = offset - xp.sum(offset * way, axis=-1)[:, None] * way
        size = xp.sqrt(xp.sum(offset * offset, axis=-1))[:, None]
        lifted = centre + radius * offset / xp.maximum(size, 1e-300)
        movable = open_rows[:, None] & ((size > 1e-9 * length) | (radius == 0.0))
        end = xp.where(movable, lifted, end)
        toward = end
        exit_point, inside = colliders.recover_inside(xp, xp.ascontiguousarray(end), reach)
        open_rows = open_rows & inside
        if not bool(open_rows.any()):
            break
    return end, open_rows


def _entry_exit(colliders, start, end, nearest_exit, reach, xp):
    """(r, 3) [m]: the way out of the shells for segments from ``start`` (r, 3), outside, to ``end`` (r, 3), inside:
    ``reach`` (r,) [m] in front of the skin where the segment entered it (the mesh's two-sided contact query of a
    point moving start → end against the colliders at rest), else (no face crossed: the end entered through a gap in
    an open mesh) ``nearest_exit`` (r, 3). The nearest exit of a point under the skin jumps from one face to another
    where two are about as near (in a fold, beside an ear); where the segment entered moves with it."""
    entered, contacts = colliders.project(xp, xp.ascontiguousarray(end), reach, xp.zeros(end.shape[0]),
                                          xp.ascontiguousarray(start), interval=(1.0, 1.0), lists="laying")
    return xp.where(contacts.mask[:, None], entered, nearest_exit)


def _unit(xp, vectors):
    """Rows (n, 3) scaled to unit length (zero rows stay zero)."""
    length = xp.sqrt(xp.sum(vectors * vectors, axis=-1))
    return vectors / xp.maximum(length, 1e-15)[:, None]
