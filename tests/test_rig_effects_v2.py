"""Rig v2 fingertip effects: each law against a hand-computed case, determinism per seed, truth
isolation, config ranges, the default config unchanged, and the torsion-loading perturbations.

Law checks call the effect modules directly (milliseconds); the episode checks simulate 0.6-1.6 s,
a few seconds of wall time each.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from surrogate.errors import ConfigError
from surrogate.objects.families import make_object
from surrogate.paths import CONFIG_DIR
from surrogate.rig.config import load_rig_config, validate_rig_config, with_effects
from surrogate.rig.effects import EFFECTS, FINGERTIP_EFFECTS
from surrogate.rig.effects import load_dependent_friction as ldf
from surrogate.rig.effects import pad_relaxation as relax
from surrogate.rig.effects import presliding_friction as pres
from surrogate.rig.effects import soft_finger_torsion as sft
from surrogate.rig.recorder import record, recorder_rng
from surrogate.rig.simulate import simulate_episode

FINGERTIPS = CONFIG_DIR / "rig" / "v2.yaml"  # v1 plus the fingertip effects (the former fingertips.yaml)


@pytest.fixture(scope="module")
def box():
    return make_object("box", 0, size_x=0.05, size_y=0.04, size_z=0.05)


@pytest.fixture(scope="module")
def tips():
    return load_rig_config(FINGERTIPS)


# ----------------------------------------------------------------------------- laws, hand-computed


def test_load_dependent_friction_at_two_loads():
    # gamma = 1/3 (Hertz): 8x the load halves mu; below min_load mu stops rising.
    kw = {"exponent": 1 / 3, "reference_load": 1.0, "min_load": 0.1}
    s = ldf.friction_scale([1.0, 8.0, 0.01], **kw)
    assert s == pytest.approx([1.0, 0.5, 0.1 ** (-1 / 3)], rel=1e-12)


def test_soft_finger_torsion_limit_at_two_loads_and_the_limit_surface():
    kw = {"radius_m": 0.004, "exponent": 1 / 3, "reference_load": 1.0}
    # tau_max = 3 pi / 16 mu N a(N), a = 4 mm N^(1/3): at 1 N a = 4 mm, at 8 N a = 8 mm.
    tau = sft.torsion_limit(0.8, np.array([1.0, 8.0]), **kw)
    hand = [3 * math.pi / 16 * 0.8 * 1.0 * 0.004, 3 * math.pi / 16 * 0.8 * 8.0 * 0.008]
    assert tau == pytest.approx(hand, rel=1e-12)
    assert tau[1] / tau[0] == pytest.approx(8.0 ** (4 / 3))  # grows faster than N
    assert sft.patch_radius(1000.0, **kw) == pytest.approx(sft.MAX_RADIUS)  # capped at the pad
    # Sliding and spinning fast: the wrench lies on the ellipse; slowly (below eps): inside it.
    f_max, t_max, eps = 2.0, 0.01, 1e-3
    for slip, spin, on in ((0.05, 3.0, True), (0.1, 0.0, True), (1e-4, 0.02, False)):
        a_t, a_tau = sft.limit_surface_damping(f_max, t_max, slip, spin, eps)
        h = (a_t * slip / f_max) ** 2 + (a_tau * spin / t_max) ** 2
        assert (h == pytest.approx(1.0, abs=1e-3)) if on else h < 0.9


def test_pad_relaxation_of_a_held_squeeze_over_one_time_constant():
    # F(tau) = Fe (1 - g1 (1 - 1/e)); the exponential update is exact for a held squeeze (tolerance 1e-9 N).
    dt, tau, g1, fe = 0.5 / 540, 0.5, 0.3, 10.0
    q = np.zeros(1)
    for _ in range(540):
        q = relax.relax_step(q, fe, fraction=g1, time_s=tau, dt=dt)
    force = fe * relax.stiffness_scale(q, fe)
    assert force[0] == pytest.approx(fe * (1 - g1 * (1 - math.exp(-1))), abs=1e-9)
    assert relax.stiffness_scale(np.array([2.0, 5.0]), np.array([0.0, 4.0])) == pytest.approx([1.0, 0.0])


def _bristle_run(force, *, g=2.0, zb=5e-4, mass=0.05, dt=1e-3, ramp=0.5, hold=0.5):
    """1-DOF object held by one pad (fixed) under a tangential force ramped to ``force`` and held:
    the implicit step of the rig (f = c z - K v'), through the module's functions. Returns the displacement (m)."""
    x = v = 0.0
    z = np.zeros(3)
    for k in range(int((ramp + hold) / dt)):
        f_ext = force * min(1.0, (k + 1) * dt / ramp)
        c, K, alpha = pres.bristle_terms(abs(v), g, breakaway_m=zb, damping_time=0.002, dt=dt)
        v = (mass * v + dt * (f_ext + c * z[0])) / (mass + dt * K)  # end-of-step velocity
        z = pres.bristle_update(z, [v, 0.0, 0.0], alpha, breakaway_m=zb, dt=dt)
        x += dt * v
    return x


def test_presliding_displacement_under_a_sub_breakaway_load():
    # Quasi-static LuGre: dz/dx = 1 - z / z_b and F = g z / z_b give x = -z_b ln(1 - F / g).
    zb = 5e-4
    x = _bristle_run(1.0, g=2.0, zb=zb)
    assert x == pytest.approx(-zb * math.log(1 - 0.5), rel=0.03)  # 0.347 mm, 3 %
    assert _bristle_run(0.5, g=2.0, zb=zb) == pytest.approx(-zb * math.log(1 - 0.25), rel=0.03)
    assert _bristle_run(2.4, g=2.0, zb=zb) > 20 * zb  # above breakaway: gross slip


# ----------------------------------------------------------------------------- config


def test_v1_has_no_fingertip_effects_v2_and_the_default_have_them_all(tips):
    v1 = load_rig_config(CONFIG_DIR / "rig" / "v1.yaml")
    cfg = load_rig_config()  # the default, rig v3
    assert set(FINGERTIP_EFFECTS) <= set(EFFECTS)
    for name in FINGERTIP_EFFECTS:
        assert v1["effects"][name]["enabled"] is False and tips["effects"][name]["enabled"] is True
        assert EFFECTS[name].defaults()["enabled"] is True and cfg["effects"][name]["enabled"] is True
    assert v1["script"]["swing_probability"] == v1["script"]["lever_probability"] == 0.0
    assert all(e["enabled"] for e in cfg["effects"].values())
    # v2 keeps the v1 pad and table laws (the v3 laws are its only effects off)
    assert [n for n, e in tips["effects"].items() if not e["enabled"]] == ["pulp_stiffening", "impact_damping"]
    for c in (tips, cfg):
        assert c["script"]["swing_probability"] + c["script"]["lever_probability"] == pytest.approx(0.5)
    assert load_rig_config(None) == validate_rig_config({"recorder": {"rate_hz": 120}})  # default.yaml: the built-ins


@pytest.mark.parametrize("key, value, named, match", [
    ("effects.load_dependent_friction.exponent_max", 0.6, None, r"out of range \[0.0, 0.4\]"),
    ("effects.soft_finger_torsion.radius_min", 0.02, None, r"out of range \[0.0005, 0.01\] m"),
    ("effects.pad_relaxation.time_min", 0.0, None, r"out of range \[0.01, 30.0\] s"),
    ("effects.presliding_friction.breakaway_max", 0.01, None, r"out of range \[1e-05, 0.005\] m"),
    ("effects.pad_relaxation.fraction_min", 0.5, None, "must not exceed fraction_max"),
    ("script.lever_probability", 0.9, "script.swing_probability", "must not exceed 1"),
])
def test_config_range_errors_name_the_key(key, value, named, match):
    with pytest.raises(ConfigError, match=match) as err:
        load_rig_config(FINGERTIPS, [f"{key}={value}"])
    assert (named or key) in str(err.value)
    # the override's own key names the command line; a key of the file that the override clashes with, the file
    assert ("v2.yaml" if named else "command line (--set)") in str(err.value)


# ----------------------------------------------------------------------------- episodes


def test_deterministic_per_seed_draws_independent_of_other_effects(tips, box):
    a = simulate_episode(tips, box, hand="parallel_jaw", seed=5, duration=0.6)
    b = simulate_episode(tips, box, hand="parallel_jaw", seed=5, duration=0.6)
    c = simulate_episode(tips, box, hand="parallel_jaw", seed=6, duration=0.6)
    np.testing.assert_array_equal(a.object_pose, b.object_pose)
    np.testing.assert_array_equal(a.pad_wrench, b.pad_wrench)
    for name in FINGERTIP_EFFECTS:
        assert a.effects[name]["drawn"] == b.effects[name]["drawn"] != c.effects[name]["drawn"]
    off = simulate_episode(with_effects(tips, {"pad_relaxation": False}), box, hand="parallel_jaw", seed=5,
                           duration=0.6)
    assert "drawn" not in off.effects["pad_relaxation"]
    for name in set(FINGERTIP_EFFECTS) - {"pad_relaxation"}:
        assert off.effects[name]["drawn"] == a.effects[name]["drawn"]  # one switch changes no other draw
    np.testing.assert_array_equal(off.joint_cmd, a.joint_cmd)  # nor the script


def test_hidden_draws_only_in_truth(tips, box):
    tr = simulate_episode(tips, box, hand="three_finger", seed=2, duration=0.6)
    ep = record(tr, tips, rng=recorder_rng(tr.seed), obj=box)
    for name in FINGERTIP_EFFECTS:
        assert "drawn" not in ep.provenance.generator["effects"][name]
        for key, v in tr.effects[name]["drawn"].items():
            np.testing.assert_allclose(ep.truth[f"{name}_{key}"], v)
    assert "pad_relaxation_time_s" in ep.truth


def test_each_fingertip_effect_changes_a_held_grasp(tips, box):
    """All on vs one off, same seed and script: every effect moves the object or the pad forces."""
    cfg = load_rig_config(FINGERTIPS, ["script.grip_force_parallel_jaw_min=2", "script.grip_force_parallel_jaw_max=2"])
    full = simulate_episode(cfg, box, hand="parallel_jaw", seed=1, duration=1.6)
    assert full.labels["lifted"] or full.object_pose[-1, 2] > full.object_pose[0, 2]
    for name in FINGERTIP_EFFECTS:
        tr = simulate_episode(with_effects(cfg, {name: False}), box, hand="parallel_jaw", seed=1, duration=1.6)
        diff = max(np.abs(tr.object_pose - full.object_pose).max(), np.abs(tr.pad_wrench - full.pad_wrench).max())
        assert diff > 1e-4, f"{name}: {diff}"


def test_swing_and_lever_load_the_grasp_axis(box):
    base = load_rig_config(FINGERTIPS, ["script.swing_probability=0", "script.lever_probability=0"])
    plain = simulate_episode(base, box, hand="parallel_jaw", seed=4, duration=0.1)
    for kind in ("swing", "lever"):
        cfg = validate_rig_config({**base, "script": {**base["script"], "swing_probability": float(kind == "swing"),
                                                       "lever_probability": float(kind == "lever")}})
        tr = simulate_episode(cfg, box, hand="parallel_jaw", seed=4, duration=0.1)
        p = tr.script["perturbation"]
        axis = np.array([math.cos(tr.script["yaw"]), math.sin(tr.script["yaw"]), 0.0])  # closing direction
        assert p["kind"] == kind
        if kind == "swing":
            assert abs(np.dot(p["direction"], axis)) < 1e-12 and p["direction"][2] == 0.0
            assert tr.script["offset"] == plain.script["offset"]
        else:
            assert p["direction"] == [0.0, 0.0, 1.0]
            shift = np.subtract(tr.script["offset"], plain.script["offset"])
            assert abs(np.hypot(*shift) - abs(p["lever_offset_m"])) < 1e-12 and abs(shift @ axis[:2]) < 1e-12
        assert tr.script["grip_force"] == plain.script["grip_force"]  # the v1 draws are untouched
