"""The capture rig as a closed-loop environment (``rig.closed_loop``) and the policy transfer ledger
(``bench.transfer``)."""

from __future__ import annotations

import numpy as np
import pytest

from surrogate.capture.reader import read_dataset
from surrogate.capture.writer import write_dataset
from surrogate.envs import GraspVectorEnv
from surrogate.errors import ConfigError
from surrogate.objects import make_object
from surrogate.policies import ScriptedGraspPolicy, rollout
from surrogate.rig.closed_loop import RigGraspVectorEnv, rig_timestep


def test_rig_timestep_divides_frames_and_control():
    dt, per_frame, per_ctrl = rig_timestep(120.0, 0.02, 0.001)
    assert dt <= 0.001 and per_frame * dt == pytest.approx(1 / 120) and per_ctrl * dt == pytest.approx(0.02)
    with pytest.raises(ConfigError, match="control_dt"):
        rig_timestep(120.0, 0.0201234567, 0.001)


def test_scripted_policy_on_the_rig_records_a_capture(tmp_path):
    """One short episode of the scripted policy on the rig: same spaces and reset state as the simulated env,
    the commands pass the rig's actuator channel, and the recorded capture reads back as a stand-in."""
    obj = make_object("box", 3)
    venv = RigGraspVectorEnv(1, object=obj, hand="parallel_jaw", duration=1.6)
    sim = GraspVectorEnv(1, object=obj, hand="parallel_jaw", copies=False, max_episode_steps=None)
    assert venv.single_action_space == sim.single_action_space
    assert venv.single_observation_space == sim.single_observation_space
    obs_r, _ = venv.reset(seed=5)
    obs_s, _ = sim.reset(seed=5)
    assert obs_r.shape == obs_s.shape
    ob = venv.task.ob
    np.testing.assert_allclose(venv.task.datas[0].xpos[ob], sim.task.datas[0].xpos[ob], atol=1e-9)

    policy = ScriptedGraspPolicy(venv.task)
    res = rollout(venv, policy, seed=5, duration=1.6)
    assert res["lifted"][0] and res["success"][0]  # the rig's box, 1.6 s: approach, close, settle, lift
    eps = venv.captures(policy.hold_start, policy="scripted grasp")
    write_dataset(tmp_path / "cap", eps, venv.capture_meta())
    back = read_dataset(tmp_path / "cap", include_truth=True).episodes
    assert len(back) == 1
    ep = back[0]
    assert ep.provenance.real is False
    assert ep.provenance.generator["closed_loop"]["stand_in_for_hardware"] is True
    assert "stand-in for hardware" in ep.task
    assert ep.labels["lifted"] == bool(res["lifted"][0])
    assert len(ep.timestamps) == 1 + int(1.6 * 120)
    # The commands the policy sent are recorded; the joints lag them (the rig's actuator channel and servos).
    assert np.abs(np.diff(ep.joint_cmd[:, 2])).max() > 0
    assert ep.truth["pad_wrench"].shape[1] == 2
