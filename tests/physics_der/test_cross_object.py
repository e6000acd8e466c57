"""Contact between strands of DIFFERENT DER hair objects: all DER hair objects of a scene share one solver
(seed §4.2 Fig. 4-8 scene with the two strands in two objects), and ``collide_with_other_hair`` opts out.
Per-object parameters, frames and checkpoints: test_cross_object_state.py."""

import numpy as np

from solver_server.backend import get_backend
from solver_server.simulation import Simulation
from solver_server.solvers.der.geometry import segment_closest_points

BACKEND = get_backend("cpu")
FPS, SUBSTEPS = 25, 10            # dt = 4 ms, the seed §4.2 step
ANGLE = np.radians(20.0)
SUPPORT_AXIS = np.array([np.cos(ANGLE), 0.0, np.sin(ANGLE)])


def _line(n, length, direction, origin):
    return np.asarray(origin, float) + np.linspace(0.0, length, n)[:, None] * np.asarray(direction, float)


def _free_pins():
    return {"indices": np.zeros(0, np.int32), "weights": np.zeros(0, np.float32)}


def _hair(object_id, points, pins, **params):
    return {"id": object_id, "kind": "hair", "points": points, "strand_offsets": np.array([0, len(points)], np.int32),
            "pins": pins, "params": {"model": "der", "young_modulus": 1e7, "shear_modulus": 4e6, "damping": 1.0,
                                     **params}}


def _scene(objects, frames, solver=None):
    return {"gravity": [0.0, 0.0, -9.81], "time": {"fps": FPS, "frame_start": 1, "frame_end": 1 + frames,
                                                    "substeps": SUBSTEPS},
            "objects": objects, "solver": {"der": {"max_iterations": 50, "tolerance": 1e-5, **(solver or {})}}}


def _crossing_scene(support_mu, strand_mu, frames=4, strand_extra=None):
    """Seed Fig. 4-8 across two objects: "Support" (11 points, radius 1 mm, fixed at both ends, tilted 20°)
    and "Strand" (21 points, radius 0.1 mm, free) dropped across it from 3 mm above; Newton settings of the
    seed scenes in test_contact.py (exact first-iteration Hessian, never refreshed)."""
    support = _line(11, 0.2, SUPPORT_AXIS, -0.1 * SUPPORT_AXIS)
    strand = _line(21, 0.1, (0.0, 1.0, 0.0), (0.0, -0.05, 0.003))
    fixed = {"indices": np.array([0, 1, 9, 10], np.int32), "weights": np.ones(4, np.float32)}
    return _scene([_hair("Support", support, fixed, radius=1e-3, friction=support_mu),
                   _hair("Strand", strand, _free_pins(), radius=1e-4, friction=strand_mu, **(strand_extra or {}))],
                  frames, solver={"quasi_newton_matrix": "exact", "refresh_interval": 0})


def _run(scene, every=None):
    simulation = Simulation(scene, BACKEND)
    _, positions, _ = simulation.initial_frame()
    frames = [positions]
    for _ in range(simulation.frame_end - simulation.frame_start):
        _, positions, stats = simulation.advance(None)
        frames.append(positions)
        if every is not None:
            every(simulation, positions, stats)
    return simulation, frames


def _closest_distance(first, second):
    """Smallest distance [m] between any segment of polyline ``first`` (N, 3) and of ``second`` (M, 3)."""
    a, b = np.meshgrid(np.arange(len(first) - 1), np.arange(len(second) - 1), indexing="ij")
    a, b = a.ravel(), b.ravel()
    _, _, distance = segment_closest_points(np, first[a], first[a + 1], second[b], second[b + 1])
    return distance.min()


def _lies_on_support(frame) -> bool:
    """Whether the dropped strand's middle point is above the (sagging) support strand and the two touch (the
    closest distance is the radii sum 1.1 mm, + 0.1 mm); falling through, it is centimetres below."""
    support, strand = frame["Support"].astype(float), frame["Strand"].astype(float)
    above = strand[10, 2] > np.interp(strand[10, 0], support[:, 0], support[:, 2])
    return bool(above and _closest_distance(support, strand) < 1.2e-3)


def test_strand_of_one_object_rests_on_a_strand_of_another():
    """Pair μ = (1.2 + 0) / 2 = 0.6 > tan 20°: the dropped strand lands on the other object's strand, drapes
    over it and stays where it landed, never closer than the radii sum − 10 % of the thin radius.  Without
    contact between the objects it falls through (0.08 m below the support after 0.16 s)."""
    gaps, contacts = [], []

    def check(simulation, positions, stats):
        gaps.append(_closest_distance(positions["Support"].astype(float), positions["Strand"].astype(float)))
        contacts.append(stats["contacts"])

    _, frames = _run(_crossing_scene(1.2, 0.0), check)
    strand = frames[-1]["Strand"].astype(float)
    assert max(contacts) > 0
    assert min(gaps) >= 1e-3 + 1e-4 - 0.1e-4 - 1e-7                  # no strand–strand penetration (float32 out)
    assert _lies_on_support(frames[-1])
    assert strand[:, 2].mean() < strand[10, 2] - 5e-3                # the ends drape down on both sides
    assert abs(strand[:, 0].mean()) < 2e-3                           # friction holds it where it landed


def test_without_friction_the_strand_slides_down_the_other_objects_strand():
    _, frames = _run(_crossing_scene(0.0, 0.0))
    assert _lies_on_support(frames[-1])                              # it still lies on the support ...
    assert -frames[-1]["Strand"][:, 0].astype(float).mean() > 0.015  # ... and slides downhill along it (26 mm)


def test_two_objects_give_the_same_result_as_one_object_holding_both_strands():
    """The shared solver is the solver of the concatenated strands: bit-identical frames (landing included)."""
    scene = _crossing_scene(0.6, 0.6, frames=1)
    support, strand = scene["objects"]
    both = dict(support, points=np.concatenate((support["points"], strand["points"])),
                strand_offsets=np.array([0, 11, 32], np.int32),
                radius=np.concatenate((np.full(11, 1e-3), np.full(21, 1e-4))))
    contacts = []
    _, frames = _run(scene, lambda simulation, positions, stats: contacts.append(stats["contacts"]))
    _, single = _run(dict(scene, objects=[both]))
    assert contacts[-1] > 0
    assert np.array_equal(np.concatenate((frames[-1]["Support"], frames[-1]["Strand"])), single[-1]["Support"])


def test_an_object_that_opts_out_falls_through_the_other_hair():
    scene = _crossing_scene(0.6, 0.6, frames=3, strand_extra={"collide_with_other_hair": False})
    simulation, frames = _run(scene)
    assert [list(frame) for frame in frames] == [["Support", "Strand"]] * 4
    assert frames[-1]["Support"].shape == (11, 3) and frames[-1]["Strand"].shape == (21, 3)
    assert all(array.dtype == np.float32 for frame in frames for array in frame.values())
    assert frames[-1]["Strand"][10, 2] < -0.03                      # free fall 0.5 g t² = 0.044 m at t = 0.12 s
    assert len(simulation.groups[0].solvers) == 2


def test_touching_clamped_roots_of_two_objects_are_not_a_contact():
    """Beard's clamped second point lies 1.2 mm from Hair's clamped first edge (radii 0.5 mm): a contact
    between kinematic points has no response (solving it failed with a singular matrix); it is left out and
    both objects hang freely."""
    hair = _line(8, 0.06, (0.0, 0.0, -1.0), (0.0, 0.0, 0.1))
    root, second = np.array([-0.0095, 0.0, 0.096]), np.array([-0.0012, 0.0, 0.096])
    beard = np.concatenate(([root, second], second + np.linspace(1, 5, 5)[:, None] * [-0.006, 0.0, -0.006]))
    params = {"model": "der", "radius": 5e-4, "young_modulus": 1e8}
    objects = [{"id": name, "kind": "hair", "points": points, "strand_offsets": np.array([0, len(points)], np.int32),
                "params": params} for name, points in (("Hair", hair), ("Beard", beard))]
    simulation, frames = _run(_scene(objects, frames=2))
    assert all(np.all(np.isfinite(array)) for array in frames[-1].values())
    np.testing.assert_allclose(frames[-1]["Beard"][:2], beard[:2], atol=1e-7)
    assert frames[-1]["Beard"][-1, 2] < beard[-1, 2] - 1e-4          # its free end sags under gravity


def test_touching_clamped_roots_inside_one_object_are_not_a_contact():
    """The same touching roots as above, both strands in ONE hair object: the contact between kinematic points
    is left out there too (it failed with a singular matrix before) and the free ends sag."""
    hair = _line(8, 0.06, (0.0, 0.0, -1.0), (0.0, 0.0, 0.1))
    root, second = np.array([-0.0095, 0.0, 0.096]), np.array([-0.0012, 0.0, 0.096])
    beard = np.concatenate(([root, second], second + np.linspace(1, 5, 5)[:, None] * [-0.006, 0.0, -0.006]))
    points = np.concatenate((hair, beard))
    params = {"model": "der", "radius": 5e-4, "young_modulus": 1e8}
    offsets = np.array([0, len(hair), len(points)], np.int32)
    simulation, frames = _run(_scene([{"id": "Groom", "kind": "hair", "points": points,
                                       "strand_offsets": offsets, "params": params}], frames=2))
    last = frames[-1]["Groom"]
    assert np.all(np.isfinite(last))
    np.testing.assert_allclose(last[len(hair):len(hair) + 2], beard[:2], atol=1e-7)
    assert last[-1, 2] < beard[-1, 2] - 1e-4
