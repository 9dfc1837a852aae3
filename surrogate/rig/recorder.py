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

import numpy as np

from ..capture import Episode, Provenance
from ..capture.episode import hold_last_valid
from ..capture.schema import feix_name
from ..config import config_hash, plain
from ..errors import ConfigError
from ..quat import quat_from_rotvec, quat_mul, rotvec_from_quat
from ..scenes.from_capture import asset_from_spec
from .effects import FINGERTIP_EFFECTS
from .recorder_config import DEFAULT_PRISMATIC_JOINTS, RECORDER_DEFAULTS, validate_recorder_config
from .regions import annotate_regions, contact_region_seeds
from .trace import RigTrace

# Re-exported: the recorder's public names (tests and the rig's generator import them from here).
__all__ = ["DEFAULT_PRISMATIC_JOINTS", "RECORDER_DEFAULTS", "SOURCE", "annotate_regions", "config_hash",
           "contact_region_seeds", "joint_steps", "quat_mul", "record", "recorder_rng", "rotvec_from_quat",
           "validate_recorder_config"]

SOURCE = "contact-surrogate capture rig (reference physics; stands in for hardware)"

_NOISE_STREAM = 0x5E5052  # separates the noise stream from any other use of the physics seed


def recorder_rng(seed: int, noise_seed: int | None = None) -> np.random.Generator:
    """The recorder's generator for the episode with physics ``seed``.

    ``noise_seed=None`` is the default noise draw of that episode; another ``noise_seed``
    re-records the same physics (same truth) with independent sensor noise, which is how
    the rig's repeatability is measured.
    """
    entropy = [int(seed), _NOISE_STREAM] + ([] if noise_seed is None else [int(noise_seed) + 1])
    return np.random.default_rng(np.random.SeedSequence(entropy))


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
    return hold_last_valid(meas, valid), valid


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
    # The rig-v2 fingertip effects' hidden per-episode values, e.g. ``truth.pad_relaxation_time_s``.
    for name in FINGERTIP_EFFECTS:
        e = (tr.effects or {}).get(name)
        for key, v in ((e.get("drawn") or {}) if isinstance(e, dict) else {}).items():
            truth[f"{name}_{key}"] = np.full(T, float(v))
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
        "effects": plain({k: ({p: v for p, v in e.items() if p != "drawn"} if isinstance(e, dict) else e)
                           for k, e in trace.effects.items()}),
        "script": plain(trace.script),
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
        labels=plain(dict(trace.labels)),
        truth=_truth(trace, sel),
    )
