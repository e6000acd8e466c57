"""Host <-> device copies only at frame boundaries: no device -> host array copy inside a substep.

On the emulated CUDA device ``Simulation`` runs every group's ``step`` (one substep) inside
:func:`~solver_server.emulated_device.substep_guard`, where ``.get()`` / ``xp.asnumpy`` / ``backend.to_host`` of a
device array raise, and counts every host synchronization. Every scenario must pass the guard; the solvers in
SYNC_FREE must also count no synchronization in their steady-state substeps.
"""

from __future__ import annotations

import numpy as np
import pytest

from solver_server import backend as backend_module
from solver_server.backend import get_backend
from solver_server.emulated_device import (HOST_TO_DEVICE, SYNCS, PortabilityError, emulated_cuda_backend,
                                          refusing_synchronizations, substep_guard)
from solver_server.simulation import Simulation
from tests.portability.scenarios import SCENARIOS
from tests.portability.sync_reads import counting_reads


def _guarded_frames(name, backend):
    """Frames of a scenario (on the emulated device every substep of every group runs under the guard)."""
    scene, drive = SCENARIOS[name]()
    simulation = Simulation(scene, backend)
    frames = [simulation.initial_frame()]
    for frame in range(simulation.frame_start + 1, simulation.frame_end + 1):
        frames.append(simulation.advance(drive(frame) if drive else None))
    return frames


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_no_device_to_host_copy_inside_a_substep(name):
    """(That the frames equal the CPU backend's is test_solvers_portable's job.)"""
    frames = _guarded_frames(name, emulated_cuda_backend())
    assert max(stats["contacts"] for _, _, stats in frames[1:]) > 0, f"{name}: no contact, collisions untested"


# solvers whose steady-state substep reads nothing back from the device (the first frame may: lists, factors)
SYNC_FREE = {"ParticleHairGroup": ("particles", "colliders_particles", "particles_guides_animated"),
             "PDGroup": ("pd_cloth_on_ball", "pd_softbody", "pd_cloth_jacobi_animated"),
             "CosseratHairGroup": ("cosserat", "cosserat_interaction", "colliders_cosserat",
                                   "cosserat_guides_animated")}


def _steady_syncs(group_name: str, scenario: str) -> dict[str, int]:
    """Host synchronizations counted inside ``group_name``'s substeps after the scenario's first frame."""
    SYNCS.clear()
    _guarded_frames(scenario, emulated_cuda_backend())
    first = SCENARIOS[scenario]()[0]["time"]["frame_start"] + 1
    return {where: count for where, count in SYNCS.items()
            if f"{group_name}.step" in where and int(where.rsplit(" ", 1)[1]) > first}


@pytest.mark.parametrize("group_name, scenario", [(group, scenario) for group, scenarios in SYNC_FREE.items()
                                                  for scenario in scenarios])
def test_a_sync_free_solver_makes_no_host_synchronization_inside_its_substeps(group_name, scenario):
    """Scalar reads, boolean masks, data-sized outputs and ``.tolist()`` / ``.item()`` are all counted by the
    emulated device; the group's substeps after the first frame count none (the mesh collider's candidate lists,
    the contact counts, the strain limit's rounds and the contact repeats, the Cosserat strands' step refinement
    and turn-out rounds and their interaction list are decided and kept on the device)."""
    steady = _steady_syncs(group_name, scenario)
    assert not steady, f"{scenario}: host synchronizations inside {group_name} substeps: {steady}"


@pytest.mark.parametrize("scenario", ["particles", "particles_guides_animated", "pd_cloth_on_ball", "pd_softbody",
                                      "pd_cloth_jacobi_animated", "cosserat", "cosserat_interaction",
                                      "cosserat_guides_animated"])
def test_the_complete_guard_runs_the_sync_free_scenes_through(scenario):
    """After the first frame, with the guard refusing synchronizations, the scenes whose every group is sync-free
    run through (the collider zoo's PD group is not: its mesh rounds decide on the host)."""
    scene, drive = SCENARIOS[scenario]()
    simulation = Simulation(scene, emulated_cuda_backend())
    simulation.initial_frame()
    simulation.advance(drive(simulation.frame_start + 1) if drive else None)
    with refusing_synchronizations():
        for frame in range(simulation.frame_start + 2, simulation.frame_end + 1):
            simulation.advance(drive(frame) if drive else None)


def test_the_complete_guard_names_the_substep(monkeypatch):
    """A scalar read added to the particle substep is refused at the line that makes it."""
    from solver_server.collision import colliders

    monkeypatch.setattr(colliders.Contacts, "count", property(lambda self: int(self.mask.sum())))
    simulation = Simulation(SCENARIOS["particles"]()[0], emulated_cuda_backend())
    simulation.initial_frame()
    with refusing_synchronizations(), pytest.raises(PortabilityError, match="ParticleHairGroup.step at frame 2"):
        simulation.advance(None)


def test_the_device_resident_pd_substep_gives_the_cpu_frames_bit_for_bit():
    """The cloth on the ball stretches past its hard limit (the CPU layout's rounds have work, and edges are left
    over) and touches the ball; the device-resident rounds and contact repeats mirror the CPU layout's early
    ends as flags, so the frames are the same to the last bit, and the counts read at the frame's end agree."""
    cpu = _guarded_frames("pd_cloth_on_ball", get_backend("cpu"))
    device = _guarded_frames("pd_cloth_on_ball", emulated_cuda_backend())
    assert max(stats["strain_limit_rounds"] for _, _, stats in cpu[1:]) > 0
    assert max(stats["strain_limit_left"] for _, _, stats in cpu[1:]) > 0
    assert max(stats["contacts"] for _, _, stats in cpu[1:]) > 0
    for (_, expected, cpu_stats), (_, got, device_stats) in zip(cpu, device):
        np.testing.assert_array_equal(got["Cloth"], expected["Cloth"])
        assert device_stats["contacts"] == cpu_stats["contacts"]
        assert device_stats.get("strain_limit_left") == cpu_stats.get("strain_limit_left")


def test_the_cosserat_substep_on_the_device_gives_the_cpu_frames():
    """Strand interaction (its candidate list in a device buffer, rebuilt on a device flag), the turn-out rounds
    (all of them on the device) and the per-strand step refinement give the CPU's frames."""
    for scenario in ("cosserat_interaction", "colliders_cosserat"):
        cpu = _guarded_frames(scenario, get_backend("cpu"))
        device = _guarded_frames(scenario, emulated_cuda_backend())
        for (_, expected, cpu_stats), (_, got, device_stats) in zip(cpu, device):
            np.testing.assert_array_equal(got["Hair"], expected["Hair"])
            assert device_stats["contacts"] == cpu_stats["contacts"]


def test_a_cosserat_step_length_read_on_the_host_is_counted(monkeypatch):
    """Mutation check: the step planned from the fastest segment read back (as it was) shows in the count."""
    from solver_server.solvers.cosserat import solver as cosserat_solver

    planned = cosserat_solver.CosseratSolver._step_length

    def read_back(self, remaining):
        float(self.xp.max(self._work_arrays()["fastest_sq"]))
        return planned(self, remaining)

    monkeypatch.setattr(cosserat_solver.CosseratSolver, "_step_length", read_back)
    assert _steady_syncs("CosseratHairGroup", "cosserat")


def test_a_contact_count_read_on_the_host_is_counted(monkeypatch):
    """Mutation check: the contact count read back inside the substep (as it was) shows in the count."""
    from solver_server.collision import colliders

    monkeypatch.setattr(colliders.Contacts, "count", property(lambda self: int(self.mask.sum())))
    assert _steady_syncs("ParticleHairGroup", "colliders_particles")


def test_the_guard_refuses_every_download_route():
    backend = emulated_cuda_backend()
    array = backend.from_host(np.arange(3.0))
    with substep_guard("a test substep"):
        for download in (lambda: array.get(), lambda: backend.xp.asnumpy(array), lambda: backend.to_host(array)):
            with pytest.raises(PortabilityError, match="a test substep"):
                download()
        before = SYNCS.get("a test substep", 0)
        assert float(array.sum()) == 3.0                                  # a scalar sync is allowed, and counted
        assert SYNCS["a test substep"] == before + 1
        assert array[array > 1.0].shape == (1,)                           # boolean-mask indexing: counted
        assert backend.xp.nonzero(array)[0].shape == (2,)                 # data-sized output: counted
        assert SYNCS["a test substep"] == before + 3
        uploads = HOST_TO_DEVICE.get("a test substep", 0)
        backend.xp.asarray(np.ones(2)) + backend.from_host(np.ones(2))   # uploads: allowed, counted
        backend.xp.asarray(array)                                         # already on the device: not an upload
        assert HOST_TO_DEVICE["a test substep"] == uploads + 2
    assert np.array_equal(array.get(), np.arange(3.0))                   # outside a substep: allowed


def test_a_der_matrix_that_does_not_factor_fails_the_job_at_its_substep_on_the_device_as_on_the_cpu(monkeypatch):
    """On a device the Gauss–Newton system matrix is factored without reading its positive-definiteness test (it
    is positive definite by construction); the group's finite check after the substep reads the kept test with
    the direction flag, so a matrix spoiled by non-finite values fails the job at that substep and names the
    hair, as the CPU's error does."""
    from solver_server.solvers.der.banded import BandedCholesky

    factor = BandedCholesky.__init__
    calls = {"count": 0}

    def spoiled(self, xp, band, *args, **kwargs):
        calls["count"] += 1
        factor(self, xp, band * float("nan") if calls["count"] > 6 else band, *args, **kwargs)

    monkeypatch.setattr(BandedCholesky, "__init__", spoiled)
    failed_at = []
    for backend in (get_backend("cpu"), emulated_cuda_backend()):
        calls["count"] = 0
        failed_at.append(_der_failure(backend)[0])
    assert failed_at[0] == failed_at[1]


def _der_failure(backend):
    """(the frame a SimulationError naming 'Hair' reports, the last frame made) of the DER scenario on ``backend``,
    run until it fails."""
    from solver_server.sim.errors import SimulationError

    scene, _ = SCENARIOS["der"]()
    simulation = Simulation(scene, backend)
    simulation.initial_frame()
    with pytest.raises(SimulationError, match="'Hair'") as failure:
        for _ in range(simulation.frame_start + 1, simulation.frame_end + 1):
            simulation.advance(None)
    return failure.value.frame, simulation.frame


def test_a_non_finite_der_direction_fails_the_job_at_its_substep_on_the_device_as_on_the_cpu(monkeypatch):
    """On a device the DER line search does not read whether its Newton direction is finite (it never takes a
    non-finite one: no strand accepts a NaN objective); the group's finite check after the substep reads the
    flag, so the job fails at that substep and names the hair, as the CPU's immediate error does."""
    from solver_server.solvers.der.banded import BandedCholesky

    solve = BandedCholesky.solve
    calls = {"count": 0}

    def poisoned(self, rhs):
        calls["count"] += 1
        solution = solve(self, rhs)
        if calls["count"] > 60:
            solution = solution * float("nan")
        return solution

    monkeypatch.setattr(BandedCholesky, "solve", poisoned)
    for backend in (get_backend("cpu"), emulated_cuda_backend()):
        calls["count"] = 0
        failed, made = _der_failure(backend)
        assert failed == made + 1


def test_der_edge_pairs_are_listed_with_two_reads_of_the_device(monkeypatch):
    """The strand-contact pairs are found, filtered (a free vertex) and narrow-phase tested inside the broad phase's
    kernels, and listed with two reads of the device a call: the largest swept radius (the hash grid's cell size)
    and the number of hits; no count of candidates, no mask of movable pairs, no mask of hits. The contacts made
    from the hits take one read more."""
    from solver_server.solvers.der import contact_detection

    listing_reads, detection_reads = [], []
    monkeypatch.setattr(contact_detection.ContactDetector, "_edge_pair_hits",
                        counting_reads(contact_detection.ContactDetector._edge_pair_hits, listing_reads.append))
    monkeypatch.setattr(contact_detection.ContactDetector, "_detect_edges",
                        counting_reads(contact_detection.ContactDetector._detect_edges, detection_reads.append))
    SYNCS.clear()
    frames = _guarded_frames("der_strand_contact", emulated_cuda_backend())
    assert listing_reads and set(listing_reads) == {2}, listing_reads
    assert max(stats["contacts"] for _, _, stats in frames[1:]) > 0
    # with hits, the contacts are made from them with one read more: which of them (and of their far ends) are
    # kept (no read of which pairs touch, none of which far ends are wanted)
    assert 3 in detection_reads and set(detection_reads) <= {2, 3}, detection_reads


def test_der_rod_edges_against_a_mesh_read_the_device_once_a_search(monkeypatch):
    """Rod edges against a mesh collider's edges: every rod edge is an item of the search (those with no free,
    reachable vertex skip it), so the only read is the hits' number."""
    from solver_server.solvers.der import contact_detection

    search_reads = []
    monkeypatch.setattr(contact_detection.ContactDetector, "_mesh_edge_contacts",
                        counting_reads(contact_detection.ContactDetector._mesh_edge_contacts, search_reads.append))
    SYNCS.clear()
    _guarded_frames("colliders_der", emulated_cuda_backend())
    assert search_reads and set(search_reads) == {1}, search_reads


def test_der_mesh_failsafe_and_contact_figures_read_nothing_on_the_device(monkeypatch):
    """On the device the failsafe after DER's contact loop runs its masked corrections whether or not anything
    crossed, counts on the device and hands back a moved-anything flag, and the step's contact figures stay device
    scalars until the frame's stats: no read in either, beyond the failsafe's choice of the edges it tests where
    some vertices are unreachable (one per mesh collider)."""
    from solver_server.solvers.der import contact, contact_failsafe

    failsafe_reads, edge_view_reads, figure_reads = [], [], []
    monkeypatch.setattr(contact_failsafe.MeshFailsafe, "keep_outside",
                        counting_reads(contact_failsafe.MeshFailsafe.keep_outside, failsafe_reads.append))
    monkeypatch.setattr(contact_failsafe.MeshFailsafe, "_edge_view",
                        counting_reads(contact_failsafe.MeshFailsafe._edge_view, edge_view_reads.append))
    monkeypatch.setattr(contact.StepContacts, "statistics",
                        counting_reads(contact.StepContacts.statistics, figure_reads.append))
    frames = _guarded_frames("colliders_der", emulated_cuda_backend())
    assert failsafe_reads and figure_reads
    assert [whole - edges for whole, edges in zip(failsafe_reads, edge_view_reads)] == [0] * len(failsafe_reads)
    assert max(edge_view_reads) <= 1 and max(figure_reads) == 0
    assert max(stats["contacts"] for _, _, stats in frames[1:]) > 0
