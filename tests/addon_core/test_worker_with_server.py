"""BakeWorker + LocalServer against a real solver server subprocess (no Blender)."""

import numpy as np

from blender_addon.core import scene_export
from blender_addon.core.local_server import LocalServer
from blender_addon.core.worker import BakeWorker


def grid(n, size, height):
    xs = np.linspace(-size / 2, size / 2, n)
    x, y = np.meshgrid(xs, xs, indexing="xy")
    vertices = np.stack([x.ravel(), y.ravel(), np.full(n * n, height)], axis=1)
    corner = (np.arange(n - 1)[None, :] + n * np.arange(n - 1)[:, None]).ravel()
    triangles = np.concatenate([np.stack([corner, corner + 1, corner + n + 1], 1),
                                np.stack([corner, corner + n + 1, corner + n], 1)])
    return vertices, triangles


def drain(worker, timeout=30.0):
    events = []
    while not events or events[-1].kind not in {"done", "error"}:
        event = worker.wait_event(timeout)
        assert event is not None, "worker went silent"
        events.append(event)
    return events


def test_local_server_starts_answers_and_stops_cleanly():
    server = LocalServer()
    address = server.start()
    assert address.startswith("tcp://127.0.0.1:")
    assert server.process.poll() is None
    assert server.stop() == 0  # SIGTERM is a clean shutdown
    assert any("solver server stopped" in line for line in server.recent_log)


def test_pinned_cloth_over_a_driven_floor_through_the_worker():
    n = 6
    vertices, triangles = grid(n, 1.0, 1.0)
    pins = [n * (n - 1), n * n - 1]
    cloth = scene_export.cloth_object("Sheet", vertices, triangles, pins, [1.0, 1.0], {})
    floor_matrix = np.eye(4)
    floor = scene_export.collider_object("Floor", scene_export.plane_shape(), floor_matrix, {}, animated=True)
    frames = range(1, 9)
    drive = {frame: {"Floor": scene_export.drive_entry("Floor", floor_matrix)} for frame in frames}
    scene = scene_export.build_scene([cloth, floor], 24.0, 1, 8, 4)
    with LocalServer() as address:
        events = drain(BakeWorker(address, scene, drive_frames=drive, timeout=20.0).start())
    assert events[0].kind == "accepted" and events[-1].kind == "done" and not events[-1].cancelled
    results = {event.frame: event.positions["Sheet"] for event in events if event.kind == "frame"}
    assert sorted(results) == list(frames)
    np.testing.assert_allclose(results[1], vertices, atol=1e-6)  # frame_start is the input state
    for positions in results.values():
        np.testing.assert_allclose(positions[pins], vertices[pins], atol=1e-6)
        assert np.isfinite(positions).all() and positions[:, 2].min() >= 0.0
    assert results[8][: n, 2].mean() < 1.0 - 0.1  # the edge opposite the pins fell
