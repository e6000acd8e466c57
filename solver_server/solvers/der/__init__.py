"""Discrete Elastic Rods hair solver with Newton-based Coulomb friction contact (seed 000)."""
