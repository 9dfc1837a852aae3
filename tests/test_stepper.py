"""Hybrid stepper, Gymnasium environments, policies, soak and speed (tiny models; MuJoCo as the oracle)."""

from __future__ import annotations

import warnings

import gymnasium as gym
import mujoco
import numpy as np
import pytest
import torch

from surrogate.errors import ConfigError
from surrogate.model.contact_law import ContactLawGNN
from surrogate.objects import load_split, make_object
from surrogate.scenes import build_scene, hand_ctrl, set_contact_mode
from surrogate.sim import MuJoCoContact, Stepper, SurrogateStepError, SurrogateWarning, ZeroContact, step

from .conftest import trajectory

TINY = dict(hidden=16, steps=2, mlp_layers=2)
TABLE = dict(stiffness=1e6, damping=5.0, friction=0.8, slip_eps=1e-3, units="si")
PAD = dict(stiffness=1e5, damping=5.0, friction=1.0, slip_eps=1e-3, units="si")
torch.set_num_threads(1)


def _scene():
    return build_scene(make_object("box", 0), hand="parallel_jaw", setting="table")


def _ctrl(scene, k):
    """Scripted close-and-lift of the parallel jaw: descend 0.4 s, close 0.3 s, lift 8 cm from 0.8 s."""
    t = k * scene.model.opt.timestep
    z = scene.meta["grasp_base_z"] * min(t / 0.4, 1) + 0.08 * min(max((t - 0.8) / 0.4, 0), 1)
    return hand_ctrl(scene.hand, base=(0, 0, z, 0), grip=min(max((t - 0.4) / 0.3, 0), 1))


def _run(scene, stepper, n, *, datas=None, contact=None):
    """qpos/qvel trajectory [n, B, nq + nv] of the scripted grasp under the stepper (or plain mj_step if None)."""
    ds = datas if datas is not None else [scene.make_data()]

    def control(k, d):
        d.ctrl[scene.hand_actuator_ids] = _ctrl(scene, k)

    return trajectory(scene.model, ds, n, stepper, contact=contact, control=control)


def _tiny(seed=0):
    """A contact law with its network's corrections on and random weights (every head, so they correct)."""
    torch.manual_seed(seed)
    net = ContactLawGNN(prior=TABLE, prior_body=PAD, **TINY)
    with torch.no_grad():
        for p in net.correction_parameters():
            p.copy_(0.3 * torch.randn(p.shape))
    return net.eval()


def test_zero_contact_equals_external_mode_exactly():
    """Oracle (a): no force from the contact model == MuJoCo with the owned pairs excluded."""
    s = _scene()
    hyb = _run(s, Stepper(s, ZeroContact()), 300)
    set_contact_mode(s.model, s, "external")
    ref = _run(s, None, 300)
    assert np.array_equal(hyb, ref)
    assert ref[-1, 0, s.object_qpos_adr + 2] < s.meta["object_rest_pos"][2] - 0.01  # it really fell through


def test_mujoco_contact_reproduces_mj_step():
    """Oracle (b): MuJoCo's own analytic forces through qfrc_applied reproduce mj_step over a close-and-lift.

    Not exact at the default solver tolerance (1e-8): the solver stops with an iterate qacc whose
    residual is ~1e-3 rad/s^2 on the light box's rotations; mj_step keeps that iterate as next step's
    warm start, the hybrid step keeps the exact M^-1 (forces) one, and the next solves start from
    different points. Measured over 1.3 s (grasp and lift): object position 1.3e-7 m, orientation 1.0e-6,
    qvel 2.5e-4. With tolerance 0 the solver converges fully and the two agree to 1e-16.
    """
    s = _scene()
    qa, n = s.object_qpos_adr, 650
    for tol, pos_tol, quat_tol in ((1e-8, 1e-6, 1e-5), (0.0, 1e-12, 1e-12)):
        s.model.opt.tolerance = tol
        hyb = _run(s, Stepper(s, MuJoCoContact(s)), n)
        set_contact_mode(s.model, s, "analytic")
        ref = _run(s, None, n)
        err = np.abs(hyb - ref)[:, 0]
        assert err[:, qa:qa + 3].max() < pos_tol, (tol, err[:, qa:qa + 3].max())
        assert err[:, qa + 3:qa + 7].max() < quat_tol, (tol, err[:, qa + 3:qa + 7].max())
    assert ref[-1, 0, qa + 2] - ref[0, 0, qa + 2] > 0.05  # the box was lifted


def test_deterministic_and_batch_equals_single_runs():
    s = _scene()
    net = _tiny()
    a = _run(s, Stepper(s, net), 120, datas=[s.make_data() for _ in range(3)])
    b = _run(s, Stepper(s, net), 120, datas=[s.make_data() for _ in range(3)])
    assert np.array_equal(a, b)
    # three different starting states, batched vs one at a time
    def starts():
        ds = [s.make_data(drop_height=h) for h in (0.0, 0.01, 0.02)]
        return ds
    batched = _run(s, Stepper(s, net), 120, datas=starts())
    singles = np.concatenate([_run(s, Stepper(s, net), 120, datas=[d]) for d in starts()], axis=1)
    assert np.isfinite(batched).all()
    # 1e-6, not 1e-9: a batch of three and a batch of one reach float32 products through kernels chosen by size, which
    # may round apart (~1e-7 relative); a drop's contact onset amplifies that to 3.9e-8 m on a 2-core AVX2 machine
    # without AVX-512 (equal to 1e-9 on the machines before). Members that leaked into each other would differ by mm.
    np.testing.assert_allclose(batched, singles, rtol=0, atol=1e-6)


def test_an_empty_batch_is_stepped_as_nothing_in_either_mode():
    """A loop that steps only its unfinished environments steps none once all have finished: the learned path had
    raised numpy's reshape error there, the analytic one stepped nothing."""
    s = _scene()
    st = Stepper(s, _tiny())
    for contact in ("surrogate", "analytic"):
        step(s.model, [], st, contact=contact)
    d = s.make_data()
    step(s.model, [d], st)  # the stepper still steps after it
    assert d.time > 0


class _BadModel:
    """A contact model that returns NaN for environment 1's contacts (and MuJoCo's forces elsewhere)."""

    def __init__(self, scene):
        self.inner = MuJoCoContact(scene)

    def prepare(self, m, datas):
        self.inner.prepare(m, datas)

    def __call__(self, graph):
        f = self.inner(graph)
        f[graph.env == 1] = float("nan")
        return f


def test_bad_force_raises_or_falls_back():
    s = _scene()
    m = s.model
    with pytest.raises(SurrogateStepError) as e:
        step(m, [s.make_data(), s.make_data()], Stepper(s, _BadModel(s)))
    assert e.value.env == 1 and e.value.step == 0 and e.value.body == "world"
    assert "env 1" in str(e.value) and "not finite" in str(e.value)
    st = Stepper(s, _BadModel(s), on_bad_force="fallback")
    ds = [s.make_data(), s.make_data()]
    with pytest.warns(SurrogateWarning, match="falling back"):
        step(m, ds, st, nstep=20)
    assert st.stats()["fallbacks"] == 20 and st.stats()["fallback_envs"] == {1: 20}
    set_contact_mode(m, s, "analytic")
    ref = s.make_data()
    for _ in range(20):
        mujoco.mj_step(m, ref)
    np.testing.assert_allclose(ds[1].qpos, ref.qpos, atol=1e-9)  # env 1 ran analytic contact
    np.testing.assert_allclose(ds[0].qpos, ref.qpos, atol=1e-5)  # env 0: MuJoCo's forces, oracle tolerance


def test_exploding_force_limit_and_options():
    s = _scene()

    class Huge:
        def __call__(self, graph):
            return torch.full((graph.edge_index.shape[1], 3), 1e4)

    with pytest.raises(SurrogateStepError, match="above the limit"):
        step(s.model, s.make_data(), Stepper(s, Huge(), max_force=100.0))
    with pytest.raises(ConfigError):
        Stepper(s, contact="surrogate")
    with pytest.raises(ConfigError):
        Stepper(s, ZeroContact(), on_bad_force="ignore")
    with pytest.raises(ConfigError):
        step(s.model, s.make_data(), Stepper(s, ZeroContact()), nstep=0)
    other = build_scene(make_object("box", 0), hand="three_finger")
    with pytest.raises(ConfigError):
        step(other.model, other.make_data(), Stepper(s, ZeroContact()))
    # as many bodies, geoms and pairs, another object: refused (its size is the law's length unit), not stepped
    a, b = (build_scene(make_object("box", k), hand="none", setting="ground") for k in (0, 5))
    assert (a.model.nbody, a.model.ngeom, a.model.npair) == (b.model.nbody, b.model.ngeom, b.model.npair)
    with pytest.raises(ConfigError, match="another scene than the stepper's: its object's geoms differ"):
        step(b.model, b.make_data(), Stepper(a, ZeroContact()))
    heavier = a.spec.compile()  # another model of the same scene, another mass: stepped
    heavier.body_mass[a.object_body_id] *= 2
    step(heavier, mujoco.MjData(heavier), Stepper(a, ZeroContact()))


def test_out_of_range_inputs_counted_and_warned_once():
    from surrogate.model.checkpoint import load_checkpoint

    net, _ = load_checkpoint("checkpoints/cube_tosses")  # trained on a cube on the ground: pads are new to it
    s = _scene()
    allow = {"untrained_groups": "allow"}  # its pad law is an unfitted prior: refused unless allowed (test_contact_scope)
    assert Stepper(s, net, **allow).check_inputs is net.corrections  # default: checked only where a network reads inputs
    st = Stepper(s, net, on_bad_force="fallback", check_inputs=True, **allow)
    ds = [s.make_data(), s.make_data()]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        _run(s, st, 500, datas=ds)
    assert sum(issubclass(x.category, SurrogateWarning) and "training range" in str(x.message) for x in w) == 1
    stats = st.stats()
    assert stats["ood_edges"] > 0 and stats["ood_env_steps"] > 0
    assert any(k.startswith("edge:") for k in stats["ood_features"])
    assert stats["network_calls"] == 500 and stats["env_steps"] == 1000


# -- Gymnasium environments -----------------------------------------------------------------
def test_envs_registered_and_pass_check_env():
    from gymnasium.utils.env_checker import check_env

    import surrogate.envs  # noqa: F401  (registers)

    for env_id, kw in (("ContactSurrogate/GripperGrasp-v0", {}),
                       ("ContactSurrogate/HandGrasp-v0", {"object": "cylinder", "object_seed": 1}),
                       ("ContactSurrogate/GripperGrasp-v0", {"contact": "surrogate", "contact_model": _tiny()})):
        env = gym.make(env_id, **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # unbounded Box observation bounds
            check_env(env.unwrapped, skip_render_check=True)
        obs, info = env.reset(seed=3)
        assert env.observation_space.contains(obs) and set(info) >= {"rise", "lifted"}
        env.close()
    env = gym.make("ContactSurrogate/GripperGrasp-v0", split="heldout", split_index=0)
    assert env.spec.max_episode_steps == 150
    # learned contact without a checkpoint is the released grasp model, as the README's recipe says
    env = gym.make("ContactSurrogate/GripperGrasp-v0", contact="surrogate")
    assert env.unwrapped.task.contact == "surrogate" and env.unwrapped.task.stepper.contact_model is not None
    env.close()


def test_vector_env_equals_single_envs():
    from surrogate.envs import GraspEnv, GraspVectorEnv

    venv = gym.make_vec("ContactSurrogate/GripperGrasp-v0", num_envs=3, vectorization_mode="vector_entry_point",
                        contact="surrogate", contact_model=_tiny())
    assert isinstance(venv.unwrapped, GraspVectorEnv)
    singles = [GraspEnv(contact="surrogate", contact_model=_tiny()) for _ in range(3)]
    obs, _ = venv.reset(seed=10)
    sobs = np.stack([e.reset(seed=10 + i)[0] for i, e in enumerate(singles)])
    np.testing.assert_array_equal(obs, sobs)
    rng = np.random.default_rng(0)
    before = venv.unwrapped.task.stepper.stats()
    for _ in range(4):
        a = rng.uniform(-1, 1, size=(3, 6)).astype(np.float32)
        obs, rew, term, trunc, _ = venv.step(a)
        out = [e.step(a[i]) for i, e in enumerate(singles)]
        np.testing.assert_allclose(obs, np.stack([o[0] for o in out]), atol=1e-5)
        np.testing.assert_allclose(rew, [o[1] for o in out], atol=1e-6)
    # at most one network call per physics step for all copies (none on a step without contacts:
    # the untrained model can toss the box off the table): 4 actions x 10 physics steps
    after = venv.unwrapped.task.stepper.stats()
    assert after["physics_steps"] - before["physics_steps"] == 40
    assert 0 < after["network_calls"] - before["network_calls"] <= 40


def test_pad_sensors_include_surrogate_wrench():
    """With MuJoCo's own forces as the contact model, the pad F/T observation matches analytic contact."""
    from surrogate.envs import GraspTask
    from surrogate.policies import ScriptedGraspPolicy

    obj = make_object("box", 0)
    ta = GraspTask(1, obj=obj, contact="analytic", randomize=False)
    ts = GraspTask(1, obj=obj, contact="surrogate", randomize=False, contact_model=ZeroContact())
    ts.stepper.contact_model = MuJoCoContact(ts.scene)
    for t in (ta, ts):
        t.reset_one(0, np.random.default_rng(0))
    pa, ps = ScriptedGraspPolicy(ta), ScriptedGraspPolicy(ts)
    pa.reset(), ps.reset()
    J = len(ta.qadr)
    for k in range(50):  # 1 s: approach and close
        for t, p in ((ta, pa), (ts, ps)):
            t.apply_action(p(k * t.control_dt))
            t.simulate()
    oa, os_ = ta.observe()[0], ts.observe()[0]
    ft = slice(2 * J + 13, 2 * J + 13 + 12)
    assert np.abs(oa[ft]).max() > 1.0  # the pads squeeze the box
    np.testing.assert_allclose(os_[ft], oa[ft], atol=1e-3 * np.abs(oa[ft]).max())


def test_render_rgb_array():
    import surrogate.envs  # noqa: F401  (registers the environments)

    env = gym.make("ContactSurrogate/GripperGrasp-v0", render_mode="rgb_array", width=64, height=48)
    env.reset(seed=0)
    img = env.render()
    assert img.shape == (48, 64, 3) and img.dtype == np.uint8 and img.std() > 0


# -- policies, soak, speed ----------------------------------------------------------------------
def test_scripted_policy_lifts_and_cem_runs():
    from surrogate.envs import GraspVectorEnv
    from surrogate.policies import GraspParams, ScriptedGraspPolicy, cem_grasp, rollout

    venv = GraspVectorEnv(2, hand="parallel_jaw", object="box", copies=False)
    res = rollout(venv, ScriptedGraspPolicy(venv.task, GraspParams()), seed=0, duration=2.0)
    assert res["success"].all() and not res["slipped"].any()
    out = cem_grasp(GraspVectorEnv(3, object="box", copies=False), iterations=1, elites=2, duration=1.0)
    assert np.isfinite(out["best_return"]) and len(out["history"]) == 1


def test_soak_tiny_model():
    from surrogate.bench.soak import soak

    obj = load_split("heldout")[0]
    rep = soak(None, [obj], steps=40, n_envs=2, contact_model=_tiny())
    row = rep["objects"][0] if rep["objects"] else None
    assert rep["steps"] == 40 and (row is not None or rep["skipped"])
    if row is not None:
        assert row["finite"] and rep["ok"], rep


def test_speed_measure_runs():
    from surrogate.bench.speed import format_table, measure

    rows = measure(_tiny(), batches=(1, 4), steps=2, min_seconds=0.0)
    assert [r["batch"] for r in rows] == [1, 4]
    assert all(r["analytic_sps"] > 0 and r["hybrid_sps"] > 0 and "network" in r["phases_ms"] for r in rows)
    assert "hybrid / analytic" in format_table(rows)
