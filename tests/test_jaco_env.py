"""The Kinova Jaco hand as a Gymnasium environment (``ContactSurrogate/JacoGrasp-v0``): made by id, Gymnasium's own
checker, copies that equal separate ``MjData``, an untouched object at rest under the learned contact, and the scripted
grasp lifting an object under both contacts. Skipped, saying so, without dm_control's Jaco assets."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import surrogate.envs  # noqa: F401  (registers the ids)
from surrogate.envs import ENV_IDS, GraspVectorEnv
from surrogate.errors import ConfigError
from surrogate.policies import ScriptedGraspPolicy, rollout
from surrogate.scenes.jaco import jaco_assets

try:
    jaco_assets()
    MISSING = None
except ConfigError as e:  # pragma: no cover - the README's test command installs them
    MISSING = str(e)
pytestmark = pytest.mark.skipif(MISSING is not None, reason=f"no Jaco assets: {MISSING}")
JACO = "ContactSurrogate/JacoGrasp-v0"


def test_the_jaco_environment_is_made_by_id_and_passes_gymnasiums_checker():
    assert ENV_IDS[JACO] == "jaco"
    env = gym.make(JACO, object="capsule", object_seed=100)
    check_env(env.unwrapped, skip_render_check=True)
    task = env.unwrapped.task
    J, P = len(task.hand.joint_names), len(task.hand.pad_geom_names)
    assert P == 3 and env.observation_space.shape == (2 * J + 13 + 6 * P + 1,)
    assert env.action_space.shape == (4 + len(task.hand.open_command),)


def test_jaco_copies_equal_separate_mjdata():
    """The vector env's default (the environments as copies in one ``MjModel``) steps as separate ``MjData`` do."""
    kw = dict(object="box", object_seed=100, contact="surrogate")
    a, b = GraspVectorEnv(3, copies=True, **kw), GraspVectorEnv(3, copies=False, **kw)
    oa, _ = a.reset(seed=4)
    ob, _ = b.reset(seed=4)
    np.testing.assert_allclose(oa, ob, atol=1e-9)
    rng = np.random.default_rng(0)
    for _ in range(10):
        act = rng.uniform(-1, 1, a.action_space.shape).astype(np.float32)
        oa = a.step(act)[0]
        ob = b.step(act)[0]
    np.testing.assert_allclose(oa, ob, atol=1e-6)


def test_an_untouched_object_rests_under_the_learned_contact_in_the_jaco_env():
    env = gym.make(JACO, object="cylinder", contact="surrogate")
    env.reset(seed=0)
    task = env.unwrapped.task
    d = task.datas[0]
    hold = task.action_from_targets(d.ctrl[task.scene.hand_actuator_ids][None].copy())[0]
    p0 = d.xipos[task.ob].copy()
    for _ in range(60):
        env.step(hold)
    assert np.linalg.norm(d.xipos[task.ob] - p0) < 2e-3


@pytest.mark.parametrize("contact", ["analytic", "surrogate"])
def test_the_scripted_grasp_lifts_with_the_jaco_under_both_contacts(contact):
    venv = GraspVectorEnv(2, copies=False, hand="jaco", object="capsule", object_seed=100, contact=contact)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the release's card warns that it was trained on another hand's pads
        r = rollout(venv, ScriptedGraspPolicy(venv.task), seed=0, duration=2.5)
    assert r["lifted"].all() and r["success"].any() and r["stepper"]["fallbacks"] == 0
    assert (r["final_rise_m"][r["success"]] > 0.03).all()
