"""The rig's recorder: noise statistics, dropouts, quantization, drift, regions, truth, seeds.

The traces here come from ``synthetic_trace``, an analytic test fixture (a box lifted
along a smooth path while a parallel-jaw hand closes on it); it is not the rig's physics.
"""

from __future__ import annotations

import numpy as np
import pytest

from surrogate.capture import DatasetMeta, Environment, ObjectSpec, read_dataset, write_dataset
from surrogate.errors import ConfigError
from surrogate.objects import make_object
from surrogate.rig.recorder import (
    RECORDER_DEFAULTS,
    SOURCE,
    annotate_regions,
    config_hash,
    contact_region_seeds,
    joint_steps,
    quat_mul,
    record,
    recorder_rng,
    rotvec_from_quat,
    validate_recorder_config,
)
from surrogate.rig.trace import RigTrace

JOINTS = ["hand_x", "hand_y", "hand_z", "hand_yaw", "left_slide", "right_slide"]
SENSORS = ["pad_left", "pad_right"]


def object_spec(obj) -> ObjectSpec:
    return ObjectSpec(name=obj.name, mass=obj.mass, inertia=np.asarray(obj.inertia).tolist(), size=obj.size,
                      geometry={"kind": "procedural", "family": obj.family, "seed": obj.params["seed"], "params": {}},
                      friction=obj.friction)


def synthetic_trace(obj, *, frames=600, rate=120.0, seed=0, distance=None, force=5.0, hand="parallel_jaw") -> RigTrace:
    """An analytic grasp: the hand closes (distance 10 cm -> 0) over the first 30 %, holds and
    lifts the object 10 cm with a slow yaw, and opens again over the last 10 %.

    Shapes as in RigTrace: [N] times, [N, 7] pose, [N, 6] twist, [N, 6] joints, [N, 2, 6] wrench.
    """
    t = np.arange(frames) / rate
    u = t / t[-1]
    s = np.clip((u - 0.4) / 0.4, 0, 1)
    s = s * s * (3 - 2 * s)  # smoothstep lift
    half = obj.extents[2] / 2
    pos = np.stack([0.02 * np.sin(0.5 * t), np.zeros_like(t), half + 0.1 * s], axis=1)
    yaw = 0.3 * s
    quat = np.stack([np.cos(yaw / 2), 0 * t, 0 * t, np.sin(yaw / 2)], axis=1)
    lin = np.gradient(pos, t, axis=0)
    ang = np.stack([0 * t, 0 * t, np.gradient(yaw, t)], axis=1)
    if distance is None:
        distance = np.interp(u, [0.0, 0.3, 0.9, 1.0], [0.1, 0.0, 0.0, 0.1])
    grasped = distance <= 0.0
    q = np.stack([pos[:, 0], pos[:, 1], pos[:, 2] + 0.05, yaw, 0.03 * (1 - u), 0.03 * (1 - u)], axis=1)
    wrench = np.zeros((frames, 2, 6))
    wrench[:, 0, 0] = force * grasped
    wrench[:, 1, 0] = -force * grasped
    wrench[:, :, 4] = 0.002 * force * grasped[:, None]  # centre of pressure 2 mm off centre
    hx = obj.extents[0] / 2
    points = [np.array([[hx, 0.0, 0.0], [-hx, 0.0, 0.0]]) if g else np.zeros((0, 3)) for g in grasped]
    return RigTrace(
        times=t, object_pose=np.concatenate([pos, quat], axis=1), object_twist=np.concatenate([lin, ang], axis=1),
        joint_names=list(JOINTS), joint_pos=q, joint_vel=np.gradient(q, t, axis=0), joint_cmd=q + 0.001,
        sensor_names=list(SENSORS), pad_wrench=wrench, contact_points=points, hand_object_distance=np.asarray(distance, float),
        object_nominal=object_spec(obj), object_true={"mass": obj.mass * 1.05, "com_offset": [0.001, 0.0, 0.0]},
        environment=Environment(kind="table"), hand=hand, grasp_type=8,
        labels={"lifted": True, "slipped": False, "dropped": False, "max_slip_m": 0.001},
        script={"grip_force": force}, effects={"stribeck": True}, seed=seed,
    )


@pytest.fixture(scope="module")
def box():
    return make_object("box", 0)


def cfg_with(**sections) -> dict:
    return {"recorder": sections}




def far_trace(obj, frames, **kw):
    return synthetic_trace(obj, frames=frames, distance=np.full(frames, 0.5), **kw)


# ----------------------------------------------------------------------------- config


def test_config_defaults_errors_and_idempotence():
    d = validate_recorder_config(None)
    assert d == RECORDER_DEFAULTS and d["rate_hz"] == 120.0 and d["tactile"]["enabled"] is False
    assert validate_recorder_config(d) == d
    with pytest.raises(ConfigError, match=r"recorder\.pose\.jitter.*unknown key"):
        validate_recorder_config({"pose": {"jitter": 1}})
    with pytest.raises(ConfigError, match=r"recorder\.rate_hz.*\[100, 200\]"):
        validate_recorder_config({"rate_hz": 500})
    with pytest.raises(ConfigError, match=r"recorder\.joints\.hinge_counts_per_rev.*integer"):
        validate_recorder_config({"joints": {"hinge_counts_per_rev": 100.5}})
    with pytest.raises(ConfigError, match=r"recorder\.wrench\.enabled"):
        validate_recorder_config({"wrench": {"enabled": "yes"}})
    assert config_hash({"a": 1, "b": [1, 2]}) == config_hash({"b": (1, 2), "a": 1})


# ----------------------------------------------------------------------------- pose noise


def pose_errors(ep, trace):
    """Position error [T, 3] (m) and body-frame rotation error [T, 3] (rad), measured - true."""
    true = np.asarray(trace.object_pose)
    inv = true[:, 3:] * np.array([1, -1, -1, -1])
    return ep.object_pose[:, :3] - true[:, :3], rotvec_from_quat(quat_mul(inv, ep.object_pose[:, 3:]))


def test_pose_jitter_matches_config(box):
    trace = far_trace(box, 20000)
    ep = record(trace, {}, rng=np.random.default_rng(1), obj=box)
    assert ep.object_pose_valid.all()  # hand never near: no dropouts
    dp, dr = pose_errors(ep, trace)
    p = RECORDER_DEFAULTS["pose"]
    # Within one episode the bias is constant: the spread is the jitter.
    np.testing.assert_allclose(dp.std(axis=0), p["jitter_pos_m"], rtol=0.03)
    np.testing.assert_allclose(np.rad2deg(dr.std(axis=0)), p["jitter_rot_deg"], rtol=0.03)


def test_pose_bias_is_constant_per_episode_with_configured_spread(box):
    trace = far_trace(box, 20)
    means_p, means_r = [], []
    for k in range(400):
        ep = record(trace, {}, rng=np.random.default_rng(1000 + k), obj=box)
        dp, dr = pose_errors(ep, trace)
        means_p.append(dp.mean(axis=0))
        means_r.append(dr.mean(axis=0))
    p = RECORDER_DEFAULTS["pose"]
    assert np.std(means_p) == pytest.approx(p["bias_pos_m"], rel=0.08)
    assert np.rad2deg(np.std(means_r)) == pytest.approx(p["bias_rot_deg"], rel=0.08)
    assert abs(np.mean(means_p)) < 0.15 * p["bias_pos_m"]


# ----------------------------------------------------------------------------- dropouts


def runs(mask):
    """Lengths of the runs of True in a 1-D bool array."""
    m = np.concatenate([[False], mask, [False]]).astype(int)
    edges = np.flatnonzero(np.diff(m))
    return edges[1::2] - edges[::2]


def test_dropouts_only_near_occlusion_in_bursts_holding_last_pose(box):
    n = 30000
    # far, then a slow approach through the occlusion zone, contact, slow retreat, far
    d = np.interp(np.arange(n), [0, 5000, 15000, 20000, 25000, n - 1], [0.2, 0.2, 0.0, 0.0, 0.2, 0.2])
    trace = synthetic_trace(box, frames=n, distance=d)
    ep = record(trace, {}, rng=np.random.default_rng(3), obj=box)
    invalid = ~ep.object_pose_valid
    d_occ = RECORDER_DEFAULTS["pose"]["occlusion_distance_m"]
    assert invalid.sum() > 100
    assert (d[invalid] < d_occ).all(), "a dropout away from any occlusion"
    lengths = runs(invalid)
    assert lengths.mean() > 3.0 and (lengths >= 2).mean() > 0.8, f"not bursts: {np.bincount(lengths)}"
    # more dropouts at contact than at the edge of the occlusion zone
    touching, edge = d <= 0.0, (d > 0.75 * d_occ) & (d < d_occ)
    assert invalid[touching].mean() > 3 * invalid[edge].mean()
    # dropped frames hold the last valid (noisy) pose exactly
    idx = np.flatnonzero(invalid)
    idx = idx[idx > 0]
    np.testing.assert_array_equal(ep.object_pose[idx], ep.object_pose[idx - 1])


# ----------------------------------------------------------------------------- joints


def test_encoder_quantization_velocity_by_differences_and_commands(box):
    trace = synthetic_trace(box, frames=2000)
    ep = record(trace, {}, rng=np.random.default_rng(0), obj=box)
    step = joint_steps(JOINTS, RECORDER_DEFAULTS["joints"])
    assert step[3] == pytest.approx(2 * np.pi / 4096) and step[4] == pytest.approx(1e-5)
    counts = ep.joint_pos / step
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-6)
    err = np.abs(ep.joint_pos - trace.joint_pos).max(axis=0)
    assert (err <= step / 2 * (1 + 1e-9)).all()
    moving = np.ptp(trace.joint_pos, axis=0) > 0  # hand_y stays at 0: no error there
    np.testing.assert_allclose(err[moving], step[moving] / 2, rtol=0.05)
    np.testing.assert_allclose(ep.joint_vel[1:], np.diff(ep.joint_pos, axis=0) / np.diff(ep.timestamps)[:, None])
    assert (ep.joint_vel[0] == 0).all()
    np.testing.assert_array_equal(ep.joint_cmd, trace.joint_cmd)


# ----------------------------------------------------------------------------- force/torque


def test_wrench_bias_drift_noise_and_saturation(box):
    w = RECORDER_DEFAULTS["wrench"]
    frames, rate = 1201, 120.0  # 10 s
    trace = synthetic_trace(box, frames=frames)
    true = np.asarray(trace.pad_wrench)
    only_bias = cfg_with(wrench={"force_noise_n": 0.0, "torque_noise_nm": 0.0, "force_drift_n_per_sqrt_s": 0.0,
                                 "torque_drift_nm_per_sqrt_s": 0.0})
    only_drift = cfg_with(wrench={"force_noise_n": 0.0, "torque_noise_nm": 0.0, "force_bias_n": 0.0, "torque_bias_nm": 0.0})
    bias, drift_end, white = [], [], []
    for k in range(60):
        e = record(trace, only_bias, rng=np.random.default_rng(k), obj=box).wrench - true
        assert np.ptp(e, axis=0).max() < 1e-12  # a constant offset
        bias.append(e[0])
        e = record(trace, only_drift, rng=np.random.default_rng(k), obj=box).wrench - true
        assert np.abs(e[0]).max() == 0.0  # tared at the start, drifts from there
        drift_end.append(e[-1])
        e = record(trace, {}, rng=np.random.default_rng(k), obj=box).wrench - true
        white.append(np.diff(e[:, :, :3], axis=0))
    bias, drift_end = np.array(bias), np.array(drift_end)
    assert bias[..., :3].std() == pytest.approx(w["force_bias_n"], rel=0.1)
    assert bias[..., 3:].std() == pytest.approx(w["torque_bias_nm"], rel=0.1)
    # random walk: spread grows as sqrt(t)
    assert drift_end[..., :3].std() == pytest.approx(w["force_drift_n_per_sqrt_s"] * np.sqrt(10.0), rel=0.1)
    # frame-to-frame differences: two white-noise draws plus one drift step
    want = np.sqrt(2 * w["force_noise_n"] ** 2 + w["force_drift_n_per_sqrt_s"] ** 2 / rate)
    assert np.std(white) == pytest.approx(want, rel=0.05)
    # saturation at the sensor's range
    ep = record(synthetic_trace(box, frames=100, force=100.0), {}, rng=np.random.default_rng(0), obj=box)
    assert np.abs(ep.wrench[..., :3]).max() == w["force_range_n"]


def test_tactile_grid_sums_to_normal_force(box):
    trace = synthetic_trace(box, frames=300)
    off = record(trace, {}, rng=np.random.default_rng(0), obj=box)
    assert off.tactile is None
    ep = record(trace, cfg_with(tactile={"enabled": True, "noise_n": 0.0}), rng=np.random.default_rng(0), obj=box)
    assert ep.tactile.shape == (300, 2 * 16) and (ep.tactile >= 0).all()
    per_pad = ep.tactile.reshape(300, 2, 16).sum(axis=2)
    np.testing.assert_allclose(per_pad, np.abs(trace.pad_wrench[:, :, 0]), atol=1e-9)


# ----------------------------------------------------------------------------- regions


def test_contact_region_annotation_hand_made():
    seeds = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], dtype=float) * 0.02
    points = [np.zeros((0, 3)), np.array([[0.02, 0.001, 0.0]]), np.array([[0.0, 0.0, 0.021], [-0.019, 0.002, 0.001]]),
              np.array([[0.01, -0.02, 0.0], [0.011, -0.019, 0.0]])]
    got = annotate_regions(points, seeds)
    want = np.zeros((4, 6))
    want[1, 0] = want[2, 4] = want[2, 1] = want[3, 3] = 1
    np.testing.assert_array_equal(got, want)


def test_region_seeds_farthest_point_sampling(box):
    s = contact_region_seeds(box, 16)
    assert s.shape == (16, 3)
    np.testing.assert_array_equal(s, contact_region_seeds(box, 16))
    # on the surface of the box, and spread out (no two seeds close together)
    half = box.extents / 2
    assert np.allclose(np.max(np.abs(s) / half, axis=1), 1.0, atol=1e-6)
    d = np.linalg.norm(s[:, None] - s[None], axis=2) + np.eye(16)
    assert d.min() > 0.2 * box.size


def test_record_annotates_regions_and_grasp(box):
    trace = synthetic_trace(box, frames=400)
    ep = record(trace, {}, rng=np.random.default_rng(0), objects_regions=8)  # seeds rebuilt from the spec
    seeds = contact_region_seeds(box, 8)
    np.testing.assert_array_equal(ep.contact_regions, annotate_regions(trace.contact_points, seeds))
    grasped = np.array([len(p) > 0 for p in trace.contact_points])
    assert (ep.contact_regions[grasped].sum(axis=1) >= 1).all() and (ep.contact_regions[~grasped] == 0).all()
    assert ep.grasp_type == 8 and ep.labels == trace.labels


# ----------------------------------------------------------------------------- truth, provenance, seeds


def test_truth_kept_separately_and_hidden_from_readers(box, tmp_path):
    trace = synthetic_trace(box, frames=300)
    ep = record(trace, {"physics": {"x": 1}}, rng=recorder_rng(trace.seed), obj=box)
    assert ep.provenance.real is False and ep.provenance.source == SOURCE
    gen = ep.provenance.generator
    assert gen["rig_config_sha256"] == config_hash({"physics": {"x": 1}}) and gen["seed"] == 0
    assert gen["effects"] == trace.effects and gen["script"] == trace.script
    assert ep.provenance.capture_rate_hz == 120.0
    assert set(ep.truth) >= {"object_pose", "object_twist", "joint_pos", "joint_vel", "pad_wrench", "object_mass"}
    assert not np.allclose(ep.object_pose, ep.truth["object_pose"], atol=1e-5)  # measured is not truth
    meta = DatasetMeta(joint_names=JOINTS, wrench_sensors=SENSORS, contact_region_seeds={box.name: contact_region_seeds(box, 16)})
    write_dataset(tmp_path / "ds", [ep], meta)
    plain = read_dataset(tmp_path / "ds")
    assert plain.episodes[0].truth == {}
    assert not any(k.startswith("truth.") for k in plain.episodes[0].__dict__)
    with_truth = read_dataset(tmp_path / "ds", include_truth=True).episodes[0]
    np.testing.assert_allclose(with_truth.truth["pad_wrench"], trace.pad_wrench, atol=1e-5)
    np.testing.assert_allclose(with_truth.truth["object_pose"], trace.object_pose, atol=1e-6)
    np.testing.assert_allclose(plain.episodes[0].object_pose, ep.object_pose, atol=1e-6)


def test_same_seed_identical_noise_seed_changes_noise_not_truth(box):
    trace = synthetic_trace(box, frames=600, seed=7)
    a = record(trace, {}, rng=recorder_rng(7), obj=box)
    b = record(trace, {}, rng=recorder_rng(7), obj=box)
    c = record(trace, {}, rng=recorder_rng(7, noise_seed=1), obj=box)
    for name in ("object_pose", "object_pose_valid", "joint_pos", "joint_vel", "wrench", "contact_regions"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.object_pose, c.object_pose) and not np.array_equal(a.wrench, c.wrench)
    for k in a.truth:
        np.testing.assert_array_equal(a.truth[k], c.truth[k])
    np.testing.assert_array_equal(a.contact_regions, c.contact_regions)


def test_decimation_and_rate_mismatch(box):
    trace = synthetic_trace(box, frames=480, rate=240.0)
    ep = record(trace, {}, rng=np.random.default_rng(0), obj=box)
    assert ep.num_frames == 240 and np.allclose(np.diff(ep.timestamps), 1 / 120)
    with pytest.raises(ConfigError, match="rate_hz"):
        record(synthetic_trace(box, frames=100, rate=150.0), {}, rng=np.random.default_rng(0), obj=box)
