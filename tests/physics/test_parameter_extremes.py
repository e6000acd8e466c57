"""For every object kind, parameters drawn across the kind's whole parameter table
(bounds and log-uniform between; ``benchmarks.parameter_sweep`` holds the tables' draws and the small scenes)
and substeps 1..24 give finite frames, or a clear ``bad_scene`` at submit; never ``simulation_failed`` or an
unexpected exception on input the table accepts. Derandomized, so CI sees the same draws every run; the
time per frame is measured by the sweep, not asserted here (no timing asserts)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.parameter_sweep import KINDS
from solver_server.backend import get_backend
from solver_server.sim.errors import SceneError
from solver_server.simulation import Simulation

from .scenes import scene


def _across(spec):
    """A value of table parameter ``spec``: a bound or log-uniform between (open 0 bound: 1e-9 × upper)."""
    low = spec.low if spec.low > 0.0 else spec.high * 1e-9
    ends = [st.just(float(spec.high))] + ([] if spec.low_open else [st.just(float(spec.low))])
    return st.one_of(*ends, st.floats(math.log10(low), math.log10(spec.high)).map(lambda e: float(10.0 ** e)))


def _draws(kind):
    table, drawn, _, _ = KINDS[kind]
    specs = {spec.name: spec for spec in table}
    params = st.fixed_dictionaries({name: _across(specs[name]) for name in drawn})
    if kind == "cloth":
        params = st.tuples(params, st.booleans()).map(lambda pair: {**pair[0], "self_collision": pair[1]})
    return params


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_parameters_across_the_table_simulate_or_are_refused_at_submit(kind):
    _, _, build, object_id = KINDS[kind]

    @settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(params=_draws(kind), substeps=st.integers(1, 24))
    def check(params, substeps):
        try:
            simulation = Simulation(scene(build(params), frame_end=3, substeps=substeps), get_backend("cpu"))
        except SceneError:
            return                 # a clear bad_scene at submit is an allowed answer
        simulation.initial_frame()
        for _ in range(2):
            _, positions, _ = simulation.advance(None)
            assert np.all(np.isfinite(positions[object_id])), (params, substeps)

    check()
