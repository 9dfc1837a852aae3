"""Hands authored with ``mujoco.MjSpec`` (no model files): a parallel-jaw gripper
and a three-finger dexterous hand, both on a positioned base.

Common to both hands
--------------------
* Base body ``hand_base`` with joints ``hand_x``, ``hand_y``, ``hand_z``
  (slides, m, world axes) and ``hand_yaw`` (hinge about world z, rad); joint
  value 0 is the pose the hand was added at (``base_pos``). Each has a position
  actuator of the same name with ``act_`` prefix (``act_hand_x`` ...), so a
  script approaches, lifts and shakes by setting ``ctrl``.
* Every hand body has ``gravcomp = 1``: gravity on the hand is cancelled by a
  passive force, so the base actuators only carry the object and inertia.
* Fingers point down (-z of the base) at joint value 0 of the base.
* Each fingertip pad is a box geom (2 cm x 2 cm x 5 mm) on its own jointless
  body welded to the last link, with a site at the pad centre (same frame as the
  pad: local -x of the pad faces the grasp centre for the three-finger hand,
  +x/-x for the right/left jaw). A ``force`` and a ``torque`` sensor on that site
  read the wrench the pad body receives from the rest of the finger, i.e. the
  contact wrench on the pad plus the pad's own (tiny) weight and inertia,
  expressed in the site frame (N, N m).
* Finger actuators are position servos with a force limit: the contact force of
  a closing finger is ``min(grip_force, kp * error) * lever`` bounded;
  ``set_grip_force`` changes the bound on a compiled model.
* Joints have armature (reflected motor inertia), which keeps stiff position
  servos stable at a 2-4 ms timestep.

``parallel_jaw``
  Joints ``left_slide``, ``right_slide`` (m, 0 = closed with 2 mm between the
  pads, 0.05 = fully open, positive opens). Actuators ``act_left``,
  ``act_right``. Geoms: ``palm``, ``finger_left``, ``finger_right`` (links),
  ``pad_left``, ``pad_right`` (pads). Sites ``pad_left_site``,
  ``pad_right_site``; sensors ``ft_left_force``, ``ft_left_torque``,
  ``ft_right_force``, ``ft_right_torque``. Pad centres are 7.5 cm below the base
  origin; finger bottoms 8.5 cm below.

``three_finger``
  Three fingers ``f0``, ``f1``, ``f2`` at 0, 120 and 240 degrees about the
  palm axis. Per finger ``f{i}_j0`` (abduction, sideways swing about the radial
  axis), ``f{i}_j1`` (proximal flexion, positive curls the finger toward the
  palm axis), ``f{i}_j2`` (distal flexion, positive curls). Capsule links
  ``f{i}_prox`` (5 cm) and ``f{i}_dist`` (3 cm), knuckle sphere
  ``f{i}_knuckle``, palm cylinder ``palm``; pads ``pad_f{i}`` with sites
  ``pad_f{i}_site`` and sensors ``ft_f{i}_force`` / ``ft_f{i}_torque``.
  Actuators ``act_f{i}_j{k}``: 9 finger actuators + 4 base actuators.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

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

_BLUE = [0.3, 0.4, 0.8, 1.0]
_PAD_RGBA = [0.15, 0.15, 0.15, 1.0]


@dataclass
class HandInfo:
    """Names and scripted-grasp helpers of a hand in a scene.

    Attributes:
      name: ``parallel_jaw`` or ``three_finger``.
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


# ----------------------------------------------------------------------------- building blocks


def _add_position_actuator(spec, name, joint, *, kp, force, ctrlrange):
    act = spec.add_actuator(name=name, target=joint, trntype=mujoco.mjtTrn.mjTRN_JOINT)
    # dampratio 1: critically damped servo whatever the reflected inertia.
    act.set_to_position(kp=kp, dampratio=1.0)
    act.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
    act.ctrlrange = list(ctrlrange)
    act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
    act.forcerange = [-force, force]
    return act


def _add_base(spec: mujoco.MjSpec, base_pos) -> mujoco.MjsBody:
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
        _add_position_actuator(spec, f"act_{name}", name, kp=_BASE_KP_SLIDE, force=_BASE_FORCE, ctrlrange=(-0.5, 0.5))
    base.add_joint(
        name="hand_yaw", type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0, 0, 1],
        range=[-np.pi, np.pi], limited=mujoco.mjtLimited.mjLIMITED_TRUE, armature=_BASE_YAW_ARMATURE,
    )
    _add_position_actuator(spec, "act_hand_yaw", "hand_yaw", kp=_BASE_KP_YAW, force=_BASE_TORQUE, ctrlrange=(-np.pi, np.pi))
    return base


def _add_pad(spec, parent, pad: str, *, pos, ft_prefix: str) -> tuple[str, str, str]:
    """Jointless pad body with a box geom, a site and a force/torque sensor pair.

    Returns (site name, force sensor name, torque sensor name).
    """
    body = parent.add_body(name=f"{pad}_body", pos=list(pos))
    body.gravcomp = 1.0
    body.add_geom(name=pad, type=mujoco.mjtGeom.mjGEOM_BOX, size=list(PAD_HALF), rgba=_PAD_RGBA)
    site = f"{pad}_site"
    body.add_site(name=site, size=[0.004, 0.004, 0.004])
    fs, ts = f"ft_{ft_prefix}_force", f"ft_{ft_prefix}_torque"
    spec.add_sensor(name=fs, type=mujoco.mjtSensor.mjSENS_FORCE, objtype=mujoco.mjtObj.mjOBJ_SITE, objname=site)
    spec.add_sensor(name=ts, type=mujoco.mjtSensor.mjSENS_TORQUE, objtype=mujoco.mjtObj.mjOBJ_SITE, objname=site)
    return site, fs, ts


# ----------------------------------------------------------------------------- parallel jaw

_JAW_TRAVEL = 0.05  # m per finger
_JAW_CLEAR = 0.001  # m from the centre plane to each pad face when closed
_JAW_KP = 1000.0  # N/m
_JAW_ARMATURE = 0.05  # kg


def add_parallel_jaw(spec: mujoco.MjSpec, *, base_pos: Sequence[float], grip_force: float = 10.0) -> HandInfo:
    """Add the parallel-jaw gripper; see the module docstring for names.

    Args:
      spec: modified in place.
      base_pos: [3] world position of the base origin at base joint value 0 (m).
      grip_force: N, bound on each jaw's closing force.
    Returns:
      The hand's ``HandInfo``.
    """
    base = _add_base(spec, base_pos)
    base.add_geom(name="palm", type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.06, 0.02, 0.01], rgba=_BLUE)

    # Pad bottom flush with the finger end, so a pad can reach 1 cm above a surface.
    finger_len_half = 0.0375
    pad_z = -0.065  # pad centre, relative to the finger body at 1 cm below the base
    pads, sites, sensors, links, joints, acts = [], [], [], [], [], []
    for side, sign in (("left", -1.0), ("right", 1.0)):
        # Finger body origin on the centre plane; positive joint value moves it
        # outward (sign * x), so the same ctrl opens both jaws.
        finger = base.add_body(name=f"finger_{side}", pos=[0, 0, -0.01])
        finger.gravcomp = 1.0
        joint = f"{side}_slide"
        finger.add_joint(
            name=joint, type=mujoco.mjtJoint.mjJNT_SLIDE, axis=[sign, 0, 0],
            range=[0.0, _JAW_TRAVEL], limited=mujoco.mjtLimited.mjLIMITED_TRUE, armature=_JAW_ARMATURE,
        )
        link_x = sign * (_JAW_CLEAR + 2 * PAD_HALF[0] + 0.004)
        finger.add_geom(
            name=f"finger_{side}", type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.004, 0.01, finger_len_half],
            pos=[link_x, 0, -finger_len_half], rgba=_BLUE,
        )
        pad = f"pad_{side}"
        site, fs, ts = _add_pad(spec, finger, pad, pos=[sign * (_JAW_CLEAR + PAD_HALF[0]), 0, pad_z], ft_prefix=side)
        act = f"act_{side}"
        # ctrl below 0 closes past the mechanical stop, so the force bound
        # (not the position error) sets the grip on any object.
        _add_position_actuator(spec, act, joint, kp=_JAW_KP, force=grip_force, ctrlrange=(-0.02, _JAW_TRAVEL))
        pads.append(pad); sites.append(site); sensors += [fs, ts]
        links.append(f"finger_{side}"); joints.append(joint); acts.append(act)

    return HandInfo(
        name="parallel_jaw",
        base_body=BASE_BODY,
        base_joint_names=BASE_JOINTS,
        finger_joint_names=tuple(joints),
        base_actuator_names=tuple(f"act_{j}" for j in BASE_JOINTS),
        finger_actuator_names=tuple(acts),
        pad_geom_names=tuple(pads),
        pad_site_names=tuple(sites),
        link_geom_names=("palm",) + tuple(links),
        sensor_names=tuple(sensors),
        open_command=np.full(2, _JAW_TRAVEL),
        closed_command=np.full(2, -0.02),
        grip_levers=np.ones(2),
        grip_force=float(grip_force),
        max_opening=2 * (_JAW_CLEAR + _JAW_TRAVEL),
        pad_depth=0.01 - pad_z,
        finger_depth=0.01 + 2 * finger_len_half,
        bodies=(BASE_BODY, "finger_left", "finger_right", "pad_left_body", "pad_right_body"),
    )


# ----------------------------------------------------------------------------- three finger

_TF_RADIUS = 0.04  # m, knuckle distance from the palm axis
_TF_PROX = 0.05  # m, proximal link length
_TF_DIST = 0.03  # m, distal link length
_TF_PROX_R = 0.008  # m, capsule radii
_TF_DIST_R = 0.007
_TF_PAD_Z = -0.027  # m, pad centre along the distal link (pad bottom flush with the link end)
_TF_KP = 5.0  # N m/rad
_TF_ARMATURE = 0.002  # kg m^2, reflected inertia of a small geared servo
# Open: proximal links spread (j1 < 0), distal links vertical (j2 = -j1), pads
# facing the palm axis 5 cm from it. Closing flexes j1 until the pads stop on
# the object (force bound) and straightens j2 to 0, so at contact the distal
# links lean inward by j1 + j2 > 0 and the pad normals point slightly up: a
# scooping pinch that holds under lift. j2 gets twice the moment arm so the
# contact force on the pad cannot back-drive it.
_TF_OPEN = (0.0, -0.45, 0.45)  # j0, j1, j2 (rad)
_TF_CLOSED = (0.0, 0.7, 0.0)
_TF_J2_RANGE = (-1.0, 1.7)


def _three_finger_pad_radius(j1: float, j2: float) -> tuple[float, float]:
    """Radial distance from the palm axis of a pad face, and depth of the pad centre below the knuckle (m).

    Planar kinematics in the finger plane (x radial outward, z up): flexion by
    angle t about +y maps (0, 0, -1) to (-sin t, 0, -cos t).
    """
    def rot(t, v):
        return np.array([v[0] * np.cos(t) + v[1] * np.sin(t), -v[0] * np.sin(t) + v[1] * np.cos(t)])

    dist_origin = rot(j1, np.array([0.0, -_TF_PROX]))
    face = dist_origin + rot(j1 + j2, np.array([-(_TF_DIST_R + 2 * PAD_HALF[0]), _TF_PAD_Z]))
    centre = dist_origin + rot(j1 + j2, np.array([-(_TF_DIST_R + PAD_HALF[0]), _TF_PAD_Z]))
    return _TF_RADIUS + face[0], -centre[1]


def add_three_finger(spec: mujoco.MjSpec, *, base_pos: Sequence[float], grip_force: float = 5.0) -> HandInfo:
    """Add the three-finger hand (9 finger joints); see the module docstring for names.

    Args:
      spec: modified in place.
      base_pos: [3] world position of the palm centre at base joint value 0 (m).
      grip_force: N, fingertip force bound; joint torque bounds are this times
        the joint's moment arm to the pad (``grip_levers``).
    Returns:
      The hand's ``HandInfo``.
    """
    base = _add_base(spec, base_pos)
    base.add_geom(name="palm", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[0.05, 0.01, 0], rgba=_BLUE)

    # Moment arms (m) from each joint to the pad when the finger is straight.
    arm_j1 = _TF_PROX - _TF_PAD_Z
    arm_j2 = -2 * _TF_PAD_Z
    levers = []
    pads, sites, sensors, links, joints, acts, bodies = [], [], [], [], [], [], [BASE_BODY]
    for i in range(3):
        a = 2 * np.pi * i / 3
        f = f"f{i}"
        # Finger frame: x radial outward, y tangential, z up.
        fb = base.add_body(
            name=f"{f}_base", pos=[_TF_RADIUS * np.cos(a), _TF_RADIUS * np.sin(a), -0.01],
            quat=[np.cos(a / 2), 0, 0, np.sin(a / 2)],
        )
        fb.gravcomp = 1.0
        fb.add_joint(name=f"{f}_j0", type=mujoco.mjtJoint.mjJNT_HINGE, axis=[1, 0, 0], range=[-0.4, 0.4],
                     limited=mujoco.mjtLimited.mjLIMITED_TRUE, armature=_TF_ARMATURE)
        fb.add_geom(name=f"{f}_knuckle", type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.009, 0, 0], rgba=_BLUE)

        prox = fb.add_body(name=f"{f}_proxbody")
        prox.gravcomp = 1.0
        prox.add_joint(name=f"{f}_j1", type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0, 1, 0], range=[-0.6, 1.7],
                       limited=mujoco.mjtLimited.mjLIMITED_TRUE, armature=_TF_ARMATURE)
        prox.add_geom(name=f"{f}_prox", type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[_TF_PROX_R, 0, 0],
                      fromto=[0, 0, 0, 0, 0, -_TF_PROX], rgba=_BLUE)

        dist = prox.add_body(name=f"{f}_distbody", pos=[0, 0, -_TF_PROX])
        dist.gravcomp = 1.0
        dist.add_joint(name=f"{f}_j2", type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0, 1, 0], range=list(_TF_J2_RANGE),
                       limited=mujoco.mjtLimited.mjLIMITED_TRUE, armature=_TF_ARMATURE)
        dist.add_geom(name=f"{f}_dist", type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[_TF_DIST_R, 0, 0],
                      fromto=[0, 0, 0, 0, 0, -_TF_DIST], rgba=_BLUE)

        pad = f"pad_{f}"
        site, fs, ts = _add_pad(spec, dist, pad, pos=[-(_TF_DIST_R + PAD_HALF[0]), 0, _TF_PAD_Z], ft_prefix=f)
        # The palm overlaps the proximal capsule at the knuckle, and a curled
        # distal pad can brush its own proximal link: neither is a real contact.
        spec.add_exclude(bodyname1=BASE_BODY, bodyname2=f"{f}_proxbody")
        spec.add_exclude(bodyname1=f"{f}_proxbody", bodyname2=f"{pad}_body")

        for k, (lo, hi), lever in ((0, (-0.4, 0.4), arm_j1), (1, (-0.6, 1.7), arm_j1), (2, _TF_J2_RANGE, arm_j2)):
            act = f"act_{f}_j{k}"
            _add_position_actuator(spec, act, f"{f}_j{k}", kp=_TF_KP, force=grip_force * lever, ctrlrange=(lo, hi))
            acts.append(act); joints.append(f"{f}_j{k}"); levers.append(lever)
        pads.append(pad); sites.append(site); sensors += [fs, ts]
        links += [f"{f}_knuckle", f"{f}_prox", f"{f}_dist"]
        bodies += [f"{f}_base", f"{f}_proxbody", f"{f}_distbody", f"{pad}_body"]

    open_r, open_depth = _three_finger_pad_radius(_TF_OPEN[1], _TF_OPEN[2])
    # Lowest point of the open hand: the distal capsule tip (plus its radius).
    tip = np.array([0.0, -_TF_PROX]) + np.array(
        [-_TF_DIST * np.sin(_TF_OPEN[1] + _TF_OPEN[2]), -_TF_DIST * np.cos(_TF_OPEN[1] + _TF_OPEN[2])]
    )
    return HandInfo(
        name="three_finger",
        base_body=BASE_BODY,
        base_joint_names=BASE_JOINTS,
        finger_joint_names=tuple(joints),
        base_actuator_names=tuple(f"act_{j}" for j in BASE_JOINTS),
        finger_actuator_names=tuple(acts),
        pad_geom_names=tuple(pads),
        pad_site_names=tuple(sites),
        link_geom_names=("palm",) + tuple(links),
        sensor_names=tuple(sensors),
        open_command=np.tile(_TF_OPEN, 3).astype(float),
        closed_command=np.tile(_TF_CLOSED, 3).astype(float),
        grip_levers=np.array(levers),
        grip_force=float(grip_force),
        max_opening=2 * open_r,
        pad_depth=0.01 + open_depth,
        finger_depth=0.01 - tip[1] + _TF_DIST_R,
        bodies=tuple(bodies),
    )


HAND_BUILDERS: dict[str, Callable[..., HandInfo]] = {
    "parallel_jaw": add_parallel_jaw,
    "three_finger": add_three_finger,
}


def add_hand(spec: mujoco.MjSpec, name: str, *, base_pos: Sequence[float], grip_force: float | None = None) -> HandInfo:
    """Add hand ``name`` (a key of ``HAND_BUILDERS``) at ``base_pos`` (m)."""
    if name not in HAND_BUILDERS:
        raise ConfigError(f"hand must be one of {sorted(HAND_BUILDERS)} or 'none', got {name!r}", key="hand")
    kwargs = {} if grip_force is None else {"grip_force": grip_force}
    return HAND_BUILDERS[name](spec, base_pos=base_pos, **kwargs)
