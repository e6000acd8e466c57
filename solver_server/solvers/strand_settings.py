"""Reading a fast strand model's settings dataclass from a hair object's params (shared by the particle
and Cosserat models): protocol key per field, float (or int) conversion."""

from __future__ import annotations

from dataclasses import fields


def settings_from_hair_params(cls, params: dict, key_for, wind, integers: tuple[str, ...] = ()):
    """``cls(**values, wind=wind)`` for the dataclass ``cls``: every field but ``wind`` whose protocol key
    ``key_for(field name)`` is in ``params`` is read as float (int for ``integers``); missing keys keep the
    dataclass defaults. Range checks stay with each model."""
    values = {}
    for field in fields(cls):
        if field.name == "wind":
            continue
        key = key_for(field.name)
        if key in params:
            values[field.name] = int(params[key]) if field.name in integers else float(params[key])
    return cls(**values, wind=wind)
