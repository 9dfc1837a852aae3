"""The Kinova Jaco arm with its three-finger hand (dm_control's MJCF and meshes), a table and one object: a real
robot model a user installs, for the hybrid stepper on any MJCF (``surrogate.hybrid``). Nothing of it ships here.

The assets are dm_control's ``third_party/kinova`` folder (``jaco_arm.xml``, ``jaco_hand.xml``, ``common.xml`` and
the decimated meshes), found in this order: the ``assets`` argument, the environment variable
``SURROGATE_JACO_ASSETS``, an installed ``dm_control`` package (located without importing it). Install it with
``pip install --no-deps dm-control``: its own requirements pull ``mujoco`` 4.0.0, which pins ``mujoco-core``
4.0.0 over this project's 4.0.1 (the sparse-Cholesky fix), and the files are all this needs.

The model (``MjSpec``): the hand attached at the arm's ``wristsite`` (names ``hand/...``); position servos on the
six arm joints (``arm_1`` ... ``arm_6``, their torque limits from dm_control's Jaco) on gravity-compensated bodies, so
the servos only track; force-limited position servos on the three finger joints (``finger_1`` ... ``finger_3``:
their torque limit is the grip); a table box whose top is z = 0 in front of the arm's base; the object a free
body resting on it, whose geoms collide by ``contype`` so that ``surrogate.hybrid(owned=object geoms)`` owns
every contact of the object: with the table and with each finger. The arm's own contact parameters
(``common.xml``: harder than MuJoCo's defaults) are what the analytic row uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from ..objects.asset import ObjectAsset
from .builder import rotated_vertices, stable_quat
from .hand_parts import add_position_actuator
from .kinova import ASSETS_ENV, FINGER_RANGE, jaco_assets

__all__ = ["ARM_JOINTS", "ASSETS_ENV", "FINGER_JOINTS", "FINGER_RANGE", "GRIP_SITE", "JacoScene", "TIP_SITES",
           "jaco_assets", "jaco_spec"]
from .object_body import add_object_body

ARM_JOINTS = tuple(f"joint_{i}" for i in range(1, 7))
FINGER_JOINTS = tuple(f"hand/finger_{i}" for i in range(1, 4))
GRIP_SITE = "hand/pinchsite"  # between the fingertips: the point a grasp centres on the object
TIP_SITES = tuple(f"hand/tip_{i}" for i in range(1, 4))
# dm_control's Jaco (entities/manipulators/kinova/jaco_arm.py): torque limits of the large and small joints (N m)
_ARM_TORQUE = (30.5, 30.5, 30.5, 6.8, 6.8, 6.8)
_ARM_KP = (300.0, 300.0, 300.0, 60.0, 60.0, 60.0)  # N m / rad: stiff enough to track, inside the torque limits
_FINGER_KP = 5.0  # N m / rad: saturates at the grip torque before the finger reaches its target
TABLE_HALF = (0.3, 0.3, 0.02)
TABLE_CENTRE = (0.0, 0.5)  # m, in front of the base (the arm's reach is about 0.7 m)


@dataclass(frozen=True)
class JacoScene:
    """What ``jaco_spec`` built: the spec and the names a script needs.

    Attributes:
      spec: the ``MjSpec`` (compile it, or hand it to ``surrogate.hybrid``).
      object_geoms: the object's geom names (``owned`` for ``surrogate.hybrid``).
      arm_actuators, finger_actuators: actuator names, in joint order.
      object_pos: [3] the object's initial position (m), resting on the table.
      object_points: [V, 3] the object's vertices as it rests, relative to its COM (m, world axes).
    """

    spec: mujoco.MjSpec
    object_geoms: tuple[str, ...]
    arm_actuators: tuple[str, ...]
    finger_actuators: tuple[str, ...]
    object_pos: tuple[float, float, float]
    object_points: np.ndarray


def jaco_spec(obj: ObjectAsset, *, assets=None, grip_torque: float = 1.5, timestep: float = 0.002,
              object_xy: Sequence[float] = TABLE_CENTRE) -> JacoScene:
    """The Jaco on a table with ``obj`` resting at ``object_xy`` (m), as an ``MjSpec`` (module docstring).

    Args:
      obj: the object (e.g. one of ``objects.load_split("heldout")``).
      assets: the kinova folder (``jaco_assets``).
      grip_torque: N m, each finger servo's torque limit (the grip).
      timestep: s, the physics step.
      object_xy: [2] where the object rests on the table (m, world).
    """
    folder = jaco_assets(assets)
    spec = mujoco.MjSpec.from_file(str(folder / "jaco_arm.xml"))
    hand = mujoco.MjSpec.from_file(str(folder / "jaco_hand.xml"))
    spec.site("wristsite").attach_body(hand.body("hand"), "hand/", "")
    for i in range(1, 4):  # a frame on each fingertip: the object's slip is measured in them (rig.outcomes)
        spec.body(f"hand/b_finger_tip_{i}").add_site(name=f"hand/tip_{i}", pos=[0.03, 0.0, 0.0], size=[0.004, 0, 0])
    spec.modelname = f"jaco_{obj.name}"
    spec.compiler.degree = False
    spec.option.timestep = float(timestep)
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST  # stiff servos stay stable
    for body in spec.worldbody.find_all(mujoco.mjtObj.mjOBJ_BODY):  # the robot's bodies (the object comes later)
        body.gravcomp = 1.0  # the servos track; they do not hold the arm up
    world = spec.worldbody
    world.add_light(name="sun", pos=[0, 0.5, 2.5], dir=[0, 0, -1], type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL)
    world.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[2, 2, 0.05], pos=[0, 0, -0.75],
                   rgba=[0.5, 0.55, 0.5, 1])
    world.add_geom(name="table", type=mujoco.mjtGeom.mjGEOM_BOX, size=list(TABLE_HALF),
                   pos=[TABLE_CENTRE[0], TABLE_CENTRE[1], -TABLE_HALF[2]], rgba=[0.6, 0.45, 0.3, 1])
    arm_acts = tuple(f"arm_{i}" for i in range(1, 7))
    for name, joint, kp, torque in zip(arm_acts, ARM_JOINTS, _ARM_KP, _ARM_TORQUE):
        add_position_actuator(spec, name, joint, kp=kp, force=torque, ctrlrange=(-2 * np.pi, 2 * np.pi))
    finger_acts = tuple(f"finger_{i}" for i in range(1, 4))
    for name, joint in zip(finger_acts, FINGER_JOINTS):
        add_position_actuator(spec, name, joint, kp=_FINGER_KP, force=grip_torque, ctrlrange=FINGER_RANGE)
    quat = stable_quat(obj)
    points = rotated_vertices(obj, quat)
    pos = (float(object_xy[0]), float(object_xy[1]), -float(points[:, 2].min()) + 1e-4)  # on the top, 0.1 mm above
    add_object_body(spec, obj, pos=pos, quat=quat)
    geoms = tuple(g.name for g in spec.body("object").geoms)
    for g in spec.body("object").geoms:
        g.contype, g.conaffinity = 1, 1  # collides with the table and the fingers (contype 3 / conaffinity 2)
        g.condim = 4  # torsional friction too, as the fingertips' own geoms (jaco_hand.xml)
        g.friction = [obj.friction, 0.005, 0.0001]
    return JacoScene(spec=spec, object_geoms=geoms, arm_actuators=arm_acts, finger_actuators=finger_acts,
                     object_pos=pos, object_points=points)

