"""Bake bookkeeping: shape-key naming, topology hashes and progress of one bake. Blender-free."""

from __future__ import annotations

import hashlib
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


@dataclass
class BakeProgress:
    """Progress of one bake over the inclusive frame range ``frame_start .. frame_end``."""

    frame_start: int
    frame_end: int
    started_at: float = field(default_factory=time.monotonic)
    baked_frames: set[int] = field(default_factory=set)
    last_stats: dict = field(default_factory=dict)

    @property
    def frames_total(self) -> int:
        return self.frame_end - self.frame_start + 1

    @property
    def frames_done(self) -> int:
        return len(self.baked_frames)

    @property
    def fraction(self) -> float:
        return self.frames_done / self.frames_total

    def record(self, frame: int, stats: dict | None = None) -> None:
        if not self.frame_start <= frame <= self.frame_end:
            raise ValueError(f"frame {frame} is outside the bake range {self.frame_start}..{self.frame_end}")
        self.baked_frames.add(frame)
        self.last_stats = dict(stats or {})

    @property
    def last_good_frame(self) -> int | None:
        """Last frame of the unbroken run of baked frames from ``frame_start`` (None if none yet)."""
        frame = self.frame_start
        while frame in self.baked_frames:
            frame += 1
        return frame - 1 if frame > self.frame_start else None

    def eta_seconds(self, now: float | None = None) -> float | None:
        """Remaining seconds extrapolated from the mean time per frame so far (None before any frame)."""
        if self.frames_done == 0:
            return None
        elapsed = (time.monotonic() if now is None else now) - self.started_at
        return elapsed / self.frames_done * (self.frames_total - self.frames_done)

    def status_line(self, now: float | None = None) -> str:
        eta = self.eta_seconds(now)
        eta_text = "" if eta is None else f", ETA {eta:.0f} s"
        return f"frame {self.frames_done}/{self.frames_total}{eta_text}"


def stats_line(stats: Mapping[str, object]) -> str:
    """The solver's per-frame figures for the panel, e.g. "40 iterations · 12 contacts · 3.5 ms/substep"."""
    parts = []
    if "iterations" in stats:
        parts.append(f"{int(stats['iterations'])} iterations")
    if "contacts" in stats:
        parts.append(f"{int(stats['contacts'])} contacts")
    if "step_ms" in stats:
        parts.append(f"{float(stats['step_ms']):.1f} ms/substep")
    return " · ".join(parts)


def server_line(welcome: Mapping[str, object]) -> str:
    """The server's ``welcome`` body in one line: "tangle-solver 0.1.0 · cpu · x86_64 (23.5 GiB)"."""
    device = welcome.get("device") or {}
    memory = device.get("memory_bytes")
    memory_text = f" ({memory / 2**30:.1f} GiB)" if memory else ""
    return f"{welcome.get('server', 'unknown server')} · {welcome.get('backend', '?')} · " \
           f"{device.get('name', 'unknown device')}{memory_text}"
