"""The Cosserat strands' per-step data: CosseratState (the joints, the roots and the contact anchors) and
CosseratControl (the root frames and forces of one step)."""

from __future__ import annotations

from dataclasses import dataclass

from ..strand_colliders import AnalyticColliders


@dataclass
class CosseratState:
    """orientations (S, M, 4) unit quaternions; joint_velocities (S, M, 3) [rad/s] world-frame angular
    velocity of segment i relative to segment i−1 (entry 0 unused: the root segment is kinematic);
    root_positions (S, 3) [m]; root_rotations (S, 4) rotation of the root frame from rest;
    root_velocities, root_angular_velocities (S, 3) of the last step; time [s]; collider_anchor (S, P, 3) [m]:
    the nodes at the end of the last step moved out of the colliders on the side each came from (the start of
    the next contact query's CCD: a mesh collider is two-sided, so a node's side is kept, never read from the
    mesh); None until the first step with colliders (then the nodes themselves)."""

    orientations: object
    joint_velocities: object
    root_positions: object
    root_rotations: object
    root_velocities: object
    root_angular_velocities: object
    time: float = 0.0
    interaction_pairs: int = 0
    collider_anchor: object = None


@dataclass
class CosseratControl:
    """Root frame at the END of the step: root_positions (S, 3) [m], root_rotations (S, 4) unit
    quaternions (rotation from the rest pose); colliders (world space) or None; extra_forces
    (S, P, 3) [N] per node (e.g. strand–strand interaction) or None."""

    root_positions: object
    root_rotations: object
    colliders: AnalyticColliders | None = None
    extra_forces: object = None
