"""The Kinova Jaco hand as a Gymnasium environment (``ContactSurrogate/JacoGrasp-v0``): made by id, Gymnasium's own
checker, copies that equal separate ``MjData``, and the scripted grasp lifting an object under both contacts (an
untouched object at rest: ``test_contact_law.test_released_rig_surrogate_leaves_an_untouched_object_at_rest``).
Skipped, saying so, without dm_control's Jaco assets."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from surrogate.envs import ENV_IDS, GraspVectorEnv
from surrogate.policies import ScriptedGraspPolicy, rollout

from .conftest import needs_jaco

pytestmark = needs_jaco
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
    """The vector env by id (its default: the environments as copies in one ``MjModel``) steps as separate ``MjData``
    do: observations, rewards and terminations at every step of random actions."""
    kw = dict(object="box", object_seed=100, contact="surrogate")
    a = gym.make_vec(JACO, num_envs=3, vectorization_mode="vector_entry_point", **kw)
    b = GraspVectorEnv(3, copies=False, hand="jaco", **kw)
    assert a.unwrapped.task.hand.name == "jaco" and a.unwrapped.task.physics.__class__.__name__ == "CopiesPhysics"
    oa, _ = a.reset(seed=4)
    ob, _ = b.reset(seed=4)
    np.testing.assert_allclose(oa, ob, atol=1e-9)
    rng = np.random.default_rng(0)
    for _ in range(10):
        act = rng.uniform(-1, 1, a.action_space.shape).astype(np.float32)
        ra, rb = a.step(act), b.step(act)
        np.testing.assert_allclose(ra[0], rb[0], atol=1e-6)
        np.testing.assert_allclose(ra[1], rb[1], atol=1e-6)
        np.testing.assert_array_equal(ra[2], rb[2])


@pytest.mark.parametrize("contact", ["analytic", "surrogate"])
def test_the_scripted_grasp_lifts_with_the_jaco_under_both_contacts(contact):
    venv = GraspVectorEnv(2, copies=False, hand="jaco", object="capsule", object_seed=100, contact=contact)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the release's card warns that it was trained on another hand's pads
        r = rollout(venv, ScriptedGraspPolicy(venv.task), seed=0, duration=2.5)
    assert r["lifted"].all() and r["success"].any() and r["stepper"]["fallbacks"] == 0
    assert (r["final_rise_m"][r["success"]] > 0.03).all()
