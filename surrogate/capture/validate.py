"""Validator: every check names the file, the episode and the field it rejects.

Used by the writer (nothing invalid is written), the reader (nothing invalid is
trained on) and the importers (bad episodes are skipped and reported).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import CaptureError
from .episode import DatasetMeta, Episode
from .schema import ANGULAR_FRAMES, ENVIRONMENT_KINDS, FEIX_GRASP_TYPES, SI_UNITS

QUAT_NORM_TOL = 1e-2  # stored quaternions are normalized; more than this off is corrupt data
MAX_REASONABLE_SPEED = 100.0  # m/s between frames: faster is a tracking glitch or wrong units
MAX_REASONABLE_SPIN = 1e4  # rad/s (about 1600 turns per second)
# The declared rates (LeRobot's fps, capture_rate_hz, each episode's provenance.capture_rate_hz) agree, and the median
# timestamp step is 1/rate, to this (relative); LeRobot itself checks each step against 1/fps to 1e-4 s.
RATE_RTOL = 0.01
MAX_STEP_RATIO = 1.5  # a step longer than 1.5 / rate: dropped frames or a jump in time


def _fail(msg, ep, field, file):
    raise CaptureError(msg, file=file, episode=ep.episode_id, field=field)


def _check_array(ep, name, arr, shape_tail, file, *, dtype_kind="f"):
    T = ep.num_frames
    arr = np.asarray(arr)
    # "n" marks a width that may be anything (joints, sensors, taxels, regions).
    want = "[T" + "".join(f", {'n' if s is None else s}" for s in shape_tail) + "]"
    if arr.ndim != 1 + len(shape_tail):
        _fail(f"expected shape {want}, got {list(arr.shape)}", ep, name, file)
    if arr.shape[0] != T:
        _fail(f"has {arr.shape[0]} frames but timestamps has {T} (mismatched lengths)", ep, name, file)
    for i, s in enumerate(shape_tail):
        if s is not None and arr.shape[1 + i] != s:
            _fail(f"expected shape {want}, got {list(arr.shape)}", ep, name, file)
    if dtype_kind == "f":
        if arr.dtype.kind not in "fiub":
            _fail(f"expected numbers, got dtype {arr.dtype}", ep, name, file)
        bad = ~np.isfinite(arr.astype(float))
        if bad.any():
            idx = np.argwhere(bad)[0]
            kind = "NaN" if np.isnan(arr.astype(float)[tuple(idx)]) else "infinite"
            _fail(f"{kind} value at frame {int(idx[0])} ({int(bad.sum())} non-finite values in all)", ep, name, file)
    return arr


def validate_episode(ep: Episode, meta: DatasetMeta | None = None, *, file=None) -> None:
    """Raise CaptureError on the first problem found in ``ep``; return None if it is valid."""
    if not isinstance(ep.episode_id, str) or not ep.episode_id:
        raise CaptureError("episode_id must be a non-empty string", file=file, episode=ep.episode_id, field="episode_id")
    t = np.asarray(ep.timestamps)
    if t.ndim != 1 or len(t) < 2:
        _fail(f"needs at least 2 frames as a 1-D array, got shape {list(t.shape)}", ep, "timestamps", file)
    _check_array(ep, "timestamps", t, (), file)
    # JSON has no NaN: a NaN t0 was written as null, and the reader then failed
    if not (_is_number(ep.t0) and np.isfinite(float(ep.t0))):
        _fail(f"must be a finite number of seconds, got {ep.t0!r}", ep, "t0", file)
    dt = np.diff(t)
    if (dt <= 0).any():
        i = int(np.argmax(dt <= 0))
        _fail(f"not strictly increasing: frame {i + 1} at {_num(t[i + 1])} s follows {_num(t[i])} s", ep, "timestamps", file)

    pose = _check_array(ep, "object_pose", ep.object_pose, (7,), file)
    qn = np.linalg.norm(pose[:, 3:7], axis=1)
    off = np.abs(qn - 1.0) > QUAT_NORM_TOL
    if off.any():
        i = int(np.argmax(off))
        _fail(f"quaternion at frame {i} has norm {qn[i]:.4f}, not 1 (order must be w, x, y, z)", ep, "object_pose", file)
    valid = None
    if ep.object_pose_valid is not None:
        valid = _check_array(ep, "object_pose_valid", ep.object_pose_valid, (), file)
        flags = np.isin(valid, (0, 1))  # as the reader requires: a 0.5 had been written as True and then refused
        if not flags.all():
            i = int(np.flatnonzero(~flags)[0])
            _fail(f"must be 0 or 1 (or bool), got {_num(valid[i])} at frame {i}", ep, "object_pose_valid", file)
        valid = valid.astype(bool)
        if not valid.any():
            _fail("the object is never tracked (all frames invalid)", ep, "object_pose_valid", file)
    pos = pose[:, :3] if valid is None else pose[valid, :3]
    tv = t if valid is None else t[valid]
    if len(tv) > 1:
        speed = np.linalg.norm(np.diff(pos, axis=0), axis=1) / np.diff(tv)
        if speed.max() > MAX_REASONABLE_SPEED:
            i = int(np.argmax(speed))
            _fail(f"object moves at {speed[i]:.3g} m/s near frame {i}; positions must be in metres and timestamps in "
                  "seconds", ep, "object_pose", file)

    _check_other_arrays(ep, meta, file)
    _validate_object(ep, file)
    _validate_setting(ep, file)
    _check_timing(ep, meta, file)


def _check_timing(ep: Episode, meta: DatasetMeta | None, file) -> None:
    """The episode's rate is the dataset's (``meta.capture_rate_hz``, when known) and its timestamps step at
    1/rate: the median step to RATE_RTOL, no step longer than MAX_STEP_RATIO / rate. Code downstream steps at
    1/capture_rate_hz while other code reads the timestamps: they must say the same."""
    rate = float(ep.provenance.capture_rate_hz)
    ref = None if meta is None else meta.capture_rate_hz
    if ref is not None and abs(rate - ref) > RATE_RTOL * ref:
        _fail(f"{_num(rate)} Hz disagrees with the dataset's capture_rate_hz {_num(ref)} Hz (one rate per dataset, "
              "as LeRobot's fps)", ep, "provenance.capture_rate_hz", file)
    t = np.asarray(ep.timestamps, dtype=np.float64)
    steps, nominal = np.diff(t), 1.0 / rate
    slack = 2.0 * float(np.spacing(np.float32(t[-1] - t[0])))  # timestamps are stored as float32 from the first frame
    median = float(np.median(steps))
    if abs(median - nominal) > RATE_RTOL * nominal + slack:
        _fail(f"steps of {_num(median)} s (median) are {_num(1.0 / median)} Hz, but provenance.capture_rate_hz says "
              f"{_num(rate)} Hz (the steps must be 1/rate to {RATE_RTOL:.0%})", ep, "timestamps", file)
    long = steps > MAX_STEP_RATIO * nominal + slack
    if long.any():
        i = int(np.argmax(long))
        _fail(f"a step of {_num(steps[i])} s from frame {i} to {i + 1} is {steps[i] / nominal:.3g}x the "
              f"{_num(rate)} Hz step ({int(long.sum())} of {len(steps)} steps longer than {MAX_STEP_RATIO:g}x): "
              "dropped frames or a jump in time", ep, "timestamps", file)


def validate_fps(fps, capture_rate_hz, *, file) -> None:
    """LeRobot's integer ``fps`` (``meta/info.json``) must be the exact ``capture_rate_hz`` (``meta/contact.json``)
    rounded: within 0.5 Hz or RATE_RTOL; CaptureError naming ``file`` and ``fps`` otherwise."""
    if abs(float(fps) - float(capture_rate_hz)) > max(0.5, RATE_RTOL * float(capture_rate_hz)):
        raise CaptureError(f"{_num(fps)} disagrees with meta/contact.json's capture_rate_hz {_num(capture_rate_hz)} Hz "
                           "(fps is that rate rounded to an integer)", file=file, field="fps")


def _check_other_arrays(ep: Episode, meta: DatasetMeta | None, file) -> None:
    """Twist, joints, wrench, tactile, contact regions and truth: shapes, finite values, and agreement with the meta."""
    if ep.object_twist is not None:
        _check_twist(ep, _check_array(ep, "object_twist", ep.object_twist, (6,), file), file)
    J = _joint_width(ep, ("joint_pos", "joint_vel", "joint_cmd"), "other joint arrays have", file)
    if J is not None and meta is not None and meta.joint_names is not None and len(meta.joint_names) != J:
        _fail(f"has {J} joints but the dataset names {len(meta.joint_names)}", ep, "joint_pos", file)
    _check_object_joints(ep, meta, file)
    if ep.wrench is not None:
        w = _check_array(ep, "wrench", ep.wrench, (None, 6), file)
        if meta is not None and meta.wrench_sensors is not None and w.shape[1] != len(meta.wrench_sensors):
            _fail(f"has {w.shape[1]} sensors but the dataset names {len(meta.wrench_sensors)}", ep, "wrench", file)
    if ep.tactile is not None:
        _check_array(ep, "tactile", ep.tactile, (None,), file)
    if ep.contact_regions is not None:
        cr = _check_array(ep, "contact_regions", ep.contact_regions, (None,), file)
        if ((cr != 0) & (cr != 1)).any():
            _fail("must hold 0 or 1 per region", ep, "contact_regions", file)
        if meta is not None:
            seeds = meta.contact_region_seeds.get(ep.object.name)
            if seeds is None:
                _fail(f"no region seeds for object '{ep.object.name}' in the dataset meta", ep, "contact_regions", file)
            if len(seeds) != cr.shape[1]:
                _fail(f"has {cr.shape[1]} regions, the object's seeds define {len(seeds)}", ep, "contact_regions", file)
    for name, arr in ep.truth.items():
        a = np.asarray(arr)
        if a.shape[:1] != (ep.num_frames,):
            _fail(f"has {a.shape[:1]} frames, expected {ep.num_frames}", ep, f"truth.{name}", file)
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            _fail("non-finite values", ep, f"truth.{name}", file)


def _joint_width(ep: Episode, names, others: str, file) -> int | None:
    """The one width J of the joint arrays ``names`` ([T, J] each; None where the episode has none of them); a
    different width is an error naming the array (``others``: how the message names the width it differs from)."""
    J = None
    for name in names:
        arr = getattr(ep, name)
        if arr is not None:
            arr = _check_array(ep, name, arr, (None,), file)
            if J is not None and arr.shape[1] != J:
                _fail(f"has {arr.shape[1]} joints, {others} {J}", ep, name, file)
            J = arr.shape[1]
    return J


def _check_object_joints(ep: Episode, meta: DatasetMeta | None, file) -> None:
    """An articulated object's joint arrays: [T, Jo] each, one width, as many joints as the dataset names and as
    the object's geometry (``kind: articulated``) defines."""
    Jo = _joint_width(ep, ("object_joint_pos", "object_joint_vel"), "object_joint_pos has", file)
    if Jo is None:
        return
    if meta is not None and meta.object_joint_names is not None and len(meta.object_joint_names) != Jo:
        _fail(f"has {Jo} joints but the dataset names {len(meta.object_joint_names)}", ep, "object_joint_pos", file)
    geo = ep.object.geometry if isinstance(ep.object.geometry, dict) else {}
    joints = geo.get("joints") if geo.get("kind") == "articulated" else None
    if not isinstance(joints, list) or len(joints) != Jo:
        _fail(f"has {Jo} joints but the object's geometry defines {len(joints) if isinstance(joints, list) else 'none'} "
              "(an articulated object needs geometry.kind 'articulated')", ep, "object_joint_pos", file)


def _validate_setting(ep: Episode, file) -> None:
    """Environment, provenance and grasp type."""
    env = ep.environment
    if env.kind not in ENVIRONMENT_KINDS:
        _fail(f"unknown kind '{env.kind}', allowed: {list(ENVIRONMENT_KINDS)}", ep, "environment.kind", file)
    g = env.gravity
    if (not isinstance(g, (list, tuple, np.ndarray)) or len(g) != 3
            or not all(_is_number(v) and math.isfinite(v) for v in g)):
        _fail(f"must be 3 finite numbers, got {_nums(g)}", ep, "environment.gravity", file)
    if not (_is_number(env.height) and math.isfinite(env.height)):
        _fail(f"must be a finite number (m), got {_num(env.height)}", ep, "environment.height", file)
    pv = ep.provenance
    if not pv.source:
        _fail("must name the source", ep, "provenance.source", file)
    if not (_is_number(pv.capture_rate_hz) and 0 < pv.capture_rate_hz < 1e5):
        _fail(f"must be in (0, 1e5) Hz, got {_num(pv.capture_rate_hz)}", ep, "provenance.capture_rate_hz", file)
    if ep.grasp_type is not None:
        # int() would turn 3.5 into 3 and "power" into a ValueError: require an integer id.
        g = ep.grasp_type
        if isinstance(g, (bool, np.bool_)) or not isinstance(g, (int, np.integer)) or int(g) not in FEIX_GRASP_TYPES:
            _fail(f"must be a Feix GRASP taxonomy id 1..33, got {_num(g)}", ep, "grasp_type", file)


def _check_twist(ep, twist, file) -> None:
    """Measured velocities within the same physical bounds as the positions."""
    for part, cols, limit, unit in (("linear", slice(0, 3), MAX_REASONABLE_SPEED, "m/s"), ("angular", slice(3, 6), MAX_REASONABLE_SPIN, "rad/s")):
        speed = np.linalg.norm(twist[:, cols], axis=1)
        if speed.max() > limit:
            i = int(np.argmax(speed))
            _fail(f"{part} speed {_num(speed[i])} {unit} at frame {i} exceeds {limit:g} {unit} (wrong units?)", ep, "object_twist", file)


def _is_number(x) -> bool:
    return not isinstance(x, (bool, np.bool_)) and isinstance(x, (int, float, np.integer, np.floating))


def _nums(xs) -> str:
    if isinstance(xs, (list, tuple, np.ndarray)):
        return "[" + ", ".join(_num(x) for x in xs) + "]"
    return _num(xs)


def _num(x) -> str:
    """A number as a user reads it (0.99, not np.float64(0.99))."""
    if not _is_number(x):
        return repr(x)
    return f"{float(x):.6g}" if isinstance(x, (float, np.floating)) else str(int(x))


def _validate_object(ep, file):
    o = ep.object
    if not o.name:
        _fail("object must have a name", ep, "object.name", file)
    if not (isinstance(o.mass, (int, float)) and math.isfinite(o.mass) and 0 < o.mass < 1e4):
        _fail(f"must be in (0, 1e4) kg, got {_num(o.mass)}", ep, "object.mass", file)
    inertia = np.asarray(o.inertia, dtype=float)
    if inertia.shape != (3, 3) or not np.isfinite(inertia).all():
        _fail(f"must be a finite 3x3 matrix, got shape {list(inertia.shape)}", ep, "object.inertia", file)
    if not np.allclose(inertia, inertia.T, rtol=1e-6, atol=1e-12):
        _fail("must be symmetric", ep, "object.inertia", file)
    ev = np.linalg.eigvalsh(inertia)
    if ev.min() <= 0:
        _fail(f"must be positive definite, eigenvalues {ev.tolist()}", ep, "object.inertia", file)
    if ev[0] + ev[1] < ev[2] * (1 - 1e-6):
        _fail(f"principal moments {ev.tolist()} violate the triangle inequality", ep, "object.inertia", file)
    if not (isinstance(o.size, (int, float)) and 1e-3 <= o.size <= 10.0):
        _fail(f"must be in [1e-3, 10] m, got {_num(o.size)} (units must be metres)", ep, "object.size", file)
    if o.friction is not None and not (_is_number(o.friction) and 0 <= o.friction < 10):
        _fail(f"must be in [0, 10), got {_num(o.friction)}", ep, "object.friction", file)
    kind = o.geometry.get("kind") if isinstance(o.geometry, dict) else None
    if kind not in ("box", "mesh", "procedural", "articulated"):
        _fail(f"geometry.kind must be box, mesh or procedural (or articulated: an object with joints), got {kind!r}", ep,
              "object.geometry", file)
    if kind == "articulated":
        _validate_links(ep, o.geometry, file)


def _validate_links(ep, geo: dict, file) -> None:
    """An articulated object's links (mass, inertia, collision boxes or meshes) and joints (type, parent, child, axis)."""
    links = geo.get("links")
    if not isinstance(links, list) or not links:
        _fail("an articulated object needs a non-empty list of links", ep, "object.geometry.links", file)
    names = []
    for i, link in enumerate(links):
        where = f"object.geometry.links[{i}]"
        if not isinstance(link, dict) or not link.get("name"):
            _fail("each link needs a name", ep, where, file)
        m = link.get("mass")
        if not (_is_number(m) and math.isfinite(m) and 0 < m < 1e4):
            _fail(f"mass must be in (0, 1e4) kg, got {_num(m)}", ep, f"{where}.mass", file)
        inertia = np.asarray(link.get("inertia", []), dtype=float)
        if inertia.shape != (3, 3) or not np.isfinite(inertia).all() or np.linalg.eigvalsh(inertia).min() <= 0:
            _fail("inertia must be a finite positive-definite 3x3 matrix", ep, f"{where}.inertia", file)
        if not link.get("shapes"):
            _fail("a link needs collision shapes", ep, f"{where}.shapes", file)
        names.append(link["name"])
    for j, joint in enumerate(geo.get("joints") or []):
        where = f"object.geometry.joints[{j}]"
        if not isinstance(joint, dict) or joint.get("type") not in ("continuous", "revolute", "prismatic"):
            _fail("type must be continuous, revolute or prismatic", ep, f"{where}.type", file)
        if joint.get("parent") not in names or joint.get("child") not in names:
            _fail(f"parent and child must be links of the object {names}", ep, where, file)
        axis = np.asarray(joint.get("axis", []), dtype=float)
        if axis.shape != (3,) or not np.isfinite(axis).all() or np.linalg.norm(axis) < 1e-9:
            _fail("axis must be a non-zero 3-vector", ep, f"{where}.axis", file)


def validate_meta(meta: DatasetMeta, *, file=None) -> None:
    """Check the dataset-wide description."""
    rate = meta.capture_rate_hz
    if rate is not None and not (_is_number(rate) and 0 < rate < 1e5):
        raise CaptureError(f"must be in (0, 1e5) Hz, got {_num(rate)}", file=file, field="capture_rate_hz")
    if meta.angular_frame not in ANGULAR_FRAMES:
        raise CaptureError(f"must be one of {list(ANGULAR_FRAMES)}, got {meta.angular_frame!r}", file=file, field="angular_frame")
    if meta.tactile_unit is not None and meta.tactile_unit not in SI_UNITS:
        raise CaptureError(f"unknown unit {meta.tactile_unit!r}; SI units: {sorted(SI_UNITS)}", file=file, field="tactile_unit")
    for obj, seeds in meta.contact_region_seeds.items():
        s = np.asarray(seeds, dtype=float)
        if s.ndim != 2 or s.shape[1] != 3 or not np.isfinite(s).all():
            raise CaptureError(f"seeds for object '{obj}' must be finite [R, 3] points", file=file, field="contact_region_seeds")
    for path in meta.robot_files:
        parts = str(path).split("/")
        if parts[:2] != ["meta", "robot"] or len(parts) < 3 or ".." in parts or "" in parts:
            raise CaptureError(f"robot file {path!r} must be a relative path under meta/robot/", file=file,
                               field="robot_files")
    mjcf = meta.hand.get("mjcf") if isinstance(meta.hand, dict) else None
    if mjcf is not None and mjcf not in meta.robot_files:
        raise CaptureError(f"names the robot's MJCF {mjcf!r}, which the dataset does not hold (under meta/robot/)",
                           file=file, field="hand.mjcf")
