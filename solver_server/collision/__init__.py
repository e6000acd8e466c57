"""Colliders (plane, sphere, box, torus, triangle mesh), broad phase and contact projection."""

from .colliders import Collider, ColliderSet, Contacts, apply_friction

__all__ = ["Collider", "ColliderSet", "Contacts", "apply_friction"]
