"""Counting the emulated device's host synchronizations (reads of the device) made inside one function's calls."""

from __future__ import annotations

from solver_server.emulated_device import SYNCS


def host_reads() -> int:
    """Synchronizations counted so far, over every substep."""
    return sum(SYNCS.values())


def counting_reads(function, record):
    """``function`` wrapped to pass ``record`` the number of synchronizations each call made (also when it raises)."""
    def wrapper(*args, **kwargs):
        before = host_reads()
        try:
            return function(*args, **kwargs)
        finally:
            record(host_reads() - before)
    return wrapper
