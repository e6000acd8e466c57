"""A numerical breakdown inside a solver (an internal error is a bug by definition) reaches the
caller as a SimulationError naming the object and the frame, in words an artist can act on, never as an
unexpected exception; the frames before it stand."""

from __future__ import annotations

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.sim.errors import SimulationError
from solver_server.simulation import Simulation
from solver_server.solvers.der import banded

from .scenes import scene


def _hanging_strand():
    points = np.stack([np.zeros(6), np.zeros(6), np.linspace(0.0, -0.1, 6)], axis=1)
    return {"id": "Strand", "kind": "hair", "points": points.astype(np.float32),
            "strand_offsets": np.array([0, 6], np.int32),
            "pins": {"indices": np.array([0], np.int32), "weights": np.ones(1, np.float32)}, "params": {"model": "der"}}


def test_a_matrix_that_stops_being_positive_definite_is_a_simulation_failure_naming_object_and_frame(monkeypatch):
    simulation = Simulation(scene([_hanging_strand()], frame_end=6), get_backend("cpu"))
    simulation.initial_frame()
    kept = [simulation.advance(None) for _ in range(2)]          # frames 2 and 3 are fine
    assert all(np.all(np.isfinite(frame[1]["Strand"])) for frame in kept)

    def broken(*args, **kwargs):
        raise banded.NotPositiveDefinite("band matrix not positive definite: strand block 0 of 1")

    monkeypatch.setattr(banded.BandedCholesky, "__init__", broken)
    with pytest.raises(SimulationError) as failure:
        simulation.advance(None)
    error = failure.value
    assert error.object == "Strand" and error.frame == 4
    assert "not positive definite" in error.message and "Likely cause" in error.message
