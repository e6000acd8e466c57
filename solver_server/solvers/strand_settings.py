"""Reading a fast strand model's settings dataclass from a hair object's params (shared by the particle
and Cosserat models): protocol key per field, float (or int) conversion, and the range checks."""

from __future__ import annotations

from dataclasses import fields

from solver_server.sim.errors import SceneError


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


def check_ranges(checks, object_id: str | None = None) -> None:
    """Raise SceneError naming the object for the first failed check of ``checks``: (protocol key, value,
    passed: bool, the rule in words such as "> 0")."""
    for key, value, passed, rule in checks:
        if not passed:
            raise SceneError(f"parameter {key!r} = {value!r} must be {rule}", object=object_id)
