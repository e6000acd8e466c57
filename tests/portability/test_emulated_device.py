"""The emulated CUDA device itself: it must refuse what CuPy refuses (else the portability test could pass silently)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse

from solver_server.backend import conjugate_gradient_factor, get_backend
from solver_server.devices import backend_for
from solver_server.emulated_device import DeviceArray, PortabilityError, emulated_cuda_backend


@pytest.fixture()
def backend():
    return emulated_cuda_backend()


def test_device_arrays_refuse_numpy_functions_and_implicit_conversion(backend):
    xp = backend.xp
    a = xp.arange(6.0).reshape(2, 3)
    assert isinstance(a, DeviceArray)
    with pytest.raises(PortabilityError):
        np.asarray(a)
    with pytest.raises(PortabilityError):
        np.concatenate([a, a])
    with pytest.raises(PortabilityError):
        np.linalg.norm(a)
    with pytest.raises(PortabilityError):
        np.where(a > 1.0, a, 0.0)


def test_host_arrays_do_not_mix_into_device_math(backend):
    xp = backend.xp
    a = xp.ones(3)
    host = np.ones(3)
    for mix in (lambda: a + host, lambda: host * a, lambda: xp.maximum(a, host), lambda: xp.dot(a, host)):
        with pytest.raises(PortabilityError):
            mix()
    with pytest.raises(PortabilityError):
        a[:] = host
    with pytest.raises(PortabilityError):
        backend.sparse.csr_matrix(scipy.sparse.identity(3)) @ host


def test_allowed_operations_match_numpy(backend):
    xp = backend.xp
    host = np.random.default_rng(1).standard_normal((5, 3))
    a = backend.from_host(host)
    result = xp.linalg.norm(a * 2.0 + np.float64(1.0), axis=1)
    assert isinstance(result, DeviceArray)
    np.testing.assert_allclose(backend.to_host(result), np.linalg.norm(host * 2.0 + 1.0, axis=1))
    np.testing.assert_allclose(backend.to_host(a[np.array([0, 2])]), host[[0, 2]])   # host index arrays: allowed
    total = xp.zeros(2)
    xp.add.at(total, backend.from_host(np.array([0, 1, 1])), xp.ones(3))
    np.testing.assert_allclose(backend.to_host(total), [1.0, 2.0])
    assert float(a.sum()) == pytest.approx(host.sum())
    u, s, vt = xp.linalg.svd(backend.from_host(np.tile(np.eye(3), (4, 1, 1))))      # batched 3x3 SVD
    np.testing.assert_allclose(backend.to_host(s), np.ones((4, 3)))


def test_conjugate_gradient_solve_matches_a_direct_solve():
    rng = np.random.default_rng(2)
    n = 60
    laplacian = scipy.sparse.diags([-np.ones(n - 1), 2.0 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1])
    matrix = (laplacian + scipy.sparse.diags(rng.uniform(0.1, 1.0, n))).tocsc()
    rhs = rng.standard_normal((n, 3))
    expected = scipy.sparse.linalg.spsolve(matrix, rhs)
    for backend in (get_backend("cpu"), emulated_cuda_backend()):
        solve = conjugate_gradient_factor(backend, matrix)
        got = backend.to_host(solve(backend.from_host(rhs)))
        np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-9)
        got_vector = backend.to_host(solve(backend.from_host(rhs[:, 1])))
        np.testing.assert_allclose(got_vector, expected[:, 1], rtol=1e-8, atol=1e-9)


def test_simulation_runs_each_substep_guarded_and_in_cuda_launch_layouts(monkeypatch):
    """On the emulated device a group's substep runs inside the download guard, and launch_items / launch_split
    launch a thread per item in one launch, as on CUDA; on the CPU backend neither holds."""
    import warp as wp

    from solver_server.emulated_device import current_substep
    from solver_server.simulation import Simulation
    from tests.portability.scenarios import SCENARIOS

    launched = []
    original = wp.launch

    def recorded(kernel, dim, *args, **kwargs):
        launched.append((kernel.key, dim, current_substep()))
        return original(kernel, dim, *args, **kwargs)

    monkeypatch.setattr(wp, "launch", recorded)
    monkeypatch.setenv("TANGLE_KERNEL_THREADS", "2")      # the CPU layout cuts every launch in two (not by its work)
    for device, cuda_layout in (("cpu", False), ("cuda-emulated", True)):
        launched.clear()
        scene, _ = SCENARIOS["particles"]()
        simulation = Simulation(scene, backend_for(device))
        simulation.initial_frame()
        simulation.advance(None)
        substep = [(key, dim, where) for key, dim, where in launched if key == "substep"]
        assert substep, device
        strands = len(scene["objects"][0]["strand_offsets"]) - 1
        assert all((dim == strands) == cuda_layout for _, dim, _ in substep), (device, substep[:3])
        assert all((where is not None) == cuda_layout for _, _, where in substep)
        assert all("ParticleHairGroup.step at frame 2" == where for _, _, where in substep if cuda_layout)


def test_a_download_inside_a_substep_of_the_emulated_device_names_it():
    from solver_server.simulation import Simulation
    from tests.portability.scenarios import SCENARIOS

    scene, _ = SCENARIOS["particles"]()
    simulation = Simulation(scene, emulated_cuda_backend())
    simulation.initial_frame()
    group = simulation.groups[0]
    step = group.step
    group.step = lambda inputs: (simulation.backend.to_host(group.states[0].positions), step(inputs))[1]
    with pytest.raises(PortabilityError, match="ParticleHairGroup.step at frame 2"):
        simulation.advance(None)


def test_the_guard_holds_only_for_the_thread_inside_a_substep():
    """Jobs run on worker threads: one job's substep must not refuse another job's frame-boundary download."""
    import threading

    from solver_server.emulated_device import current_substep, substep_guard

    backend = emulated_cuda_backend()
    array = backend.from_host(np.arange(3.0))
    inside, results = threading.Event(), {}

    def other_job():
        inside.wait(timeout=10)
        results["where"] = current_substep()
        results["copy"] = backend.to_host(array)

    worker = threading.Thread(target=other_job)
    worker.start()
    with substep_guard("job A's substep"):
        inside.set()
        worker.join(timeout=10)
        with pytest.raises(PortabilityError, match="job A's substep"):
            backend.to_host(array)
    assert results["where"] is None and np.array_equal(results["copy"], np.arange(3.0))


def test_functions_that_read_device_data_back_count_as_cupys_synchronizations(backend):
    """Inside a substep ``nonzero`` sizes its output from the data (one read) and ``bincount`` reads whether a key is
    negative and the largest key (two, even with a minlength), as CuPy's do; the segmented sum that replaces
    ``bincount`` for per-strand sums reads nothing."""
    from solver_server.emulated_device import SYNCS, substep_guard
    from solver_server.kernels import int32_view
    from solver_server.kernels.segments import segment_sums

    xp = backend.xp
    keys = xp.asarray(np.array([0, 0, 1, 3]))
    values = xp.asarray(np.array([1.0, 2.0, 3.0, 4.0]))
    offsets = int32_view(xp, xp.asarray(np.array([0, 2, 3, 3, 4])))
    counts = {}
    for name, call in {"nonzero": lambda: xp.nonzero(values > 1.5),
                       "bincount": lambda: xp.bincount(keys, weights=values, minlength=4),
                       "segment_sums": lambda: segment_sums(xp, values, offsets)}.items():
        where = f"synchronization test: {name}"
        with substep_guard(where):
            call()
        counts[name] = SYNCS.pop(where, 0)
    assert counts == {"nonzero": 1, "bincount": 2, "segment_sums": 0}


def test_collider_edge_rounds_and_self_contact_passes_read_the_device_once_each():
    """On the device path a round of the cloth's edge contact with a mesh collider reads one number (whether its
    test found pairs and whether any had crossed, packed), and a self-contact pass one past its candidate lists
    (its pairs and, above bit 32, its crossed pairs): the cloth falling onto the ramp and the ball of the
    portability scenario, over four frames."""
    from solver_server.collision.colliders import ColliderSet
    from solver_server.collision.self_collision import SurfaceContact
    from solver_server.simulation import Simulation
    from solver_server.solvers.pd.contact import ContactPoints
    from tests.portability.scenarios import SCENARIOS
    from tests.portability.sync_reads import counting_reads as counting

    scene, _ = SCENARIOS["pd_cloth_cholesky"]()
    simulation = Simulation(scene, emulated_cuda_backend())
    simulation.initial_frame()
    seen = {"rounds": 0, "edge_calls": [], "pass_reads": []}

    def one_round(*args, **kwargs):
        seen["rounds"] += 1
        return edge_round(*args, **kwargs)

    edge_round, edge_rounds, one_pass, lists = (ColliderSet.resolve_edges, ContactPoints.resolve_edges,
                                                SurfaceContact._pass, SurfaceContact._candidates)
    list_reads = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ColliderSet, "resolve_edges", one_round)
        def edge_call(*args, **kwargs):
            rounds_before = seen["rounds"]
            result = counting(edge_rounds, lambda count: seen["edge_calls"].append(count))(*args, **kwargs)
            seen["edge_calls"][-1] = (seen["edge_calls"][-1], seen["rounds"] - rounds_before)
            return result

        patch.setattr(ContactPoints, "resolve_edges", edge_call)
        patch.setattr(SurfaceContact, "_candidates", counting(lists, list_reads.append))
        patch.setattr(SurfaceContact, "_pass", counting(
            one_pass, lambda count: seen["pass_reads"].append(count - list_reads.pop())))
        for _ in range(4):
            simulation.advance(None)
    assert seen["edge_calls"] and sum(rounds for _, rounds in seen["edge_calls"]) > 0
    assert all(reads_in_call == rounds for reads_in_call, rounds in seen["edge_calls"])
    assert seen["pass_reads"] and set(seen["pass_reads"]) == {1}


def test_a_conversion_that_changes_nothing_hands_back_its_argument_and_counts_no_operation(backend):
    """As CuPy: ``asarray`` / ``ascontiguousarray`` of a device array that already has the dtype and layout return
    it (no launch, no allocation: not an operation); a conversion that copies is one."""
    from solver_server.emulated_device import OPERATIONS, substep_guard

    xp = backend.xp
    values = xp.arange(6.0).reshape(2, 3)
    where = "conversion test"
    with substep_guard(where):
        same = [xp.ascontiguousarray(values), xp.asarray(values), xp.ascontiguousarray(values, dtype=xp.float64)]
        unchanged = OPERATIONS.pop(where, 0)
        converted = [xp.ascontiguousarray(values, dtype=xp.float32), xp.ascontiguousarray(values.T)]
        copies = OPERATIONS.pop(where, 0)
    assert all(array is values for array in same) and unchanged == 0
    assert all(array is not values for array in converted) and copies == 2
