"""The pads as patches whose friction and torsion share one elliptic limit (``law.patch_law``, ``friction_ellipse``):
passive for any velocities and coefficients, zero at separation, the point law's friction at e = 0, the limit
surface's torques in the stepper, the patch's points at their centre, the twin equal to the stepper, and energy that
never grows with saturated corrections."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from surrogate.model.contact_law import ContactLawGNN
from surrogate.model.law import patch_law, point_law, spin_slip
from surrogate.model.patch import patch_centres
from surrogate.objects import make_object
from surrogate.scenes import build_scene
from surrogate.sim import Stepper, step
from surrogate.sim.twin import Twin

from .test_contact_law import CUBE, PAD, TABLE, _cube_scene, _perturbed, stepper_toss
from .test_spin_friction import dropped_spinning_cube_energy, held_box_batch

torch.set_num_threads(1)


def test_patch_law_only_dissipates_stays_inside_its_ellipse_and_vanishes_at_separation():
    """For random slips, spins, coefficients and normal forces: the linearized force ``-a v_t'`` and torque
    ``-(a_w I + b_w n n^T) w'`` never do positive work at any end-of-step velocity; at the velocity they are
    linearized at, ``(|F_t| / mu f_n)^2 + (T_n / (mu f_n e))^2 <= 1`` (the elliptic limit); both are zero where the
    normal force is; and with e = 0 the friction is the point law's."""
    rng = np.random.default_rng(0)
    N = 300
    n = rng.normal(size=(N, 3))
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    v_t2 = rng.exponential(0.01, N)
    w = rng.normal(0, 5, (N, 3))
    fn = np.where(rng.random(N) < 0.3, 0.0, rng.exponential(3.0, N))
    mu, e, eps = rng.uniform(0.1, 1.5, N), rng.exponential(0.003, N), 1e-4
    w_n, w_t2 = spin_slip(w, n)
    a, a_w, b_w = patch_law(fn, mu, v_t2, w_n, w_t2, e=e, mu_roll=rng.exponential(0.001, N), eps=eps, eps_w=1e-2)
    assert (a >= 0).all() and (a_w >= 0).all() and (a_w + b_w >= -1e-15).all()
    for _ in range(5):
        w1 = rng.normal(0, 5, (N, 3))
        T = -(a_w[:, None] * w1 + (b_w * (w1 * n).sum(-1))[:, None] * n)
        assert ((T * w1).sum(-1) <= 1e-12).all()
        assert np.abs(T[fn == 0]).max() == 0.0 and np.abs(a[fn == 0]).max() == 0.0
    on = fn > 0
    F_t, T_n = a * np.sqrt(v_t2), (a_w + b_w) * np.abs(w_n)
    assert F_t[on].max() > 0.3 * (mu * fn)[on].max() / 10  # the loads are not all negligible
    ratio = (F_t[on] / (mu * fn)[on]) ** 2 + (T_n[on] / (mu * fn * e)[on]) ** 2
    assert (ratio <= 1.0 + 1e-9).all() and ratio.max() > 0.9
    speed = np.sqrt(v_t2)
    a0 = point_law(np.full(N, 1e-3), np.zeros(N), speed, k=fn / 1e-3 ** 1.5, p=1.5, c=0.0, mu=mu, eps=eps, dt=1e-3)[1]
    a_e0 = patch_law(fn, mu, v_t2, w_n, w_t2, e=0.0, mu_roll=0.0, eps=eps, eps_w=1e-2)
    np.testing.assert_allclose(a_e0[0], a0, rtol=1e-12)
    np.testing.assert_allclose(a_e0[1] + a_e0[2], 0.0, atol=1e-15)  # no torsion with e = 0


def test_a_law_with_the_ellipse_needs_a_patch_length():
    with pytest.raises(ValueError, match="friction_ellipse"):
        ContactLawGNN(prior=TABLE, prior_body=PAD, friction_ellipse=True)
    m = ContactLawGNN(prior=TABLE, prior_body=dict(PAD, torsional_friction=0.002), friction_ellipse=True)
    assert m.hparams["friction_ellipse"] is True and m.patch[0].tolist() == [False, True]
    assert "friction_ellipse" not in ContactLawGNN(prior=TABLE, prior_body=dict(PAD, torsional_friction=0.002)).hparams


def test_patch_centres_moves_each_pairs_pushing_points_to_their_weighted_centre():
    pos = np.array([[0.0, 0, 0], [1.0, 0, 0], [0.0, 2, 0], [5.0, 5, 5], [7.0, 7, 7], [9.0, 9, 9]])
    depth = np.array([1.0, 3.0, -1.0, 2.0, 1.0, 1.0])  # the third does not push
    pair = np.array([4, 4, 4, 8, 9, 9])
    on = np.array([True, True, True, True, False, False])  # the last pair is in a group without patches
    out = patch_centres(pos, depth, pair, on, 1.0)
    np.testing.assert_allclose(out[:2], [[0.75, 0, 0]] * 2)
    np.testing.assert_array_equal(out[2:], pos[2:])  # separated, alone in its pair, or off: as found
    np.testing.assert_allclose(patch_centres(pos, depth, pair, on, 2.0)[0], [0.9, 0, 0])


def _sphere_spinning(prior: dict, *, w_z: float, v_x: float = 0.0):
    obj = make_object("sphere", 0, radius=0.03, density=1000.0)
    scene = build_scene(obj, setting="ground", timestep=0.001, contact_mode="external")
    model = ContactLawGNN(prior=prior, corrections=False, friction_iterations=1, friction_ellipse=True).eval()
    stepper = Stepper(scene, model)
    d = scene.make_data()
    for _ in range(300):  # settle
        step(scene.model, d, stepper)
    da = scene.object_dof_adr
    d.qvel[da], d.qvel[da + 5] = v_x, w_z
    return scene, stepper, d


def test_a_spinning_sphere_meets_the_patch_torque_and_less_of_it_while_it_slides():
    """On the ground a spinning sphere meets the torque ``mu f_n e`` of its patch (the stepper reports it); sliding
    at v while it spins at w, only ``mu f_n e^2 w / sqrt(v^2 + e^2 w^2)`` of it (the elliptic limit), and the
    friction force shrinks as ``v / sqrt(v^2 + e^2 w^2)`` (v, w: the end-of-step slip and spin, at which the
    re-linearized law is reported)."""
    e, mu = 0.004, TABLE["friction"]
    scene, stepper, d = _sphere_spinning(dict(TABLE, torsional_friction=e), w_z=20.0)
    m, b = scene.model, scene.object_body_id
    weight = m.body_mass[b] * -float(m.opt.gravity[2])
    step(m, d, stepper, nstep=5)
    assert stepper.last_wrench[0, 0, 5] == pytest.approx(-mu * weight * e, rel=0.02)
    scene, stepper, d = _sphere_spinning(dict(TABLE, torsional_friction=e), w_z=20.0, v_x=0.08)
    step(m, d, stepper)
    da = scene.object_dof_adr
    w = d.xmat[b].reshape(3, 3) @ d.qvel[da + 3:da + 6]  # the free joint's angular velocity is in the body frame
    slip = d.qvel[da] + np.cross(w, [0.0, 0.0, -0.03])[0]  # the contact point's, at the sphere's bottom
    s = np.hypot(slip, e * w[2])
    assert 0.03 < slip < 0.08 and w[2] > 19.0
    assert stepper.last_wrench[0, 0, 5] == pytest.approx(-mu * weight * e * e * w[2] / s, rel=0.03)
    assert stepper.last_wrench[0, 0, 0] == pytest.approx(-mu * weight * slip / s, rel=0.03)


@pytest.mark.parametrize("corrections, iterations", [(False, 0), (True, 1)])
def test_twin_matches_the_stepper_with_the_ellipse(corrections, iterations, torch_network):
    """The twin and the stepper solve the same patches: a spinning cube tossed onto the ground whose corner contacts
    act as one patch, 1 s (the twin's torch law and solve against the stepper's)."""
    scene = _cube_scene()
    model = ContactLawGNN(prior=dict(CUBE, torsional_friction=0.05), corrections=corrections,
                          friction_iterations=iterations, friction_ellipse=True)
    model = _perturbed(model, scale=0.5) if corrections else model.eval()
    stepper, ref, s0 = stepper_toss(scene, model, 148)
    with torch.no_grad():
        pos, _ = Twin(scene).rollout(model, s0, 148, substeps=4)
    np.testing.assert_allclose(pos.numpy(), ref, atol=1e-9)
    plain = ContactLawGNN(prior=dict(CUBE, torsional_friction=0.05), corrections=corrections,
                          friction_iterations=iterations)
    plain = _perturbed(plain, scale=0.5) if corrections else plain.eval()
    assert np.abs(stepper_toss(scene, plain, 148)[1] - ref).max() > 1e-3  # and the patches changed the toss


@pytest.mark.parametrize("seed", [0, 1])
def test_dropped_spinning_cube_never_gains_energy_with_the_ellipse_and_saturated_corrections(seed):
    model = _perturbed(ContactLawGNN(prior=dict(CUBE, torsional_friction=0.05, rolling_friction=0.01),
                                     corrections=True, friction_iterations=1, friction_ellipse=True), seed=seed)
    e0, es = dropped_spinning_cube_energy(model, seed)
    assert np.isfinite(es).all() and es.max() <= e0 + 1e-4 * abs(e0) and es[-1] < e0 - 0.1


def test_the_steppers_patch_terms_equal_the_twins_on_a_held_box():
    """A gripper holding a box: the pads' points at their centres, and the numpy terms of the patch law (MuJoCo's
    Jacobians) equal to the torch ones (the graph's twists), with the network's per-contact scaling far from one."""
    from surrogate.sim.law_solve import _terms, contact_jacobians

    model = ContactLawGNN(prior=TABLE, prior_body=dict(PAD, torsional_friction=0.003), corrections=True,
                          friction_ellipse=True)
    model = _perturbed(model, scale=0.3)
    m, datas, st = held_box_batch(model, lambda k: [0.01, 0.0, 0.02 * k, 0.3 * k, -0.2, 0.5])
    cb = st.builder.build(m, datas, dtype=torch.float64, dynamics=True, patch=model.patch)
    plain = st.builder.build(m, datas, dtype=torch.float64, dynamics=True)
    pads = st.builder.static[cb.contact_set.local] < 0.5
    assert pads.sum() >= 4 and np.abs(cb.dynamics[0] - plain.dynamics[0])[pads].max() > 1e-3
    np.testing.assert_array_equal(cb.dynamics[0][~pads], plain.dynamics[0][~pads])  # the table's as found
    terms = _terms(m, cb, model, st.builder, J=contact_jacobians(st.builder, cb))
    with torch.no_grad():
        t = model.law_terms(cb.graph)
    assert np.abs(terms[-1][2]).max() > 1e-5  # pads press and turn: torques
    for name, x, y in (("a", terms[2], t["a"]), ("b", terms[3], t["b"]), ("a_w", terms[-1][1], t["spin"].a),
                       ("b_w", terms[-1][2], t["spin"].b)):
        np.testing.assert_allclose(x, y.numpy(), rtol=1e-6, atol=1e-12, err_msg=name)
