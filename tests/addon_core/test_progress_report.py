"""Headless bake progress: a bar redrawn in place on a terminal, a line every tenth of the
range (or every few seconds) in a log, with frame, rate, ETA and the solver's figures."""

import io

from blender_addon.core.bake_state import BakeProgress
from blender_addon.core.progress_report import ProgressPrinter, clock_text


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _bake(printer, clock, frames, seconds_per_frame=0.5, stats=None):
    progress = BakeProgress(1, frames, started_at=clock.now)
    for frame in range(1, frames + 1):
        clock.now += seconds_per_frame
        progress.record(frame, stats, now=clock.now)
        printer.frame(progress, frame, stats or {})
    return progress


def test_clock_text():
    assert clock_text(5) == "0:05" and clock_text(75.4) == "1:15" and clock_text(3725) == "1:02:05"


def test_a_terminal_gets_one_line_redrawn_with_bar_rate_eta_and_solver_figures():
    stream, clock = io.StringIO(), FakeClock()
    printer = ProgressPrinter(stream, interactive=True, clock=clock)
    progress = BakeProgress(1, 40, started_at=clock.now)
    clock.now += 2.0
    progress.record(1, {"iterations": 12, "contacts": 30}, now=clock.now)
    printer.frame(progress, 1, {"iterations": 12, "contacts": 30})
    text = stream.getvalue()
    assert text.startswith("\r\x1b[2Ktangle: [") and "\n" not in text
    assert "1/40 frames (2%) · frame 1 · 2.00 s/frame · ETA estimating · 12 iterations · 30 contacts" in text
    for frame in range(2, 6):
        clock.now += 2.0
        progress.record(frame, {}, now=clock.now)
    printer.frame(progress, 5, {})
    assert "5/40 frames (12%) · frame 5 · 2.00 s/frame · ETA 1:10" in stream.getvalue()
    printer.message("SIGINT: cancelling")
    assert stream.getvalue().endswith("\ntangle: SIGINT: cancelling\n")   # below the bar, not over it


def test_a_log_gets_a_line_per_tenth_of_the_range_and_the_last_frame():
    stream, clock = io.StringIO(), FakeClock()
    _bake(ProgressPrinter(stream, interactive=False, clock=clock), clock, 40, stats={"iterations": 10})
    lines = stream.getvalue().splitlines()
    assert [line.split(" frames")[0] for line in lines] == [f"tangle: {done}/40" for done in (1, 5, 9, 13, 17, 21,
                                                                                              25, 29, 33, 37, 40)]
    assert all("\r" not in line for line in lines)
    assert lines[-1] == "tangle: 40/40 frames (100%) · frame 40 · 0.50 s/frame · 10 iterations"


def test_a_slow_bake_logs_at_least_every_few_seconds():
    stream, clock = io.StringIO(), FakeClock()
    _bake(ProgressPrinter(stream, interactive=False, clock=clock, log_every_s=10.0), clock, 100,
          seconds_per_frame=6.0)
    assert len(stream.getvalue().splitlines()) >= 50       # every other frame at 6 s per frame, not every tenth
