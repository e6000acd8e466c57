"""Projective Dynamics for cloth and soft bodies (seed 001)."""
