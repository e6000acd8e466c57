"""The connection a bake of a scene uses: its server profile, its address, or this session's local solver."""

from __future__ import annotations

import bpy

from .core.connection import ConnectionSettingsError, ServerConnection, is_local
from .core.local_server import LocalServerError
from .preferences import addon_preferences, local_server_python
from .session import ensure_local_server


def scene_connection(scene, context=None) -> ServerConnection:
    """The connection a bake of ``scene`` uses: its server profile (address + keys) when one is picked,
    else the scene's address; the address ``local`` starts (or reuses) this session's local solver.
    Raises ConnectionSettingsError naming the profile when it cannot work."""
    settings = scene.tangle
    name = settings.server_profile
    if not name and is_local(settings.server_address):
        try:
            connection = ServerConnection(ensure_local_server(*local_server_python(context)).address, local=True)
        except LocalServerError as error:
            raise ConnectionSettingsError(f"the local solver did not start: {error}") from error
    elif not name:
        connection = ServerConnection(settings.server_address)
    else:
        prefs = addon_preferences(context)
        profile = prefs.profiles.get(name) if prefs is not None else None
        if profile is None:
            raise ConnectionSettingsError(
                f"scene '{scene.name}' uses server profile '{name}', which is not defined in the Tangle add-on "
                "preferences on this machine; add it there or clear the scene's profile")
        connection = ServerConnection(
            profile.address,
            bpy.path.abspath(profile.server_public_key_file) if profile.server_public_key_file else "",
            bpy.path.abspath(profile.client_secret_key_file) if profile.client_secret_key_file else "",
            profile=name)
    connection.validate()
    return connection
