"""Reading a fast strand model's settings dataclass from a hair object's params (shared by the particle
and Cosserat models): protocol key per field, float (or int) conversion, and the range checks of the
parameter table (``sim.params``), which also gives the dataclasses their defaults."""

from __future__ import annotations

from dataclasses import fields

from ..sim.params import check_values, default_of


def hair_default(key: str):
    """The parameter table's default of hair parameter ``key`` (a settings dataclass field's default)."""
    return default_of("hair", key)


def settings_from_hair_params(cls, params: dict, key_for, wind, integers: tuple[str, ...] = ()):
    """``cls(**values, wind=wind)`` for the dataclass ``cls``: every field but ``wind`` whose protocol key
    ``key_for(field name)`` is in ``params`` is read as float (int for ``integers``); missing keys keep the
    dataclass defaults."""
    values = {}
    for field in fields(cls):
        if field.name == "wind":
            continue
        key = key_for(field.name)
        if key in params:
            values[field.name] = int(params[key]) if field.name in integers else float(params[key])
    return cls(**values, wind=wind)


def check_settings(settings, key_for, object_id: str | None = None, table_free: tuple[str, ...] = ()) -> None:
    """Check every field of a settings dataclass but ``wind`` and ``table_free`` (fields the table lacks,
    checked by their model) against the hair parameter table's range of its protocol key ``key_for(name)``:
    SceneError naming the object and the key."""
    check_values("hair", {key_for(field.name): getattr(settings, field.name) for field in fields(settings)
                          if field.name != "wind" and field.name not in table_free}, object_id)
