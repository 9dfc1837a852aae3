"""What both hands share: ``HandInfo``, the positioned and servoed base, pads with force/torque sensors,
position servos with a force bound, and the scripted-grasp helpers (``hand_ctrl``, ``set_grip_force``).
The hands themselves and their names: ``surrogate.scenes.hands``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import mujoco
import numpy as np

from surrogate.errors import ConfigError

BASE_JOINTS = ("hand_x", "hand_y", "hand_z", "hand_yaw")
BASE_BODY = "hand_base"

# Pad box half-sizes (m): 5 mm thick along the pad normal (local x), 2 x 2 cm face.
PAD_HALF = (0.0025, 0.01, 0.01)

# Base servo: stiff enough to lift ~1 kg objects with < 5 mm sag (k = 3000 N/m:
# 10 N / 3000 N/m = 3.3 mm) and to shake at a few Hz; force bounds keep a
# collision with the table from launching the scene.
_BASE_KP_SLIDE = 3000.0  # N/m
_BASE_KP_YAW = 30.0  # N m/rad
_BASE_FORCE = 200.0  # N
_BASE_TORQUE = 20.0  # N m
_BASE_ARMATURE = 0.5  # kg (slides), kg m^2 would be far too much for yaw
_BASE_YAW_ARMATURE = 0.01  # kg m^2

HAND_RGBA = [0.3, 0.4, 0.8, 1.0]
PAD_RGBA = [0.15, 0.15, 0.15, 1.0]


@dataclass
class HandInfo:
    """Names and scripted-grasp helpers of a hand in a scene.

    Attributes:
      name: ``parallel_jaw``, ``three_finger``, ``jaco`` (``scenes.jaco_hand``) or a robot a capture describes.
      base_body: name of the positioned base body.
      base_joint_names: (4,) ``hand_x, hand_y, hand_z, hand_yaw`` (m, m, m, rad).
      finger_joint_names: finger joints, in actuator order.
      joint_names: base joints then finger joints.
      base_actuator_names: (4,) position actuators of the base joints.
      finger_actuator_names: position actuators of the finger joints.
      actuator_names: base then finger actuators; ``hand_ctrl`` returns a
        vector in this order.
      pad_geom_names: fingertip pad geoms (contacts owned by a surrogate).
      pad_site_names: one site per pad, at the pad centre.
      link_geom_names: all other hand geoms (palm, links; analytic contact).
      sensor_names: force and torque sensor per pad, ``ft_<pad>_force``,
        ``ft_<pad>_torque``, in pad order.
      open_command: [n_finger_actuators] finger ctrl for fully open.
      closed_command: [n_finger_actuators] finger ctrl that closes past any
        object so the force limit, not the position, sets the grip.
      grip_levers: [n_finger_actuators] m; the actuator force bound is
        ``grip_force * lever`` (1 for slides; the moment arm to the pad for hinges).
      grip_force: N, the fingertip force bound the hand was built with.
      max_opening: m, distance between opposing pad faces when open (parallel
        jaw) or the diameter of the circle through the pad faces (three finger).
      pad_depth: m, how far below the base origin the pad centres are with the
        fingers open, so a script can put the pads at a height.
      finger_depth: m, the lowest point of the open hand below the base origin.
      bodies: names of all hand bodies.
      finger_angles: rad, the direction (about the base's z, from its x) of each pad from the base axis, open.
      closes_across: the pads close along the base's x from both sides (a grasp goes across the object's narrowest
        side); otherwise they close around the axis.
    """

    name: str
    base_body: str
    base_joint_names: tuple[str, ...]
    finger_joint_names: tuple[str, ...]
    base_actuator_names: tuple[str, ...]
    finger_actuator_names: tuple[str, ...]
    pad_geom_names: tuple[str, ...]
    pad_site_names: tuple[str, ...]
    link_geom_names: tuple[str, ...]
    sensor_names: tuple[str, ...]
    open_command: np.ndarray
    closed_command: np.ndarray
    grip_levers: np.ndarray
    grip_force: float
    max_opening: float
    pad_depth: float
    finger_depth: float
    bodies: tuple[str, ...] = field(default_factory=tuple)
    finger_angles: tuple[float, ...] = ()
    closes_across: bool = False

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self.base_joint_names + self.finger_joint_names

    @property
    def actuator_names(self) -> tuple[str, ...]:
        return self.base_actuator_names + self.finger_actuator_names

    @property
    def hand_geom_names(self) -> tuple[str, ...]:
        return self.link_geom_names + self.pad_geom_names


def hand_ctrl(hand: HandInfo, *, base: Sequence[float] = (0.0, 0.0, 0.0, 0.0), grip: float = 0.0) -> np.ndarray:
    """Hand control vector in ``hand.actuator_names`` order.

    Args:
      hand: the hand.
      base: [4] base joint targets x, y, z (m, relative to where the hand was
        added) and yaw (rad).
      grip: 0 = open, 1 = closed (linear blend of the open and closed commands).
    Returns:
      [4 + n_finger_actuators] ctrl values for the hand's actuators.
    """
    fingers = (1.0 - grip) * hand.open_command + grip * hand.closed_command
    return np.concatenate([np.asarray(base, dtype=float), fingers])


def actuator_ids(model: mujoco.MjModel, hand: HandInfo) -> np.ndarray:
    """[4 + n_finger_actuators] actuator ids of ``hand.actuator_names`` in ``model``."""
    return np.array([model.actuator(n).id for n in hand.actuator_names], dtype=int)


def set_grip_force(model: mujoco.MjModel, hand: HandInfo, force: float) -> None:
    """Bound each finger actuator's force to ``force * lever`` (N at the pad).

    Args:
      model: compiled model containing ``hand`` (modified in place).
      hand: the hand.
      force: N, the fingertip force bound (> 0).
    """
    if not np.isfinite(force) or force <= 0:
        raise ConfigError(f"grip force must be positive N, got {force!r}", key="grip_force")
    for name, lever in zip(hand.finger_actuator_names, hand.grip_levers):
        a = model.actuator(name).id
        model.actuator_forcerange[a] = (-force * lever, force * lever)
        model.actuator_forcelimited[a] = 1


def add_position_actuator(spec, name, joint, *, kp, force, ctrlrange):
    act = spec.add_actuator(name=name, target=joint, trntype=mujoco.mjtTrn.mjTRN_JOINT)
    # dampratio 1: critically damped servo whatever the reflected inertia.
    act.set_to_position(kp=kp, dampratio=1.0)
    act.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
    act.ctrlrange = list(ctrlrange)
    act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
    act.forcerange = [-force, force]
    return act


def add_base(spec: mujoco.MjSpec, base_pos) -> mujoco.MjsBody:
    """Positioned base: x, y, z slides and a yaw hinge, all servoed."""
    # All angles here are radians; MjSpec's compiler defaults to degrees.
    spec.compiler.degree = False
    base = spec.worldbody.add_body(name=BASE_BODY, pos=list(base_pos))
    base.gravcomp = 1.0
    axes = {"hand_x": (1, 0, 0), "hand_y": (0, 1, 0), "hand_z": (0, 0, 1)}
    for name, axis in axes.items():
        base.add_joint(
            name=name, type=mujoco.mjtJoint.mjJNT_SLIDE, axis=list(axis),
            range=[-0.5, 0.5], limited=mujoco.mjtLimited.mjLIMITED_TRUE, armature=_BASE_ARMATURE,
        )
        add_position_actuator(spec, f"act_{name}", name, kp=_BASE_KP_SLIDE, force=_BASE_FORCE, ctrlrange=(-0.5, 0.5))
    base.add_joint(
        name="hand_yaw", type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0, 0, 1],
        range=[-np.pi, np.pi], limited=mujoco.mjtLimited.mjLIMITED_TRUE, armature=_BASE_YAW_ARMATURE,
    )
    add_position_actuator(spec, "act_hand_yaw", "hand_yaw", kp=_BASE_KP_YAW, force=_BASE_TORQUE, ctrlrange=(-np.pi, np.pi))
    return base


def add_pad(spec, parent, pad: str, *, pos, ft_prefix: str) -> tuple[str, str, str]:
    """Jointless pad body with a box geom, a site and a force/torque sensor pair.

    Returns (site name, force sensor name, torque sensor name).
    """
    # The spec's own defaults, not the parent's class (an attached robot's finger class would make the pad a mesh)
    body = parent.add_body(name=f"{pad}_body", pos=list(pos), childclass="main")
    body.gravcomp = 1.0
    body.add_geom(name=pad, type=mujoco.mjtGeom.mjGEOM_BOX, size=list(PAD_HALF), rgba=PAD_RGBA)
    site = f"{pad}_site"
    body.add_site(name=site, size=[0.004, 0.004, 0.004])
    fs, ts = f"ft_{ft_prefix}_force", f"ft_{ft_prefix}_torque"
    spec.add_sensor(name=fs, type=mujoco.mjtSensor.mjSENS_FORCE, objtype=mujoco.mjtObj.mjOBJ_SITE, objname=site)
    spec.add_sensor(name=ts, type=mujoco.mjtSensor.mjSENS_TORQUE, objtype=mujoco.mjtObj.mjOBJ_SITE, objname=site)
    return site, fs, ts


def hand_info(name: str, *, joints, acts, pads, sites, links, sensors, **rest) -> HandInfo:
    """The ``HandInfo`` of a hand on the common base: the base's names, ``palm`` first among the links;
    ``rest``: the hand's commands, levers, grip force and dimensions (``HandInfo`` fields)."""
    return HandInfo(name=name, base_body=BASE_BODY, base_joint_names=BASE_JOINTS, finger_joint_names=tuple(joints),
                    base_actuator_names=tuple(f"act_{j}" for j in BASE_JOINTS), finger_actuator_names=tuple(acts),
                    pad_geom_names=tuple(pads), pad_site_names=tuple(sites), link_geom_names=("palm",) + tuple(links),
                    sensor_names=tuple(sensors), **rest)
