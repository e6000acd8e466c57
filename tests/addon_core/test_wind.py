"""core.wind: Blender Wind fields add up as acceleration vectors; noise becomes the gust amplitude."""

import numpy as np
import pytest

from blender_addon.core.wind import scene_wind


def test_one_field_along_its_axis():
    wind = scene_wind([[0.0, 0.0, 2.0]], [3.0], [0.5])
    assert wind == {"wind_direction": [0.0, 0.0, 1.0], "wind_strength": 3.0, "wind_amplitude": 1.5}


def test_fields_add_as_vectors_and_negative_strength_blows_backwards():
    wind = scene_wind([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], [3.0, 4.0], [0.0, 0.0])
    np.testing.assert_allclose(wind["wind_direction"], [0.6, 0.8, 0.0])
    assert wind["wind_strength"] == pytest.approx(5.0)
    backwards = scene_wind([[1.0, 0.0, 0.0]], [-2.0], [0.25])
    np.testing.assert_allclose(backwards["wind_direction"], [-1.0, 0.0, 0.0])
    assert backwards["wind_strength"] == pytest.approx(2.0) and backwards["wind_amplitude"] == pytest.approx(0.5)


def test_no_field_or_cancelling_fields_give_no_wind():
    assert scene_wind(np.zeros((0, 3)), [], []) is None
    assert scene_wind([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]], [2.0, 2.0], [0.0, 0.0]) is None


def test_turbulence_fields_add_to_the_gust_and_alone_blow_a_gust_along_their_axis():
    mixed = scene_wind([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], [3.0, 2.0], [0.5, 0.0], [False, True])
    assert mixed == {"wind_direction": [1.0, 0.0, 0.0], "wind_strength": 3.0, "wind_amplitude": 1.5 + 2.0}
    alone = scene_wind([[0.0, 2.0, 0.0]], [-4.0], [0.3], [True])
    assert alone == {"wind_direction": [0.0, 1.0, 0.0], "wind_strength": 0.0, "wind_amplitude": 4.0}
    assert scene_wind([[0.0, 1.0, 0.0]], [0.0], [0.0], [True]) is None
