"""Capture rig physics: config validation, each effect's law, determinism, the
effects' influence on a trajectory, an ungraspable object, and labelled lifts.

Episodes here are short (0.5-2.2 s of simulated time) so the file runs in well
under a minute on one core.
"""

from __future__ import annotations

import numpy as np
import pytest

from surrogate.errors import ConfigError
from surrogate.objects.families import make_object
from surrogate.paths import CONFIG_DIR
from surrogate.rig.config import (
    effect_names,
    load_rig_config,
    only_effect,
    recorder_rate_hz,
    validate_rig_config,
)
from surrogate.rig.effects import EFFECTS, FINGERTIP_EFFECTS, compliant_pads, effect_table
from surrogate.rig.effects.actuator_delay_backlash import ActuatorChannel
from surrogate.rig.effects.friction_map import FrictionField
from surrogate.rig.effects.stribeck_friction import coefficient as stribeck_coefficient
from surrogate.rig.physics import hull_planes, penetration_along, penetration_batch
from surrogate.rig.scripts import UngraspableObject
from surrogate.rig.simulate import simulate_episode


@pytest.fixture(scope="module")
def cfg():
    return load_rig_config()


@pytest.fixture(scope="module")
def box():
    return make_object("box", 0, size_x=0.05, size_y=0.04, size_z=0.05)


def _same(a, b) -> bool:
    if not np.array_equal(a.times, b.times):
        return False
    for f in ("object_pose", "object_twist", "joint_pos", "joint_vel", "joint_cmd", "pad_wrench",
              "hand_object_distance"):
        if not np.array_equal(getattr(a, f), getattr(b, f)):
            return False
    return all(np.array_equal(p, q) for p, q in zip(a.contact_points, b.contact_points))


# ----------------------------------------------------------------------------- config


def test_default_config_is_complete_and_names_every_effect(cfg):
    assert set(cfg) == {"physics", "effects", "script", "recorder"}
    assert tuple(cfg["effects"]) == effect_names() == tuple(EFFECTS)
    v1 = {"compliant_pads", "stribeck_friction", "friction_map", "actuator_delay_backlash", "mass_mismatch"}
    v3 = {"pulp_stiffening", "impact_damping"}
    assert set(effect_names()) == v1 | set(FINGERTIP_EFFECTS) | v3
    old = load_rig_config(CONFIG_DIR / "rig" / "v1.yaml")
    for name, e in EFFECTS.items():
        assert cfg["effects"][name]["enabled"] is True  # the default is rig v3: every effect on
        assert old["effects"][name]["enabled"] is (name in v1)  # v1.yaml: the released checkpoint's rig
        assert e.doc and e.module.__doc__ and "Physical basis" in e.module.__doc__
        for k, p in e.params.items():
            lo, hi = p["range"]
            assert lo <= p["default"] <= hi, (name, k)
    assert recorder_rate_hz(cfg) == 120.0
    assert "compliant_pads" in effect_table()


def test_config_errors_name_the_key_and_the_allowed(cfg):
    with pytest.raises(ConfigError) as e:
        load_rig_config(overrides=["effects.wobble.enabled=true"])
    assert "effects.wobble" in str(e.value) and "stribeck_friction" in str(e.value)
    with pytest.raises(ConfigError) as e:
        load_rig_config(overrides=["effects.stribeck_friction.kinetic_ratio=1.5"])
    assert "effects.stribeck_friction.kinetic_ratio" in str(e.value) and "[0.3, 1.0]" in str(e.value)
    with pytest.raises(ConfigError) as e:
        load_rig_config(overrides=["physics.max_timestep=0.005"])
    assert "physics.max_timestep" in str(e.value) and "0.001" in str(e.value)
    with pytest.raises(ConfigError) as e:
        load_rig_config(overrides=["effects.friction_map.stifness=3"])
    assert "effects.friction_map.stifness" in str(e.value) and "wavelength_min" in str(e.value)
    assert e.value.location.file == "command line (--set)"  # the override's key, not the default file's
    with pytest.raises(ConfigError) as e:
        load_rig_config(overrides=["camera.fps=30"])
    assert "camera" in str(e.value) and "physics" in str(e.value)
    with pytest.raises(ConfigError, match="script.lift_height_min"):
        load_rig_config(overrides=["script.lift_height_min=0.2", "script.lift_height_max=0.1"])
    with pytest.raises(ConfigError, match="enabled"):
        load_rig_config(overrides=["effects.mass_mismatch.enabled=3"])
    # The recorder section passes through untouched.
    c = load_rig_config(overrides=["recorder.anything={a: 1}"])
    assert c["recorder"]["anything"] == {"a": 1}


def test_only_effect(cfg):
    off = only_effect(cfg, None)
    assert not any(v["enabled"] for v in off["effects"].values())
    one = only_effect(cfg, "friction_map")
    assert [k for k, v in one["effects"].items() if v["enabled"]] == ["friction_map"]
    with pytest.raises(ConfigError, match="effects.nope"):
        only_effect(cfg, "nope")
    assert validate_rig_config(one) == one


# ----------------------------------------------------------------------------- effect laws


def test_penetration_of_a_box_face():
    obj = make_object("box", 0, size_x=0.05, size_y=0.04, size_z=0.05)
    planes = [hull_planes(p) for p in obj.pieces]
    assert len(planes[0][0]) == 6  # coplanar triangles merged
    pts = np.array([[0.024, 0.0, 0.0], [0.026, 0.0, 0.0], [0.0, 0.0, 0.0]])
    d = penetration_along(pts, np.array([-1.0, 0.0, 0.0]), planes)  # pad pushing in -x
    assert d == pytest.approx([0.001, 0.0, 0.025])


@pytest.mark.parametrize("family", ["box", "sphere", "dumbbell", "superquadric"])
def test_batched_pad_penetration_matches_the_plain_one(family):
    """The simulator's batched, face-culled depth equals the plain definition (saturated at 5 mm)."""
    planes = [hull_planes(p) for p in make_object(family, 1).pieces]
    rng = np.random.default_rng(0)
    for _ in range(20):
        centres = rng.normal(size=(3, 3)) * 0.02
        dirs = rng.normal(size=(3, 3))
        dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
        pts = centres[:, None, :] + rng.uniform(-0.01, 0.01, size=(3, 36, 3))
        got = penetration_batch(pts, dirs, centres, planes, np.sqrt(3) * 0.01, 0.005)
        want = np.minimum(np.stack([penetration_along(pts[i], dirs[i], planes) for i in range(3)]), 0.005)
        assert np.allclose(got, want, atol=1e-15)


def test_compliant_pad_moves_the_contact_point_under_load():
    """A pad pressed on a box face tilted by 3 deg: light load touches one edge, heavy load the whole face."""
    obj = make_object("box", 0, size_x=0.05, size_y=0.04, size_z=0.05)
    planes = [hull_planes(p) for p in obj.pieces]
    params = {k: p["default"] for k, p in EFFECTS["compliant_pads"].params.items()}
    grid = compliant_pads.pad_grid((0.0025, 0.01, 0.01), params["grid"], -1.0)
    th = np.deg2rad(3.0)
    R = np.array([[np.cos(th), 0, np.sin(th)], [0, 1, 0], [-np.sin(th), 0, np.cos(th)]])
    normal = R @ np.array([-1.0, 0.0, 0.0])
    centres, rigid, loads = [], [], []
    for push in (0.0002, 0.002):
        pts = np.array([0.025 + 0.0025 - push, 0.0, 0.0]) + grid @ R.T
        res = compliant_pads.patch_forces(pts, normal, planes, params)
        centres.append(res["centre"])
        loads.append(res["total"])
        rigid.append(compliant_pads.patch_forces(pts, normal, planes, None)["centre"])
    assert loads[0] < 5.0 < 20.0 < loads[1]
    # Motion of the effective contact point along the face (y, z; x is the indentation).
    shift = np.linalg.norm(centres[1][1:] - centres[0][1:])
    assert shift >= 1e-3  # millimetres of contact-point motion with the patch
    assert np.linalg.norm(rigid[1][1:] - rigid[0][1:]) < 2e-4 < shift  # the rigid point stays at the deepest edge


def test_friction_map_stays_in_range_and_varies(box):
    params = {k: p["default"] for k, p in EFFECTS["friction_map"].params.items()}
    field = FrictionField(box.name, box.friction, params)
    pts = np.random.default_rng(0).uniform(-0.05, 0.05, size=(20000, 3))
    mu = field(pts)
    assert mu.min() >= params["low"] - 1e-12 and mu.max() <= params["high"] + 1e-12
    assert mu.max() - mu.min() > 0.3  # it really varies over the surface
    again = FrictionField(box.name, box.friction, params)(pts)
    assert np.array_equal(mu, again)  # per-object, deterministic
    other = FrictionField("another_object", box.friction, params)(pts)
    assert not np.allclose(mu, other)
    assert np.all(FrictionField(box.name, 0.8, None)(pts) == 0.8)


def test_stribeck_curve():
    params = {k: p["default"] for k, p in EFFECTS["stribeck_friction"].params.items()}
    v = np.array([0.0, params["stribeck_velocity"], 0.1, 1.0])
    mu = stribeck_coefficient(np.full(4, 1.0), v, params)
    assert mu[0] == pytest.approx(1.0)
    assert mu[1] < mu[0] and mu[2] < mu[1]  # static -> kinetic
    assert mu[3] > mu[2]  # viscous rise at high speed
    assert np.all(stribeck_coefficient(np.full(4, 1.0), v, None) == 1.0)


def test_actuator_delay_and_backlash():
    params = {k: p["default"] for k, p in EFFECTS["actuator_delay_backlash"].params.items()}
    ch = ActuatorChannel([0.0, 0.0], 0.001, [False, True], params, np.random.default_rng(3))
    assert 8 <= ch.steps <= 14
    out = np.array([ch([1.0, 1.0]) for _ in range(40)])
    assert np.all(out[: ch.steps - 1] == 0.0)  # nothing arrives before the delay
    assert out[-1] == pytest.approx(1.0 - 0.5 * ch.width)  # play: the target lags by half the width
    assert 0.0005 <= ch.width[0] <= 0.002 and np.deg2rad(0.5) - 1e-4 <= ch.width[1] <= np.deg2rad(1.5) + 1e-4


# ----------------------------------------------------------------------------- episodes


def test_same_seed_same_trace_other_seed_differs(cfg, box):
    a = simulate_episode(cfg, box, hand="parallel_jaw", seed=3, duration=0.5)
    b = simulate_episode(cfg, box, hand="parallel_jaw", seed=3, duration=0.5)
    c = simulate_episode(cfg, box, hand="parallel_jaw", seed=4, duration=0.5)
    assert _same(a, b)
    assert not _same(a, c)
    n = a.num_frames
    assert n == 61 and a.times[1] == pytest.approx(1 / 120)
    J = len(a.joint_names)
    assert a.object_pose.shape == (n, 7) and a.object_twist.shape == (n, 6)
    assert a.joint_pos.shape == a.joint_vel.shape == a.joint_cmd.shape == (n, J)
    assert a.pad_wrench.shape == (n, 2, 6) and a.sensor_names == ["ft_left", "ft_right"]
    assert len(a.contact_points) == n and a.hand_object_distance.shape == (n,)
    assert a.object_nominal.mass == box.mass and a.grasp_type == 9 and a.hand == "parallel_jaw"
    assert a.object_true["mass"] != box.mass  # mass_mismatch on by default
    assert a.environment.kind == "table"
    assert a.effects["actuator_delay_backlash"]["drawn"]["delay_steps"] >= 8


def test_each_effect_changes_the_trajectory(cfg, box):
    """Effect alone vs all off, same seed: the script is identical, the trajectory is not."""
    dur = 1.3  # through the approach and the closing of the jaws
    base = simulate_episode(only_effect(cfg, None), box, hand="parallel_jaw", seed=1, duration=dur)
    for name in effect_names():
        tr = simulate_episode(only_effect(cfg, name), box, hand="parallel_jaw", seed=1, duration=dur)
        assert np.array_equal(tr.joint_cmd, base.joint_cmd), name  # same script
        diff = max(np.abs(tr.object_pose - base.object_pose).max(), np.abs(tr.joint_pos - base.joint_pos).max())
        assert diff > 1e-6, f"{name} did not change the trajectory ({diff})"


def test_oversize_object_is_ungraspable(cfg):
    big = make_object("box", 0, size_x=0.16, size_y=0.15, size_z=0.05)
    for hand in ("parallel_jaw", "three_finger"):
        with pytest.raises(UngraspableObject, match="does not fit"):
            simulate_episode(cfg, big, hand=hand, seed=0, duration=0.1)


def test_an_object_near_the_opening_is_grasped_centred_and_the_draws_are_unchanged(cfg):
    """A drawn offset that leaves no yaw is halved, quartered, then zero; a grasp that fits with its drawn offset
    keeps it (the same plan as before the fallback)."""
    from surrogate.rig.scripts import plan_grasp
    from surrogate.scenes import build_scene

    hand = build_scene(make_object("box", 0), hand="parallel_jaw").hand
    script = dict(cfg["script"], grasp_offset_max=0.02)
    limit = 0.5 * hand.max_opening - script["clearance"]
    wide = np.array([[-limit + 0.003, 0.0], [limit - 0.003, 0.0], [0.0, -limit + 0.003], [0.0, limit - 0.003]])
    small = 0.3 * wide
    for seed in range(8):
        plan = plan_grasp(hand, wide, script, np.random.default_rng(seed))
        drawn = np.random.default_rng(seed).uniform(-0.02, 0.02, size=2)
        scale = np.linalg.norm(plan["offset"]) / np.linalg.norm(drawn)
        assert min(abs(scale - s) for s in (1.0, 0.5, 0.25, 0.0)) < 1e-9
        assert np.allclose(plan_grasp(hand, small, script, np.random.default_rng(seed))["offset"], drawn)


def test_a_grasp_lifts_and_its_labels_are_consistent(cfg, box):
    c = load_rig_config(overrides=["script.grip_force_parallel_jaw_min=8"])
    lifted = []
    for seed in (0, 1, 2):
        tr = simulate_episode(c, box, hand="parallel_jaw", seed=seed, duration=2.2)
        L = tr.labels
        rise = tr.object_pose[:, 2] - tr.object_pose[0, 2]
        assert L["lifted"] == (rise.max() > c["script"]["lift_threshold"])
        assert L["final_rise_m"] == pytest.approx(rise[-1])
        assert not L["dropped"] or L["lifted"]
        assert L["slipped"] == (L["lifted"] and L["max_slip_m"] > c["script"]["slip_threshold"])
        if L["lifted"]:
            lifted.append(seed)
            # Held: both pads press with about the grip force, the object is in contact with them only.
            fx = np.abs(tr.pad_wrench[-1, :, 0])
            assert fx == pytest.approx(tr.script["grip_force"], rel=0.15)
            assert tr.hand_object_distance[-1] < 0.0  # compliant pads are indented
            break
    assert lifted
