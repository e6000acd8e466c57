"""Bake bookkeeping: shape-key naming, topology hashes and progress of one bake. Blender-free."""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

SHAPE_KEY_PREFIX = "tangle_f"
BASIS_NAME = "Basis"
_SHAPE_KEY_PATTERN = re.compile(rf"^{SHAPE_KEY_PREFIX}(-?\d+)$")


def shape_key_name(frame: int) -> str:
    """Name of the shape key that holds the baked positions of ``frame``: ``tangle_f0001``."""
    return f"{SHAPE_KEY_PREFIX}{frame:04d}"


def frame_of_shape_key(name: str) -> int | None:
    """Inverse of :func:`shape_key_name`; ``None`` for keys the bake did not create."""
    match = _SHAPE_KEY_PATTERN.match(name)
    return int(match.group(1)) if match else None


def topology_hash(vertex_count: int, triangles: np.ndarray) -> str:
    """Hash of a mesh's topology (vertex count + triangle indices (F, 3)); positions do not matter."""
    digest = hashlib.sha1(str(int(vertex_count)).encode())
    digest.update(np.ascontiguousarray(triangles, dtype="<i4").tobytes())
    return digest.hexdigest()[:16]


def shape_key_weights(frame: int, first_frame: int, last_frame: int) -> list[tuple[int, float]]:
    """(frame, value) keyframes for the shape key of ``frame`` with LINEAR interpolation.

    Value 1 on its own frame and 0 on the neighbours, so playback is exact at integer frames and a
    linear blend in between. Before the first baked frame and after the last one the animation holds
    (no 0-key outside the baked range), so the first and last poses extend.
    """
    keys = []
    if frame > first_frame:
        keys.append((frame - 1, 0.0))
    keys.append((frame, 1.0))
    if frame < last_frame:
        keys.append((frame + 1, 0.0))
    return keys


ETA_TIMED_FRAMES = 3         # frame-to-frame times needed before the remaining time is estimated
ETA_RECENT_SHARE = 1 / 3     # the share of the timed frames, the latest, that the estimate averages


@dataclass
class BakeProgress:
    """Progress of one bake over the inclusive frame range ``frame_start .. frame_end``."""

    frame_start: int
    frame_end: int
    started_at: float = field(default_factory=time.monotonic)
    baked_frames: set[int] = field(default_factory=set)
    last_stats: dict = field(default_factory=dict)
    arrivals: list[float] = field(default_factory=list)   # [s] monotonic time each frame arrived

    @property
    def frames_total(self) -> int:
        return self.frame_end - self.frame_start + 1

    @property
    def frames_done(self) -> int:
        return len(self.baked_frames)

    @property
    def fraction(self) -> float:
        return self.frames_done / self.frames_total

    def record(self, frame: int, stats: dict | None = None, now: float | None = None) -> None:
        """``frame`` arrived (at ``now``, monotonic seconds; default: the clock now) with its solver ``stats``."""
        if not self.frame_start <= frame <= self.frame_end:
            raise ValueError(f"frame {frame} is outside the bake range {self.frame_start}..{self.frame_end}")
        self.baked_frames.add(frame)
        self.last_stats = dict(stats or {})
        self.arrivals.append(time.monotonic() if now is None else now)

    @property
    def last_good_frame(self) -> int | None:
        """Last frame of the unbroken run of baked frames from ``frame_start`` (None if none yet)."""
        frame = self.frame_start
        while frame in self.baked_frames:
            frame += 1
        return frame - 1 if frame > self.frame_start else None

    def eta_seconds(self, now: float | None = None) -> float | None:
        """Remaining seconds, or None while estimating.

        The first frames are no guide (the scene is sent and the solver starts before the first one, the
        next one warms up the solver's caches, and contact has not begun), nor is the mean since the start
        once contact slows the frames down: the estimate is the mean time between the latest frames (the
        last third of the frame-to-frame times after the first one, at least ETA_TIMED_FRAMES) times the
        frames left, less the time already spent on the next one. None until ETA_TIMED_FRAMES such times are
        known."""
        timed = len(self.arrivals) - 2
        if timed < ETA_TIMED_FRAMES:
            return None
        recent = max(ETA_TIMED_FRAMES, round(timed * ETA_RECENT_SHARE))
        per_frame = (self.arrivals[-1] - self.arrivals[-1 - recent]) / recent
        spent = (time.monotonic() if now is None else now) - self.arrivals[-1]
        left = self.frames_total - self.frames_done
        return max(0.0, per_frame * left - min(spent, per_frame)) if left else 0.0

    def eta_hindsight(self, fraction: float = 0.25) -> tuple[float | None, float] | None:
        """(the ETA this bake showed when ``fraction`` of its frames had arrived, the time those frames then
        really took) [s], from the arrival times; None before the bake has all its frames."""
        if len(self.arrivals) < self.frames_total:
            return None
        seen = max(1, math.ceil(fraction * self.frames_total))
        then = BakeProgress(self.frame_start, self.frame_end, self.started_at,
                            set(sorted(self.baked_frames)[:seen]), arrivals=self.arrivals[:seen])
        return then.eta_seconds(self.arrivals[seen - 1]), self.arrivals[-1] - self.arrivals[seen - 1]

    def status_line(self, now: float | None = None) -> str:
        eta = self.eta_seconds(now)
        eta_text = ", estimating time left" if eta is None else f", ETA {eta:.0f} s"
        return f"frame {self.frames_done}/{self.frames_total}{eta_text}"


# Convergence figures the solvers report per frame, in order of preference for the panel's "residual":
# PD's iterative global solve, DER's Fischer-Burmeister contact residual, DER's mean velocity update.
RESIDUAL_KEYS = (("global_residual", "residual"), ("fischer_burmeister", "FB residual"),
                 ("mean_dv", "mean |Δv| [m/s]"))


def stats_line(stats: Mapping[str, object]) -> str:
    """The solver's per-frame figures for the panel,
    e.g. "40 iterations · 12 contacts · residual 3.2e-07 · 3.5 ms/substep"."""
    parts = []
    if "iterations" in stats:
        parts.append(f"{int(stats['iterations'])} iterations")
    if "contacts" in stats:
        parts.append(f"{int(stats['contacts'])} contacts")
    for key, label in RESIDUAL_KEYS:
        if isinstance(stats.get(key), (int, float)):
            parts.append(f"{label} {float(stats[key]):.2g}")
            break
    if "step_ms" in stats:
        parts.append(f"{float(stats['step_ms']):.1f} ms/substep")
    parts.extend(contact_warnings(stats))
    return " · ".join(parts)


def contact_warnings(stats: Mapping[str, object]) -> list[str]:
    """What the contact solve could not do cleanly in a frame (docs/contact.md), in an artist's words:
    pairs of cloth surfaces still touching after the last self-contact pass, surface edges passing through
    a collider mesh (a thin part such as an ear between two cloth points), cloth edges stretched past their
    limit (a heavy body on the cloth, pins dragged apart), hair points that only their sunk
    roots could bring out of a collider (left out of contact), points moved out of a closed
    collider shell (at the start, or after a collider teleported), colliders that teleported."""
    warnings = []
    left = int(stats.get("self_contacts_left", 0) or 0)
    if left:
        where = stats.get("self_contacts_left_objects")
        warnings.append(f"{left} self-contacts unresolved" + (f" ({', '.join(map(str, where))})" if where else ""))
    through = int(stats.get("collider_edges_left", 0) or 0)
    if through:
        warnings.append(f"{through} edges through a collider")
    stretched = int(stats.get("stretch_beyond_limit", 0) or 0)
    if stretched:
        where = stats.get("stretch_beyond_limit_objects")
        worst = stats.get("stretch_worst")
        warnings.append(f"{stretched} cloth edges stretched past their limit"
                        + (f" ({', '.join(map(str, where))})" if where else "")
                        + (f", up to {float(worst):.2f}× their length" if worst else ""))
    sunk = int(stats.get("unreachable_contacts", 0) or 0)
    if sunk:
        warnings.append(f"{sunk} hair points rooted inside a collider (no contact there)")
    recovered = int(stats.get("recovered_inside", 0) or 0)
    if recovered:
        warnings.append(f"{recovered} points moved out of a collider")
    teleported = stats.get("teleported_colliders")
    if teleported:
        warnings.append("teleported: " + ", ".join(str(name) for name in teleported))
    return warnings


def server_line(welcome: Mapping[str, object]) -> str:
    """The server's ``welcome`` body in one line: "tangle-solver 0.1.0 · cpu · x86_64 (23.5 GiB)"."""
    device = welcome.get("device") or {}
    memory = device.get("memory_bytes")
    memory_text = f" ({memory / 2**30:.1f} GiB)" if memory else ""
    return f"{welcome.get('server', 'unknown server')} · {welcome.get('backend', '?')} · " \
           f"{device.get('name', 'unknown device')}{memory_text}"


# ---- what a bake left behind, and continuing it (resume / re-bake from a frame) -----------------

OUTPUT_ROUTES = ("SHAPE_KEYS", "PC2")


MESH_ROUTE_NAMES = {"SHAPE_KEYS": "shape keys", "PC2": "a PC2 cache"}
HAIR_CACHE_NAMES = {"KEYFRAMES": "keyframed hair", "GEOMETRY_NODES": "hair in a Geometry Nodes bake"}


def bake_route(output_route: str, hair_cache: str = "KEYFRAMES") -> str:
    """The route a bake is recorded under: the mesh output (``SHAPE_KEYS`` / ``PC2``), followed by
    ``+GEOMETRY_NODES`` when Curves hair goes into a Geometry Nodes bake instead of keyframes."""
    return output_route if hair_cache == "KEYFRAMES" else f"{output_route}+{hair_cache}"


def split_route(route: str) -> tuple[str, str]:
    """(mesh output, hair cache) of a recorded route (records older than the hair cache: keyframes)."""
    mesh_route, _, hair_cache = route.partition("+")
    return mesh_route, hair_cache or "KEYFRAMES"


def describe_route(route: str) -> str:
    mesh_route, hair_cache = split_route(route)
    return f"{MESH_ROUTE_NAMES.get(mesh_route, mesh_route)} and {HAIR_CACHE_NAMES.get(hair_cache, hair_cache)}"


class BakeRefused(Exception):
    """A resume / re-bake request that cannot keep the existing frames; nothing was sent."""


@dataclass
class BakeRecord:
    """The bake stored with a scene (an ID property of the Scene, saved in the .blend).

    frame_start / frame_end: the bake range. route: ``bake_route`` ("SHAPE_KEYS", "PC2", either
    + "+GEOMETRY_NODES" for hair in a Geometry Nodes bake). objects: {object name:
    topology hash at bake time}. last_frame: last frame of the unbroken run of baked frames from
    frame_start (None before any). checkpoints: {frame: encoded checkpoint bytes} (core.checkpoints).
    """

    frame_start: int
    frame_end: int
    route: str
    objects: dict[str, str]
    last_frame: int | None = None
    checkpoints: dict[int, bytes] = field(default_factory=dict)

    def to_properties(self) -> dict:
        """A dict of ID-property-storable values (str keys; int, str, bytes leaves)."""
        return {"frame_start": self.frame_start, "frame_end": self.frame_end, "route": self.route,
                "objects": dict(self.objects), "last_frame": -1 if self.last_frame is None else self.last_frame,
                "has_last_frame": self.last_frame is not None,
                "checkpoints": {str(frame): bytes(blob) for frame, blob in self.checkpoints.items()}}

    @classmethod
    def from_properties(cls, values: Mapping[str, object]) -> "BakeRecord":
        has_last = bool(values.get("has_last_frame", False))
        return cls(int(values["frame_start"]), int(values["frame_end"]), str(values["route"]),
                   {str(name): str(digest) for name, digest in dict(values.get("objects", {})).items()},
                   int(values["last_frame"]) if has_last else None,
                   {int(frame): bytes(blob) for frame, blob in dict(values.get("checkpoints", {})).items()})


def frames_text(first: int, last: int) -> str:
    """"frame 7" or "frames 7–12"."""
    return f"frame {first}" if first == last else f"frames {first}–{last}"


def stored_text(record: "BakeRecord | None") -> str:
    """What the stored bake holds: "frames 1–16 stored (complete)" or "frames 1–10 stored, 11–16 missing"."""
    if record is None:
        return "nothing stored"
    if record.last_frame is None:
        return f"nothing stored of {frames_text(record.frame_start, record.frame_end)}"
    stored = f"{frames_text(record.frame_start, record.last_frame)} stored"
    if record.last_frame >= record.frame_end:
        return f"{stored} (complete)"
    missing = frames_text(record.last_frame + 1, record.frame_end).replace("frames ", "").replace("frame ", "")
    return f"{stored}, {missing} missing (Resume continues)"


def outcome_status(state: str, written: tuple[int, int] | None, replaced: int, elapsed_s: float,
                   record: "BakeRecord | None") -> str:
    """The status line after a bake, resume or re-bake: how it ended, the frames this run wrote (and how many
    of them replaced frames baked before), and what the stored bake holds now, e.g.
    "Cancelled: frames 1–10 baked in 3.1 s · frames 1–10 stored, 11–16 missing (Resume continues)".

    state: "finished" | "cancelled" | "failed"; written: (first, last) frame this run wrote, or None."""
    verb = {"finished": "Baked", "cancelled": "Cancelled", "failed": "Failed"}[state]
    if written is None:
        did = "no frame baked"
    else:
        did = f"{frames_text(*written)} baked" + (f" ({replaced} replaced)" if replaced else "")
    return f"{verb}: {did} in {elapsed_s:.1f} s · {stored_text(record)}"


@dataclass(frozen=True)
class Continuation:
    """How to continue a stored bake: compute frames ``first_new_frame ..`` (frames before it are kept
    untouched); ``resume_frame`` is the checkpoint to restore (None: simulate from the input state and
    discard the recomputed frames before ``first_new_frame``)."""

    first_new_frame: int
    resume_frame: int | None


def plan_continuation(record: BakeRecord | None, first_new_frame: int, frame_start: int, frame_end: int,
                      route: str, topologies: Mapping[str, str]) -> Continuation:
    """Check that the stored bake can be continued from ``first_new_frame`` with the scene as it is now.

    topologies: {object name: topology hash} of the objects that would be baked now. Raises
    :class:`BakeRefused` with a message naming the object / frame when the earlier frames cannot be kept.
    """
    if record is None or record.last_frame is None:
        raise BakeRefused("there is no Tangle bake in this scene to continue; bake from the start")
    if record.frame_start != frame_start:
        raise BakeRefused(f"the bake starts at frame {record.frame_start} but the bake range now starts at "
                          f"{frame_start}; bake from the start")
    if record.route != route:
        raise BakeRefused(f"the bake was written as {describe_route(record.route)}, the output is now "
                          f"{describe_route(route)}; switch the output back or bake from the start")
    for name in sorted(set(record.objects) - set(topologies)):
        raise BakeRefused(f"object '{name}' was baked but is no longer simulated (deleted, renamed or its role "
                          "changed); bake from the start")
    for name in sorted(set(topologies) - set(record.objects)):
        raise BakeRefused(f"object '{name}' is simulated now but was not part of the bake; bake from the start")
    for name in sorted(topologies):
        if topologies[name] != record.objects[name]:
            raise BakeRefused(f"object '{name}': the mesh topology changed since the bake (vertices or faces "
                              "added, removed or reordered); free the bake or bake from the start")
    if not frame_start < first_new_frame <= record.last_frame + 1:
        raise BakeRefused(f"cannot continue from frame {first_new_frame}: frames {frame_start}..{record.last_frame} "
                          f"are baked, so continue from a frame in {frame_start + 1}..{record.last_frame + 1}")
    if first_new_frame > frame_end:
        raise BakeRefused(f"frames {frame_start}..{frame_end} are all baked already; nothing to resume")
    from .checkpoints import checkpoint_to_resume_from

    return Continuation(first_new_frame, checkpoint_to_resume_from(record.checkpoints, frame_start, first_new_frame))
