"""Tangle solver server: ``python -m solver_server --bind tcp://127.0.0.1:5555``."""

__version__ = "0.1.0"
