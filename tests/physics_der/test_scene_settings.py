"""scene["solver"]["der"] keys of the Newton loop: defaults, the seed's schedule, refusals."""

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.sim.errors import SceneError
from solver_server.simulation import Simulation

from .test_cross_object import _free_pins, _hair, _line, _scene


def _newton_settings(solver):
    strand = _line(8, 0.07, (1.0, 0.0, 0.0), (0.0, 0.0, 0.1))
    simulation = Simulation(_scene([_hair("Strand", strand, _free_pins(), radius=1e-4)], 2, solver=solver),
                            get_backend("cpu"))
    group = next(group for group in simulation.groups if hasattr(group, "solvers"))
    return group.solvers[0].solver.integrator.settings


def test_scene_defaults_use_the_bent_path_and_detect_contacts_after_the_free_motion():
    settings = _newton_settings(None)
    assert settings.length_preserving_path is True
    assert settings.contact_detection_tolerance == pytest.approx(1e-4)
    assert settings.contact_detection_iterations == 8


def test_negative_detection_tolerance_is_the_seed_schedule_and_keys_are_applied():
    settings = _newton_settings({"contact_detection_tolerance": -1, "contact_detection_iterations": 3,
                                 "length_preserving_path": False})
    assert settings.contact_detection_tolerance is None
    assert settings.contact_detection_iterations == 3
    assert settings.length_preserving_path is False


@pytest.mark.parametrize("bad", [{"contact_detection_iterations": 0}, {"contact_detection_tolerance": float("nan")},
                                 {"contact_detection_tolerence": 1e-4}])
def test_bad_detection_settings_are_refused_naming_the_key(bad):
    with pytest.raises(SceneError, match="contact_detection"):
        _newton_settings(bad)
