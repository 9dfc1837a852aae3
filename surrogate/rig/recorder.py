"""The rig's recorder: an exact ``RigTrace`` -> the ``Episode`` a real capture rig would record.

What a real rig gets wrong, and how it is modelled here (defaults in ``RECORDER_DEFAULTS``):

* Object pose (mocap / vision tracker at ``rate_hz``):
  - a constant per-episode bias: position in the world frame (camera extrinsics) and
    orientation in the body frame (rigid-body / marker definition), drawn once per episode;
  - white jitter on every frame (position m, orientation as a body-frame rotation vector);
  - dropouts while fingers occlude the object: a burst starts at frame n with probability
    ``dropout_onset_prob * clip((d_occ - d[n]) / d_occ, 0, 1)`` (d = hand-object distance),
    lasts ``1 + Geometric`` frames (mean ``dropout_burst_mean_frames``) and ends early as
    soon as the hand is farther than ``d_occ`` (line of sight is back). Dropped frames have
    ``object_pose_valid = False`` and hold the last valid pose (the capture format's convention).
  The tracker measures pose only: ``object_twist`` is not recorded (``truth`` has it).
* Joints: absolute encoders quantize positions (``hinge_counts_per_rev`` for hinges,
  ``prismatic_resolution_m`` for slides); velocities are backward differences of the
  quantized positions (what motor drivers report; 0 on the first frame, which has no
  predecessor); commands are recorded exactly as sent.
* Fingertip force/torque: a per-episode offset left after taring, a random-walk drift whose
  spread grows with sqrt(time), white noise, and clipping at the sensor's range.
* Tactile (off by default): a ``rows x cols`` taxel grid per pad; the pad's normal force is
  spread over the taxels around the centre of pressure, plus white noise, clipped at 0.
* Annotations: contact regions (a Voronoi partition of the object surface by seeds chosen
  with farthest-point sampling, see ``contact_region_seeds``) and the Feix grasp type.
* ``Episode.truth`` keeps the exact state (evaluation only); measured fields never see it.

Shapes: T = frames, J = joints, S = pads (force/torque sensors), R = contact regions.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from pathlib import Path

import numpy as np

from ..capture import Episode, Provenance
from ..capture.schema import feix_name
from ..errors import ConfigError
from ..scenes.from_capture import asset_from_spec
from .trace import RigTrace

SOURCE = "contact-surrogate capture rig (reference physics; stands in for hardware)"

# Slides of the project's hands (surrogate/scenes/hands.py); every other joint is a hinge.
DEFAULT_PRISMATIC_JOINTS = ["hand_x", "hand_y", "hand_z", "left_slide", "right_slide"]

# (default, low, high, unit) per key; ``None`` bounds mean "not a number" (bool / list).
# The comment above each group gives the real-world basis of its defaults.
_SPEC = {
    # OptiTrack / Vicon systems record at 100-240 Hz; 120 Hz is OptiTrack's default.
    "rate_hz": (120.0, 100.0, 200.0, "Hz"),
    "contact_regions": (16, 1, 256, "regions"),
    "pose": {
        # Rigid-body calibration (marker pivot, camera extrinsics): mm-level, ~0.5 deg.
        "bias_pos_m": (1.0e-3, 0.0, 0.01, "m, std per axis"),
        "bias_rot_deg": (0.5, 0.0, 5.0, "deg, std per axis"),
        # Sub-mm marker noise; on a ~5 cm marker baseline 0.2 mm is ~0.2 deg.
        "jitter_pos_m": (2.0e-4, 0.0, 0.005, "m, std per axis"),
        "jitter_rot_deg": (0.2, 0.0, 2.0, "deg, std per axis"),
        # Fingers within 2 cm of a 3-8 cm object hide its markers from some cameras. At contact
        # 0.02/frame x 8-frame (67 ms) bursts lose ~14 % of frames (~2.4 dropouts/s at 120 Hz).
        "occlusion_distance_m": (0.02, 0.0, 0.2, "m"),
        "dropout_onset_prob": (0.02, 0.0, 1.0, "per frame at contact"),
        "dropout_burst_mean_frames": (8.0, 1.0, 120.0, "frames"),
    },
    "joints": {
        # 12-bit absolute magnetic encoders (e.g. Dynamixel X series): 4096 counts/rev.
        "hinge_counts_per_rev": (4096, 64, 2**24, "counts/rev"),
        # Linear scale of a gripper slide: 10 um.
        "prismatic_resolution_m": (1.0e-5, 1.0e-8, 1.0e-3, "m"),
        "prismatic_joints": (DEFAULT_PRISMATIC_JOINTS, None, None, "joint names"),
    },
    "wrench": {
        "enabled": (True, None, None, "bool"),
        # ATI Nano17 class (SI-25-0.25): +-25 N, +-0.25 N m; noise of a few 1/160 N counts.
        "force_noise_n": (0.02, 0.0, 5.0, "N, std"),
        "torque_noise_nm": (2.0e-4, 0.0, 0.05, "N m, std"),
        # Offset left after taring at the episode start, then thermal drift of strain gauges.
        "force_bias_n": (0.05, 0.0, 5.0, "N, std"),
        "torque_bias_nm": (5.0e-4, 0.0, 0.05, "N m, std"),
        "force_drift_n_per_sqrt_s": (0.02, 0.0, 1.0, "N/sqrt(s)"),
        "torque_drift_nm_per_sqrt_s": (2.0e-4, 0.0, 0.01, "N m/sqrt(s)"),
        "force_range_n": (25.0, 0.1, 1000.0, "N"),
        "torque_range_nm": (0.25, 1.0e-3, 100.0, "N m"),
    },
    "tactile": {
        "enabled": (False, None, None, "bool"),
        # A 4x4 grid over the 2 cm pad (~5 mm pitch, like a uSkin 4x4 patch).
        "rows": (4, 1, 32, "taxels"),
        "cols": (4, 1, 32, "taxels"),
        "pad_size_m": (0.02, 1.0e-3, 0.1, "m"),
        "spread_m": (0.004, 1.0e-4, 0.05, "m, Gaussian sigma of the pressure blob"),
        "noise_n": (0.01, 0.0, 1.0, "N per taxel, std"),
    },
}


def _defaults(spec: dict) -> dict:
    return {k: _defaults(v) if isinstance(v, dict) else copy.deepcopy(v[0]) for k, v in spec.items()}


RECORDER_DEFAULTS = _defaults(_SPEC)


# ----------------------------------------------------------------------------- config


def _check_value(value, entry, key, file):
    default, lo, hi, unit = entry
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"must be true or false, got {value!r}", file=file, key=key)
        return value
    if isinstance(default, list):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"must be a list of {unit}, got {value!r}", file=file, key=key)
        return list(value)
    is_int = isinstance(default, int)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if is_int and ok and float(value) != int(value):
        ok = False
    if not ok or not lo <= value <= hi:
        kind = "an integer" if is_int else "a number"
        raise ConfigError(f"must be {kind} in [{lo:g}, {hi:g}] ({unit}), got {value!r}", file=file, key=key)
    return int(value) if is_int else float(value)


def _validate(section, spec, where, file):
    if not isinstance(section, dict):
        raise ConfigError(f"must be a mapping with keys {sorted(spec)}, got {type(section).__name__}", file=file, key=where)
    out = {}
    for k in section:
        if k not in spec:
            raise ConfigError(f"unknown key; allowed: {sorted(spec)}", file=file, key=f"{where}.{k}")
    for k, entry in spec.items():
        key = f"{where}.{k}"
        if isinstance(entry, dict):
            out[k] = _validate(section.get(k, {}) or {}, entry, key, file)
        else:
            out[k] = _check_value(section[k], entry, key, file) if k in section else copy.deepcopy(entry[0])
    return out


def validate_recorder_config(section: dict | None, *, file=None) -> dict:
    """The ``recorder`` section with defaults filled in; idempotent on its own output.

    Raises:
      ConfigError naming the dotted key (``recorder.pose.jitter_pos_m``) and the allowed
      range or keys, for unknown keys, wrong types and out-of-range values.
    """
    return _validate(section or {}, _SPEC, "recorder", file)


def _plain(obj):
    """``obj`` as plain JSON types (numpy values, tuples and paths converted)."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (np.ndarray, np.generic)):
        return _plain(obj.tolist())
    if isinstance(obj, Path):
        return str(obj)
    return obj


def config_hash(cfg: dict) -> str:
    """sha256 (hex) of the canonical JSON of a loaded rig config (sorted keys, no spaces)."""
    text = json.dumps(_plain(cfg), sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


# ----------------------------------------------------------------------------- randomness

_NOISE_STREAM = 0x5E5052  # separates the noise stream from any other use of the physics seed


def recorder_rng(seed: int, noise_seed: int | None = None) -> np.random.Generator:
    """The recorder's generator for the episode with physics ``seed``.

    ``noise_seed=None`` is the default noise draw of that episode; another ``noise_seed``
    re-records the same physics (same truth) with independent sensor noise, which is how
    the rig's repeatability is measured.
    """
    entropy = [int(seed), _NOISE_STREAM] + ([] if noise_seed is None else [int(noise_seed) + 1])
    return np.random.default_rng(np.random.SeedSequence(entropy))


# ----------------------------------------------------------------------------- quaternions (w, x, y, z)


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of [..., 4] quaternions (w, x, y, z)."""
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ], axis=-1)


def quat_from_rotvec(v: np.ndarray) -> np.ndarray:
    """[..., 3] rotation vectors (rad) -> [..., 4] unit quaternions (w, x, y, z)."""
    angle = np.linalg.norm(v, axis=-1, keepdims=True)
    # sin(a/2)/a -> 1/2 as a -> 0; the Taylor term keeps tiny angles exact.
    k = np.where(angle > 1e-8, np.sin(angle / 2) / np.maximum(angle, 1e-300), 0.5 - angle**2 / 48)
    return np.concatenate([np.cos(angle / 2), v * k], axis=-1)


def rotvec_from_quat(q: np.ndarray) -> np.ndarray:
    """[..., 4] unit quaternions (w, x, y, z) -> [..., 3] rotation vectors (rad), angle in [0, pi]."""
    q = q * np.where(q[..., :1] < 0, -1.0, 1.0)
    s = np.linalg.norm(q[..., 1:], axis=-1, keepdims=True)
    angle = 2 * np.arctan2(s, q[..., :1])
    k = np.where(s > 1e-12, angle / np.maximum(s, 1e-300), 2.0)
    return q[..., 1:] * k


# ----------------------------------------------------------------------------- contact regions

_SEED_CACHE: dict = {}


def contact_region_seeds(obj, n_regions: int, *, n_samples: int = 4096) -> np.ndarray:
    """[R, 3] seed points (body frame, m) partitioning ``obj``'s surface into R Voronoi regions.

    Farthest-point sampling over ``n_samples`` surface samples, started at the sample
    farthest from the centre of mass; deterministic for an object (fixed sampling seed),
    so every episode of an object shares its regions. Cached per (name, source, R).
    """
    import trimesh

    key = (obj.name, obj.source, int(n_regions), int(n_samples))
    if key not in _SEED_CACHE:
        pts, _ = trimesh.sample.sample_surface(obj.combined_mesh(), n_samples, seed=0)
        pts = np.asarray(pts, dtype=float)
        chosen = [int(np.argmax(np.linalg.norm(pts, axis=1)))]
        dmin = np.linalg.norm(pts - pts[chosen[0]], axis=1)
        for _ in range(1, min(int(n_regions), len(pts))):
            chosen.append(int(np.argmax(dmin)))
            dmin = np.minimum(dmin, np.linalg.norm(pts - pts[chosen[-1]], axis=1))
        _SEED_CACHE[key] = pts[chosen]
    return _SEED_CACHE[key].copy()


def annotate_regions(contact_points: list, seeds: np.ndarray) -> np.ndarray:
    """[T, R] float (0/1): region r is 1 at frame n when a point of ``contact_points[n]`` ([P_n, 3],
    object frame, m) is nearer seed r than any other seed."""
    seeds = np.asarray(seeds, dtype=float)
    out = np.zeros((len(contact_points), len(seeds)), dtype=np.float32)
    for n, pts in enumerate(contact_points):
        pts = np.asarray(pts, dtype=float).reshape(-1, 3)
        if len(pts):
            nearest = np.argmin(np.linalg.norm(pts[:, None, :] - seeds[None], axis=2), axis=1)
            out[n, nearest] = 1.0
    return out


# ----------------------------------------------------------------------------- sensors


def _frame_step(times: np.ndarray, rate_hz: float) -> int:
    """Every how many trace frames the recorder samples: the trace must run at rate_hz or a multiple of it."""
    dt = float(np.median(np.diff(times)))
    ratio = (1.0 / rate_hz) / dt
    k = int(round(ratio))
    if k < 1 or abs(ratio - k) > 1e-3 * k:
        raise ConfigError(f"the trace is sampled at {1 / dt:.6g} Hz; rate_hz {rate_hz:g} must equal it or divide it",
                          key="recorder.rate_hz")
    return k


def _pose_dropouts(distance: np.ndarray, p: dict, rng: np.random.Generator) -> np.ndarray:
    """[T] bool validity of the tracked pose given the hand-object distance [T] (m)."""
    T = len(distance)
    u = rng.random(T)
    m = p["dropout_burst_mean_frames"]
    # Burst length 1 + Geometric(q) has mean 1 + 1/q = m.
    lengths = 1 + rng.geometric(1.0 / (m - 1.0), T) if m > 1.0 else np.ones(T, dtype=int)
    d_occ = p["occlusion_distance_m"]
    valid = np.ones(T, dtype=bool)
    if d_occ <= 0 or p["dropout_onset_prob"] <= 0:
        return valid
    near = distance < d_occ
    onset = p["dropout_onset_prob"] * np.clip((d_occ - distance) / d_occ, 0.0, 1.0)
    n = 0
    while n < T:
        if near[n] and u[n] < onset[n]:
            end = min(T, n + int(lengths[n]))
            # The tracker reacquires as soon as the fingers are out of the way.
            leave = np.flatnonzero(~near[n:end])
            if len(leave):
                end = n + int(leave[0])
            valid[n:end] = False
            n = end
        else:
            n += 1
    if not valid.any():  # never seen at all would be an unusable episode: keep the clearest view
        valid[int(np.argmax(distance))] = True
    return valid


def _hold_last_valid(x: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """``x`` [T, ...] with invalid frames replaced by the last valid one (the first valid one before any)."""
    idx = np.where(valid, np.arange(len(valid)), -1)
    idx = np.maximum.accumulate(idx)
    idx[idx < 0] = int(np.argmax(valid))
    return x[idx]


def _measure_pose(pose: np.ndarray, distance: np.ndarray, p: dict, rng: np.random.Generator):
    """Noisy tracked pose [T, 7] and validity [T] from the exact pose [T, 7]."""
    T = len(pose)
    bias_p = rng.normal(0.0, p["bias_pos_m"], 3)
    bias_r = rng.normal(0.0, np.deg2rad(p["bias_rot_deg"]), 3)
    jit_p = rng.normal(0.0, p["jitter_pos_m"], (T, 3))
    jit_r = rng.normal(0.0, np.deg2rad(p["jitter_rot_deg"]), (T, 3))
    q_true = pose[:, 3:] / np.linalg.norm(pose[:, 3:], axis=1, keepdims=True)
    # Body-frame orientation error: q_meas = q_true * exp(bias + jitter).
    q = quat_mul(q_true, quat_from_rotvec(bias_r + jit_r))
    meas = np.concatenate([pose[:, :3] + bias_p + jit_p, q], axis=1)
    valid = _pose_dropouts(distance, p, rng)
    return _hold_last_valid(meas, valid), valid


def joint_steps(joint_names: list, j: dict) -> np.ndarray:
    """[J] encoder step per joint: rad for hinges, m for the configured prismatic joints."""
    hinge = 2 * np.pi / j["hinge_counts_per_rev"]
    return np.array([j["prismatic_resolution_m"] if n in j["prismatic_joints"] else hinge for n in joint_names])


def _measure_joints(times, q, names, j):
    """Quantized positions [T, J] and backward-difference velocities [T, J] (0 on frame 0)."""
    step = joint_steps(names, j)
    qm = np.round(q / step) * step
    vel = np.zeros_like(qm)
    vel[1:] = np.diff(qm, axis=0) / np.diff(times)[:, None]
    return qm, vel


def _measure_wrench(times, wrench, w, rng):
    """Measured pad wrenches [T, S, 6]: true + tare offset + drift + noise, clipped at the range."""
    T, S, _ = wrench.shape
    per = lambda f, t: np.array([f] * 3 + [t] * 3)  # noqa: E731 - force then torque components
    bias = rng.normal(0.0, 1.0, (S, 6)) * per(w["force_bias_n"], w["torque_bias_nm"])
    dt = np.diff(times, prepend=times[0])  # 0 at frame 0: drift starts at the tare
    steps = rng.normal(0.0, 1.0, (T, S, 6)) * np.sqrt(dt)[:, None, None]
    drift = np.cumsum(steps, axis=0) * per(w["force_drift_n_per_sqrt_s"], w["torque_drift_nm_per_sqrt_s"])
    noise = rng.normal(0.0, 1.0, (T, S, 6)) * per(w["force_noise_n"], w["torque_noise_nm"])
    rng_lim = per(w["force_range_n"], w["torque_range_nm"])
    return np.clip(wrench + bias + drift + noise, -rng_lim, rng_lim)


def _measure_tactile(wrench, tc, rng):
    """Taxel forces [T, S * rows * cols] (N): each pad's normal force spread around its centre of pressure.

    The pad's sensor frame has its normal along local x and the site at the pad centre, so a
    normal force fx at (y, z) on the face gives torques ty = z fx and tz = -y fx.
    """
    T, S, _ = wrench.shape
    rows, cols, size = tc["rows"], tc["cols"], tc["pad_size_m"]
    ys = (np.arange(cols) + 0.5) / cols * size - size / 2
    zs = (np.arange(rows) + 0.5) / rows * size - size / 2
    gz, gy = np.meshgrid(zs, ys, indexing="ij")  # [rows, cols]
    fn = np.abs(wrench[..., 0])  # [T, S]
    safe = np.where(fn > 1e-9, fn, 1.0)
    cy = np.clip(-wrench[..., 5] / safe, -size / 2, size / 2)
    cz = np.clip(wrench[..., 4] / safe, -size / 2, size / 2)
    d2 = (gy[None, None] - cy[..., None, None]) ** 2 + (gz[None, None] - cz[..., None, None]) ** 2
    blob = np.exp(-0.5 * d2 / tc["spread_m"] ** 2)
    blob /= blob.sum(axis=(-2, -1), keepdims=True)
    taxels = blob * fn[..., None, None] + rng.normal(0.0, tc["noise_n"], (T, S, rows, cols))
    return np.clip(taxels, 0.0, None).reshape(T, S * rows * cols)


# ----------------------------------------------------------------------------- record


def _truth(tr: RigTrace, sel) -> dict:
    """Exact per-frame state for evaluation; per-episode true object values broadcast to [T, ...]."""
    T = len(tr.times[sel])
    truth = {
        "object_pose": np.asarray(tr.object_pose, dtype=float)[sel],
        "object_twist": np.asarray(tr.object_twist, dtype=float)[sel],
        "joint_pos": np.asarray(tr.joint_pos, dtype=float)[sel],
        "joint_vel": np.asarray(tr.joint_vel, dtype=float)[sel],
        "pad_wrench": np.asarray(tr.pad_wrench, dtype=float)[sel],
        "hand_object_distance": np.asarray(tr.hand_object_distance, dtype=float)[sel],
        "contact_count": np.array([len(np.asarray(tr.contact_points[n]).reshape(-1, 3))
                                   for n in np.arange(tr.num_frames)[sel]], dtype=float),
    }
    # The simulated (not nominal) object: benchmarks compare identified parameters against it.
    for key in ("mass", "com_offset", "inertia", "friction_range"):
        if key in (tr.object_true or {}):
            v = np.asarray(tr.object_true[key], dtype=float)
            truth[f"object_{key}"] = np.broadcast_to(v, (T, *v.shape)).copy()
    adb = (tr.effects or {}).get("actuator_delay_backlash")
    delay = adb.get("drawn", {}).get("delay_s") if isinstance(adb, dict) else None
    if delay is not None:
        truth["actuator_delay_s"] = np.full(T, float(delay))
    return truth


def record(trace: RigTrace, cfg: dict, *, rng: np.random.Generator, objects_regions: int = 16,
           obj=None, region_seeds: np.ndarray | None = None, episode_id: str | None = None) -> Episode:
    """Record ``trace`` as a capture rig would.

    Args:
      trace: the exact episode from the rig's physics, at ``rate_hz`` or a multiple of it.
      cfg: the loaded rig config; its ``recorder`` section (validated here, defaults filled)
        sets the sensors. Its sha256 goes into ``provenance.generator``.
      rng: noise generator, normally ``recorder_rng(trace.seed)``.
      objects_regions: R, number of contact regions on the object surface.
      obj: the ObjectAsset simulated (for the region seeds); rebuilt from
        ``trace.object_nominal.geometry`` when omitted.
      region_seeds: [R, 3] seeds to use instead (they must match the dataset meta's).
      episode_id: default ``rig-<hand>-<object>-<seed>``.
    Returns:
      Episode with measured fields, annotations, provenance (``real=False``) and ``truth``.
    """
    rc = validate_recorder_config(cfg.get("recorder"))
    times = np.asarray(trace.times, dtype=float)
    k = _frame_step(times, rc["rate_hz"])
    sel = slice(None, None, k)
    t = times[sel]
    contact_points = list(trace.contact_points)[sel]
    distance = np.asarray(trace.hand_object_distance, dtype=float)[sel]

    pose, valid = _measure_pose(np.asarray(trace.object_pose, dtype=float)[sel], distance, rc["pose"], rng)
    joint_pos, joint_vel = _measure_joints(t, np.asarray(trace.joint_pos, dtype=float)[sel], list(trace.joint_names), rc["joints"])
    true_wrench = np.asarray(trace.pad_wrench, dtype=float)[sel]
    wrench = _measure_wrench(t, true_wrench, rc["wrench"], rng) if rc["wrench"]["enabled"] else None
    tactile = _measure_tactile(true_wrench, rc["tactile"], rng) if rc["tactile"]["enabled"] else None

    if region_seeds is None:
        region_seeds = contact_region_seeds(obj if obj is not None else asset_from_spec(trace.object_nominal),
                                            objects_regions)
    regions = annotate_regions(contact_points, region_seeds)

    name = trace.object_nominal.name
    generator = {
        "rig_config_sha256": config_hash(cfg),
        "seed": int(trace.seed),
        "hand": trace.hand,
        # The per-episode draws (true mass, delay, ...) are the hidden physics: they go to
        # truth (evaluation only), never into provenance where training code could read them.
        "effects": _plain({k: ({p: v for p, v in e.items() if p != "drawn"} if isinstance(e, dict) else e)
                           for k, e in trace.effects.items()}),
        "script": _plain(trace.script),
        "recorder": rc,
    }
    return Episode(
        episode_id=episode_id or f"rig-{trace.hand}-{name}-{int(trace.seed)}",
        timestamps=t - t[0],
        t0=float(t[0]),
        object_pose=pose,
        object_pose_valid=valid,
        object=trace.object_nominal,
        environment=trace.environment,
        provenance=Provenance(source=SOURCE, real=False, capture_rate_hz=rc["rate_hz"],
                              generator=generator),
        joint_pos=joint_pos,
        joint_vel=joint_vel,
        joint_cmd=np.asarray(trace.joint_cmd, dtype=float)[sel].copy(),
        wrench=wrench,
        tactile=tactile,
        contact_regions=regions,
        grasp_type=int(trace.grasp_type),
        task=f"{feix_name(trace.grasp_type)} grasp with the {trace.hand} hand",
        labels=_plain(dict(trace.labels)),
        truth=_truth(trace, sel),
    )
