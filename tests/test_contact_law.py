"""Contact model v2: the passive law, its learned corrections, the twin, and rollout training.

Property tests run the law with *perturbed* (untrained, large random) network corrections: what
keeps a rollout passive must be the structure, not what training happened to find.
"""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from surrogate.model.contact_law import CONFIG_EDGE_INDEX, ContactLawGNN
from surrogate.model.history import ContactState
from surrogate.model.joint_solve import solve_free_object
from surrogate.model.law import LawPrior, friction_coefficient, point_law
from surrogate.objects import make_object
from surrogate.scenes import build_scene
from surrogate.sim import Stepper, step
from surrogate.sim.twin import Twin

from .conftest import SHARED, eval_script, needs_jaco, needs_shared

torch.set_num_threads(1)
CUBE = dict(stiffness=150.0, damping=2.0, friction=0.2, slip_eps=1e-3)
PAD = dict(stiffness=1e5, damping=5.0, friction=1.0, slip_eps=1e-3, units="si")
TABLE = dict(stiffness=1e6, damping=5.0, friction=0.8, slip_eps=1e-3, units="si")
STRIBECK = dict(CUBE, static_friction=1.8, stribeck_speed=0.05)  # a static/kinetic law (static 0.36, kinetic 0.2)


def _perturbed(model: ContactLawGNN, scale: float = 3.0, seed: int = 0) -> ContactLawGNN:
    """Large random weights in every correction head (saturating the bounds)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.correction_parameters():
            p.copy_(scale * torch.randn(p.shape, generator=g))
    return model.eval()


def _cube_scene(timestep=1 / 148 / 4):
    obj = make_object("box", 0, size_x=0.1048, size_y=0.1048, size_z=0.1048, density=0.37 / 0.1048 ** 3)  # the ContactNets cube
    return build_scene(obj, setting="ground", timestep=timestep, owned_margin=0.02, contact_mode="external")


def _free_data(scene, pos, quat, vel, omega_b):
    d = mujoco.MjData(scene.model)
    qa, da = scene.object_qpos_adr, scene.object_dof_adr
    d.qpos[qa:qa + 3], d.qpos[qa + 3:qa + 7] = pos, np.asarray(quat) / np.linalg.norm(quat)
    d.qvel[da:da + 3], d.qvel[da + 3:da + 6] = vel, omega_b
    mujoco.mj_forward(scene.model, d)
    return d


# -- the law --------------------------------------------------------------------------------------
def test_point_law_is_zero_at_separation_and_only_dissipates():
    rng = np.random.default_rng(0)
    n = 1000
    depth = rng.uniform(-1e-3, 1e-3, n)
    vn, speed = rng.normal(0, 0.5, n), np.abs(rng.normal(0, 0.5, n))
    f0, a, b, fn = point_law(depth, vn, speed, k=1e5, p=1.5, c=5.0, mu=0.8, eps=1e-3, dt=1e-3)
    sep = depth <= 0
    assert (f0[sep] == 0).all() and (a[sep] == 0).all() and (b[sep] == 0).all() and (fn[sep] == 0).all()
    assert (f0 >= 0).all() and (a >= 0).all() and (a + b >= -1e-12).all()  # K = aI + b nn^T is PSD
    # friction magnitude at the current velocity stays inside the cone
    assert (a * speed <= 0.8 * fn * (1 + 1e-12)).all()
    # the torch and numpy paths are one implementation
    t = point_law(*(torch.tensor(x) for x in (depth, vn, speed)), k=1e5, p=1.5, c=5.0, mu=0.8, eps=1e-3, dt=1e-3)
    for x, y in zip((f0, a, b, fn), t):
        np.testing.assert_allclose(x, y.numpy(), rtol=1e-12, atol=0)


def stepper_toss(scene, model, frames: int):
    """Two spinning cubes tossed onto the ground through the hybrid stepper, 4 physics steps a frame:
    (stepper, reference COM positions [2, frames, 3], the twin's start states [2, 13]) for twin-vs-stepper parity."""
    states = [([0, 0, 0.12], [0.9, 0.3, 0.2, 0.1], [0.8, 0.1, -0.3], [3.0, -4.0, 1.0]),
              ([0.1, 0, 0.09], [0.5, -0.5, 0.5, 0.5], [-0.5, 0.4, 0.5], [-2.0, 6.0, 0.0])]
    stepper = Stepper(scene, model)
    ds = [_free_data(scene, *s) for s in states]
    ref = np.zeros((len(ds), frames, 3))
    qa = scene.object_qpos_adr
    for f in range(frames):
        ref[:, f] = [d.qpos[qa:qa + 3] for d in ds]
        step(scene.model, ds, stepper, nstep=4)
    s0 = torch.tensor(np.array([np.concatenate([s[0], np.asarray(s[1]) / np.linalg.norm(s[1]), s[2], s[3]])
                                for s in states]))
    return stepper, ref, s0


def test_semi_implicit_friction_never_reverses_slip():
    """A sliding point under a huge friction damping ends the step slower, never reversed."""
    mass = torch.tensor([0.1], dtype=torch.float64)
    inertia = torch.eye(3, dtype=torch.float64)[None] * 1e-5
    for slip in (1e-4, 1e-2, 1.0):
        vel = torch.tensor([[slip, 0.0, 0.0]], dtype=torch.float64)
        n = torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64)
        f0, a, b, _ = point_law(torch.tensor([1e-4]), torch.tensor([0.0]), torch.tensor([slip]), k=1e6, p=1.5, c=5.0,
                                mu=2.0, eps=1e-6, dt=1e-3)
        forces, xi = solve_free_object(f0.double()[:, None] * n, a.double(), b.double(), n, torch.zeros(1, 3, dtype=torch.float64),
                                       torch.zeros(1, 3, dtype=torch.float64), torch.zeros(1, dtype=torch.long), vel=vel,
                                       omega=torch.zeros(1, 3, dtype=torch.float64), mass=mass, inertia_w=inertia,
                                       gravity=torch.zeros(1, 3, dtype=torch.float64), dt=1e-3, num_envs=1)
        v_end = float(xi[0, 0])
        assert 0.0 <= v_end <= slip
        assert float(forces[0, 0]) * v_end <= 0.0  # F_t . v_t' <= 0


def test_joint_space_solve_is_the_contact_space_solve():
    """The law's joint-space solve gives the same forces as the rig's contact-space solve, for
    environments with different numbers of contacts."""
    from surrogate.semi_implicit import semi_implicit_solve
    from surrogate.sim.law_solve import solve_law

    rng = np.random.default_rng(0)
    counts, nv, dt = [5, 2, 4], 8, 1e-3
    B, E = len(counts), sum(counts)
    A = rng.normal(size=(B, nv, nv))
    M = A @ A.transpose(0, 2, 1) + nv * np.eye(nv)  # SPD joint-space inertia
    J = rng.normal(size=(E, 3, nv))
    n = rng.normal(size=(E, 3))
    n /= np.linalg.norm(n, axis=-1, keepdims=True)
    a, b, f0 = rng.uniform(0, 50, E), rng.uniform(0, 500, E), rng.uniform(0, 5, E)
    v_free = rng.normal(size=(B, nv))
    start = np.cumsum([0] + counts[:-1])
    F, v1 = solve_law(f0[:, None] * n, a, b, n, J, np.array(counts), M, v_free, dt)
    for i, (s0, c) in enumerate(zip(start, counts)):  # each environment alone, in contact space
        rows = slice(s0, s0 + c)
        K = np.zeros((c, 3, c, 3))
        for k in range(c):
            K[k, :, k, :] = a[s0 + k] * np.eye(3) + b[s0 + k] * np.outer(n[s0 + k], n[s0 + k])
        K = K.reshape(3 * c, 3 * c)
        Jf = J[rows].reshape(3 * c, nv)
        Xt = np.linalg.solve(M[i], Jf.T)  # M^-1 J^T
        F_ref = semi_implicit_solve(K, Jf @ Xt, (f0[rows, None] * n[rows]).reshape(-1), Jf @ v_free[i], dt)
        np.testing.assert_allclose(F[rows].reshape(-1), F_ref, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(v1[i], v_free[i] + dt * Xt @ F[rows].reshape(-1), atol=1e-9)


def test_padded_solve_equals_per_contact_sums_with_an_empty_environment_and_per_contact_steps():
    """``solve_joint`` pads each environment's contacts to the largest count; against the system summed contact by
    contact (``index_add``, written out here): environments of 3, 0, 1 and 2 contacts, a step per environment (given
    per contact, as the twin does), the other body's velocity held (``u_other``); forces, velocities and the gradients
    of a loss in w0, a, b and J agree to 1e-10. Contacts out of environment order are refused."""
    from surrogate.model.joint_solve import solve_joint

    rng = np.random.default_rng(3)
    counts, nv = [3, 0, 1, 2], 7
    B, E = len(counts), sum(counts)
    T = lambda x: torch.tensor(x, dtype=torch.float64, requires_grad=True)  # noqa: E731
    L = rng.normal(size=(B, nv, nv))
    M = torch.tensor(L @ L.transpose(0, 2, 1) + nv * np.eye(nv))
    n = rng.normal(size=(E, 3))
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    w0, a, b, J = T(rng.normal(size=(E, 3))), T(rng.uniform(1, 50, E)), T(rng.uniform(10, 500, E)), T(rng.normal(size=(E, 3, nv)))
    n, u_oth, v_free = torch.tensor(n), torch.tensor(rng.normal(size=(E, 3))), torch.tensor(rng.normal(size=(B, nv)))
    env = torch.repeat_interleave(torch.arange(B), torch.tensor(counts))
    dt = torch.tensor([1e-3, 2e-3, 5e-4, 1e-3], dtype=torch.float64)[env]

    def reference():
        K = a[:, None, None] * torch.eye(3) + b[:, None, None] * n[:, :, None] * n[:, None, :]  # [E, 3, 3]
        A = M.index_add(0, env, dt[:, None, None] * (J.transpose(1, 2) @ K @ J))
        src = w0 + (K @ u_oth[..., None])[..., 0]
        rhs = (M @ v_free[..., None])[..., 0].index_add(0, env, dt[:, None] * (J.transpose(1, 2) @ src[..., None])[..., 0])
        v1 = torch.linalg.solve(A, rhs[..., None])[..., 0]
        u = (J @ v1[env][..., None])[..., 0] - u_oth
        return w0 - (K @ u[..., None])[..., 0], v1

    got, want = solve_joint(w0, a, b, n, J, env, M, v_free, dt, u_other=u_oth)[:2], reference()
    grads = []
    for F, v1 in (got, want):
        np.testing.assert_allclose(v1[1].detach().numpy(), v_free[1].numpy(), rtol=1e-12)  # no contact: free motion
        grads.append(torch.autograd.grad((F ** 2).sum() + (v1 ** 2).sum(), (w0, a, b, J)))
    for x, y in zip(got, want):
        np.testing.assert_allclose(x.detach().numpy(), y.detach().numpy(), rtol=1e-10, atol=1e-12)
    for gx, gy in zip(*grads):
        np.testing.assert_allclose(gx.numpy(), gy.numpy(), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="consecutive rows"):
        solve_joint(w0, a, b, n, J, env.flip(0), M, v_free, dt)


def test_iterated_friction_is_coulomb_at_a_sliding_impact():
    """A point mass landing while it slides (hand-computed case). Linearized once, friction is the
    start-of-step normal force's (a graze at first touch) and brakes far less than Coulomb; re-linearized at
    the solved state (``iterations=1``), the friction is mu times the solved normal force (to the slip
    regularization) and still cannot reverse the slip."""
    from surrogate.sim.law_solve import solve_law

    m, dt, mu, eps, k, p = 0.4, 1e-3, 0.3, 1e-3, 1e5, 1.5
    depth, vt0, vn0 = 1e-4, 0.5, -1.0  # just touching, sliding along x at 0.5 m/s, landing at 1 m/s
    n = np.array([[0.0, 0.0, 1.0]])
    f0, a, b, _ = point_law(np.array([depth]), np.array([vn0]), np.array([vt0]), k=k, p=p, c=2.0, mu=mu, eps=eps, dt=dt)
    J, M = np.eye(3)[None], m * np.eye(3)[None]
    v_free = np.array([[vt0, 0.0, vn0 - 9.81 * dt]])
    args = (f0[:, None] * n, a, b, n, J, np.array([1]), M, v_free, dt)
    F0, _ = solve_law(*args)
    F1, v1 = solve_law(*args, mu=np.array([mu]), eps=np.array([eps]), iterations=1)
    for F in (F0, F1):
        assert F[0, 2] > 0 and abs(F[0, 0]) <= mu * F[0, 2] * (1 + 1e-12) and F[0, 1] == pytest.approx(0, abs=1e-12)
    assert abs(F0[0, 0]) < 0.3 * mu * F0[0, 2]  # once: under-braked
    assert abs(F1[0, 0]) == pytest.approx(mu * F1[0, 2], rel=1e-2)  # iterated: Coulomb
    # by hand: the lagged friction a = mu Fn' / sqrt(vt'^2 + eps^2) with Fn', vt' of the first solve
    vt_first = v_free[0, 0] + dt * F0[0, 0] / m
    a1 = mu * F0[0, 2] / np.hypot(vt_first, eps)
    vt_expected = v_free[0, 0] / (1 + dt * a1 / m)
    assert v1[0, 0] == pytest.approx(vt_expected, rel=1e-9) and 0 < v1[0, 0] < vt0  # slowed, not reversed


def test_static_kinetic_friction_is_passive_and_reduces_to_coulomb():
    """The static/kinetic coefficient ``mu_k (1 + (r - 1) exp(-s^2 / v_s^2))``: r mu_k at rest, mu_k sliding fast,
    positive for every slip and ratio, so the linearized friction stays a damping (a >= 0) inside the static cone;
    with r = 1 it is Coulomb's, bit for bit; numpy and torch agree."""
    rng = np.random.default_rng(1)
    n = 2000
    depth = rng.uniform(-1e-3, 1e-3, n)
    vn, speed = rng.normal(0, 0.5, n), np.abs(rng.normal(0, 0.5, n))
    r = rng.uniform(0.2, 3.0, n)
    mu3 = np.stack([np.full(n, 0.4), r, np.full(n, 0.05)], axis=-1)
    c = friction_coefficient(mu3, speed * speed)
    assert (c > 0).all() and (c <= 0.4 * np.maximum(r, 1.0) + 1e-12).all() and (c >= 0.4 * np.minimum(r, 1.0) - 1e-12).all()
    np.testing.assert_allclose(friction_coefficient(mu3, np.zeros(n)), 0.4 * r, rtol=1e-12)
    np.testing.assert_allclose(friction_coefficient(mu3, np.full(n, 100.0)), 0.4, rtol=1e-12)  # 10 m/s >> v_s
    kw = dict(k=1e5, p=1.5, c=5.0, eps=1e-3, dt=1e-3)
    f0, a, b, fn = point_law(depth, vn, speed, mu=mu3, **kw)
    assert (a >= 0).all() and (a + b >= -1e-12).all() and (f0[depth <= 0] == 0).all() and (a[depth <= 0] == 0).all()
    assert (a * speed <= c * fn * (1 + 1e-12)).all()  # inside the cone of the slip's own coefficient
    coulomb = point_law(depth, vn, speed, mu=0.4, **kw)
    one = point_law(depth, vn, speed, mu=np.stack([np.full(n, 0.4), np.ones(n), np.full(n, 0.05)], -1), **kw)
    for x, y in zip(coulomb, one):
        np.testing.assert_array_equal(x, y)
    t = point_law(*(torch.tensor(x) for x in (depth, vn, speed)), mu=torch.tensor(mu3), **kw)
    for x, y in zip((f0, a, b, fn), t):
        np.testing.assert_allclose(x, y.numpy(), rtol=1e-12, atol=0)


def test_iterated_static_kinetic_friction_uses_the_end_of_step_slip():
    """The sliding impact of ``test_iterated_friction_is_coulomb_at_a_sliding_impact`` with a static/kinetic law
    (hand-computed): the re-linearized friction takes the coefficient at the *end-of-step* slip of the first
    solve, in the stepper's joint-space solve and in the twin's object solve alike; the slip is slowed, never
    reversed."""
    from surrogate.sim.law_solve import solve_law

    m, dt, eps, k, p = 0.4, 1e-3, 1e-3, 1e5, 1.5
    mu3 = np.array([[0.3, 2.5, 0.4]])  # static 0.75, kinetic 0.3, v_s 0.4 m/s (of the order of the slip)
    depth, vt0, vn0 = 1e-4, 0.5, -1.0
    n = np.array([[0.0, 0.0, 1.0]])
    f0, a, b, _ = point_law(np.array([depth]), np.array([vn0]), np.array([vt0]), k=k, p=p, c=2.0, mu=mu3, eps=eps, dt=dt)
    assert a[0] == pytest.approx(float(friction_coefficient(mu3, np.array([vt0 ** 2]))[0]) * f0[0] * (1 + 2.0) / np.hypot(vt0, eps))
    J, M = np.eye(3)[None], m * np.eye(3)[None]
    v_free = np.array([[vt0, 0.0, vn0 - 9.81 * dt]])
    args = (f0[:, None] * n, a, b, n, J, np.array([1]), M, v_free, dt)
    F0, _ = solve_law(*args)
    F1, v1 = solve_law(*args, mu=mu3, eps=np.array([eps]), iterations=1)
    vt_first = v_free[0, 0] + dt * F0[0, 0] / m
    mu_first = 0.3 * (1 + 1.5 * np.exp(-(vt_first / 0.4) ** 2))
    vt_expected = v_free[0, 0] / (1 + dt * mu_first * F0[0, 2] / np.hypot(vt_first, eps) / m)
    assert v1[0, 0] == pytest.approx(vt_expected, rel=1e-9) and 0 < v1[0, 0] < vt0
    assert mu_first > 0.3 * 1.2  # the static part matters here: a Coulomb law would not pass the line above
    # the twin's solve of the same point mass (object at the contact point, no rotation to speak of)
    T = lambda x: torch.tensor(np.asarray(x, dtype=np.float64))  # noqa: E731
    _, xi = solve_free_object(T(f0[:, None] * n), T(a), T(b), T(n), T(np.zeros((1, 3))), T(np.zeros((1, 3))), torch.zeros(1, dtype=torch.long),
                              vel=T([[vt0, 0.0, vn0]]), omega=T(np.zeros((1, 3))), mass=T([m]), inertia_w=T(np.eye(3)[None]),
                              gravity=T([[0, 0, -9.81]]), dt=dt, num_envs=1, mu=T(mu3), eps=T([eps]), iterations=1)
    assert float(xi[0, 0]) == pytest.approx(v1[0, 0], rel=1e-9)


def test_untrained_model_is_the_prior_law_and_corrections_are_bounded():
    scene = _cube_scene()
    st_law = Stepper(scene, ContactLawGNN(prior=CUBE, corrections=False).eval())
    d = _free_data(scene, [0, 0, 0.05], [0.9, 0.3, 0.2, 0.1], [0.3, 0, -0.5], [1.0, -2.0, 0.5])
    mujoco.mj_step1(scene.model, d)
    cb = st_law.builder.build(scene.model, [d], dtype=torch.float64)
    assert cb.num_contacts >= 1
    g = cb.graph
    law = ContactLawGNN(prior=CUBE, corrections=False).eval()
    net = ContactLawGNN(prior=CUBE, corrections=True).eval()
    torch.testing.assert_close(net(g), law(g), rtol=0, atol=0)
    _perturbed(net, scale=10.0)
    prm = net.law_parameters(g)
    base = torch.tensor([CUBE["stiffness"], CUBE["damping"], CUBE["friction"]])
    ratio = (prm / base).log()
    s_k, s_c, s_mu = net.bounds
    assert (ratio[:, 0].abs() <= s_k + 1e-6).all() and (ratio[:, 1].abs() <= s_c + 1e-6).all()
    assert (ratio[:, 2] <= s_mu + 1e-6).all() and (prm[:, 2] <= net.mu_max + 1e-6).all()
    assert not torch.allclose(net(g), law(g))


def test_stiffness_depends_on_configuration_only():
    scene = _cube_scene()
    d = _free_data(scene, [0, 0, 0.05], [0.9, 0.3, 0.2, 0.1], [0.3, 0, -0.5], [1.0, -2.0, 0.5])
    mujoco.mj_step1(scene.model, d)
    g = Stepper(scene, ContactLawGNN(prior=CUBE)).builder.build(scene.model, [d], dtype=torch.float64).graph
    net = _perturbed(ContactLawGNN(prior=CUBE, corrections=True))
    k1 = net.law_parameters(g)[:, 0]
    k2 = net.law_parameters(g, g.vel * -3.0 + 0.7, g.omega * 5.0 - 1.0)[:, 0]
    torch.testing.assert_close(k1, k2)
    assert len(CONFIG_EDGE_INDEX) == 33


def test_prior_config_is_checked():
    with pytest.raises(ValueError, match="unknown law prior keys"):
        LawPrior.from_json({"stifness": 1.0})
    with pytest.raises(ValueError, match="positive"):
        LawPrior.from_json({"damping": -1.0})
    with pytest.raises(ValueError, match="units"):
        LawPrior.from_json({"units": "imperial"})
    with pytest.raises(ValueError, match="share units"):
        ContactLawGNN(prior=CUBE, prior_body=PAD)


# -- passivity in closed loop ---------------------------------------------------------------------
def _energy(scene, d):
    """Kinetic + gravitational energy (J) from qpos/qvel (after mj_step, xipos is the previous step's)."""
    from surrogate.sim.twin import body_inertia

    m = scene.model
    b, qa, da = scene.object_body_id, scene.object_qpos_adr, scene.object_dof_adr
    v, w = d.qvel[da:da + 3], d.qvel[da + 3:da + 6]
    ke = 0.5 * m.body_mass[b] * v @ v + 0.5 * w @ body_inertia(m, b) @ w
    return ke - m.body_mass[b] * (m.opt.gravity @ d.qpos[qa:qa + 3])


@pytest.mark.parametrize("seed, stribeck", [(0, False), (1, False), (0, True)])
def test_dropped_object_never_gains_energy(seed, stribeck):
    """A spinning cube dropped from 5 cm: kinetic + potential energy never exceeds its start (1e-4 relative:
    the semi-implicit step's integration error), with saturated random corrections; also with a static/kinetic
    friction law (static coefficient 3x the kinetic one), friction re-linearized at the solved state."""
    scene = _cube_scene()
    model = ContactLawGNN(prior=dict(STRIBECK, static_friction=3.0) if stribeck else CUBE, corrections=True,
                          stribeck=stribeck, friction_iterations=int(stribeck))
    stepper = Stepper(scene, _perturbed(model, seed=seed))
    rng = np.random.default_rng(seed)
    q = rng.normal(size=4)
    d = _free_data(scene, [0, 0, 0.0524 * 1.8 + 0.05], q, [0.4, -0.2, 0.0], rng.normal(0, 6, 3))
    e0 = _energy(scene, d)
    es, touched = [], False
    for _ in range(600):
        step(scene.model, d, stepper)
        es.append(_energy(scene, d))
        touched |= stepper.stats()["contacts"] > 0
    es = np.array(es)
    assert touched and np.isfinite(es).all()
    assert es.max() <= e0 + 1e-4 * abs(e0)
    assert es[-1] < e0 - 0.1  # impacts dissipated energy (J)


def test_object_at_rest_stays_within_1mm_for_10s():
    scene = build_scene(make_object("box", 0), setting="table", timestep=0.002, contact_mode="external")
    model = _perturbed(ContactLawGNN(prior=TABLE, prior_body=PAD, corrections=True))
    stepper = Stepper(scene, model)
    d = scene.make_data()
    qa = scene.object_qpos_adr
    for _ in range(250):  # 0.5 s: settle onto the law's equilibrium penetration
        step(scene.model, d, stepper)
    p0 = d.qpos[qa:qa + 3].copy()
    step(scene.model, d, stepper, nstep=5000)  # 10 s
    assert np.linalg.norm(d.qpos[qa:qa + 3] - p0) < 1e-3
    assert abs(p0[2] - scene.make_data().qpos[qa + 2]) < 2e-3  # no hovering, no sinking


def test_held_object_does_not_creep():
    """Gripper holds a box in the air under the law with saturated random corrections: the box moves less
    than 1 mm/s relative to the pads over 1 s of hold."""
    from surrogate.envs import GraspVectorEnv
    from surrogate.policies import GraspParams, ScriptedGraspPolicy

    model = _perturbed(ContactLawGNN(prior=TABLE, prior_body=PAD, corrections=True))
    venv = GraspVectorEnv(1, copies=False, hand="parallel_jaw", object="box", contact="surrogate", contact_model=model,
                          max_episode_steps=None)
    venv.reset(seed=0)
    task = venv.task
    policy = ScriptedGraspPolicy(task, GraspParams())
    policy.reset()
    m = task.scene.model
    pad = int(m.geom_bodyid[m.geom(task.scene.hand.pad_geom_names[0]).id])
    t_hold = float(policy.hold_start[0])
    rel, k = [], 0
    while k * task.control_dt < t_hold + 1.0:
        task.apply_action(policy(k * task.control_dt))
        task.simulate()
        d = task.datas[0]
        if k * task.control_dt >= t_hold:
            rel.append(d.xpos[task.scene.object_body_id] - d.xpos[pad])
        k += 1
    rel = np.array(rel)
    assert len(rel) > 10
    assert d.xpos[task.scene.object_body_id][2] > task.scene.surface_z + 0.03  # lifted and held
    speed = np.linalg.norm(rel[-1] - rel[0]) / ((len(rel) - 1) * task.control_dt)
    assert speed < 1e-3


# -- the twin -------------------------------------------------------------------------------------
@pytest.mark.parametrize("friction_iterations, stribeck, corrections", [(0, False, True), (1, False, True), (1, True, True),
                                                                         (1, True, False)])
def test_twin_matches_the_hybrid_stepper(friction_iterations, stribeck, corrections, torch_network):
    """Same parameters, same trajectory: a spinning cube tossed onto the ground, impact and slide, 1 s
    (the twin's object-only solve and the stepper's solve with MuJoCo's mobility are the same system),
    with friction linearized once or re-linearized at the solved state, Coulomb or static/kinetic (with
    corrections, and as a constant law: the stepper's numpy path)."""
    scene = _cube_scene()
    model = ContactLawGNN(prior=STRIBECK if stribeck else CUBE, corrections=corrections,
                          friction_iterations=friction_iterations, stribeck=stribeck)
    model = _perturbed(model, scale=0.5) if corrections else model.eval()
    F = 148
    stepper, ref, s0 = stepper_toss(scene, model, F)
    assert stepper.stats()["contacts"] > 0
    with torch.no_grad():
        pos, _ = Twin(scene).rollout(model, s0, F, substeps=4)
    np.testing.assert_allclose(pos.numpy(), ref, atol=1e-9)


def test_twin_gradients_reach_the_law_and_are_finite():
    scene = _cube_scene()
    model = ContactLawGNN(prior=CUBE, corrections=True).train()
    s0 = torch.tensor([[0, 0, 0.1, 0.9, 0.3, 0.2, 0.1, 0.5, 0, -0.5, 2.0, 1.0, 0.0]], dtype=torch.float64)
    s0[:, 3:7] /= s0[:, 3:7].norm()
    pos, quat = Twin(scene).rollout(model, s0, 30, substeps=4)
    (pos[:, -1, 0] + quat[:, -1, 1]).sum().backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    assert float(model.log_friction.grad.abs().sum()) > 0


# -- training ------------------------------------------------------------------------------------
@needs_shared("contactnets_cube")
def test_short_rollout_training_lowers_validation_error(tmp_path):
    """Two prior epochs from a poor friction (0.35) on 12 real tosses lower the whole-toss validation score."""
    from surrogate.importers.contactnets import import_contactnets
    from surrogate.learn.fit import fit_law

    root = tmp_path / "cube"
    import_contactnets(SHARED / "contactnets_cube", root, progress=False)
    cfg = {"data": {"root": str(root), "val_fraction": 0.4, "val_min": 0, "max_train_episodes": 12, "max_val_episodes": 8,
                    "window_frames": 32, "window_stride": 32, "batch_size": 8},
           "model": {"kind": "law", "prior": {**CUBE, "friction": 0.35}, "corrections": True, "hidden": 8, "steps": 1},
           "stages": {"prior": {"epochs": 2, "lr": 0.1}, "corrections": {"epochs": 1, "lr": 1e-3}},
           "trainer": {"enable_progress_bar": False, "logger": False} if False else {"enable_progress_bar": False}}
    res = fit_law(cfg, out=tmp_path / "run")
    m = res["metrics"]
    assert m["prior"]["fitted"]["score"] < m["prior"]["initial"]["score"]
    assert "paired_minus_prior" in m["corrections"] and isinstance(m["corrections"]["kept"], bool)
    assert res["model"].prior().friction != pytest.approx(0.35)
    # the input normalizers hold the training inputs' statistics (the stepper's out-of-range check reads them)
    assert float(res["model"].edge_norm.count) > 0 and float(res["prior_model"].edge_norm.count) > 0


@needs_shared("contactnets_cube")
def test_prior_grid_starts_the_fit_from_its_best_training_score(tmp_path):
    """``stages.grid`` scores each friction by whole training-toss rollouts and starts the prior from the best;
    with no gradient epochs the release is that law. A bad group is refused naming the key."""
    from surrogate.errors import ConfigError
    from surrogate.importers.contactnets import import_contactnets
    from surrogate.learn.fit import fit_law

    root = tmp_path / "cube"
    import_contactnets(SHARED / "contactnets_cube", root, progress=False)
    cfg = {"data": {"root": str(root), "val_fraction": 0.4, "val_min": 0, "max_train_episodes": 8, "max_val_episodes": 4,
                    "window_frames": 0, "batch_size": 8},
           "model": {"kind": "law", "prior": CUBE, "corrections": False, "friction_iterations": 1},
           "stages": {"grid": {"friction": [0.05, 0.15, 0.6]}, "prior": {"epochs": 0}},
           "trainer": {"enable_progress_bar": False}}
    res = fit_law(cfg, out=tmp_path / "run")
    grid = res["metrics"]["grid"]
    assert [r["friction"] for r in grid["rows"]] == [0.05, 0.15, 0.6] and all(r["n"] == 8 for r in grid["rows"])
    assert len({round(r["score"], 6) for r in grid["rows"]}) == 3  # the friction changes the rollouts
    assert grid["best"] == min(grid["rows"], key=lambda r: r["score"])
    assert res["model"].prior().friction == pytest.approx(grid["best"]["friction"], rel=1e-6)
    assert res["model"].prior().stiffness == pytest.approx(CUBE["stiffness"], rel=1e-6)  # not in the grid: kept
    cfg["stages"]["grid"] = {"group": "pads", "friction": [0.1]}
    with pytest.raises(ConfigError, match="stages.grid.group"):
        fit_law(cfg, out=tmp_path / "run2")
    cfg["stages"]["grid"] = {"static_friction": [0.5, 1.0]}  # a Coulomb model has no static/kinetic ratio to scan
    with pytest.raises(ConfigError, match="model.stribeck"):
        fit_law(cfg, out=tmp_path / "run3")
    # with model.stribeck the grid scans the ratio like any other prior parameter
    cfg["model"] = {**cfg["model"], "stribeck": True, "prior": {**CUBE, "stribeck_speed": 0.2}}
    res = fit_law(cfg, out=tmp_path / "run4")
    rows = res["metrics"]["grid"]["rows"]
    assert [r["static_friction"] for r in rows] == [0.5, 1.0] and rows[0]["score"] != rows[1]["score"]
    assert res["model"].prior().static_friction == pytest.approx(res["metrics"]["grid"]["best"]["static_friction"], rel=1e-6)


def test_law_checkpoint_roundtrip(tmp_path):
    from surrogate.model.checkpoint import export_checkpoint, load_checkpoint, read_card

    net = _perturbed(ContactLawGNN(prior=TABLE, prior_body=PAD, corrections=True), scale=0.3)
    with torch.no_grad():
        net.log_friction[1] += 0.2  # a "fitted" prior the card must record
    export_checkpoint(net, tmp_path / "ck")
    card = read_card(tmp_path / "ck")
    assert card["model"]["class"] == "surrogate.model.contact_law.ContactLawGNN"
    assert card["model"]["hparams"]["prior_body"]["friction"] == pytest.approx(np.exp(np.log(1.0) + 0.2), rel=1e-6)
    back, _ = load_checkpoint(tmp_path / "ck")
    scene = build_scene(make_object("box", 0), hand="parallel_jaw", setting="table", contact_mode="external")
    d = scene.make_data()
    mujoco.mj_step1(scene.model, d)
    g = Stepper(scene, net).builder.build(scene.model, [d], dtype=torch.float64).graph
    torch.testing.assert_close(back(g), net(g))


def test_static_kinetic_law_checkpoint_roundtrip_and_prior_checks(tmp_path):
    """A static/kinetic law's fitted ratio and Stribeck speed go into the card and come back; they change the
    forces (a slow-sliding cube brakes harder); a ratio other than 1 without ``stribeck`` is refused."""
    from surrogate.model.checkpoint import export_checkpoint, load_checkpoint, read_card

    net = ContactLawGNN(prior=STRIBECK, corrections=False, friction_iterations=1, stribeck=True).eval()
    with torch.no_grad():
        net.log_static_friction[0] += 0.1
    assert net.prior().static_friction == pytest.approx(1.8 * np.exp(0.1), rel=1e-6)
    assert len(net.prior_parameters()) == 5
    export_checkpoint(net, tmp_path / "ck")
    card = read_card(tmp_path / "ck")
    assert card["model"]["hparams"]["stribeck"] is True
    assert card["model"]["hparams"]["prior"]["static_friction"] == pytest.approx(1.8 * np.exp(0.1), rel=1e-6)
    back, _ = load_checkpoint(tmp_path / "ck")
    scene = _cube_scene()
    d = _free_data(scene, [0, 0, 0.0522], [1, 0, 0, 0], [0.02, 0, 0], [0, 0, 0])  # a face on the ground, sliding slowly
    mujoco.mj_step1(scene.model, d)
    g = Stepper(scene, net).builder.build(scene.model, [d], dtype=torch.float64).graph
    torch.testing.assert_close(back(g), net(g))
    coulomb = ContactLawGNN(prior=CUBE, corrections=False, friction_iterations=1).eval()
    with torch.no_grad():
        assert float(net(g)[:, 0].sum()) < 1.2 * float(coulomb(g)[:, 0].sum()) < 0  # more braking against the slip
    with pytest.raises(ValueError, match="stribeck"):
        ContactLawGNN(prior=STRIBECK, corrections=False)


# -- the released rig surrogate in closed loop ----------------------------------------------------
@pytest.mark.parametrize("env_id", ["ContactSurrogate/GripperGrasp-v0", "ContactSurrogate/HandGrasp-v0",
                                    pytest.param("ContactSurrogate/JacoGrasp-v0", marks=needs_jaco)])
@pytest.mark.parametrize("family", ["box", "cylinder", "capsule"])
def test_released_rig_surrogate_leaves_an_untouched_object_at_rest(env_id, family):
    """The hand held still above the table for 60 env steps (1.2 s): the object moves < 2 mm (the release gate's
    own function, ``eval/release_gates.py``)."""
    from surrogate.paths import REPO_ROOT

    row = eval_script("release_gates").held_still(env_id, family, str(REPO_ROOT / "checkpoints" / "rig_default"))
    assert not row["terminated"] and row["fallbacks"] == 0
    assert row["mm"] < 2.0


def test_checkpoint_integrity_is_checked(tmp_path):
    from surrogate.model.checkpoint import CheckpointError, export_checkpoint, load_checkpoint

    export_checkpoint(ContactLawGNN(prior=CUBE), tmp_path / "ck")
    w = tmp_path / "ck" / "weights.safetensors"
    data = bytearray(w.read_bytes())
    data[-3] ^= 0xFF  # a flipped byte in the last tensor
    w.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="content hash"):
        load_checkpoint(tmp_path / "ck")
    import json

    export_checkpoint(ContactLawGNN(prior=CUBE), tmp_path / "ck2")
    card = json.loads((tmp_path / "ck2" / "card.json").read_text())
    card["model"]["hparams"] = ["not", "a", "dict"]
    (tmp_path / "ck2" / "card.json").write_text(json.dumps(card))
    with pytest.raises(CheckpointError, match="hparams"):
        load_checkpoint(tmp_path / "ck2")


@needs_shared("contactnets_cube")
def test_training_never_overwrites_a_release(tmp_path):
    """train.py exports under the run's folder; --release refuses an existing release without --overwrite."""
    import subprocess
    import sys

    from surrogate.importers.contactnets import import_contactnets
    from surrogate.paths import REPO_ROOT

    root = tmp_path / "cube"
    import_contactnets(SHARED / "contactnets_cube", root, progress=False)
    release = REPO_ROOT / "checkpoints" / "cube_tosses"
    before = {p.name: p.read_bytes() for p in release.iterdir()}
    base = [sys.executable, str(REPO_ROOT / "train.py"), "fit", "-c", str(REPO_ROOT / "configs/train/cube_tosses.yaml"),
            "--set", f"data.root={root}", "--set", "data.bench_split=null", "--set", "data.val_min=0",
            "--set", "data.max_train_episodes=2", "--set", "data.max_val_episodes=2", "--set", "stages.prior.epochs=0",
            "--set", "stages.corrections.epochs=0", "--set", f"out_dir={tmp_path / 'run'}"]
    subprocess.run(base, check=True, cwd=tmp_path, capture_output=True)
    assert (tmp_path / "run" / "export" / "card.json").is_file()
    r = subprocess.run(base + ["--release"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode != 0 and "--overwrite" in r.stderr
    assert {p.name: p.read_bytes() for p in release.iterdir()} == before


# -- the force signal -----------------------------------------------------------------------------
def test_twin_reports_the_force_the_object_exerts_on_the_ground():
    """A cube settled on the ground pushes the ground (the world body) down with its weight."""
    scene = _cube_scene()
    model = ContactLawGNN(prior=CUBE, corrections=False).eval()
    z0 = 0.0524 + 0.001
    s0 = torch.tensor([[0, 0, z0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]], dtype=torch.float64)
    with torch.no_grad():
        pos, _, f = Twin(scene).rollout(model, s0, 150, substeps=4, force_bodies=[[0, -1]])
    weight = Twin(scene).mass * 9.81
    assert f.shape == (1, 150, 2, 3)
    assert torch.all(f[0, 0] == 0) and torch.all(f[0, :, 1] == 0)  # frame 0: no step yet; -1: no body
    np.testing.assert_allclose(f[0, -1, 0].numpy(), [0, 0, -weight], atol=0.01 * weight)


def test_force_loss_is_relative_zero_at_a_match_and_robust_to_blowups():
    from surrogate.learn.objective import force_loss

    meas = torch.zeros(1, 3, 1, 3, dtype=torch.float64)
    meas[0, :, 0, 0] = 4.0  # a 4 N grip
    valid = torch.tensor([[[False], [True], [True]]])
    w = torch.tensor([0.5], dtype=torch.float64)
    assert float(force_loss(meas.clone(), meas, valid, w)) == pytest.approx(0.0, abs=1e-6)
    double = force_loss(2 * meas, meas, valid, w)
    assert float(double) == pytest.approx(np.log1p(4.0 / 4.5))
    blown = meas.clone()
    blown[0, 2, 0, 0] = 1000.0
    assert float(force_loss(blown, meas, valid, w)) < 3.0  # a squeezed-through window cannot drown a batch
    bad0 = meas.clone()
    bad0[0, 0] = 99.0
    assert float(force_loss(bad0, meas, valid, w)) == pytest.approx(0.0, abs=1e-6)  # invalid frames do not count


@pytest.mark.parametrize("prior, corrections", [(dict(TABLE), False), (dict(CUBE), False), (dict(TABLE), True),
                                                 (dict(CUBE), True), (dict(TABLE, presliding_stiffness=1e4), True)])
def test_the_steppers_numpy_law_equals_the_twins_torch_law(prior, corrections):
    """The stepper computes every law's terms in numpy (``numpy_law_terms``: a constant law from the contact arrays
    alone, building no graph; a network's from its per-contact parameters); they equal the torch terms the twin
    trains through (``law_terms`` on the graph), for a gripper holding a box in three states, with a network whose
    corrections are far from zero and with the presliding spring and a stored state."""
    from surrogate.bench.speed import grasped_state
    from surrogate.sim.law_solve import _terms, contact_jacobians, law_forces

    body = dict(PAD) if prior.get("units") == "si" else dict(prior, stiffness=3e3)
    if "presliding_stiffness" in prior:
        body["presliding_stiffness"] = 1e3
    model = ContactLawGNN(prior=prior, prior_body=body, corrections=corrections).eval()
    torch.manual_seed(0)
    if corrections:
        with torch.no_grad():
            for p in (*model.decoder.parameters(), *model.stiffness_mlp.parameters()):
                p.normal_(0.0, 0.5)  # corrections far from zero: the per-contact parameters differ
    scene = build_scene(make_object("box", 0), hand="parallel_jaw", setting="table")
    m = scene.model
    d0 = grasped_state(scene, seconds=0.9)
    datas = []
    for k in range(3):  # three environments in different states (contacts in and out of the pads)
        d = mujoco.MjData(m)
        mujoco.mj_copyData(d, m, d0)
        d.qvel[scene.object_dof_adr:scene.object_dof_adr + 3] += [0.01 * k, -0.02 * k, 0.0]
        datas.append(d)
    st = Stepper(scene, model, on_bad_force="fallback")
    st.set_mode(m, "surrogate")
    for d in datas:
        mujoco.mj_step1(m, d)
    builder = st.builder
    cb = builder.build(m, datas, dtype=torch.float64, dynamics=True)
    assert cb.num_contacts >= 6 and cb._graph is None
    state = None
    if model.presliding:  # a stored displacement, inside the cone or not: the law makes it safe either way
        E = cb.num_contacts
        state = ContactState(np.random.default_rng(0).normal(0, 1e-4, (E, 3)), np.full(E, 0.1), np.full(E, 1.0),
                             np.full(E, 1e3))
    f0, w0, a, b, n, mu, eps, spring, spin = _terms(m, cb, model, builder, J=contact_jacobians(builder, cb), state=state)
    assert cb._graph is None  # no torch graph: the constant law reads the contacts, a network the batch's arrays
    kw = {} if state is None else {"state": ContactState(*(torch.from_numpy(x) for x in state))}
    with torch.no_grad():
        t = model.law_terms(cb.graph, **kw)
    assert np.abs(f0).max() > 0.1
    # the same float64 arithmetic on the same state; the contact velocity is J qvel here and the bodies' twists on
    # the graph there, which round differently (4e-9 relative in f0 through the damping term)
    for name, x in (("f0", f0), ("w0", w0), ("a", a), ("b", b), ("mu", mu)):
        np.testing.assert_allclose(x, t[name].numpy(), rtol=1e-6, atol=1e-9, err_msg=name)
    if spring is not None:
        np.testing.assert_allclose(spring[0], t["z"].numpy(), rtol=1e-6, atol=1e-12)
        np.testing.assert_allclose(spring[1], t["kz"].numpy(), rtol=1e-12)
    if corrections:  # and the network's parameters are not the constant law's
        const = ContactLawGNN(prior=prior, prior_body=body, corrections=False).eval()
        assert np.abs(_terms(m, cb, const, builder, J=contact_jacobians(builder, cb), state=state)[2] - a).max() > 1e-3
    F, _ = law_forces(m, datas, cb, model, builder)
    assert np.isfinite(F).all()
