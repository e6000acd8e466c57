"""BakeWorker + LocalServer against a real solver server subprocess (no Blender)."""

import numpy as np

from blender_addon.core import scene_export
from blender_addon.core.local_server import LocalServer
from blender_addon.core.worker import BakeWorker

from addon_shapes import grid
from worker_events import drain


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
        events = drain(BakeWorker(address, scene, drive_frames=drive, timeout=20.0).start(), timeout=30.0)
    assert events[0].kind == "accepted" and events[-1].kind == "done" and not events[-1].cancelled
    results = {event.frame: event.positions["Sheet"] for event in events if event.kind == "frame"}
    assert sorted(results) == list(frames)
    np.testing.assert_allclose(results[1], vertices, atol=1e-6)  # frame_start is the input state
    for positions in results.values():
        np.testing.assert_allclose(positions[pins], vertices[pins], atol=1e-6)
        assert np.isfinite(positions).all() and positions[:, 2].min() >= 0.0
    assert results[8][: n, 2].mean() < 1.0 - 0.1  # the edge opposite the pins fell
