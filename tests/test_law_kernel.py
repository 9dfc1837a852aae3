"""The compiled law step (``surrogate.sim.law_kernel``) against the numpy path it replaces in the stepper
(``law_solve.numpy_law_forces``), on batches where contacts come and go, for the released laws, a network's
per-contact parameters, static/kinetic friction and the friction re-linearization; and what it does with a system
that is not finite."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from surrogate.bench.speed import grasped_state
from surrogate.model.batch_graph import GraphBuilder
from surrogate.model.checkpoint import load_checkpoint
from surrogate.model.contact_law import ContactLawGNN
from surrogate.objects import make_object
from surrogate.paths import release_checkpoint
from surrogate.scenes import build_scene, set_contact_mode
from surrogate.sim import Stepper, step
from surrogate.sim.law_kernel import kernel_eligible
from surrogate.sim.law_solve import _kernel_forces, law_forces, numpy_law_forces

torch.set_num_threads(1)


def _batch(scene, n: int, kick: float):
    """n ``MjData`` from a grasp, the object kicked differently in each, then stepped with the owned pairs external so
    that contacts come and go (different counts per environment), each right after ``mj_step1`` and the smooth
    acceleration, as the stepper leaves them for the law."""
    m = scene.model
    d0 = grasped_state(scene, seconds=0.9)
    set_contact_mode(m, scene, "external")
    datas = []
    for k in range(n):
        d = mujoco.MjData(m)
        mujoco.mj_copyData(d, m, d0)
        d.qvel[scene.object_dof_adr:scene.object_dof_adr + 6] += kick * k * np.array([1.0, -0.5, 0.7, 3.0, -2.0, 1.0])
        for _ in range(5 * k):
            mujoco.mj_step(m, d)
        mujoco.mj_step1(m, d)
        mujoco.mj_fwdActuation(m, d)
        mujoco.mj_fwdAcceleration(m, d)
        datas.append(d)
    return datas


def _both(scene, model, datas):
    builder = GraphBuilder.from_scene(scene)
    cb = builder.build(scene.model, datas, dtype=torch.float64, dynamics=True, patch=model.patch)
    feats = None
    if model.corrections:
        with torch.inference_mode():
            feats = model.features(cb.graph)
    fast = _kernel_forces(scene.model, datas, cb, model, builder, feats, None, True)
    slow = numpy_law_forces(scene.model, datas, cb, model, builder, features=feats, accelerated=True)
    return cb, fast, slow


def _network(stribeck: bool = False, spin: bool = False, **kw):
    """A network on an SI law of pad-like stiffness (static/kinetic friction with ``stribeck``, torsional and rolling
    friction with ``spin``)."""
    torch.manual_seed(0)
    prior = {"units": "si", "stiffness": 2e5, "damping": 1.0, "friction": 0.8}
    if stribeck:
        prior.update(static_friction=1.3, stribeck_speed=0.01)
    if spin:
        prior.update(torsional_friction=0.004, rolling_friction=0.001)
    model = ContactLawGNN(corrections=True, prior=prior, stribeck=stribeck, **kw).eval()
    with torch.no_grad():  # a network whose corrections are far from zero
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model


@pytest.mark.parametrize("hand", ["parallel_jaw", "three_finger"])
@pytest.mark.parametrize("which", ["release", "network", "stribeck_iterated", "spin", "spin_law_iterated",
                                   "ellipse", "ellipse_law_iterated"])
def test_compiled_step_equals_the_numpy_path(hand, which):
    """Forces and generalized forces of the compiled step equal the numpy path's to 1e-10 (relative to the largest),
    on 4 environments with different contact counts (one without force), for the released rig law, a network's
    per-contact parameters, static/kinetic friction with two re-linearizations, torsional and rolling friction
    (a network's, and a constant law's re-linearized), and the pads as patches whose friction and torsion share one
    limit (``friction_ellipse``: a network's, and a constant law's re-linearized)."""
    scene = build_scene(make_object("box", 0), hand=hand, setting="table")
    if which == "release":
        model = load_checkpoint(release_checkpoint("rig_default"))[0]
    elif which == "network":
        model = _network()
    elif which == "spin":
        model = _network(spin=True)
    elif which == "ellipse":
        model = _network(spin=True, friction_ellipse=True)
    elif which in ("spin_law_iterated", "ellipse_law_iterated"):
        model = ContactLawGNN(corrections=False, friction_iterations=2, prior={
            "units": "si", "stiffness": 2e5, "damping": 1.0, "friction": 0.8, "torsional_friction": 0.004,
            "rolling_friction": 0.002}, friction_ellipse=which == "ellipse_law_iterated").eval()
    else:
        model = _network(stribeck=True, friction_iterations=2)
    datas = _batch(scene, 4, 0.6)
    cb, (F, q), (F0, q0) = _both(scene, model, datas)
    counts = cb.contact_set.counts
    assert cb.num_contacts >= 8 and len(set(counts.tolist())) > 1, counts
    assert np.abs(F0).max() > 0.05 and np.isfinite(F).all()
    np.testing.assert_allclose(F, F0, rtol=0, atol=1e-10 * np.abs(F0).max())
    np.testing.assert_allclose(q, q0, rtol=0, atol=1e-10 * np.abs(q0).max())


def test_cube_release_on_the_table_equals_the_numpy_path():
    """The cube release (object-weight units, iterated friction) on a tossed cube: the compiled step equals numpy."""
    model = load_checkpoint(release_checkpoint("cube_tosses"))[0]
    scene = build_scene(make_object("box", 0), hand="parallel_jaw", setting="table")
    m = scene.model
    d = mujoco.MjData(m)
    mujoco.mj_resetData(m, d)
    set_contact_mode(m, scene, "external")
    d.qpos[scene.object_qpos_adr + 2] -= 0.0005  # pressed into the table
    d.qvel[scene.object_dof_adr:scene.object_dof_adr + 6] = [0.3, -0.1, -0.2, 1.0, 0.5, -2.0]
    mujoco.mj_forward(m, d)
    mujoco.mj_step1(m, d)
    mujoco.mj_fwdActuation(m, d)
    mujoco.mj_fwdAcceleration(m, d)
    assert getattr(model, "friction_iterations", 0) > 0
    cb, (F, q), (F0, q0) = _both(scene, model, [d])
    assert cb.num_contacts >= 4 and np.abs(F0).max() > 0.1
    np.testing.assert_allclose(F, F0, rtol=0, atol=1e-10 * np.abs(F0).max())
    np.testing.assert_allclose(q, q0, rtol=0, atol=1e-10 * np.abs(q0).max())


def test_the_stepper_takes_the_compiled_step_only_for_laws_without_state(monkeypatch):
    """The released law and a network without history take the compiled step; the presliding spring, history
    features and a recorded solve (``tape``) take the numpy path; the stepper's wrenches and states in a closed loop
    equal those of the same steps with the numpy path in its place."""
    import surrogate.sim.hybrid_step as hybrid_step

    scene = build_scene(make_object("box", 0), hand="parallel_jaw", setting="table")
    builder = GraphBuilder.from_scene(scene)
    release = load_checkpoint(release_checkpoint("rig_default"))[0]
    assert kernel_eligible(release, builder, tape=None)
    assert kernel_eligible(_network(), builder, tape=None)
    assert not kernel_eligible(release, builder, tape=[])
    spring = ContactLawGNN(corrections=False, prior={"units": "si", "presliding_stiffness": 100.0})
    assert not kernel_eligible(spring, builder, tape=None)
    history = ContactLawGNN(corrections=True, history=True)
    assert not kernel_eligible(history, builder, tape=None)

    def run():
        st = Stepper(scene, release)
        d = grasped_state(scene, seconds=0.5)
        wrenches = []
        for _ in range(50):
            step(scene.model, d, st)
            wrenches.append(st.last_wrench.copy())
        return np.array(wrenches), d.qpos.copy()

    Wk, qk = run()
    monkeypatch.setattr(hybrid_step, "law_forces", numpy_law_forces)
    Wn, qn = run()
    assert np.abs(Wn).max() > 0.1
    np.testing.assert_allclose(Wk, Wn, rtol=0, atol=1e-8 * np.abs(Wn).max())
    np.testing.assert_allclose(qk, qn, rtol=0, atol=1e-9)


def test_a_non_finite_system_gives_nan_for_its_environment_only(monkeypatch):
    """A non-finite law (an infinite stiffness at one environment's contacts) gives NaN forces and generalized forces
    for that environment only (the stepper's force guard then falls back to analytic contact there); the other
    environment's are its own solve's, bit for bit."""
    scene = build_scene(make_object("box", 0), hand="parallel_jaw", setting="table")
    m = scene.model
    builder = GraphBuilder.from_scene(scene)
    datas = _batch(scene, 2, 0.2)
    cb = builder.build(m, datas, dtype=torch.float64, dynamics=True, graph=False)
    assert (cb.contact_set.counts > 0).all()
    release = load_checkpoint(release_checkpoint("rig_default"))[0]
    F_ok, q_ok = law_forces(m, datas, cb, release, builder, accelerated=True)
    table = release.numpy_law_table

    def infinite_at_env0(moving, **kw):
        t, rows, eps = table(moving, **kw)
        t = t[rows].copy()
        t[cb.env == 0, 0] = np.inf
        return t, np.arange(len(rows)), eps

    monkeypatch.setattr(release, "numpy_law_table", infinite_at_env0)
    F, q = law_forces(m, datas, cb, release, builder, accelerated=True)
    assert np.isnan(F[cb.env == 0]).all() and np.isnan(q[0]).all()
    np.testing.assert_array_equal(F[cb.env == 1], F_ok[cb.env == 1])
    np.testing.assert_array_equal(q[1], q_ok[1])
