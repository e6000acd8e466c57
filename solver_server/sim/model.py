"""Static data of a particle system built from one or more scene objects (Newton-style Model).

Several objects of one solver are merged into one system; ``ranges`` gives each object's
particle slice. Objects whose simulated particles differ from their output vertices (a soft
body embedded in a tetrahedral lattice) carry an ``embedding``: a sparse (N_out, n) matrix of
barycentric weights so that output positions = embedding @ particle positions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class ObjectSlot:
    """Where one scene object lives in a merged Model.

    start/stop: particle range; embedding: None (outputs are the particles themselves) or a
    scipy.sparse (N_out, n_total) matrix; rest_output: (N_out, 3) rest positions of the output
    vertices (world space at frame_start); matrix_rest: (4, 4) matrix_world at frame_start;
    surface_triangles: (F, 3) triangles over the OUTPUT vertices (cloth triangles, soft-body surface);
    output_maps: the object's painted factors {param: (N_out,)} over its OUTPUT vertices (sim/maps.py).
    """

    id: str
    kind: str
    start: int
    stop: int
    rest_output: np.ndarray
    matrix_rest: np.ndarray
    animated: bool
    embedding: object = None
    surface_triangles: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int64))
    output_maps: dict = field(default_factory=dict)


@dataclass
class ParticleModel:
    """Merged static arrays (host numpy, float64 / int64).

    rest: (n, 3) [m]; mass: (n,) [kg]; thickness (n,) [m], friction (n,) [-], damping (n,) [1/s];
    triangles (F, 3) and tets (T, 4) in merged particle indices with the owning slot index in
    triangle_slot (F,) / tet_slot (T,); pin_indices (P,) merged particle indices, pin_weights (P,)
    in (0, 1], pin_slot (P,), pin_rest (P, 3) rest positions of the pinned points;
    params: per-slot resolved parameter dicts; painted: {param: (n,) factor per particle} for every
    parameter some object paints (sim/maps.py; 1 on the particles of objects that do not paint it).
    """

    slots: list[ObjectSlot]
    rest: np.ndarray
    mass: np.ndarray
    thickness: np.ndarray
    friction: np.ndarray
    damping: np.ndarray
    triangles: np.ndarray
    triangle_slot: np.ndarray
    tets: np.ndarray
    tet_slot: np.ndarray
    pin_indices: np.ndarray
    pin_weights: np.ndarray
    pin_slot: np.ndarray
    params: list[dict]
    painted: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def particle_count(self) -> int:
        return len(self.rest)

    def factors(self, name: str) -> np.ndarray | None:
        """(n,) painted factors of parameter ``name`` per particle, or None where no object paints it."""
        return self.painted.get(name)

    def slot(self, object_id: str) -> ObjectSlot:
        for slot in self.slots:
            if slot.id == object_id:
                return slot
        raise KeyError(object_id)
