"""The exact physical trace of one rig episode: what the simulator knows, before any sensor.

This is the seam between the rig's physics (``simulate``) and its recorder
(``recorder``): the physics fills a RigTrace at the recorder's frame times; the
recorder turns it into a capture ``Episode`` with realistic sensor errors and keeps
the exact values only under ``Episode.truth`` (evaluation only).

Shapes: N = recorded frames, J = hand joints, S = fingertip force/torque sensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..capture import Environment, ObjectSpec


@dataclass
class RigTrace:
    """Exact state of one rig episode sampled at the recorder's frame times.

    Attributes:
      times: [N] s from the episode start.
      object_pose: [N, 7] centre-of-mass position (m, world) and quaternion (w, x, y, z).
      object_twist: [N, 6] linear (m/s, world) and angular (rad/s, world) velocity.
      joint_names: [J] hand joint names (base joints included), in column order.
      joint_pos: [N, J] rad or m.  joint_vel: [N, J] rad/s or m/s.
      joint_cmd: [N, J] commands as the script sent them (before actuator delay/backlash).
      sensor_names: [S] fingertip force/torque sensor names.
      pad_wrench: [N, S, 6] true contact force (N) and torque (N m) on each fingertip pad,
        in that pad's sensor frame.
      contact_points: length-N list of [P_n, 3] object-frame points (m) in contact at frame n.
      hand_object_distance: [N] m, smallest distance between any hand geom and the object
        (the recorder uses it to drop poses while fingers occlude the object).
      object_nominal: what a user would enter for the object (nominal mass, inertia, friction).
      object_true: the values actually simulated: {"mass", "inertia", "com_offset", "friction_range"}.
      environment: table/ground surface and gravity.
      hand: hand model name.
      grasp_type: Feix GRASP taxonomy id of the scripted grasp.
      labels: {"lifted": bool, "slipped": bool, "dropped": bool, "max_slip_m": float, ...}.
      script: the randomized script parameters (approach, closing force, perturbation ...).
      effects: the reference-physics effects as configured (which are on, with parameters).
      seed: the episode seed.
    """

    times: np.ndarray
    object_pose: np.ndarray
    object_twist: np.ndarray
    joint_names: list
    joint_pos: np.ndarray
    joint_vel: np.ndarray
    joint_cmd: np.ndarray
    sensor_names: list
    pad_wrench: np.ndarray
    contact_points: list
    hand_object_distance: np.ndarray
    object_nominal: ObjectSpec
    object_true: dict
    environment: Environment
    hand: str
    grasp_type: int
    labels: dict = field(default_factory=dict)
    script: dict = field(default_factory=dict)
    effects: dict = field(default_factory=dict)
    seed: int = 0

    @property
    def num_frames(self) -> int:
        return int(len(self.times))
