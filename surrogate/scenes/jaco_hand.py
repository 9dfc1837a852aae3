"""The Kinova Jaco three-finger hand (dm_control's ``jaco_hand.xml`` and meshes) as a rig hand, ``jaco``: on the
common positioned base (``hand_parts.add_base``), pointing down, with a sensed pad on each fingertip, so the capture
rig grasps with it and its captures carry a real robot's geometry (issue #26).

What is dm_control's: the palm and finger meshes, their masses, the finger kinematics and joint range (0.15 .. 1.35
rad, closing as it grows), the analytic contact parameters of the links (``common.xml``). What is the rig's:

* the finger drive: force-limited position servos (``grip_force`` at the pad times the lever to it) with a light
  armature and no joint damping or friction loss. dm_control's values (armature 0.1 kg m^2, damping 0.75 N m s,
  friction loss 0.1 N m) model the real hand's slow geared fingers: at a 3 N grip they close at 0.16 rad/s and a 1 N
  grip does not move them at all, which no scripted grasp of a few seconds can use;
* a pad (``hand_parts.add_pad``: 2 x 2 cm, 5 mm thick, with force/torque sensors) on the inner face of each distal
  link near its tip, where the rig's fingertip physics acts (``rig.physics``); the distal meshes stay analytic
  contact behind them;
* the mounting: finger 1 on the base's +x side, fingers 2 and 3 opposing it on the -x side (a thumb against two
  fingers: Feix "prismatic 2 finger"), the fingers closing along base x.

Names: joints ``jaco/finger_{1,2,3}``, actuators ``act_finger_{1,2,3}``, pads ``pad_finger_{1,2,3}`` (sites
``pad_finger_{i}_site``, sensors ``ft_finger_{i}_force`` / ``_torque``), links ``jaco/link_6_main``,
``jaco/link_6_insert``, ``jaco/finger_knuckle_{i}``, ``jaco/finger_tip_{i}``. The assets are found as
``scenes.kinova.jaco_assets`` finds them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

import mujoco
import numpy as np

from surrogate.scenes.hand_parts import (
    BASE_BODY,
    BASE_JOINTS,
    PAD_HALF,
    HandInfo,
    add_base,
    add_pad,
    add_position_actuator,
)
from surrogate.scenes.kinova import FINGER_RANGE, jaco_assets

PREFIX = "jaco/"
FINGERS = (1, 2, 3)
_OPEN = 0.55  # rad: the open fingers leave about 11 cm between the opposing pads (as the other hands open)
_KP = 5.0  # N m / rad: saturates at the grip torque before the finger reaches its target
_ARMATURE = 0.002  # kg m^2: a small geared servo's reflected inertia (the three-finger hand's)
# The pad on the distal link (its body frame: x along the link to the tip, +y the inner face at y = 5.5 mm, the
# link 22.6 mm wide along z; measured from finger_distal.stl): 3 cm out, resting on the inner face.
_PAD_POS = (0.03, 0.0055 + PAD_HALF[0], 0.0)
# The pad's normal (its x) is the link's +y tilted 20 deg toward the knuckle, so at the closing angles of a grasp
# (0.7 .. 1 rad) it points 7-25 deg upward: a scooping pinch that holds under lift (square on the link, it points
# down there and squeezes the object out of the grip).
_PAD_TILT = np.radians(20.0)
_PAD_QUAT = (np.cos(np.pi / 4 + _PAD_TILT / 2), 0.0, 0.0, np.sin(np.pi / 4 + _PAD_TILT / 2))
# Finger 1 opposes fingers 2 and 3 together: its servo gets twice their torque bound, so the grip is balanced
# (with equal bounds the pair back-drives it and pushes the object out).
_LEVER_SCALE = (2.0, 1.0, 1.0)
# The hand's body in the base frame: its fingers (dm_control's -z of ``hand``) pointing down, finger 1 toward +x.
_HAND_QUAT = (np.sqrt(0.5), 0.0, 0.0, -np.sqrt(0.5))  # dm_control's mounting quat flipped about x


def add_jaco_hand(spec: mujoco.MjSpec, *, base_pos: Sequence[float], grip_force: float = 5.0,
                  assets=None) -> HandInfo:
    """Add the Jaco hand on the positioned base at ``base_pos`` [3] (m); see the module docstring for names.

    Args:
      spec: modified in place.
      grip_force: N, the fingertip force bound (each servo's torque bound is this times its lever).
      assets: dm_control's kinova folder (``scenes.kinova.jaco_assets``).
    Raises:
      ConfigError: the assets are not found (saying how to get them).
    """
    folder = jaco_assets(assets)
    geo = _open_geometry(str(folder))
    levers = geo["lever"] * np.array(_LEVER_SCALE)
    padded = _hand_with_pads(spec, add_base(spec, base_pos), folder)
    acts, joints, pads, sites, sensors = [], [], [], [], []
    for i, (pad, site, fs, ts) in zip(FINGERS, padded):
        joint = f"{PREFIX}finger_{i}"
        jnt = spec.joint(joint)
        jnt.armature, jnt.frictionloss = _ARMATURE, 0.0
        jnt.damping = np.zeros(len(jnt.damping))  # (MuJoCo 4: the damping polynomial's coefficients)
        act = f"act_finger_{i}"
        add_position_actuator(spec, act, joint, kp=_KP * _LEVER_SCALE[i - 1], force=grip_force * levers[i - 1],
                              ctrlrange=FINGER_RANGE)
        acts.append(act)
        joints.append(joint)
        pads.append(pad)
        sites.append(site)
        sensors += [fs, ts]
    links = tuple(f"{PREFIX}{g}" for g in ("link_6_main", "link_6_insert")) + tuple(
        f"{PREFIX}finger_{k}_{i}" for i in FINGERS for k in ("knuckle", "tip"))
    bodies = (BASE_BODY, f"{PREFIX}hand") + tuple(
        f"{PREFIX}{b}_{i}" for i in FINGERS for b in ("b_finger", "b_finger_tip")) + tuple(f"{p}_body" for p in pads)
    return HandInfo(name="jaco", base_body=BASE_BODY, base_joint_names=BASE_JOINTS, finger_joint_names=tuple(joints),
                    base_actuator_names=tuple(f"act_{j}" for j in BASE_JOINTS), finger_actuator_names=tuple(acts),
                    pad_geom_names=tuple(pads), pad_site_names=tuple(sites), link_geom_names=links,
                    sensor_names=tuple(sensors), open_command=np.full(3, _OPEN), closed_command=np.full(3, FINGER_RANGE[1]),
                    grip_levers=levers, grip_force=float(grip_force),
                    max_opening=geo["max_opening"], pad_depth=geo["pad_depth"], finger_depth=geo["finger_depth"],
                    bodies=bodies, finger_angles=geo["finger_angles"], closes_across=True)


def _hand_with_pads(spec: mujoco.MjSpec, base, folder) -> list[tuple[str, str, str, str]]:
    """dm_control's hand under ``base`` with a pad on each fingertip: [(pad geom, site, force sensor, torque
    sensor)] in finger order."""
    _attach(spec, base, folder)
    out = []
    for i in FINGERS:
        pad = f"pad_finger_{i}"
        names = add_pad(spec, spec.body(f"{PREFIX}b_finger_tip_{i}"), pad, pos=_PAD_POS, ft_prefix=f"finger_{i}")
        spec.body(f"{pad}_body").quat = list(_PAD_QUAT)
        out.append((pad, *names))
    return out


def _attach(spec: mujoco.MjSpec, base, folder) -> None:
    """dm_control's hand under ``base`` (names prefixed ``jaco/``), turned to point down, finger 1 toward +x."""
    hand = mujoco.MjSpec.from_file(str(folder / "jaco_hand.xml"))
    for mesh in hand.meshes:  # absolute: the files stay found in the scene's spec and its MJCF (scenes.hand_model)
        mesh.file = str((Path(folder) / hand.meshdir / mesh.file).resolve())
    body = base.add_frame().attach_body(hand.body("hand"), PREFIX, "")
    body.quat = list(_HAND_QUAT)
    body.gravcomp = 1.0
    for b in body.find_all(mujoco.mjtObj.mjOBJ_BODY):
        b.gravcomp = 1.0


@functools.lru_cache(maxsize=4)
def _open_geometry(folder: str) -> dict:
    """The open hand's dimensions ``HandInfo`` needs (base at the origin): the opening between the pads, how far below
    the base the pad centres and the lowest point are, the direction of each pad from the base axis, and the lever
    (m) from a finger's joint axis to its pad centre (the same for the three fingers)."""
    m, d = _open_hand(folder)
    j = m.joint(f"{PREFIX}finger_1")
    axis, r = d.xaxis[j.id], d.site_xpos[m.site("pad_finger_1_site").id] - d.xanchor[j.id]
    pads = [m.geom(f"pad_finger_{i}").id for i in FINGERS]
    xy = d.geom_xpos[pads][:, :2]
    faces = []  # each pad face's distance from the base axis, horizontally
    for g, p in zip(pads, xy):
        normal = d.geom_xmat[g].reshape(3, 3)[:, 0]
        faces.append(np.linalg.norm(p + PAD_HALF[0] * normal[:2]))
    low = min(_lowest(m, d, g) for g in range(m.ngeom) if m.geom_bodyid[g] != 0)
    return {"max_opening": 2.0 * float(min(faces)), "pad_depth": float(-d.geom_xpos[pads][:, 2].mean()),
            "finger_depth": float(-low), "finger_angles": tuple(float(np.arctan2(p[1], p[0])) for p in xy),
            "lever": float(np.linalg.norm(r - (r @ axis) * axis))}


def _open_hand(folder: str):
    """(model, data) of the hand alone on its base at the origin, the fingers open, after kinematics."""
    spec = mujoco.MjSpec()
    spec.compiler.degree = False
    _hand_with_pads(spec, add_base(spec, [0.0, 0.0, 0.0]), Path(folder))
    m = spec.compile()
    d = mujoco.MjData(m)
    for i in FINGERS:
        d.qpos[m.jnt_qposadr[m.joint(f"{PREFIX}finger_{i}").id]] = _OPEN
    mujoco.mj_kinematics(m, d)
    return m, d


def _lowest(m: mujoco.MjModel, d: mujoco.MjData, g: int) -> float:
    """m, the lowest world z of geom ``g`` (its mesh's vertices, or its bounding box)."""
    R = d.geom_xmat[g].reshape(3, 3)
    if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH:
        mid = m.geom_dataid[g]
        v = m.mesh_vert[m.mesh_vertadr[mid]:m.mesh_vertadr[mid] + m.mesh_vertnum[mid]]
        return float((v @ R.T + d.geom_xpos[g])[:, 2].min())
    return float(d.geom_xpos[g][2] - np.abs(R[2]) @ m.geom_size[g])
