"""The rig's constant-speed lifts (``script.lift_ramp_*``): drawn from the episode's own generator (so a probability of
0 leaves every episode, and the config's hash, as they were), a lift that starts at once and rises at its speed to its
height, and checked keys."""

from __future__ import annotations

import numpy as np
import pytest

from surrogate.errors import ConfigError
from surrogate.objects.families import make_object
from surrogate.rig.config import default_rig_config, load_rig_config
from surrogate.rig.scripts import draw_lift_speed
from surrogate.rig.simulate import simulate_episode


@pytest.fixture(scope="module")
def box():
    return make_object("box", 0, size_x=0.05, size_y=0.04, size_z=0.05)


def test_the_draw_takes_its_probability_and_range_and_nothing_at_zero():
    script = default_rig_config()["script"]
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    assert draw_lift_speed(script, rng) is None and rng.bit_generator.state == state  # the default: no draw at all
    always = {**script, "lift_ramp_probability": 1.0, "lift_ramp_speed_min": 0.15, "lift_ramp_speed_max": 0.25}
    speeds = [draw_lift_speed(always, rng) for _ in range(200)]
    assert min(speeds) >= 0.15 and max(speeds) <= 0.25 and max(speeds) - min(speeds) > 0.05
    half = {**always, "lift_ramp_probability": 0.5}
    share = np.mean([draw_lift_speed(half, rng) is not None for _ in range(400)])
    assert 0.4 < share < 0.6


def test_keys_are_optional_and_checked():
    # not among the defaults, so the default config (and every capture made with it) hashes as before
    assert not any(k.startswith("lift_ramp") for k in default_rig_config()["script"])
    assert not any(k.startswith("lift_ramp") for k in load_rig_config()["script"])
    with pytest.raises(ConfigError, match="lift_ramp_probability"):
        load_rig_config(None, ["script.lift_ramp_probability=1.5"])
    with pytest.raises(ConfigError, match="lift_ramp_speed"):
        load_rig_config(None, ["script.lift_ramp_speed_min=0.5", "script.lift_ramp_speed_max=0.2"])


def test_a_ramp_lift_starts_at_once_and_rises_at_its_speed(box):
    """The same seed with and without the ramp: the same grasp, object and draws; the commanded base height rises
    linearly from the lift's start at the drawn speed to the drawn height and stays there, where the minimum-jerk
    profile starts from rest."""
    smooth_cfg = load_rig_config()
    ramp_cfg = load_rig_config(None, ["script.lift_ramp_probability=1.0"])
    a = simulate_episode(smooth_cfg, box, hand="parallel_jaw", seed=3, duration=2.0)
    b = simulate_episode(ramp_cfg, box, hand="parallel_jaw", seed=3, duration=2.0)
    sa, sb = a.script, b.script
    assert "lift_speed" not in sa and 0.1 <= sb["lift_speed"] <= 0.3
    for key in ("grip_force", "lift_height", "object_yaw", "offset", "perturbation"):
        assert sa[key] == sb[key], key
    l0, l1 = sb["phases"]["lift"]
    assert l1 - l0 == pytest.approx(sb["lift_height"] / sb["lift_speed"], rel=1e-9)
    z = 2  # the base's vertical joint: commands [x, y, z, yaw, fingers...]
    t = a.times
    early = (t > l0 + 0.02) & (t < l0 + 0.1)
    rate_b = np.diff(b.joint_cmd[early, z]) / np.diff(t[early])
    np.testing.assert_allclose(rate_b, sb["lift_speed"], rtol=1e-6)
    rate_a = np.diff(a.joint_cmd[early, z]) / np.diff(t[early])
    assert rate_a.max() < 0.5 * sb["lift_speed"]  # the minimum-jerk profile starts from rest
    z0 = b.joint_cmd[early, z][0] - sb["lift_speed"] * (t[early][0] - l0)  # the height the lift starts from
    h0, h1 = sb["phases"]["hold"]
    hold = (t > h0 + 0.01) & (t < h1)
    assert hold.any()
    np.testing.assert_allclose(b.joint_cmd[hold, z], z0 + sb["lift_height"], atol=1e-9)  # there, and still
