"""Progress of a headless bake on a terminal or in a log. Blender-free.

On a terminal (``interactive``) one line is redrawn in place after every frame: a bar, frames done, the
frame just baked, seconds per frame, the estimated time left and the solver's figures. In a log (stdout
not a terminal: a render farm, CI) a plain line is written every ``log_every_frames`` frames (a tenth of
the range by default) or ``log_every_s`` seconds, whichever comes first, and at the last frame.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TextIO

from .bake_state import BakeProgress, stats_line

BAR_WIDTH = 24


def clock_text(seconds: float) -> str:
    """Seconds as h:mm:ss or m:ss."""
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class ProgressPrinter:
    """Writes a bake's progress to ``stream`` (see module docstring)."""

    def __init__(self, stream: TextIO, interactive: bool, log_every_frames: int | None = None,
                 log_every_s: float = 10.0, clock=time.monotonic):
        self.stream = stream
        self.interactive = interactive
        self.log_every_frames = log_every_frames
        self.log_every_s = log_every_s
        self.clock = clock
        self._last_line_at = None
        self._last_line_frames = 0
        self._bar_open = False
        self.progress: BakeProgress | None = None   # the bake's progress as last reported (arrival times included)

    def describe(self, progress: BakeProgress, frame: int, stats: Mapping[str, object]) -> str:
        """The progress text after ``frame`` was baked (no bar)."""
        now = self.clock()
        done, total = progress.frames_done, progress.frames_total
        parts = [f"{done}/{total} frames ({100 * done // total}%)", f"frame {frame}"]
        if done:
            parts.append(f"{(now - progress.started_at) / done:.2f} s/frame")
        eta = progress.eta_seconds(now)
        if done < total:
            parts.append("ETA estimating" if eta is None else f"ETA {clock_text(eta)}")
        figures = stats_line(stats)
        return " · ".join(parts + ([figures] if figures else []))

    def frame(self, progress: BakeProgress, frame: int, stats: Mapping[str, object]) -> None:
        """Report that ``frame`` was baked (``progress`` already records it)."""
        self.progress = progress
        text = self.describe(progress, frame, stats)
        done, total = progress.frames_done, progress.frames_total
        if self.interactive:
            filled = BAR_WIDTH * done // total
            self.stream.write(f"\r\x1b[2Ktangle: [{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {text}")
            self._bar_open = True
            self.stream.flush()
            return
        now = self.clock()
        every = self.log_every_frames or max(1, total // 10)
        due = (done - self._last_line_frames >= every or done == total or self._last_line_at is None
               or now - self._last_line_at >= self.log_every_s)
        if due:
            self.stream.write(f"tangle: {text}\n")
            self.stream.flush()
            self._last_line_at, self._last_line_frames = now, done

    def message(self, text: str) -> None:
        """A line of its own (a notice between frames), below the bar when one is drawn."""
        self.close()
        self.stream.write(f"tangle: {text}\n")
        self.stream.flush()

    def close(self) -> None:
        """End the redrawn line so later output starts on a line of its own."""
        if self._bar_open:
            self.stream.write("\n")
            self.stream.flush()
            self._bar_open = False
