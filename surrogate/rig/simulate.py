"""Simulate one capture-rig episode and sample its exact state: ``simulate_episode``.

    cfg = load_rig_config()
    trace = simulate_episode(cfg, make_object("box", 3), hand="parallel_jaw", seed=7)
    trace.labels  # {"lifted": True, "slipped": False, "dropped": False, "max_slip_m": ...}

The physics step is the recorder's frame period divided into
``ceil(period / physics.max_timestep)`` substeps (120 Hz, 1 ms -> 9 substeps of
0.926 ms), so frames fall exactly on physics steps. Randomness comes from
independent generators per purpose, each seeded by ``(seed, purpose)``:
``script`` (object yaw, grasp, force, lift, perturbation), ``mass_mismatch``,
``actuator`` (delay, backlash), ``fingertips`` (the rig-v2 pad effects' hidden values) and
``perturbation`` (the rig-v2 swing / lever choice). Switching an effect on or off therefore never
changes the script of a seed (what the gap-attribution study needs), and a seed
gives bit-identical traces on one machine. ``redraw=k`` draws the hidden values (``mass_mismatch``,
``actuator``, ``fingertips``) again from independent generators and keeps the script: the same grasp of
the same object with another episode's physics (``bench.rig_floor``).

Frames of the trace: ``object_pose`` / ``object_twist`` are those of the object's
geometry frame, whose origin is the *nominal* centre of mass (the frame the
nominal ``ObjectSpec`` and the mesh are given in); with ``mass_mismatch`` on, the
true COM sits at ``object_true["com_offset"]`` in that frame. ``pad_wrench`` is
the rig's contact wrench from the object on each pad (force, and torque about
the pad site), in the site frame; ``sensor_names`` are ``ft_<pad>`` (the prefix
of the hand's ``ft_<pad>_force`` / ``ft_<pad>_torque`` sensors). ``contact_points``
holds the object-surface points of the pad patches and the table contact, plus
MuJoCo's analytic finger-link / palm contacts, in the object frame.
"""

from __future__ import annotations

import copy
import math
import re
import zlib
from pathlib import Path

import mujoco
import numpy as np

from surrogate.capture import Environment, ObjectSpec
from surrogate.errors import ConfigError
from surrogate.objects.asset import ObjectAsset
from surrogate.paths import file_sha256
from surrogate.rig.config import recorder_rate_hz, validate_rig_config
from surrogate.rig.outcomes import hand_object_distance, relative_pose
from surrogate.rig.physics import RigPhysics
from surrogate.rig.scripts import (
    GRASP_TYPES,
    GraspScript,
    draw_lift_speed,
    draw_script_values,
    episode_labels,
    fingertip_perturbation,
    plan_grasp,
)
from surrogate.rig.trace import RigTrace
from surrogate.scenes import TABLE_HEIGHT, stable_quat

GRAVITY = [0.0, 0.0, -9.81]
_HANDS = tuple(GRASP_TYPES)


HIDDEN_PURPOSES = ("mass_mismatch", "actuator", "fingertips")  # the per-episode draws a capture does not record


def episode_rng(seed: int, purpose: str, redraw: int | None = None) -> np.random.Generator:
    """The generator of one purpose (``script``, ``mass_mismatch``, ``actuator``) of episode ``seed``; ``redraw``
    k >= 0: the k-th independent redraw of it (None: the episode's own draw)."""
    key = [int(seed), zlib.crc32(purpose.encode())]
    return np.random.default_rng(key if redraw is None else key + [0x5EDA, int(redraw)])


def nominal_object_spec(obj: ObjectAsset) -> ObjectSpec:
    """What a user would enter for ``obj`` (nominal mass, inertia, friction, how to rebuild the shape)."""
    m = re.match(r"procedural:([^:]+):seed=(\d+)", obj.source or "")
    if m:
        params = {k: v for k, v in obj.params.items() if isinstance(v, (int, float, str, bool))}
        geometry = {"kind": "procedural", "family": m.group(1), "seed": int(m.group(2)), "params": params}
    else:
        path = Path(obj.source).resolve()  # read again by whoever builds the episode's scene, from any folder
        geometry = {"kind": "mesh", "path": str(path), "sha256": file_sha256(path) if path.is_file() else "",
                    "scale": 1.0}
    return ObjectSpec(name=obj.name, mass=float(obj.mass), inertia=np.asarray(obj.inertia, dtype=float).tolist(),
                      size=float(obj.size), geometry=geometry, friction=float(obj.friction))


def _yaw_quat(yaw: float, q: np.ndarray) -> np.ndarray:
    out = np.zeros(4)
    mujoco.mju_mulQuat(out, np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]), q)
    return out / np.linalg.norm(out)


def simulate_episode(cfg: dict, obj: ObjectAsset, *, hand: str, seed: int, duration: float | None = None,
                     redraw: int | None = None, redraw_only: tuple[str, ...] | None = None) -> RigTrace:
    """Run one scripted grasp episode under the rig's reference physics.

    Args:
      cfg: rig config (``load_rig_config``); validated again here.
      obj: the nominal object.
      hand: ``parallel_jaw``, ``three_finger`` or ``jaco``.
      seed: episode seed (fixes the script, the drawn effects and hence the trace).
      duration: s, episode length (default ``script.duration``).
      redraw: k >= 0 draws the hidden per-episode values (``HIDDEN_PURPOSES``) again, the k-th time, with the
        script of ``seed`` kept; None: the episode's own values.
      redraw_only: with ``redraw``, the purposes (a subset of ``HIDDEN_PURPOSES``) drawn again, the others kept as the
        episode's own (None: all).
    Returns:
      The ``RigTrace`` sampled at ``recorder.rate_hz`` (default 120 Hz), frames at
      ``k / rate`` for ``k = 0 .. floor(duration * rate)``.
    Raises:
      ConfigError: bad config, hand or duration.
      UngraspableObject: the object does not fit the open hand at any yaw.
    """
    cfg = validate_rig_config(cfg)
    if hand not in _HANDS:
        raise ConfigError(f"hand must be one of {_HANDS}, got {hand!r}", key="hand")
    duration = float(cfg["script"]["duration"] if duration is None else duration)
    if not (0.0 < duration <= 60.0):
        raise ConfigError(f"duration must be in (0, 60] s, got {duration!r}", key="duration")
    rate = recorder_rate_hz(cfg)
    period = 1.0 / rate
    substeps = max(1, math.ceil(period / cfg["physics"]["max_timestep"] - 1e-9))
    dt = period / substeps
    if redraw is not None and (isinstance(redraw, bool) or int(redraw) != redraw or redraw < 0):
        raise ConfigError(f"redraw must be None or a non-negative integer, got {redraw!r}", key="redraw")
    if redraw_only is not None and not set(redraw_only) <= set(HIDDEN_PURPOSES):
        raise ConfigError(f"redraw_only must name purposes of {HIDDEN_PURPOSES}, got {redraw_only!r}", key="redraw_only")
    phys, script, params = _scripted_rig(cfg, obj, hand=hand, seed=seed, dt=dt, redraw=redraw, redraw_only=redraw_only)
    n_frames = int(math.floor(duration * rate + 1e-9)) + 1
    rec = _Samples(phys, script, np.arange(n_frames) / rate)
    rec.record(0, phys.evaluate())
    step = 0
    for k in range(1, n_frames):
        for _ in range(substeps):
            phys.step(script.command(step * dt))
            step += 1
        if not np.isfinite(phys.data.qpos).all():  # pragma: no cover - a diverged episode is a bug, say so
            raise FloatingPointError(f"rig physics diverged at t = {step * dt:.4f} s (seed {seed}, {obj.name})")
        rec.record(k, phys.patches)
    script_out = copy.deepcopy(params)
    script_out["phases"] = {k: [float(a), float(b) if math.isfinite(b) else float(duration)]
                            for k, (a, b) in script.phases.items()}
    script_out["physics"] = {"timestep_s": dt, "substeps": substeps, "rate_hz": rate, "duration_s": duration}
    # Where the hand's base joints are zero (world, m): scenes rebuilt from the capture put the
    # hand exactly here, so recorded joint positions place the pads where they really were.
    script_out["hand_base_pos"] = [float(v) for v in phys.scene.meta["hand_base_pos"]]
    return _trace(cfg, obj, phys, script, rec, script_out, hand=hand, seed=seed)


def _scripted_rig(cfg: dict, obj: ObjectAsset, *, hand: str, seed: int, dt: float, redraw: int | None = None,
                  redraw_only: tuple[str, ...] | None = None):
    """(RigPhysics, GraspScript, script parameters) of episode ``seed``: the object yawed on the table,
    the grasp planned from its plan view around the hand's start axis (the ``script`` generator); the hidden
    values of ``redraw_only`` (None: all) from ``redraw``'s generators."""
    script_cfg = cfg["script"]
    rng = episode_rng(seed, "script")
    values = draw_script_values(hand, script_cfg, rng)
    quat = _yaw_quat(values["object_yaw"], stable_quat(obj))
    phys = RigPhysics(cfg, obj, hand=hand, timestep=dt, object_quat=quat, grip_force=values["grip_force"],
                      rngs={p: episode_rng(seed, p, redraw if redraw_only is None or p in redraw_only else None)
                            for p in HIDDEN_PURPOSES})
    d, s, h = phys.data, phys.scene, phys.hand
    Ro = d.xmat[phys.ob].reshape(3, 3)
    verts = phys.support @ Ro.T + d.xpos[phys.ob]  # hull vertices and surface samples
    base0 = np.asarray(s.meta["hand_base_pos"])
    grasp = plan_grasp(h, verts[:, :2] - base0[:2], script_cfg, rng, object_name=obj.name)
    pert, offset = fingertip_perturbation(h, script_cfg, episode_rng(seed, "perturbation"), grasp, verts[:, :2] - base0[:2])
    if pert is not None:
        values["perturbation"] = pert
    if offset is not None:
        grasp["offset"] = offset
    speed = draw_lift_speed(script_cfg, episode_rng(seed, "lift"))
    if speed is not None:  # a constant-speed lift: its phase lasts as long as the rise takes
        values["lift_speed"] = speed
        values["times"]["lift"] = values["lift_height"] / speed
    lowest = s.surface_z + 0.003 + h.finger_depth - base0[2]
    grasp_z = max(s.meta["grasp_base_z"] + values.pop("height_u") * script_cfg["grasp_height_offset_max"], lowest)
    params = {**values, **grasp, "grasp_z": float(grasp_z)}
    return phys, GraspScript(h, params), params


class _Samples:
    """The exact state of the rig at each frame (what ``RigTrace`` holds), filled by ``record``.

    Arrays [F, ...]: pose [7], twist [6] (world), jpos / jvel / jcmd [J], wrench [pads, 6], hod (hand-object
    distance), rel_pos [3] / rel_quat [4] (object in the hand base frame), rel_pad [pads, 3] (object in
    each pad site's frame); points: F arrays of contact points.
    """

    def __init__(self, phys: RigPhysics, script: GraspScript, times: np.ndarray):
        m, h = phys.model, phys.hand
        F, J = len(times), len(h.joint_names)
        self.phys, self.script, self.times = phys, script, times
        self.qadr = np.array([m.jnt_qposadr[m.joint(n).id] for n in h.joint_names])
        self.vadr = np.array([m.jnt_dofadr[m.joint(n).id] for n in h.joint_names])
        self.base_id = m.body(h.base_body).id
        self.hand_geoms = [m.geom(g).id for g in h.hand_geom_names]
        self.pad_sites = [pad["site"] for pad in phys.pads]
        self.pose, self.twist = np.zeros((F, 7)), np.zeros((F, 6))
        self.jpos, self.jvel, self.jcmd = np.zeros((F, J)), np.zeros((F, J)), np.zeros((F, J))
        self.wrench = np.zeros((F, len(phys.pads), 6))
        self.hod = np.zeros(F)
        self.rel_pos, self.rel_quat = np.zeros((F, 3)), np.zeros((F, 4))
        self.rel_pad = np.zeros((F, len(self.pad_sites), 3))
        self.points = []

    def record(self, k: int, patches) -> None:
        phys, m, d = self.phys, self.phys.model, self.phys.data
        ob, va, base_id = phys.ob, phys.scene.object_dof_adr, self.base_id
        self.pose[k, :3] = d.xpos[ob]
        self.pose[k, 3:] = d.xquat[ob]
        R = d.xmat[ob].reshape(3, 3)
        self.twist[k, :3] = d.qvel[va:va + 3]
        self.twist[k, 3:] = R @ d.qvel[va + 3:va + 6]
        self.jpos[k] = d.qpos[self.qadr]
        self.jvel[k] = d.qvel[self.vadr]
        self.jcmd[k] = self.script.command(self.times[k])
        self.wrench[k] = phys.pad_wrenches(patches)
        self.points.append(phys.contact_points(patches))
        self.hod[k] = hand_object_distance(m, d, self.hand_geoms, phys.scene.object_geom_ids)
        self.rel_pad[k], self.rel_pos[k], self.rel_quat[k] = relative_pose(d, ob, base_id, self.pad_sites)


def _trace(cfg: dict, obj: ObjectAsset, phys: RigPhysics, script: GraspScript, rec: _Samples, script_out: dict, *,
           hand: str, seed: int) -> RigTrace:
    """The ``RigTrace`` of a finished episode: samples, labels, the drawn effects and the script."""
    labels = episode_labels(rec.times, rec.pose[:, :3], rec.rel_pad, rec.rel_pos, rec.rel_quat, rec.hod, script.phases,
                            cfg["script"])
    effects = copy.deepcopy(cfg["effects"])
    effects["actuator_delay_backlash"]["drawn"] = phys.channel.describe()
    tm = phys.true_mass
    effects["mass_mismatch"]["drawn"] = {"mass_ratio": tm["mass"] / obj.mass,
                                         "com_offset_m": [float(v) for v in tm["com_offset"]]}
    for name, drawn in phys.tips.describe().items():  # enabled fingertip effects only
        effects[name]["drawn"] = drawn
    h = phys.hand
    return RigTrace(
        times=rec.times,
        object_pose=rec.pose,
        object_twist=rec.twist,
        joint_names=list(h.joint_names),
        joint_pos=rec.jpos,
        joint_vel=rec.jvel,
        joint_cmd=rec.jcmd,
        sensor_names=[n[: -len("_force")] for n in h.sensor_names[::2]],
        pad_wrench=rec.wrench,
        contact_points=rec.points,
        hand_object_distance=rec.hod,
        object_nominal=nominal_object_spec(obj),
        object_true={"mass": float(tm["mass"]), "inertia": np.asarray(tm["inertia"]).tolist(),
                     "com_offset": [float(v) for v in tm["com_offset"]],
                     "friction_range": [float(v) for v in phys.field.range]},
        environment=Environment(kind="table", height=TABLE_HEIGHT, gravity=list(GRAVITY)),
        hand=hand,
        grasp_type=GRASP_TYPES[hand],
        labels=labels,
        script=script_out,
        effects=effects,
        seed=int(seed),
    )
