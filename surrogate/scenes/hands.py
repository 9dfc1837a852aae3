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

from collections.abc import Callable, Sequence

import mujoco
import numpy as np

from surrogate.errors import ConfigError
from surrogate.scenes.hand_parts import (
    BASE_BODY,
    BASE_JOINTS,
    HAND_RGBA,
    PAD_HALF,
    HandInfo,
    actuator_ids,
    add_base,
    add_pad,
    add_position_actuator,
    hand_ctrl,
    hand_info,
    set_grip_force,
)
from surrogate.scenes.three_finger import add_three_finger

# The hands' public names (the building blocks live in ``hand_parts``, the three-finger hand in ``three_finger``).
__all__ = ["BASE_BODY", "BASE_JOINTS", "HAND_BUILDERS", "PAD_HALF", "HandInfo", "actuator_ids", "add_hand",
           "add_parallel_jaw", "add_three_finger", "hand_ctrl", "set_grip_force"]


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
    base = add_base(spec, base_pos)
    base.add_geom(name="palm", type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.06, 0.02, 0.01], rgba=HAND_RGBA)

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
            pos=[link_x, 0, -finger_len_half], rgba=HAND_RGBA,
        )
        pad = f"pad_{side}"
        site, fs, ts = add_pad(spec, finger, pad, pos=[sign * (_JAW_CLEAR + PAD_HALF[0]), 0, pad_z], ft_prefix=side)
        act = f"act_{side}"
        # ctrl below 0 closes past the mechanical stop, so the force bound
        # (not the position error) sets the grip on any object.
        add_position_actuator(spec, act, joint, kp=_JAW_KP, force=grip_force, ctrlrange=(-0.02, _JAW_TRAVEL))
        pads.append(pad)
        sites.append(site)
        sensors += [fs, ts]
        links.append(f"finger_{side}")
        joints.append(joint)
        acts.append(act)

    return hand_info("parallel_jaw", joints=joints, acts=acts, pads=pads, sites=sites, links=links, sensors=sensors,
                     open_command=np.full(2, _JAW_TRAVEL), closed_command=np.full(2, -0.02), grip_levers=np.ones(2),
                     grip_force=float(grip_force), max_opening=2 * (_JAW_CLEAR + _JAW_TRAVEL), pad_depth=0.01 - pad_z,
                     finger_depth=0.01 + 2 * finger_len_half,
                     bodies=(BASE_BODY, "finger_left", "finger_right", "pad_left_body", "pad_right_body"),
                     finger_angles=(np.pi, 0.0), closes_across=True)


def add_jaco(spec: mujoco.MjSpec, **kwargs) -> HandInfo:
    """The Kinova Jaco hand (``scenes.jaco_hand``: dm_control's assets, found when it is built)."""
    from surrogate.scenes.jaco_hand import add_jaco_hand

    return add_jaco_hand(spec, **kwargs)


HAND_BUILDERS: dict[str, Callable[..., HandInfo]] = {
    "parallel_jaw": add_parallel_jaw,
    "three_finger": add_three_finger,
    "jaco": add_jaco,
}


def add_hand(spec: mujoco.MjSpec, name: str, *, base_pos: Sequence[float], grip_force: float | None = None) -> HandInfo:
    """Add hand ``name`` (a key of ``HAND_BUILDERS``) at ``base_pos`` (m)."""
    if name not in HAND_BUILDERS:
        raise ConfigError(f"hand must be one of {sorted(HAND_BUILDERS)} or 'none', got {name!r}", key="hand")
    kwargs = {} if grip_force is None else {"grip_force": grip_force}
    return HAND_BUILDERS[name](spec, base_pos=base_pos, **kwargs)
