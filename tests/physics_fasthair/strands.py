"""Test strands for the fast hair models' kernel tests."""

import numpy as np

from solver_server.solvers.guides.layout import StrandLayout


def curly_strands(counts, seed, steps, radius, spacing, drop):
    """Padded rest positions (S, P, 3) and layout of helical strands of uneven segments, one per count: helix
    parameter steps drawn uniformly from ``steps`` (low, high, scale) [rad], helix ``radius`` [m], strands
    ``spacing`` [m] apart along x, descending ``drop`` [m] per radian."""
    rng = np.random.default_rng(seed)
    low, high, scale = steps
    flat = []
    for index, count in enumerate(counts):
        t = np.cumsum(rng.uniform(low, high, count)) * scale
        flat.append(np.stack([radius * np.cos(t) + spacing * index, radius * np.sin(t), -drop * t], axis=-1))
    offsets = np.concatenate([[0], np.cumsum(counts)])
    layout = StrandLayout.from_offsets(offsets, int(offsets[-1]))
    return layout.pad(np.concatenate(flat)), layout
