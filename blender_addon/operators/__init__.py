"""Tangle operators: bake (modal in the UI, blocking from scripts), cancel, free bake,
test connection."""
