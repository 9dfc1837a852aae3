"""Torsional and rolling friction of the law (``law.spin_law``): passive for any coefficients and any corrections,
zero at separation, the analytic deceleration of a spinning and of a rolling sphere, the twin equal to the stepper,
and a law without them unchanged."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from surrogate.model.contact_law import ContactLawGNN
from surrogate.model.law import LawPrior, spin_law, spin_slip
from surrogate.objects import make_object
from surrogate.scenes import build_scene
from surrogate.sim import Stepper, step
from surrogate.sim.twin import Twin

from .test_contact_law import CUBE, PAD, TABLE, _cube_scene, _energy, _free_data, _perturbed, stepper_toss

torch.set_num_threads(1)
SPIN = dict(torsional_friction=0.02, rolling_friction=0.01)  # lengths: in L (weight units) or m (si)


def test_spin_law_only_dissipates_and_vanishes_at_separation():
    """For random angular velocities, coefficients and normal forces, the linearized torque ``-(a I + b n n^T) w'``
    never does positive work at any end-of-step angular velocity, and is zero where the normal force is."""
    rng = np.random.default_rng(0)
    n = rng.normal(size=(200, 3))
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    w = rng.normal(0, 5, (200, 3))
    fn = np.where(rng.random(200) < 0.3, 0.0, rng.exponential(3.0, 200))
    a, b = spin_law(fn, *spin_slip(w, n), mu_spin=rng.exponential(0.01, 200), mu_roll=rng.exponential(0.01, 200),
                    eps_w=1e-2)
    for _ in range(5):
        w1 = rng.normal(0, 5, (200, 3))
        T = -(a[:, None] * w1 + (b * (w1 * n).sum(-1))[:, None] * n)
        assert ((T * w1).sum(-1) <= 1e-12).all()
        assert np.abs(T[fn == 0]).max() == 0.0
    # the largest torques: mu_spin f_n about the normal and mu_roll f_n about the tangents, approached when slipping
    a, b = spin_law(np.array([2.0]), np.array([50.0]), np.array([0.0]), mu_spin=0.01, mu_roll=0.0, eps_w=1e-3)
    assert (a + b)[0] * 50.0 == pytest.approx(0.02, rel=1e-3)


def test_a_prior_without_spin_is_the_law_before_it():
    """Zero coefficients are off: no parameter, no head, a card that reads as before."""
    m = ContactLawGNN(prior=TABLE, prior_body=PAD, corrections=True)
    assert not m.spin and not hasattr(m, "log_spin")
    assert "torsional_friction" not in LawPrior.from_json(TABLE).to_json()
    with pytest.raises(ValueError, match="torsional_friction"):
        LawPrior.from_json(dict(TABLE, torsional_friction=-1.0))
    on = ContactLawGNN(prior=TABLE, prior_body=dict(PAD, torsional_friction=0.003), corrections=True)
    assert on.spin and on.prior("body").torsional_friction == pytest.approx(0.003)
    assert on.prior("surface").torsional_friction == 0.0 and on.prior("body").rolling_friction == 0.0
    assert on.hparams["prior_body"]["torsional_friction"] == pytest.approx(0.003)


def _sphere_on_ground(prior: dict, *, w=(0.0, 0.0, 0.0), v=(0.0, 0.0, 0.0)):
    obj = make_object("sphere", 0, radius=0.03, density=1000.0)
    scene = build_scene(obj, setting="ground", timestep=0.001, contact_mode="external")
    model = ContactLawGNN(prior=prior, corrections=False, friction_iterations=1).eval()
    stepper = Stepper(scene, model)
    d = scene.make_data()
    for _ in range(300):  # settle
        step(scene.model, d, stepper)
    da = scene.object_dof_adr
    d.qvel[da:da + 3], d.qvel[da + 3:da + 6] = v, w
    return scene, stepper, d


def test_a_spinning_sphere_stops_at_the_torsional_deceleration():
    """A sphere spinning about the vertical touches the ground at one point: without torsion it keeps spinning;
    with ``mu_spin`` its spin falls at ``mu_spin m g / I`` (Coulomb torsion: a constant torque while it slips)."""
    prior = dict(TABLE, torsional_friction=0.002)
    scene, stepper, d = _sphere_on_ground(prior, w=(0.0, 0.0, 20.0))
    m, b, da = scene.model, scene.object_body_id, scene.object_dof_adr
    g = -float(m.opt.gravity[2])
    rate = 0.002 * m.body_mass[b] * g / m.body_inertia[b][2]  # rad/s^2
    step(m, d, stepper, nstep=200)
    assert d.qvel[da + 5] == pytest.approx(20.0 - rate * 0.2, rel=0.05)
    torque = 0.002 * m.body_mass[b] * g  # the stepper reports it (the pads' sensors in the envs read these wrenches)
    assert stepper.last_wrench[0, 0, 5] == pytest.approx(-torque, rel=0.02)
    step(m, d, stepper, nstep=int(20.0 / rate / 0.001))
    assert abs(d.qvel[da + 5]) < 0.05  # stopped, and not spun back
    scene, stepper, d = _sphere_on_ground(TABLE, w=(0.0, 0.0, 20.0))
    step(scene.model, d, stepper, nstep=200)
    assert d.qvel[scene.object_dof_adr + 5] > 19.9  # no torsion: the point contact cannot brake a spin


def test_a_rolling_sphere_slows_at_the_rolling_deceleration():
    """A sphere rolling without slip slows by a further ``5 mu_roll g / (7 R)`` (the torque ``mu_roll m g`` about the
    contact point, the rolling inertia ``7/5 m R^2``) than the same sphere without rolling friction (which the
    compliant, damped contact itself slows a little)."""
    R, v0, T = 0.03, 0.5, 0.3
    speed = []
    for prior in (TABLE, dict(TABLE, rolling_friction=0.001)):
        scene, stepper, d = _sphere_on_ground(prior, v=(v0, 0, 0), w=(0, v0 / R, 0))
        step(scene.model, d, stepper, nstep=int(T / 0.001))
        speed.append(d.qvel[scene.object_dof_adr])
    decel = 5 * 0.001 * -float(scene.model.opt.gravity[2]) / (7 * R)
    assert (speed[0] - speed[1]) / T == pytest.approx(decel, rel=0.05)


def dropped_spinning_cube_energy(model, seed: int) -> tuple[float, np.ndarray]:
    """(the energy at the start, [600] after each step) of a spinning cube dropped onto the ground under ``model``."""
    scene = _cube_scene()
    stepper = Stepper(scene, model)
    rng = np.random.default_rng(seed)
    d = _free_data(scene, [0, 0, 0.0524 * 1.8 + 0.05], rng.normal(size=4), [0.4, -0.2, 0.0], rng.normal(0, 6, 3))
    e0, es = _energy(scene, d), []
    for _ in range(600):
        step(scene.model, d, stepper)
        es.append(_energy(scene, d))
    return e0, np.array(es)


@pytest.mark.parametrize("seed", [0, 1])
def test_dropped_spinning_cube_never_gains_energy_with_saturated_spin_corrections(seed):
    model = _perturbed(ContactLawGNN(prior=dict(CUBE, **SPIN), corrections=True, friction_iterations=1), seed=seed)
    e0, es = dropped_spinning_cube_energy(model, seed)
    assert np.isfinite(es).all() and es.max() <= e0 + 1e-4 * abs(e0) and es[-1] < e0 - 0.1


@pytest.mark.parametrize("corrections, iterations", [(False, 0), (True, 1)])
def test_twin_matches_the_stepper_with_spin(corrections, iterations, torch_network):
    """The twin (the object's angular rows ``[0 I]``) and the stepper (MuJoCo's angular Jacobians) solve the same
    system: a spinning cube tossed onto the ground, 1 s, torsion and rolling on."""
    scene = _cube_scene()
    model = ContactLawGNN(prior=dict(CUBE, **SPIN), corrections=corrections, friction_iterations=iterations)
    model = _perturbed(model, scale=0.5) if corrections else model.eval()
    stepper, ref, s0 = stepper_toss(scene, model, 148)
    with torch.no_grad():
        pos, _ = Twin(scene).rollout(model, s0, 148, substeps=4)
    np.testing.assert_allclose(pos.numpy(), ref, atol=1e-9)
    plain, ref0, _ = stepper_toss(scene, ContactLawGNN(prior=CUBE, corrections=False,
                                                       friction_iterations=iterations).eval(), 148)
    assert np.abs(ref - ref0).max() > 1e-3  # and the torques changed the toss


def test_twin_gradients_reach_the_spin_parameters():
    scene = _cube_scene()
    model = ContactLawGNN(prior=dict(CUBE, **SPIN), corrections=True).train()
    s0 = torch.tensor([[0, 0, 0.06, 1.0, 0, 0, 0, 0.3, 0, 0, 0.0, 0.0, 8.0]], dtype=torch.float64)
    pos, quat = Twin(scene).rollout(model, s0, 30, substeps=4)
    (quat[:, -1, 3]).sum().backward()
    assert float(model.log_spin.grad.abs().sum()) > 0 and torch.isfinite(model.log_spin.grad).all()
    assert float(model.decoder[-1].weight.grad.abs().sum()) > 0  # the spin head is reached too


def held_box_batch(model, kick):
    """``(MjModel, two MjData, Stepper)``: a parallel-jaw gripper holding a box, the object's velocity kicked by
    ``kick(k)`` [6] in environment k, each MjData right after ``mj_step1`` with ``model`` owning the contacts."""
    from surrogate.bench.speed import grasped_state

    scene = build_scene(make_object("box", 0), hand="parallel_jaw", setting="table")
    m = scene.model
    d0 = grasped_state(scene, seconds=0.9)
    datas = []
    for k in range(2):
        d = mujoco.MjData(m)
        mujoco.mj_copyData(d, m, d0)
        d.qvel[scene.object_dof_adr:scene.object_dof_adr + 6] += kick(k)
        datas.append(d)
    st = Stepper(scene, model, on_bad_force="fallback")
    st.set_mode(m, "surrogate")
    for d in datas:
        mujoco.mj_step1(m, d)
    return m, datas, st


def test_the_steppers_spin_terms_equal_the_twins_on_a_held_box():
    """A gripper holding a box: the numpy terms of torsion and rolling (MuJoCo's angular Jacobians) equal the torch
    ones (the graph's twists), with the network's per-contact scaling far from one."""
    from surrogate.sim.law_solve import _terms, contact_jacobians, law_forces

    model = ContactLawGNN(prior=TABLE, prior_body=dict(PAD, torsional_friction=0.004, rolling_friction=0.001),
                          corrections=True)
    model = _perturbed(model, scale=0.3)
    m, datas, st = held_box_batch(model, lambda k: [0.0, 0.0, 0.0, 0.3 * k, -0.2, 0.5])
    cb = st.builder.build(m, datas, dtype=torch.float64, dynamics=True)
    spin = _terms(m, cb, model, st.builder, J=contact_jacobians(st.builder, cb))[-1]
    with torch.no_grad():
        t = model.law_terms(cb.graph)["spin"]
    assert np.abs(spin[1]).max() > 1e-4  # pads press: torques
    for name, x, y in (("a_w", spin[1], t.a), ("b_w", spin[2], t.b), ("mu_spin", spin[3], t.mu_spin)):
        np.testing.assert_allclose(x, y.numpy(), rtol=1e-6, atol=1e-12, err_msg=name)
    on = spin[3][spin[3] > 0]
    assert np.ptp(on) > 1e-2 * on.mean()  # the network scales each contact's torsion
    F, q = law_forces(m, datas, cb, model, st.builder)
    assert np.isfinite(F).all() and np.isfinite(q).all()


def test_the_compiled_steps_table_follows_the_spin_parameters():
    """The constant law's table (cached while the parameters do not change) carries torsion and rolling in SI units
    and follows an in-place edit of their log-parameters, as the closed-loop selection makes them."""
    import math

    model = ContactLawGNN(prior=dict(CUBE, **SPIN), corrections=False).eval()
    moving = np.array([False, True])
    kw = dict(length=0.1, mass=0.37, gravity=9.81)
    table, rows, _ = model.numpy_law_table(moving, **kw)
    assert table.shape == (2, 7) and table[0, 5] == pytest.approx(0.02 * 0.1) and table[0, 6] == pytest.approx(0.001)
    assert model.numpy_law_table(moving, **kw)[0] is table  # cached
    with torch.no_grad():
        model.log_spin[0] += math.log(2.0)
    assert model.numpy_law_table(moving, **kw)[0][0, 5] == pytest.approx(0.004)
    plain = ContactLawGNN(prior=CUBE, corrections=False).eval().numpy_law_table(moving, **kw)[0]
    assert (plain[:, 5:] == 0).all()
