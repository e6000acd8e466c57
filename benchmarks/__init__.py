"""Side-by-side performance runs (not part of the test suite)."""
