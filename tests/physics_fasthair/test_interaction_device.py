"""Strand interaction on the backend's arrays: the xp port keeps the numpy results, and on a
device-like backend (solver_server.emulated_device) the force pass copies nothing to the host."""

import numpy as np
import pytest

from solver_server.solvers.cosserat.interaction import SweptSphereInteraction
from solver_server.emulated_device import SYNCS, emulated_cuda_backend, substep_guard

# Computed with the host-only force pass (before the xp port, commit dc4904b) on `scene()`:
# (interacting pairs, sum |F| [N], F on strand 2 node 4 [N], candidate pairs) for three calls:
# first build, reuse of the Verlet list (small move), rebuild (move beyond half the margin).
HOST_REFERENCE = [
    (239, 0.4378396432866137, [0.0011091260378041045, 0.0007226286484700058, -0.00045567467788758514], 1172),
    (238, 0.4344301478535569, [0.0010987597713794821, 0.0007155323872505251, -0.000452378797126629], 1172),
    (207, 0.3584235959943702, [0.0007944233581152515, 0.0005116042229473408, -0.0003580210349320803], 1114),
]
SHIFTS = (0.0, 1e-4, 3e-3)
"""Per call, strand k moves by SHIFT · k / 10 along x [m]."""


def scene():
    """10 jittered strands of 9 nodes 2.5 mm apart, two with padded tails: positions, velocities (10, 9, 3)
    [m], [m/s], segment_valid (10, 8)."""
    rng = np.random.default_rng(8)
    strands, points = 10, 9
    positions = np.zeros((strands, points, 3))
    positions[:, :, 2] = -np.linspace(0.0, 0.08, points)
    positions[:, :, 0] = (np.arange(strands) * 0.0025)[:, None]
    positions += rng.normal(scale=0.0015, size=positions.shape)
    velocities = rng.normal(scale=0.05, size=positions.shape)
    valid = np.ones((strands, points - 1), bool)
    valid[3, 6:] = False
    valid[7, 4:] = False
    return positions, velocities, valid


def interaction(valid, xp=np):
    return SweptSphereInteraction(np.linspace(0.001, 0.0016, 10), np.linspace(0.002, 0.003, 10), 2.5, 0.3, valid, xp)


def moved(positions, shift):
    out = positions.copy()
    out[:, :, 0] += shift * np.arange(len(positions))[:, None] / 10
    return out


def test_numpy_path_matches_the_host_reference():
    positions, velocities, valid = scene()
    swept = interaction(valid)
    for shift, (count, magnitude, node, candidates) in zip(SHIFTS, HOST_REFERENCE):
        forces, pairs = swept.forces(moved(positions, shift), velocities)
        assert pairs == count
        assert len(swept._pairs) == candidates
        np.testing.assert_allclose(np.abs(forces).sum(), magnitude, rtol=1e-12)
        np.testing.assert_allclose(forces[2, 4], node, rtol=1e-12, atol=1e-18)
        np.testing.assert_allclose(forces.sum(axis=(0, 1)), 0.0, atol=1e-15)      # action = reaction


@pytest.mark.parametrize("shift", [0.0, 0.01])
def test_out_of_reach_candidates_add_nothing(shift):
    """The pass keeps candidate pairs beyond the outer radii (no mask sync): their forces are exact zeros,
    so a strand pushed out of everyone's reach right after the list was built feels no force."""
    positions, velocities, valid = scene()
    swept = interaction(valid)
    swept.forces(positions, velocities)
    far = positions.copy()
    far[0, :, 1] += shift                                  # strand 0 leaves sideways by 10 mm
    swept.margin = 1.0                                     # keep the list: every old pair stays a candidate
    forces, _ = swept.forces(far, velocities)
    if shift:
        assert np.all(forces[0] == 0.0)
    else:
        assert np.any(forces[0] != 0.0)


def test_strict_device_backend_equals_numpy_and_copies_nothing_inside_the_pass():
    positions, velocities, valid = scene()
    backend = emulated_cuda_backend()
    host, device = interaction(valid), interaction(valid, backend.xp)
    for step, shift in enumerate(SHIFTS):
        where = f"interaction device test call {step}"
        with substep_guard(where):                          # a device -> host array copy raises
            forces, pairs = device.forces(backend.from_host(moved(positions, shift)), backend.from_host(velocities))
        expected, expected_pairs = host.forces(moved(positions, shift), velocities)
        assert pairs == expected_pairs
        np.testing.assert_allclose(backend.to_host(forces), expected, rtol=1e-12, atol=1e-18)
        # scalar reads: the reuse decision and the pair count; a rebuild adds the segment lengths and a mask
        assert SYNCS[where] <= (2 if step == 1 else 6)


def test_grid_candidates_are_the_kdtree_pairs_without_neighbours_along_a_strand():
    """The kernel broad phase lists exactly the pairs a k-d tree finds within reach, less the neighbours
    along one strand, on strands whose reach spans many of their own segments."""
    from solver_server.collision.broad_phase import kdtree_neighbour_pairs

    rng = np.random.default_rng(3)
    strands, points = 12, 60
    positions = np.cumsum(rng.normal(scale=0.0008, size=(strands, points, 3)) + [0.0, 0.0, -0.0005], axis=1)
    positions += (rng.uniform(-0.004, 0.004, size=(strands, 1, 3)))
    valid = np.ones((strands, points - 1), bool)
    valid[5, 40:] = False
    swept = SweptSphereInteraction(0.001, 0.002, 1.0, 0.1, valid)
    strand_of, segment_of = np.nonzero(valid)
    midpoints = 0.5 * (positions[strand_of, segment_of] + positions[strand_of, segment_of + 1])
    reach, along = 0.006, 7
    pairs = swept._grid_candidates(np.ascontiguousarray(midpoints), reach, along)
    expected = kdtree_neighbour_pairs(midpoints, reach)
    i, j = expected[:, 0], expected[:, 1]
    expected = expected[~((strand_of[i] == strand_of[j]) & (np.abs(segment_of[i] - segment_of[j]) <= along))]
    assert len(expected) > 100 and len(pairs) == len(expected)
    assert set(map(tuple, pairs.tolist())) == set(map(tuple, expected.tolist()))


def _lengths(positions, valid):
    return np.where(valid, np.linalg.norm(np.diff(positions, axis=1), axis=-1), 0.0)


def test_device_resident_list_equals_numpy_and_reads_nothing_after_the_first_step():
    """With the segments' lengths known (inextensible strands), a device keeps the Verlet list in a buffer: the
    reuse decision, the rebuild (the third call moves beyond half the margin) and the count stay on the device, so
    after the first call (which sizes the buffer) nothing is read back, and the forces are the numpy path's."""
    from solver_server.kernels import cuda_layout

    positions, velocities, valid = scene()
    lengths = _lengths(positions, valid)
    backend = emulated_cuda_backend()
    host = SweptSphereInteraction(np.linspace(0.001, 0.0016, 10), np.linspace(0.002, 0.003, 10), 2.5, 0.3, valid,
                                  segment_lengths=lengths)
    device = SweptSphereInteraction(np.linspace(0.001, 0.0016, 10), np.linspace(0.002, 0.003, 10), 2.5, 0.3, valid,
                                    backend.xp, segment_lengths=lengths)
    for step, shift in enumerate(SHIFTS + (3.1e-3,)):
        where = f"resident interaction call {step}"
        with cuda_layout(), substep_guard(where):
            forces, pairs = device.forces(backend.from_host(moved(positions, shift)), backend.from_host(velocities))
        expected, expected_pairs = host.forces(moved(positions, shift), velocities)
        assert int(pairs) == expected_pairs
        np.testing.assert_array_equal(backend.to_host(forces), expected)
        assert SYNCS.get(where, 0) == (0 if step else 1)
    assert device.take_dropped() == 0
    kept, _ = device.verlet_list()
    np.testing.assert_array_equal(backend.to_host(kept), host.verlet_list()[0])


def test_a_list_that_outgrows_its_device_buffer_is_reported_and_built_again_larger(monkeypatch):
    """The strands start apart (few pairs: a small buffer), then close up: the rebuilt list does not fit, the
    pairs that did not are reported once at the frame's end, and the next step builds the list again in a buffer
    that holds it, giving the numpy path's forces."""
    from solver_server.kernels import cuda_layout
    from solver_server.solvers.cosserat import interaction as interaction_module

    monkeypatch.setattr(interaction_module, "MIN_CAPACITY", 1)
    positions, velocities, valid = scene()
    lengths = _lengths(positions, valid)
    spread = positions.copy()
    spread[:, :, 0] *= 4.0                                   # strands 10 mm apart: few candidates
    backend = emulated_cuda_backend()
    device = SweptSphereInteraction(0.001, 0.002, 2.5, 0.3, valid, backend.xp, segment_lengths=lengths)
    host = SweptSphereInteraction(0.001, 0.002, 2.5, 0.3, valid, segment_lengths=lengths)
    with cuda_layout():
        device.forces(backend.from_host(spread), backend.from_host(velocities))
        capacity = device.verlet_list()[0].shape[0] * 2
        device.forces(backend.from_host(positions), backend.from_host(velocities))      # closes up: overflow
    dropped = device.take_dropped()
    host.forces(positions, velocities)
    assert dropped == len(host.verlet_list()[0]) - capacity > 0
    with cuda_layout():
        forces, _ = device.forces(backend.from_host(positions), backend.from_host(velocities))
    expected, _ = host.forces(positions, velocities)
    np.testing.assert_array_equal(backend.to_host(forces), expected)
    assert device.take_dropped() == 0
