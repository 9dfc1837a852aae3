"""Contact model v3: the law's presliding spring and the per-contact history the stepper and the twin carry.

Property tests run with saturated random corrections *and* arbitrary stored state (random displacements, stiffnesses,
ages and forces written into the history): what keeps a rollout passive must be the structure, not the state."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from surrogate.model.contact_law import ContactLawGNN
from surrogate.model.history import ContactHistory, ContactKeys, ContactState, match
from surrogate.model.joint_solve import solve_free_object
from surrogate.model.law import friction_coefficient, point_law
from surrogate.model.presliding import presliding_end, with_presliding
from surrogate.objects import make_object
from surrogate.scenes import build_scene
from surrogate.sim import Stepper, step
from surrogate.sim.law_solve import solve_law
from surrogate.sim.twin import Twin

from .test_contact_law import (
    CUBE,
    PAD,
    TABLE,
    _cube_scene,
    _energy,
    _free_data,
    _perturbed,
    stepper_toss,
)

torch.set_num_threads(1)
SPRING_CUBE = dict(CUBE, presliding_stiffness=300.0)  # m|g|/L: ~0.1 mm of presliding at mu m|g| for the cube
SPRING_TABLE = dict(TABLE, presliding_stiffness=3e4)  # N/m
SPRING_PAD = dict(PAD, presliding_stiffness=1e4)


def _spring_energy(history: ContactHistory) -> float:
    """The energy the stored state holds, 1/2 k_last |z|^2 (J): what the next step may return, and no more."""
    return 0.5 * float((history.k_last * (history.z * history.z).sum(-1)).sum()) if len(history) else 0.0


def _inject(history: ContactHistory, rng, scale: float, k_ref: float) -> None:
    """Arbitrary state for every stored contact: displacements of ``scale`` (m), stiffnesses 10x either side of
    ``k_ref`` (N/m)."""
    P = len(history)
    history.z = rng.normal(0, scale, (P, 3))
    history.k_last = k_ref * np.exp(rng.uniform(-2.3, 2.3, P))
    history.age, history.fn_last = rng.uniform(0, 5, P), rng.uniform(0, 100, P)


# -- the law term ---------------------------------------------------------------------------------
def test_presliding_state_is_tangential_inside_the_cone_and_zero_at_separation():
    rng = np.random.default_rng(0)
    E = 2000
    n = rng.normal(size=(E, 3))
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    depth = rng.uniform(-1e-3, 1e-3, E)
    vn, speed = rng.normal(0, 0.3, E), np.abs(rng.normal(0, 0.3, E))
    mu = np.stack([np.full(E, 0.5), np.full(E, 2.0), np.full(E, 0.05)], -1)  # static/kinetic
    f0, a, b, fn = point_law(depth, vn, speed, k=1e5, p=1.5, c=5.0, mu=mu, eps=1e-3, dt=1e-3)
    z_stored, kz, k_last = rng.normal(0, 1e-2, (E, 3)), np.exp(rng.uniform(5, 12, E)), np.exp(rng.uniform(5, 12, E))
    w0, a2, b2, a_z, z = with_presliding(f0, a, b, n, fn, mu, speed ** 2, kz, z_stored, k_last, 1e-3)
    sep = fn <= 0
    assert sep.sum() > 500 and (~sep).sum() > 500
    assert (w0[sep] == 0).all() and (a2[sep] == a[sep]).all() and (b2[sep] == b[sep]).all() and (z[sep] == 0).all()
    np.testing.assert_allclose((z * n).sum(-1), 0, atol=1e-15)  # tangential
    cone = friction_coefficient(mu, speed ** 2) * fn
    assert (kz * np.linalg.norm(z, axis=1) <= cone * (1 + 1e-12)).all()
    assert (kz * (z * z).sum(-1) <= k_last * (z_stored * z_stored).sum(-1) * (1 + 1e-12)).all()  # no energy made
    np.testing.assert_allclose(a2 + b2, a + b, rtol=1e-12)  # the normal damping is unchanged
    assert (a2 >= a).all()
    # the torch path is the same implementation
    T = torch.from_numpy
    t = with_presliding(T(f0), T(a), T(b), T(n), T(fn), T(mu), T(speed ** 2), T(kz), T(z_stored), T(k_last), 1e-3)
    for x, y in zip((w0, a2, b2, a_z, z), t):
        np.testing.assert_allclose(x, y.numpy(), rtol=1e-12, atol=1e-300)
    # after the step: inside the cone of the solved normal force, zero where it vanished
    u = rng.normal(0, 0.1, (E, 3))
    fn_end = rng.uniform(-1, 5, E)
    z_end = presliding_end(z, u, n, kz, mu, fn_end, 1e-3)
    ut = u - (u * n).sum(-1, keepdims=True) * n
    cone_end = friction_coefficient(mu, (ut * ut).sum(-1)) * np.maximum(fn_end, 0)
    assert (kz * np.linalg.norm(z_end, axis=1) <= cone_end * (1 + 1e-12)).all() and (z_end[fn_end <= 0] == 0).all()


def test_presliding_spring_never_reverses_slip_from_rest():
    """A sliding point with no stored displacement and a very stiff spring: the spring's backward-Euler term is a
    damping, the slip ends slower, never reversed (twin's and stepper's solves, friction iterated)."""
    dt, m = 1e-3, 0.1
    n = np.array([[0.0, 0.0, 1.0]])
    for slip in (1e-4, 1e-2, 1.0):
        f0, a, b, fn = point_law(np.array([1e-4]), np.array([0.0]), np.array([slip]), k=1e6, p=1.5, c=5.0, mu=2.0,
                                 eps=1e-6, dt=dt)
        w0, a, b, a_z, _ = with_presliding(f0, a, b, n, fn, 2.0, slip ** 2, np.array([1e9]), np.zeros((1, 3)), None, dt)
        F, v1 = solve_law(w0, a, b, n, np.eye(3)[None], np.array([1]), m * np.eye(3)[None],
                          np.array([[slip, 0.0, 0.0]]), dt, mu=np.array([2.0]), eps=np.array([1e-6]), iterations=2,
                          a_spring=a_z)
        assert 0.0 <= v1[0, 0] <= slip and F[0, 0] * v1[0, 0] <= 0.0
        def T(x):
            return torch.tensor(np.asarray(x, dtype=np.float64))
        _, xi = solve_free_object(T(w0), T(a), T(b), T(n), T(np.zeros((1, 3))), T(np.zeros((1, 3))),
                                  torch.zeros(1, dtype=torch.long), vel=T([[slip, 0, 0]]), omega=T(np.zeros((1, 3))),
                                  mass=T([m]), inertia_w=T(np.eye(3)[None] * 1e-5), gravity=T([[0, 0, 0]]), dt=dt,
                                  num_envs=1, mu=T([2.0]), eps=T([1e-6]), iterations=2, a_spring=T(a_z))
        assert 0.0 <= float(xi[0, 0]) <= slip
        assert float(xi[0, 0]) == pytest.approx(v1[0, 0], rel=1e-9, abs=1e-15)


def test_spring_off_is_the_law_without_it():
    """A prior without ``presliding_stiffness`` builds no spring parameter, no history and the same card fields."""
    model = ContactLawGNN(prior=CUBE, corrections=True)
    assert not model.presliding and not hasattr(model, "log_presliding") and "history" not in model.hparams
    assert "presliding_stiffness" not in model.hparams["prior"]
    assert not ContactLawGNN(prior=SPRING_CUBE, corrections=False, history=True).history  # no network: the law
    with pytest.raises(ValueError, match="presliding_stiffness"):
        ContactLawGNN(prior=dict(CUBE, presliding_stiffness=-1.0))
    spring = ContactLawGNN(prior=SPRING_CUBE, prior_body=CUBE)
    assert spring.prior("surface").presliding_stiffness == pytest.approx(300.0)
    assert spring.prior("body").presliding_stiffness == 0.0  # a group without a spring keeps none


# -- the history ----------------------------------------------------------------------------------
def test_matching_is_one_to_one_within_the_tolerance_and_the_same_pair():
    prev_env, prev_pair = np.array([0, 0, 0, 1]), np.array([7, 7, 8, 7])
    prev_pt = np.array([[0, 0, 0], [1, 0, 0], [0, 0, 0], [0, 0, 0]], dtype=float)
    env, pair = np.array([0, 0, 0, 0, 1]), np.array([7, 7, 7, 8, 9])
    pt = np.array([[0.05, 0, 0], [0.02, 0, 0], [0.9, 0, 0], [0.01, 0, 0], [0, 0, 0]], dtype=float)
    idx = match(prev_env, prev_pair, prev_pt, env, pair, pt, np.full(5, 0.2))
    # two new contacts near previous 0: the closer one continues it, the other starts fresh; env 1's pair 9 is new
    assert idx.tolist() == [-1, 0, 1, 2, -1]
    assert match(prev_env, prev_pair, prev_pt, env, pair, pt, np.full(5, 0.001)).tolist() == [-1, -1, -1, -1, -1]
    # the state follows the other body's frame: a rotated frame gives the rotated displacement
    h = ContactHistory()
    R = np.array([[0.0, -1, 0], [1, 0, 0], [0, 0, 1]])
    keys = ContactKeys(np.array([0]), np.array([7]), np.zeros((1, 3)), R[None], np.array([0.1]))
    h.store(keys, ContactState(np.array([[1.0, 0, 0]]), np.array([0.5]), np.array([2.0]), np.array([3.0])))
    st = h.lookup(ContactKeys(np.array([0]), np.array([7]), np.full((1, 3), 0.01), np.eye(3)[None], np.array([0.1])))
    np.testing.assert_allclose(st.z, [[0.0, -1.0, 0.0]], atol=1e-15)  # R^T z stored, read back in a frame at rest
    assert (st.age, st.fn_last, st.k_last) == (0.5, 2.0, 3.0)
    h.reset([0])
    assert len(h) == 0


# -- closed loop: passivity with arbitrary state --------------------------------------------------
@pytest.mark.parametrize("seed, iterations, history", [(0, 0, False), (1, 1, False), (2, 1, True)])
def test_dropped_cube_with_the_spring_never_gains_energy(seed, iterations, history):
    """A spinning cube dropped on the ground with saturated corrections; every 20 steps in contact the history gets
    arbitrary state: displacements 10x outside the cone stored with stiffnesses far below the law's (small energy,
    large displacement: a step that used them without ``presliding_start``'s energy rule would explode). Kinetic +
    potential + stored spring energy never exceeds the start plus the energy the injections added (1e-4 of the
    start: the step's integration error; the normal springs' energy, not counted, is >= 0), and impacts dissipate.
    With ``history`` the network also scales k_z from the (arbitrary) state it sees."""
    scene = _cube_scene()
    model = _perturbed(ContactLawGNN(prior=SPRING_CUBE, corrections=True, friction_iterations=iterations,
                                     history=history), seed=seed)
    stepper = Stepper(scene, model)
    rng = np.random.default_rng(seed)
    d = _free_data(scene, [0, 0, 0.0524 * 1.8 + 0.05], rng.normal(size=4), [0.4, -0.2, 0.0], rng.normal(0, 6, 3))
    e0 = _energy(scene, d)
    k_ref = 300.0 * 0.37 * 9.81 / 0.1048
    budget, worst, injections, touched = e0, -np.inf, 0, 0
    for _k in range(600):
        step(scene.model, d, stepper)
        e = _energy(scene, d) + _spring_energy(stepper.history)
        worst = max(worst, e - budget)
        if len(stepper.history):
            touched += 1
            if touched % 20 == 1:
                before = _spring_energy(stepper.history)
                _inject(stepper.history, rng, 1e-2, k_ref * 1e-4)
                budget += max(_spring_energy(stepper.history) - before, 0.0)
                injections += 1
    assert injections >= 5 and np.isfinite(e)
    assert budget - e0 < 0.1 * e0  # the injections added little energy
    assert worst <= 1e-4 * abs(e0)
    assert _energy(scene, d) < e0 - 0.1


def test_box_on_the_table_with_the_spring_rests_and_never_gains_energy():
    """A box placed on the table, saturated corrections, arbitrary state every 100 steps: the total energy never
    rises above its value after the last injection, and the box stays within 1 mm over 5 s."""
    scene = build_scene(make_object("box", 0), setting="table", timestep=0.002, contact_mode="external")
    model = _perturbed(ContactLawGNN(prior=SPRING_TABLE, prior_body=SPRING_PAD, corrections=True, friction_iterations=1))
    stepper = Stepper(scene, model)
    d = scene.make_data()
    qa = scene.object_qpos_adr
    step(scene.model, d, stepper, nstep=250)  # 0.5 s: settle onto the law's equilibrium
    p0 = d.qpos[qa:qa + 3].copy()
    rng = np.random.default_rng(3)
    ref, worst = None, -np.inf
    scale = abs(_energy(scene, d))
    for k in range(2500):
        if k % 100 == 0:
            assert len(stepper.history) >= 3
            _inject(stepper.history, rng, 1e-4, 3e4)
            ref = _energy(scene, d) + _spring_energy(stepper.history)
        step(scene.model, d, stepper)
        worst = max(worst, _energy(scene, d) + _spring_energy(stepper.history) - ref)
    assert worst <= 1e-6 * scale
    assert np.linalg.norm(d.qpos[qa:qa + 3] - p0) < 1e-3


# -- the same state in every path -----------------------------------------------------------------
@pytest.mark.parametrize("friction_iterations, corrections, history", [(0, True, False), (1, False, False),
                                                                         (1, True, True)])
def test_twin_matches_the_stepper_with_the_spring(friction_iterations, corrections, history, torch_network):
    """The twin carries the same history as the stepper: a spinning cube tossed onto the ground, impacts, slides and
    sticking, 1 s, the same trajectory to 1e-9 m (and the spring changes it: the same toss without it ends elsewhere)."""
    scene = _cube_scene()
    model = ContactLawGNN(prior=SPRING_CUBE, corrections=corrections, friction_iterations=friction_iterations,
                          history=history)
    model = _perturbed(model, scale=0.5) if corrections else model.eval()
    F = 148
    stepper, ref, s0 = stepper_toss(scene, model, F)
    assert len(stepper.history) > 0 and np.abs(stepper.history.z).max() > 1e-6  # the spring is loaded
    with torch.no_grad():
        pos, _ = Twin(scene).rollout(model, s0, F, substeps=4)
    np.testing.assert_allclose(pos.numpy(), ref, atol=1e-9)
    off = ContactLawGNN(prior=CUBE, corrections=corrections, friction_iterations=friction_iterations)
    off = _perturbed(off, scale=0.5) if corrections else off.eval()
    with torch.no_grad():
        pos_off, _ = Twin(scene).rollout(off, s0, F, substeps=4)
    assert np.abs(pos_off.numpy()[:, -1] - ref[:, -1]).max() > 1e-3


def test_copies_carry_the_history_of_separate_mjdata():
    """A gripper closing on a box and lifting it, with the spring on both pads and the table: B copies in one MjData
    step exactly as B separate MjData (the same contacts matched, the same state), and a reset forgets it."""
    from .test_copies import _ctrl, _run_pair, _scene

    s = _scene()
    model = ContactLawGNN(prior=SPRING_TABLE, prior_body=SPRING_PAD, corrections=False, friction_iterations=1).eval()
    a, b = Stepper(s, model), Stepper(s, model)
    traj = _run_pair(s, a, b, 400, (0.0, 0.0, 0.02))
    assert np.isfinite(traj).all() and len(a.history) > 4 and np.abs(a.history.z).max() > 0
    np.testing.assert_allclose(traj[1], traj[0], rtol=0, atol=1e-15)
    for name in ("env", "pair", "point", "z", "age", "fn_last", "k_last"):
        np.testing.assert_allclose(getattr(b.history, name), getattr(a.history, name), rtol=0, atol=1e-15)
    # an environment whose clock was reset (an env reset) starts from fresh state at its next step
    ds = [s.make_data() for _ in range(2)]
    st = Stepper(s, model)
    for k in range(300):
        for d in ds:
            d.ctrl[s.hand_actuator_ids] = _ctrl(s, k)
        step(s.model, ds, st)
    assert (st.history.env == 0).any() and (st.history.age > 0).any()
    mujoco.mj_resetData(s.model, ds[0])
    before = st.history.age[st.history.env == 1].copy()
    step(s.model, ds, st)
    assert (st.history.age[st.history.env == 0] <= s.model.opt.timestep * (1 + 1e-9)).all()  # env 0 started fresh
    assert (st.history.age[st.history.env == 1] > before.max() - 1e-12).any()  # env 1 kept its own


# -- the network that sees history ----------------------------------------------------------------
def _ground_graph():
    """A graph of the cube pressed into the ground at a tilt, sliding and spinning (float64, the stepper's builder)."""
    scene = _cube_scene()
    d = _free_data(scene, [0.0, 0.0, 0.0524 * 1.2], [0.95, 0.2, -0.1, 0.05], [0.3, -0.2, -0.1], [1.0, -2.0, 0.5])
    stepper = Stepper(scene, ContactLawGNN(prior=SPRING_CUBE))
    stepper.set_mode(scene.model, "surrogate")
    mujoco.mj_step1(scene.model, d)
    g = stepper.builder.build(scene.model, [d], dtype=torch.float64).graph
    assert g.edge_index.shape[1] >= 2 and (g.dist < 0).sum() >= 1
    return g


def _rotated(g, R):
    """The same graph with the whole scene (gravity included) turned by R [3, 3]."""
    import copy

    h = copy.copy(g)
    Rt = torch.as_tensor(R)
    for name in ("normal", "r_obj", "r_oth", "tangent", "vel", "omega", "gravity"):
        setattr(h, name, getattr(g, name) @ Rt.T)
    h.inertia_w = Rt @ g.inertia_w @ Rt.T
    return h


def test_history_network_is_invariant_to_rigid_motion_and_bounded():
    """With history on, saturated corrections and arbitrary state: turning the scene (and the state with it) turns the
    forces and the state after the step, nothing else; k_z stays within its bound of the prior's."""
    g = _ground_graph()
    E = g.edge_index.shape[1]
    model = _perturbed(ContactLawGNN(prior=SPRING_CUBE, corrections=True, history=True, friction_iterations=1), seed=4)
    rng = np.random.default_rng(0)
    T = torch.from_numpy
    state = ContactState(T(rng.normal(0, 1e-4, (E, 3))), T(rng.uniform(0, 1, E)), T(rng.uniform(0, 5, E)),
                         T(rng.uniform(1e3, 1e5, E)))
    R = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    R *= np.linalg.det(R)  # a rotation
    with torch.no_grad():
        f1, _, s1 = model.solve(g, state=state, with_state=True)
        state2 = ContactState(state.z @ T(R).T, *state[1:])
        f2, _, s2 = model.solve(_rotated(g, R), state=state2, with_state=True)
        prm = model.law_parameters(g, state=state)
        prm_fresh = model.law_parameters(g)
    assert float(f1.abs().max()) > 0.1 and float(s1.z.abs().max()) > 0
    np.testing.assert_allclose(f2.numpy(), f1.numpy() @ R.T, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(s2.z.numpy(), s1.z.numpy() @ R.T, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(s2.fn_last.numpy(), s1.fn_last.numpy(), rtol=1e-6, atol=1e-9)
    k_prior = 300.0
    assert ((prm[:, 3] >= k_prior * np.exp(-2.0) * (1 - 1e-6)) & (prm[:, 3] <= k_prior * np.exp(2.0) * (1 + 1e-6))).all()
    mild = _perturbed(ContactLawGNN(prior=SPRING_CUBE, corrections=True, history=True), scale=0.3, seed=4)
    with torch.no_grad():
        prm, prm_fresh = mild.law_parameters(g, state=state), mild.law_parameters(g)
    assert not torch.allclose(prm[:, 3], prm_fresh[:, 3])  # the k_z head reads the state
    torch.testing.assert_close(prm[:, 0], prm_fresh[:, 0])  # the stiffness head never does (configuration only)


def test_history_model_trains_through_the_twin_and_round_trips(tmp_path):
    """Gradients of a twin rollout reach the k_z head and the spring's prior; the history normalizer fills in
    training; the checkpoint (card: ``history``, the prior's ``presliding_stiffness``) loads to the same law."""
    from surrogate.model.checkpoint import export_checkpoint, load_checkpoint, read_card

    scene = _cube_scene()
    model = ContactLawGNN(prior=SPRING_CUBE, corrections=True, history=True, friction_iterations=1).train()
    s0 = torch.tensor([[0, 0, 0.07, 0.9, 0.3, 0.2, 0.1, 0.5, 0, -0.3, 2.0, 1.0, 0.0]], dtype=torch.float64)
    s0[:, 3:7] /= s0[:, 3:7].norm()
    pos, quat = Twin(scene).rollout(model, s0, 30, substeps=4)
    (pos[:, -1, 0] + quat[:, -1, 1]).sum().backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(gr).all() for gr in grads)
    assert float(model.log_presliding.grad.abs().sum()) > 0
    last = [m for m in model.decoder if isinstance(m, torch.nn.Linear)][-1]
    assert float(last.weight.grad[2].abs().sum()) > 0  # the k_z head's row
    assert float(model.hist_norm.count) > 0
    model = _perturbed(model.train(), scale=0.3)
    export_checkpoint(model, tmp_path / "ck")
    card = read_card(tmp_path / "ck")
    hp = card["model"]["hparams"]
    assert hp["history"] is True and hp["prior"]["presliding_stiffness"] == pytest.approx(300.0, rel=1e-6)
    assert card["features"]["history"] == ["z_norm", "z_dot_vt", "age", "fn_last"]
    back, _ = load_checkpoint(tmp_path / "ck")
    g = _ground_graph()
    E = g.edge_index.shape[1]
    state = ContactState(torch.full((E, 3), 1e-5), torch.full((E,), 0.2), torch.full((E,), 3.0), torch.full((E,), 1e4))
    with torch.no_grad():
        torch.testing.assert_close(back.solve(g, state=state)[0], model.solve(g, state=state)[0])


def test_history_network_without_a_spring_corrects_the_spring_free_law(torch_network):
    """History on a prior without a spring: no spring parameter and no k_z head; the network reads the time under
    load and the last normal force (damping and friction change with them, the stiffness never does). With saturated
    corrections and arbitrary time and force stored every 20 steps in contact, a dropped spinning cube never gains
    energy and impacts dissipate; the twin carries the same state as the stepper (the same toss to 1e-9 m)."""
    model = _perturbed(ContactLawGNN(prior=CUBE, corrections=True, history=True, friction_iterations=1), seed=5)
    assert model.history and not model.presliding and not hasattr(model, "log_presliding")
    assert [m for m in model.decoder if isinstance(m, torch.nn.Linear)][-1].out_features == 2
    g = _ground_graph()
    E = g.edge_index.shape[1]
    rng = np.random.default_rng(5)
    T = torch.from_numpy
    state = ContactState(torch.zeros(E, 3, dtype=torch.float64), T(rng.uniform(0, 1, E)), T(rng.uniform(0, 5, E)),
                         torch.zeros(E, dtype=torch.float64))
    mild = _perturbed(ContactLawGNN(prior=CUBE, corrections=True, history=True, friction_iterations=1), scale=0.3,
                      seed=5)
    with torch.no_grad():
        prm, fresh = mild.law_parameters(g, state=state), mild.law_parameters(g)
    assert prm.shape == (E, 3) and not torch.allclose(prm[:, 1:], fresh[:, 1:])  # c and mu read the state
    torch.testing.assert_close(prm[:, 0], fresh[:, 0])  # the stiffness head never does

    scene = _cube_scene()
    stepper = Stepper(scene, model)
    d = _free_data(scene, [0, 0, 0.0524 * 1.8 + 0.05], rng.normal(size=4), [0.4, -0.2, 0.0], rng.normal(0, 6, 3))
    e0 = _energy(scene, d)
    worst, injections, touched = -np.inf, 0, 0
    for _k in range(600):
        step(scene.model, d, stepper)
        worst = max(worst, _energy(scene, d) - e0)
        if len(stepper.history):
            touched += 1
            assert not stepper.history.z.any()  # no spring: no displacement is stored
            if touched % 20 == 1:
                P = len(stepper.history)
                stepper.history.age, stepper.history.fn_last = rng.uniform(0, 5, P), rng.uniform(0, 100, P)
                injections += 1
    assert injections >= 5 and worst <= 1e-4 * abs(e0) and _energy(scene, d) < e0 - 0.1

    stepper, ref, s0 = stepper_toss(scene, mild.eval(), 148)
    assert len(stepper.history) > 0 and (stepper.history.age > 0).all()
    with torch.no_grad():
        pos, _ = Twin(scene).rollout(mild, s0, 148, substeps=4)
    np.testing.assert_allclose(pos.numpy(), ref, atol=1e-9)
