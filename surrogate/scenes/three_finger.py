"""The three-finger hand (names in ``surrogate.scenes.hands``): three fingers of three hinges each, with a
pad on every distal link."""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np

from surrogate.scenes.hand_parts import (
    BASE_BODY,
    HAND_RGBA,
    PAD_HALF,
    HandInfo,
    add_base,
    add_pad,
    add_position_actuator,
    hand_info,
)

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
    base = add_base(spec, base_pos)
    base.add_geom(name="palm", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[0.05, 0.01, 0], rgba=HAND_RGBA)

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
        fb.add_geom(name=f"{f}_knuckle", type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.009, 0, 0], rgba=HAND_RGBA)

        prox = fb.add_body(name=f"{f}_proxbody")
        prox.gravcomp = 1.0
        prox.add_joint(name=f"{f}_j1", type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0, 1, 0], range=[-0.6, 1.7],
                       limited=mujoco.mjtLimited.mjLIMITED_TRUE, armature=_TF_ARMATURE)
        prox.add_geom(name=f"{f}_prox", type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[_TF_PROX_R, 0, 0],
                      fromto=[0, 0, 0, 0, 0, -_TF_PROX], rgba=HAND_RGBA)

        dist = prox.add_body(name=f"{f}_distbody", pos=[0, 0, -_TF_PROX])
        dist.gravcomp = 1.0
        dist.add_joint(name=f"{f}_j2", type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0, 1, 0], range=list(_TF_J2_RANGE),
                       limited=mujoco.mjtLimited.mjLIMITED_TRUE, armature=_TF_ARMATURE)
        dist.add_geom(name=f"{f}_dist", type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[_TF_DIST_R, 0, 0],
                      fromto=[0, 0, 0, 0, 0, -_TF_DIST], rgba=HAND_RGBA)

        pad = f"pad_{f}"
        site, fs, ts = add_pad(spec, dist, pad, pos=[-(_TF_DIST_R + PAD_HALF[0]), 0, _TF_PAD_Z], ft_prefix=f)
        # The palm overlaps the proximal capsule at the knuckle, and a curled
        # distal pad can brush its own proximal link: neither is a real contact.
        spec.add_exclude(bodyname1=BASE_BODY, bodyname2=f"{f}_proxbody")
        spec.add_exclude(bodyname1=f"{f}_proxbody", bodyname2=f"{pad}_body")

        for k, (lo, hi), lever in ((0, (-0.4, 0.4), arm_j1), (1, (-0.6, 1.7), arm_j1), (2, _TF_J2_RANGE, arm_j2)):
            act = f"act_{f}_j{k}"
            add_position_actuator(spec, act, f"{f}_j{k}", kp=_TF_KP, force=grip_force * lever, ctrlrange=(lo, hi))
            acts.append(act)
            joints.append(f"{f}_j{k}")
            levers.append(lever)
        pads.append(pad)
        sites.append(site)
        sensors += [fs, ts]
        links += [f"{f}_knuckle", f"{f}_prox", f"{f}_dist"]
        bodies += [f"{f}_base", f"{f}_proxbody", f"{f}_distbody", f"{pad}_body"]

    open_r, open_depth = _three_finger_pad_radius(_TF_OPEN[1], _TF_OPEN[2])
    # Lowest point of the open hand: the distal capsule tip (plus its radius).
    tip = np.array([0.0, -_TF_PROX]) + np.array(
        [-_TF_DIST * np.sin(_TF_OPEN[1] + _TF_OPEN[2]), -_TF_DIST * np.cos(_TF_OPEN[1] + _TF_OPEN[2])]
    )
    return hand_info("three_finger", joints=joints, acts=acts, pads=pads, sites=sites, links=links, sensors=sensors,
                     open_command=np.tile(_TF_OPEN, 3).astype(float), closed_command=np.tile(_TF_CLOSED, 3).astype(float),
                     grip_levers=np.array(levers), grip_force=float(grip_force), max_opening=2 * open_r,
                     pad_depth=0.01 + open_depth, finger_depth=0.01 - tip[1] + _TF_DIST_R, bodies=tuple(bodies),
                     finger_angles=tuple(2 * np.pi * i / 3 for i in range(3)))
