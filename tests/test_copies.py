"""B copies of a scene in one MjModel (sim/copies_model.py, sim/copies.py): the same contacts and trajectories as
B separate MjData, the stepper's oracles on the copies path, its fallback and resets."""

from __future__ import annotations

import warnings

import mujoco
import numpy as np
import pytest
import torch

from surrogate.errors import ConfigError
from surrogate.model.checkpoint import load_checkpoint
from surrogate.model.contact_law import ContactLawGNN
from surrogate.objects import make_object
from surrogate.paths import release_checkpoint
from surrogate.scenes import build_scene, hand_ctrl, set_contact_mode, set_grip_force
from surrogate.sim import MuJoCoContact, Stepper, SurrogateWarning, ZeroContact, step
from surrogate.sim.copies import Copies
from surrogate.sim.copies_model import ModelEditedError, copies_model, dynamic_geom_pairs

from .test_stepper import _BadModel  # NaN forces for environment 1, MuJoCo's elsewhere

torch.set_num_threads(1)


def _scene(hand="parallel_jaw", family="box"):
    return build_scene(make_object(family, 0), hand=hand, setting="table")


def _ctrl(scene, k, *, push=0.0):
    """Close-and-lift of the hand; ``push`` (m) drives the hand that far below the grasp height (onto the table)."""
    t = k * scene.model.opt.timestep
    z = scene.meta["grasp_base_z"] * min(t / 0.4, 1) + 0.08 * min(max((t - 0.8) / 0.4, 0), 1) - push * min(t / 0.6, 1)
    return hand_ctrl(scene.hand, base=(0, 0, z, 0), grip=min(max((t - 0.4) / 0.3, 0), 1))


def _run_pair(scene, stepper_a, stepper_b, n, pushes, *, contact=None):
    """The same scripted runs on B separate MjData (stepper_a) and on B copies (stepper_b): trajectories
    [n, B, nq + nv] of both."""
    m = scene.model
    ds = [scene.make_data() for _ in pushes]
    cp = Copies(scene, len(pushes))
    out = np.zeros((2, n, len(pushes), m.nq + m.nv))
    for k in range(n):
        for i, p in enumerate(pushes):
            ds[i].ctrl[scene.hand_actuator_ids] = cp.ctrl[i, scene.hand_actuator_ids] = _ctrl(scene, k, push=p)
        if stepper_a is None:
            for d in ds:
                mujoco.mj_step(m, d)
        else:
            step(m, ds, stepper_a, contact=contact)
        step(cp.model, cp, stepper_b, contact=contact)
        out[0, k] = [np.concatenate([d.qpos, d.qvel]) for d in ds]
        out[1, k] = np.concatenate([cp.qpos, cp.qvel], axis=1)
    return out


@pytest.mark.parametrize("hand", ["parallel_jaw", "three_finger"])
def test_copies_have_the_scenes_contacts_and_analytic_trajectories(hand):
    """Dynamic collisions (hand on the table, fingers on each other) become explicit pairs per copy with MuJoCo's
    mixed parameters: from states with such contacts, every copy has exactly its MjData's contacts, and analytic
    stepping gives the same trajectories."""
    s = _scene(hand)
    assert len(dynamic_geom_pairs(s.model)) > 0
    pushes = (0.0, 0.03, 0.2)  # 0.2 m below the grasp height the hand presses on the table
    st = Stepper(s, contact="analytic")
    traj = _run_pair(s, st, Stepper(s, contact="analytic"), 500, pushes)
    np.testing.assert_allclose(traj[1], traj[0], rtol=0, atol=1e-10)
    # contacts, one copy at a time, at t = 0.7 s (the hand fully pushed down, before the lift)
    m = s.model
    cp = Copies(s, len(pushes))
    ds = []
    for i in range(len(pushes)):
        d = s.make_data()
        d.qpos[:], d.qvel[:] = traj[0, 350, i, :m.nq], traj[0, 350, i, m.nq:]
        mujoco.mj_forward(m, d)
        ds.append(d)
        cp.set_state(i, d, forward=False)
    mujoco.mj_forward(cp.model, cp.data)
    ncon, geom, dpf = cp.views.stacked_contacts()
    assert list(ncon) == [d.ncon for d in ds]
    table = {s.model.geom("table").id, s.model.geom("ground").id}
    hand_on_table = [d for d in ds if any(set(g) & table and s.object_body_id not in m.geom_bodyid[g]
                                           for g in d.contact.geom)]
    assert hand_on_table, "no state with the hand on the table: the test would not test dynamic pairs"
    start = np.cumsum(ncon) - ncon
    for i, d in enumerate(ds):
        rows = slice(start[i], start[i] + ncon[i])
        assert np.array_equal(geom[rows], d.contact.geom)
        assert np.array_equal(dpf[rows, 0], d.contact.dist) and np.array_equal(dpf[rows, 1:4], d.contact.pos)
        assert np.array_equal(dpf[rows, 4:], d.contact.frame)


_MIXING_XML = """
<mujoco><option timestep="0.002"/>
<worldbody>
 <geom name="floor" type="plane" size="2 2 .1" priority="1" friction="0.3 0.01 0.001" solref="0.01 1" condim="4"/>
 <geom name="wall" type="box" pos="0 0 -0.05" size=".5 .5 .05" contype="2" conaffinity="2" solmix="0" margin="0.01"/>
 <body name="a" pos="0 0 0.05"><freejoint/>
   <geom name="ga" type="box" size=".05 .05 .05" solmix="3" solref="-1000 -10" solimp="0.8 0.9 0.01 0.5 2"
         margin="0.02" gap="0.005" condim="6" contype="3"/>
   <body name="a2" pos="0 0 0.12"><joint type="hinge" axis="1 0 0"/>
     <geom name="ga2" type="sphere" size=".05" solmix="0.5" friction="2 0.1 0.1"/>
   </body>
 </body>
 <body name="b" pos="0.09 0 0.05"><freejoint/>
   <geom name="gb" type="box" size=".05 .05 .05" solmix="0" solref="0.03 0.5" gap="0.01"/>
   <geom name="gb2" type="sphere" pos="0 0 .08" size=".04" priority="2" solref="-500 -5" condim="1"/>
 </body>
 <body name="c" pos="-0.09 0 0.05"><freejoint/>
   <geom name="gc" type="box" size=".05 .05 .05" solmix="0"/>
 </body>
</worldbody>
<contact><exclude body1="a" body2="c"/><pair geom1="gb" geom2="floor" margin="0.003"/></contact>
</mujoco>"""


def test_copies_give_every_contact_mujocos_own_parameters():
    """Every mixing case of MuJoCo's dynamic collision (priority, solmix 0 on one or both sides, direct solref,
    condim, margins and gaps on both geoms, bitmasks, a parent-child weld, an excluded body pair, an explicit pair
    beside a dynamic one) becomes per-copy pairs whose contacts have exactly the parameters of the model's own."""
    from types import SimpleNamespace

    spec = mujoco.MjSpec.from_string(_MIXING_XML)
    m = spec.compile()
    pairs = {(m.geom(a).name, m.geom(b).name) for a, b in dynamic_geom_pairs(m)}
    assert ("ga", "ga2") not in pairs and ("ga", "gc") not in pairs  # parent-child weld; excluded body pair
    assert ("floor", "gb") not in pairs and ("floor", "gb2") in pairs  # explicit pair; its body's other geom
    big, lay = copies_model(SimpleNamespace(model=m, spec=spec), 2)
    d, D = mujoco.MjData(m), mujoco.MjData(big)
    mujoco.mj_forward(m, d)
    D.qpos[:] = np.tile(d.qpos, 2)
    mujoco.mj_forward(big, D)
    assert D.ncon == 2 * d.ncon and d.ncon >= 6
    fields = ("dist", "pos", "frame", "solref", "solreffriction", "solimp", "friction", "mu", "dim", "includemargin")
    for copy in range(2):
        ref = {}  # the model's contacts of each geom pair, in order (a box pair has several)
        for i in range(d.ncon):
            ref.setdefault(tuple(sorted(d.contact.geom[i])), []).append(i)
        for j in np.flatnonzero(lay.geom_copy[D.contact.geom[:, 0]] == copy):
            i = ref[tuple(sorted(lay.geom_local[D.contact.geom[j]]))].pop(0)
            for f in fields:
                np.testing.assert_allclose(getattr(D.contact, f)[j], getattr(d.contact, f)[i], rtol=0, atol=1e-12,
                                           err_msg=f"{f} of {m.geom(int(d.contact.geom[i, 0])).name}-"
                                                   f"{m.geom(int(d.contact.geom[i, 1])).name}")
        assert not any(ref.values())
    assert {float(x) for x in d.contact.includemargin} > {0.0}  # margins and gaps were in play


def test_copies_hybrid_equals_separate_batch():
    """The released law, MuJoCo's own forces and a law with random corrections step the copies as they step separate
    MjData."""
    s = _scene()
    torch.manual_seed(0)
    si = dict(damping=5.0, slip_eps=1e-3, units="si")
    net = ContactLawGNN(prior=dict(si, stiffness=1e6, friction=0.8), prior_body=dict(si, stiffness=1e5, friction=1.0),
                        hidden=16, steps=2, mlp_layers=2)
    with torch.no_grad():
        for p in net.correction_parameters():
            p.copy_(0.3 * torch.randn(p.shape))
    net.eval()
    law = load_checkpoint(release_checkpoint("rig_default"))[0]
    for model, atol in ((law, 0.0), (MuJoCoContact(s), 0.0), (net, 1e-12)):
        other = MuJoCoContact(s) if isinstance(model, MuJoCoContact) else model
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SurrogateWarning)  # the tiny net's inputs are out of range
            traj = _run_pair(s, Stepper(s, model, on_bad_force="fallback"), Stepper(s, other, on_bad_force="fallback"),
                             300, (0.0, 0.0, 0.02))
        assert np.isfinite(traj).all()
        np.testing.assert_allclose(traj[1], traj[0], rtol=0, atol=atol + 1e-15)


def test_copies_oracles():
    """Oracle (a) on the copies: no force == MuJoCo with the owned pairs excluded, exactly; oracle (b): MuJoCo's own
    forces through qfrc_applied == mj_step at solver tolerance 0 (tests/test_stepper.py explains the tolerance)."""
    s = _scene()
    m = s.model
    traj = _run_pair(s, Stepper(s, ZeroContact()), Stepper(s, ZeroContact()), 300, (0.0, 0.01))
    assert np.array_equal(traj[1], traj[0])
    # excluded pairs, stepped as plain copies with the owned pairs external: the same as the zero model's
    cp = Copies(s, 2)
    cp.set_mode("external")
    for k in range(300):
        cp.ctrl[:, s.hand_actuator_ids] = _ctrl(s, k)
        mujoco.mj_step(cp.model, cp.data)
    assert np.array_equal(np.concatenate([cp.qpos, cp.qvel], axis=1)[0], traj[1, -1, 0])
    assert traj[1, -1, 0, s.object_qpos_adr + 2] < s.meta["object_rest_pos"][2] - 0.01  # it really fell through
    m.opt.tolerance = 0.0
    try:
        hyb = _run_pair(s, Stepper(s, contact="analytic"), Stepper(s, MuJoCoContact(s)), 650, (0.0,))
    finally:
        m.opt.tolerance = 1e-8
    qa = s.object_qpos_adr
    np.testing.assert_allclose(hyb[1, :, 0, qa:qa + 7], hyb[0, :, 0, qa:qa + 7], rtol=0, atol=1e-12)
    assert hyb[0, -1, 0, qa + 2] - hyb[0, 0, 0, qa + 2] > 0.05  # the box was lifted


def test_copies_batched_equals_single_and_deterministic():
    s = _scene()
    law = load_checkpoint(release_checkpoint("rig_default"))[0]

    def run(pushes):
        cp = Copies(s, len(pushes))
        st = Stepper(s, law)
        for k in range(200):
            for i, p in enumerate(pushes):
                cp.ctrl[i, s.hand_actuator_ids] = _ctrl(s, k, push=p)
            step(cp.model, cp, st)
        return np.concatenate([cp.qpos, cp.qvel], axis=1)

    batch = run((0.0, 0.01, 0.02))
    assert np.array_equal(batch, run((0.0, 0.01, 0.02)))
    singles = np.concatenate([run((p,)) for p in (0.0, 0.01, 0.02)])
    np.testing.assert_allclose(batch, singles, rtol=0, atol=1e-12)


def test_copies_fallback_and_reset_one_copy():
    """A bad force in copy 1 makes only copy 1 take analytic contact (as for separate MjData); a bad state in one
    copy resets only that copy (MuJoCo's own reset of the one MjData would reset all) and is counted."""
    s = _scene()
    m = s.model
    st = Stepper(s, _BadModel(s), on_bad_force="fallback")
    cp = Copies(s, 3)
    with pytest.warns(SurrogateWarning, match="falling back"):
        step(cp.model, cp, st, nstep=20)
    assert st.stats()["fallbacks"] == 20 and st.stats()["fallback_envs"] == {1: 20}
    set_contact_mode(m, s, "analytic")
    ref = s.make_data()
    for _ in range(20):
        mujoco.mj_step(m, ref)
    np.testing.assert_allclose(cp.qpos[1], ref.qpos, rtol=0, atol=1e-12)  # copy 1 ran analytic contact
    np.testing.assert_allclose(cp.qpos[0], ref.qpos, rtol=0, atol=1e-5)  # copy 0: MuJoCo's forces (oracle tolerance)
    # a bad state in copy 2: reset and stepped on as MuJoCo resets a separate MjData at the start of its step
    law = load_checkpoint(release_checkpoint("rig_default"))[0]
    st = Stepper(s, law)
    before = cp.qpos.copy()
    cp.qvel[2, 0] = np.nan
    sep = s.make_data()
    sep.qvel[0] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SurrogateWarning)
        step(m, sep, Stepper(s, law))
    with pytest.warns(SurrogateWarning, match="env 2 reached a bad state"):
        step(cp.model, cp, st)
    assert st.stats()["mujoco_resets"] == 1 and st.stats()["mujoco_reset_envs"] == {2: 1}
    np.testing.assert_allclose(cp.qpos[2], sep.qpos, rtol=0, atol=1e-12)
    assert cp.time[2] == sep.time and cp.time[0] > cp.time[2] and np.isfinite(cp.qpos).all()
    assert not np.array_equal(cp.qpos[0], before[0])  # the others stepped on


def test_copies_state_round_trip_and_errors():
    s = _scene()
    cp = Copies(s, 2)
    d = s.make_data(drop_height=0.01)
    d.time = 0.5
    cp.set_state(1, d)
    back = cp.get_data(1)
    assert np.array_equal(back.qpos, d.qpos) and back.time == 0.5 and cp.time[0] == 0.0
    assert np.array_equal(back.xpos, d.xpos)
    st = Stepper(s, load_checkpoint(release_checkpoint("rig_default"))[0])
    with pytest.raises(ConfigError, match="own model"):
        step(s.model, cp, st)
    other = _scene(family="cylinder")  # the same numbers of bodies and geoms, another object
    with pytest.raises(ConfigError, match="another scene"):
        step(cp.model, cp, Stepper(other, contact="analytic"))
    step(s.model, [s.make_data()], st)  # the stepper that stepped copies steps MjData afterwards
    with pytest.raises(ConfigError, match="copies must be"):
        copies_model(s, 0)
    s.model.pair_friction[:, 0] *= 0.5  # pair parameters edited in place (as identification does) are copied
    edited = Copies(s, 2)
    assert np.array_equal(edited.model.pair_friction[edited.layout.pair], np.stack([s.model.pair_friction] * 2))
    s.model.body_mass[s.object_body_id] *= 2  # edited after compiling: the copies would step something else
    with pytest.raises(ModelEditedError, match="body_mass"):
        Copies(s, 2)
    # any physics value, not a list of a few: the grip's force bound (set_grip_force) had reached no copy
    g = _scene()
    set_grip_force(g.model, g.hand, 0.3)
    with pytest.raises(ModelEditedError, match="actuator_forcerange"):
        Copies(g, 2)
    f = _scene()  # an array whose name ends in "id" like the ids (geom_fluid): it had been left out of the check
    f.model.geom_fluid[f.model.body_geomadr[f.object_body_id], :5] = [1.0, 0.5, 0.5, 0.5, 1.0]
    with pytest.raises(ModelEditedError, match="geom_fluid"):
        Copies(f, 2)
    o = _scene()
    o.model.opt.gravity[2] = -3.0  # the options are copied at build time, as the pairs are
    assert Copies(o, 2).model.opt.gravity[2] == -3.0


def test_rollout_of_many_members_steps_copies_like_single_members():
    """``sim.rollout``'s stepper backend steps B > 1 members as copies: the same trajectories as each member alone
    (one ``MjData``), for tosses of the released cube law and for hand replays with controls."""
    from surrogate.sim.rollout import object_states, rollout

    cube = build_scene(make_object("box", 0), hand="none", setting="ground")
    law = load_checkpoint(release_checkpoint("cube_tosses"))[0]
    rest = cube.model.qpos0[cube.object_qpos_adr:cube.object_qpos_adr + 7]
    qpos = np.tile(rest, (3, 1))
    qpos[:, 2] += [0.05, 0.1, 0.2]
    qvel = np.array([[0.3, 0.0, 0.0, 0.0, 2.0, 0.0], [0.0, 0.5, 1.0, 3.0, 0.0, 0.0], [0.1, 0.1, 0.0, 0.0, 0.0, 5.0]])
    x0 = object_states(cube, qpos, qvel)
    many = rollout(cube, x0, contact=law, substeps=4, frames=60)
    ones = np.concatenate([rollout(cube, x0[b:b + 1], contact=law, substeps=4, frames=60).state for b in range(3)])
    assert many.stats["env_steps"] == 3 * 59 * 4
    np.testing.assert_allclose(many.state, ones, rtol=0, atol=1e-12)
    assert np.ptp(many.qpos[:, :, cube.object_qpos_adr + 2], axis=1).min() > 0.04  # they fell and bounced
    s = _scene()
    ctrl = np.array([[_ctrl(s, k, push=p) for k in range(400)] for p in (0.0, 0.02)])
    full = np.zeros((2, 400, s.model.nu))
    full[:, :, s.hand_actuator_ids] = ctrl
    x0 = object_states(s, np.tile(s.model.qpos0[s.object_qpos_adr:s.object_qpos_adr + 7], (2, 1)), np.zeros((2, 6)))
    x0[:, 1:1 + s.model.nq] = s.make_data().qpos
    hand_law = load_checkpoint(release_checkpoint("rig_default"))[0]
    many = rollout(s, x0, full, contact=hand_law, substeps=4)
    ones = np.concatenate([rollout(s, x0[b:b + 1], full[b:b + 1], contact=hand_law, substeps=4).state for b in range(2)])
    np.testing.assert_allclose(many.state, ones, rtol=0, atol=1e-12)
    # a model edited in place (the replays' recorded grip force) steps as separate MjData, which see the edit: a
    # batch of two was stepped with the old force bound by copies compiled from the spec
    set_grip_force(s.model, s.hand, 0.05)
    weak = rollout(s, x0, full, contact=hand_law, substeps=4)
    ones = np.concatenate([rollout(s, x0[b:b + 1], full[b:b + 1], contact=hand_law, substeps=4).state
                           for b in range(2)])
    assert np.array_equal(weak.state, ones) and not np.allclose(weak.state, many.state)
