"""Gymnasium environments as Gymnasium users write them, and rewards that need a grasp.

* ids: ``gymnasium.make("surrogate.envs:ContactSurrogate/...")`` in a fresh interpreter;
* ``GraspVectorEnv``'s ``info`` equals ``SyncVectorEnv``'s over single envs (keys, masks, dtypes,
  values, across an autoreset); ``render_fps``; unseeded vector envs differ;
* reward and ``lifted`` need the object held between two fingertips; actions are rate limited;
  NaN / inf actions raise ValueError.

All with analytic contact (no checkpoint), a few seconds each.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import mujoco
import numpy as np
import pytest

import surrogate.envs  # noqa: F401  (registers)
from surrogate.envs import GraspEnv, GraspTask, GraspVectorEnv

REPO = Path(__file__).resolve().parent.parent
IDS = {"parallel_jaw": "ContactSurrogate/GripperGrasp-v0", "three_finger": "ContactSurrogate/HandGrasp-v0"}

FRESH = r"""
import json, sys
import gymnasium as gym
out = {}
try:
    gym.make("ContactSurrogate/GripperGrasp-v0")
except Exception as e:
    out["bare"] = type(e).__name__
env = gym.make("surrogate.envs:ContactSurrogate/GripperGrasp-v0", object="cylinder", object_seed=2)
obs, info = env.reset(seed=0)
out["obs"] = list(obs.shape)
out["max_episode_steps"] = env.spec.max_episode_steps
venv = gym.make_vec("surrogate.envs:ContactSurrogate/HandGrasp-v0", num_envs=2, vectorization_mode="vector_entry_point")
out["vector"] = type(venv.unwrapped).__name__
print(json.dumps(out))
"""


def test_make_by_module_id_in_a_fresh_interpreter():
    # Gymnasium 1.x loads no entry points: the bare id is unknown until the module is imported,
    # the "module:EnvId" form imports it.
    res = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["bare"] == "NamespaceNotFound"
    assert out["obs"][0] > 0 and out["max_episode_steps"] == 150
    assert out["vector"] == "GraspVectorEnv"


# -- vector env: same info as SyncVectorEnv --------------------------------------------------
def _assert_same_info(got: dict, want: dict, where: str):
    assert set(got) == set(want), f"{where}: keys {sorted(set(got) ^ set(want))}"
    for k in want:
        g, w = np.asarray(got[k]), np.asarray(want[k])
        assert g.dtype == w.dtype and g.shape == w.shape, f"{where}: {k}: {g.dtype}{g.shape} != {w.dtype}{w.shape}"
        if k.startswith("_"):
            np.testing.assert_array_equal(g, w, err_msg=f"{where}: {k}")
        else:
            mask = np.asarray(want["_" + k])
            np.testing.assert_allclose(g[mask].astype(float), w[mask].astype(float), atol=1e-6, err_msg=f"{where}: {k}")


def test_an_env_sets_torch_threads_only_with_learned_contact_and_not_when_told_not_to():
    import torch

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        gym.make("ContactSurrogate/GripperGrasp-v0", contact="analytic").close()  # no network: not its setting
        assert torch.get_num_threads() == 2
        gym.make("ContactSurrogate/GripperGrasp-v0", contact="surrogate",
                 stepper_options={"num_threads": None}).close()
        assert torch.get_num_threads() == 2
        gym.make("ContactSurrogate/GripperGrasp-v0", contact="surrogate").close()  # the stepper's default: one
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_a_mesh_file_in_millimetres_takes_the_scale_its_error_asks_for(tmp_path):
    import trimesh

    from surrogate.errors import AssetError, ConfigError

    path = tmp_path / "box_mm.stl"
    trimesh.creation.box(extents=(40.0, 60.0, 30.0)).export(path)
    with pytest.raises(AssetError, match="pass scale=0.001"):
        gym.make("ContactSurrogate/GripperGrasp-v0", mesh=str(path), mass=0.1)
    env = gym.make("ContactSurrogate/GripperGrasp-v0", mesh=str(path), mass=0.1, scale=0.001)
    env.reset(seed=0)
    np.testing.assert_allclose(sorted(env.unwrapped.task.obj.extents), [0.03, 0.04, 0.06])
    with pytest.raises(ConfigError, match="scale applies to a mesh file"):
        gym.make("ContactSurrogate/GripperGrasp-v0", object="box", scale=0.001)


def test_vector_info_matches_sync_vector_env():
    kw = dict(num_envs=2, max_episode_steps=3, object="box")
    ours = gym.make_vec(IDS["parallel_jaw"], vectorization_mode="vector_entry_point", **kw)
    sync = gym.make_vec(IDS["parallel_jaw"], vectorization_mode="sync", **kw)
    (o1, i1), (o2, i2) = ours.reset(seed=5), sync.reset(seed=5)
    np.testing.assert_allclose(o1, o2, atol=1e-6)
    _assert_same_info(i1, i2, "reset")
    rng = np.random.default_rng(0)
    infos = []
    for k in range(5):  # truncation after 3 steps, then a next-step autoreset
        a = rng.uniform(-1, 1, size=(2, 6)).astype(np.float32)
        r1, r2 = ours.step(a), sync.step(a)
        for name, x, y in zip(("obs", "reward", "terminated", "truncated"), r1[:4], r2[:4]):
            np.testing.assert_allclose(np.asarray(x, float), np.asarray(y, float), atol=1e-5, err_msg=f"step {k}: {name}")
        _assert_same_info(r1[4], r2[4], f"step {k}")
        infos.append(r1[4])
    # step index 3 resets both copies: the reset info has no fallbacks; the next step has them again
    assert "fallbacks" not in infos[3] and infos[3]["_rise"].all() and infos[4]["_fallbacks"].all()
    ours.close(), sync.close()


def test_vector_metadata_and_unseeded_starts():
    a, b = GraspVectorEnv(2, object="box"), GraspVectorEnv(2, object="box")
    assert a.metadata["render_fps"] == 50 and a.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    oa, ob = a.reset()[0], b.reset()[0]
    assert not np.allclose(oa, ob)
    assert not np.allclose(oa[0], oa[1])
    np.testing.assert_array_equal(a.reset(seed=4)[0], b.reset(seed=[4, 5])[0])
    with pytest.raises(ValueError, match="3 seeds for 2 environments"):
        a.reset(seed=[1, 2, 3])


# -- rewards that need a grasp ---------------------------------------------------------------
def _fingertips_by_name(task: GraspTask) -> int:
    """Fingertips touching the object, from MuJoCo's contacts and the hands' geom names (independent of the env)."""
    m, d = task.model, task.datas[0]
    tips = {}
    for k, pad in enumerate(task.hand.pad_geom_names):
        link = pad.replace("pad_", "finger_") if task.hand.name == "parallel_jaw" else pad.replace("pad_", "") + "_dist"
        tips[m.geom(pad).id] = tips[m.geom(link).id] = k
    touching = set()
    for c in d.contact[:d.ncon]:
        for a, b in ((c.geom1, c.geom2), (c.geom2, c.geom1)):
            if m.geom_bodyid[a] == task.ob and b in tips and c.dist <= 1e-3:
                touching.add(tips[b])
    return len(touching)


@pytest.mark.parametrize("hand", ["parallel_jaw", "three_finger"])
def test_random_policy_lifts_nothing_without_pad_contact(hand):
    env = gym.make(IDS[hand], object="box", max_episode_steps=60)
    task = env.unwrapped.task
    dof = task.model.jnt_dofadr[task.model.body_jntadr[task.ob]]
    for ep in range(3):
        env.reset(seed=ep)
        env.action_space.seed(ep)
        held_and_up, speed, done = False, 0.0, False
        while not done:
            _, rew, term, trunc, info = env.step(env.action_space.sample())
            tips = _fingertips_by_name(task)
            assert info["fingertips"] == tips
            if rew > 0:
                assert tips >= 2, f"episode {ep}: reward {rew} without the object between two fingertips"
            held_and_up |= tips >= 2 and info["rise"] > task.lift_threshold
            speed = max(speed, float(np.linalg.norm(task.datas[0].qvel[dof:dof + 3])))
            done = term or trunc
        assert not info["lifted"] or held_and_up, f"episode {ep} lifted without pad contact"
        assert speed < 5.0, f"episode {ep}: the object reached {speed:.1f} m/s"
    env.close()


def test_object_up_without_contact_earns_nothing():
    task = GraspTask(1, randomize=False)
    task.reset_one(0, np.random.default_rng(0))
    d = task.datas[0]
    d.qpos[task.scene.object_qpos_adr + 2] += 0.06  # floating 6 cm up, no finger near it
    mujoco.mj_forward(task.model, d)
    rew, term, info = task.evaluate()
    assert info["rise"][0] > task.lift_threshold and not info["held"][0]
    assert rew[0] == 0.0 and not info["lifted"][0]


def test_scripted_grasp_is_held_and_lifted():
    from surrogate.policies import ScriptedGraspPolicy, rollout

    venv = GraspVectorEnv(2, hand="three_finger", object="cylinder", copies=False)
    res = rollout(venv, ScriptedGraspPolicy(venv.task), seed=0, duration=2.5)
    assert res["lifted"].all() and res["success"].all() and (res["return"] > 0).all()


# -- actions ---------------------------------------------------------------------------------
def test_actions_are_rate_limited():
    env = GraspEnv(object="box")
    env.reset(seed=0)
    t = env.task
    d = t.datas[0]
    before = d.ctrl[t.act_ids].copy()
    far = np.where(before > 0.5 * (t.ctrl_lo + t.ctrl_hi), -1.0, 1.0).astype(np.float32)  # the far end of each range
    env.step(far)
    step = d.ctrl[t.act_ids] - before
    assert np.all(np.abs(step[:3]) <= 0.5 * t.control_dt + 1e-12)  # 0.5 m/s
    assert abs(step[3]) <= 25.0 * t.control_dt + 1e-12
    np.testing.assert_allclose(np.abs(step[4:]), (t.ctrl_hi - t.ctrl_lo)[4:] / 0.16 * t.control_dt)
    free = GraspEnv(object="box", rate_limit=False)
    free.reset(seed=0)
    free.step(far)
    np.testing.assert_allclose(free.task.datas[0].ctrl[free.task.act_ids], free.task.targets_from_action(far))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_action_raises(bad):
    env = GraspEnv(object="box")
    env.reset(seed=0)
    a = np.zeros(6, np.float32)
    a[4] = bad
    ctrl = env.task.datas[0].ctrl.copy()
    with pytest.raises(ValueError, match=r"action of environment 0 is not finite .* components \[4\]"):
        env.step(a)
    np.testing.assert_array_equal(env.task.datas[0].ctrl, ctrl)
    venv = GraspVectorEnv(2, object="box")
    venv.reset(seed=0)
    acts = np.zeros((2, 6), np.float32)
    acts[1, 0] = bad
    with pytest.raises(ValueError, match=r"action of environment 1 is not finite"):
        venv.step(acts)
    with pytest.raises(ValueError, match=r"expected \(2, 6\)"):
        venv.step(np.zeros((2, 5)))


def test_per_copy_ood_and_fallback_counts_add_up():
    """The vector env attributes the stepper's batch counts to copies; they sum to the stepper's own."""
    import warnings

    from surrogate.model.checkpoint import load_checkpoint

    net, _ = load_checkpoint(REPO / "checkpoints/cube_tosses")  # never saw pads: out-of-range contacts
    # a constant law is not checked by default; the counts are what is tested (its unfitted pad law allowed)
    opts = {"check_inputs": True, "untrained_groups": "allow"}
    venv = GraspVectorEnv(3, object="box", contact="surrogate", contact_model=net, stepper_options=opts)
    single = GraspEnv(object="box", contact="surrogate", contact_model=net, stepper_options=opts)
    venv.reset(seed=1)
    single.reset(seed=2)  # the same start as copy 1
    rng = np.random.default_rng(0)
    ood, falls = np.zeros(3, int), np.zeros(3, int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        before = venv.task.stepper.stats()
        alike = True  # copy 1 and the single env run the same episode until it ends
        for _ in range(30):
            a = rng.uniform(-1, 1, size=(3, 6)).astype(np.float32)
            _, _, term, trunc, info = venv.step(a)
            if alike:
                sinfo = single.step(a[1])[-1]
                assert info["ood_contacts"][1] == sinfo["ood_contacts"]
                alike = not (term[1] or trunc[1])
            ood += np.where(info["_ood_contacts"], info["ood_contacts"], 0)
            falls += np.where(info["_fallbacks"], info["fallbacks"], 0)
        after = venv.task.stepper.stats()
    assert ood.sum() == after["ood_edges"] - before["ood_edges"] > 0
    assert falls.sum() == after["fallbacks"] - before["fallbacks"]


# -- clear errors for what a careless caller passes (#29 H) ------------------------------------
def test_reset_options_that_are_not_a_dict_or_a_bool_randomize_are_refused():
    env = GraspEnv(object="box")
    venv = GraspVectorEnv(2, object="box")
    for reset, where in ((env.reset, "GraspEnv.reset"), (venv.reset, "GraspVectorEnv.reset")):
        with pytest.raises(TypeError, match=f"{where}: options must be a dict .* got str 'randomize'"):
            reset(options="randomize")
        with pytest.raises(TypeError, match=r"options\['randomize'\] must be True or False, got str 'false'"):
            reset(options={"randomize": "false"})
    # a numpy bool is a bool: the nominal pose, whatever the seed
    a = env.reset(seed=1, options={"randomize": np.bool_(False)})[0]
    np.testing.assert_array_equal(a, env.reset(seed=2, options={"randomize": False})[0])
    assert not np.array_equal(a, env.reset(seed=2)[0])


def test_vector_reset_takes_a_numpy_integer_seed():
    venv = GraspVectorEnv(2, object="box")
    np.testing.assert_array_equal(venv.reset(seed=np.int64(3))[0], venv.reset(seed=3)[0])
    np.testing.assert_array_equal(GraspEnv(object="box").reset(seed=np.int64(3))[0], venv.reset(seed=3)[0][0])
    with pytest.raises(TypeError, match="seed must be an integer, a list"):
        venv.reset(seed=3.5)


def test_action_of_the_wrong_shape_is_refused_naming_the_expected_shape():
    env = GraspEnv(object="box")
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"GraspEnv.step: action has shape \(6, 1\); expected \(6,\)"):
        env.step(np.zeros((6, 1), np.float32))
    venv = GraspVectorEnv(2, object="box")
    venv.reset(seed=0)
    with pytest.raises(ValueError, match=r"action has shape \(2, 6, 1\); expected \(2, 6\)"):
        venv.step(np.zeros((2, 6, 1), np.float32))
    with pytest.raises(ValueError, match=r"action has shape \(12,\); expected \(2, 6\)"):
        venv.task.apply_action(np.zeros(12))


def test_non_finite_action_message_prints_plain_numbers():
    env = GraspEnv(object="box")
    env.reset(seed=0)
    a = np.zeros(6)
    a[2] = np.nan
    with pytest.raises(ValueError) as e:
        env.step(a)
    assert "(nan at components [2])" in str(e.value) and "np." not in str(e.value)


def test_set_state_from_another_hands_mjdata_is_refused():
    from surrogate.errors import ConfigError

    venv = GraspVectorEnv(2, object="box")  # the jaw's copies
    other = GraspTask(1, hand="three_finger", obj=venv.task.obj).datas[0]
    with pytest.raises(ConfigError, match=r"set_state\(copy 1\): the MjData has nq, nv, na, nu = .* another model"):
        venv.task.physics.batch.set_state(1, other)
