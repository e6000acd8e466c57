"""Host <-> device copies only at frame boundaries: no device -> host array copy inside a substep.

Every group's ``step`` (one substep) runs inside :func:`~tests.portability.strict_backend.substep_guard`,
where ``.get()`` / ``xp.asnumpy`` / ``backend.to_host`` of a device array raise. The PD scenarios (cloth,
soft bodies, self-collision, sphere and triangle-mesh colliders) must pass; the hair solvers that still
run host code inside a substep are listed as strict expected failures, so fixing one flips its test.
"""

from __future__ import annotations

import numpy as np
import pytest

from solver_server import backend as backend_module
from solver_server.backend import get_backend
from solver_server.simulation import Simulation
from tests.portability.scenarios import SCENARIOS
from tests.portability.strict_backend import HOST_TO_DEVICE, SYNCS, PortabilityError, strict_backend, substep_guard

def _guarded_frames(name, backend):
    """Frames of a scenario with every substep of every group under the download guard."""
    scene, drive = SCENARIOS[name]()
    simulation = Simulation(scene, backend)
    for group in simulation.groups:
        step = group.step

        def guarded(inputs, step=step, group=group):
            with substep_guard(f"{name}: {type(group).__name__}.step at frame {inputs.frame}"):
                return step(inputs)
        group.step = guarded
    frames = [simulation.initial_frame()]
    for frame in range(simulation.frame_start + 1, simulation.frame_end + 1):
        frames.append(simulation.advance(drive(frame) if drive else None))
    return frames


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_no_device_to_host_copy_inside_a_substep(name):
    """(That the frames equal the CPU backend's is test_solvers_portable's job.)"""
    frames = _guarded_frames(name, strict_backend())
    assert max(stats["contacts"] for _, _, stats in frames[1:]) > 0, f"{name}: no contact, collisions untested"


# solvers whose steady-state substep reads nothing back from the device (the first frame may: lists, factors)
SYNC_FREE = {"ParticleHairGroup": ("particles", "colliders_particles", "particles_guides_animated")}


def _steady_syncs(group_name: str, scenario: str) -> dict[str, int]:
    """Host synchronizations counted inside ``group_name``'s substeps after the scenario's first frame."""
    SYNCS.clear()
    _guarded_frames(scenario, strict_backend())
    first = SCENARIOS[scenario]()[0]["time"]["frame_start"] + 1
    return {where: count for where, count in SYNCS.items()
            if f"{group_name}.step" in where and int(where.rsplit(" ", 1)[1]) > first}


@pytest.mark.parametrize("group_name, scenario", [(group, scenario) for group, scenarios in SYNC_FREE.items()
                                                  for scenario in scenarios])
def test_a_sync_free_solver_makes_no_host_synchronization_inside_its_substeps(group_name, scenario):
    """Scalar reads, boolean masks, data-sized outputs and ``.tolist()`` / ``.item()`` are all counted by the
    strict backend; the group's substeps after the first frame count none (the mesh collider's candidate lists,
    the contact counts and the rounds are decided and kept on the device)."""
    steady = _steady_syncs(group_name, scenario)
    assert not steady, f"{scenario}: host synchronizations inside {group_name} substeps: {steady}"


def test_a_contact_count_read_on_the_host_is_counted(monkeypatch):
    """Mutation check: the contact count read back inside the substep (as it was) shows in the count."""
    from solver_server.collision import colliders

    monkeypatch.setattr(colliders.Contacts, "count", property(lambda self: int(self.mask.sum())))
    assert _steady_syncs("ParticleHairGroup", "colliders_particles")


def test_the_host_kdtree_broad_phase_fails_the_guard(monkeypatch):
    """Mutation check: the pre-grid broad phase (k-d tree on downloaded points, still selectable with
    TANGLE_BROAD_PHASE=kdtree) copies to the host inside the substep, and the guarded run fails. (DER's
    vertex–mesh collider CCD still uses the xp broad phase; DER strand–strand contact and the Cosserat
    interaction use the Warp hash grid of kernels.pairs; PD contact runs in Warp kernels over wp.Bvh.)"""
    monkeypatch.setattr(backend_module, "BROAD_PHASE", "kdtree")
    _guarded_frames("colliders_der", get_backend("cpu"))                  # numpy: no device, runs
    with pytest.raises(PortabilityError, match="inside a substep"):
        _guarded_frames("colliders_der", strict_backend())


def test_the_guard_refuses_every_download_route():
    backend = strict_backend()
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
