"""When the DER step detects contacts: after the first iteration (seed Algorithm 2) or once the free motion
has converged (NewtonSettings.contact_detection_tolerance)."""

import numpy as np
import pytest

from solver_server.solvers.der.integrator import ImplicitEulerSolver
from solver_server.solvers.der.settings import NewtonSettings
from solver_server.solvers.der.model import DerMaterial, build_model
from solver_server.solvers.der.solver import clamped_root_vertices
from solver_server.solvers.der.state import rest_state

from .helpers import BACKEND, GRAVITY, straight

STEP = 1.0 / 120.0
FINE_HAIR = DerMaterial(radius=5e-5, young_modulus=3e9, shear_modulus=1e9, density=1300.0, damping=0.5)


class RecordingHandler:
    """Impulse handler that records the contact rounds it is asked for and never pushes."""

    def __init__(self):
        self.rounds = []       # (round, mean |Δv| of the global step that preceded it) [m/s]

    def set_system(self, factor):
        pass

    def update(self, iteration, velocity_before, velocity_after):
        self.rounds.append((iteration, float(np.mean(np.abs(velocity_after - velocity_before)))))
        return None

    def converged(self):
        return True

    contact_count = 0
    checks_end_positions = False

    def keep_outside(self, positions, velocities):
        return None


def _step(detection, handler):
    model = build_model(np, straight(21, 0.12), np.array([0, 21]), FINE_HAIR)
    settings = NewtonSettings(tolerance=1e-8, quasi_newton_matrix="gauss_newton", refresh_interval=1,
                              contact_detection_tolerance=detection)
    integrator = ImplicitEulerSolver(np, BACKEND.to_host, BACKEND.from_host, model, settings)
    fixed = model.position_dofs[clamped_root_vertices(np, model)].ravel()
    state = rest_state(np, model)
    # a strand that already swings down fast: the first iterate is far from the end-of-step motion
    state.velocities[:] = np.linspace(0.0, 1.0, 21)[:, None] * np.array([0.0, 0.0, -1.0])
    state.velocities[:2] = 0.0
    return integrator.step(state, STEP, GRAVITY, fixed, np.zeros(fixed.shape[0]), handler)


def test_seed_detection_comes_after_the_first_iteration():
    handler = RecordingHandler()
    _, stats = _step(None, handler)
    assert handler.rounds[0][0] == 0
    # one contact round after every global step (the last iteration may stop because nothing moved)
    assert stats.iterations - 1 <= len(handler.rounds) <= stats.iterations
    assert handler.rounds[0][1] > 1e-3                      # made from a first iterate still far from converged


@pytest.mark.parametrize("detection", [1e-3, 1e-5])
def test_delayed_detection_waits_for_the_free_motion_and_leaves_the_motion_unchanged(detection):
    handler = RecordingHandler()
    delayed, stats = _step(detection, handler)
    assert [r for r, _ in handler.rounds] == list(range(len(handler.rounds)))
    skipped = stats.iterations - len(handler.rounds)        # global steps before the detection
    assert skipped >= 1
    assert handler.rounds[0][1] < detection                 # the step it detects along has converged that far
    seed, _ = _step(None, RecordingHandler())
    np.testing.assert_allclose(delayed.positions, seed.positions, atol=1e-9)   # no impulse: same motion
