"""The law step's per-contact-set tables (the speed issue, batch 1): the contact set a builder keeps between steps,
the Jacobians built from per-(environment, node) tables, and the two forms of ``law.cross``."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from surrogate.bench.speed import grasped_state
from surrogate.model.batch_graph import GraphBuilder
from surrogate.model.law import cross
from surrogate.objects import make_object
from surrogate.scenes import build_scene, set_contact_mode
from surrogate.sim.law_solve import contact_jacobians

torch.set_num_threads(1)


def _kicked_batch(scene, n: int, kick: float):
    """n MjData of ``scene`` from the grasp, the object kicked differently in each (contacts come and go)."""
    d0 = grasped_state(scene, seconds=0.9)
    out = []
    for k in range(n):
        d = mujoco.MjData(scene.model)
        mujoco.mj_copyData(d, scene.model, d0)
        d.qvel[scene.object_dof_adr:scene.object_dof_adr + 6] += kick * k * np.array([1.0, -0.5, 0.7, 3.0, -2.0, 1.0])
        out.append(d)
    return out


@pytest.mark.parametrize("hand, n", [("parallel_jaw", 3), ("three_finger", 3), ("parallel_jaw", 1)])
def test_contact_jacobians_are_mujocos_point_jacobians(hand, n):
    """Every contact's relative-velocity Jacobian equals MuJoCo's ``mj_jac`` at the contact point on the object
    minus the same on the other body (slides, hinges and the free joint; environments with different contact
    counts in one batch; a batch of one takes the small-array branch), and J qvel is the contact's relative
    velocity."""
    scene = build_scene(make_object("box", 0), hand=hand, setting="table")
    m = scene.model
    datas = _kicked_batch(scene, n, 0.5)
    builder = GraphBuilder.from_scene(scene)
    set_contact_mode(m, scene, "external")  # the owned pairs push nothing: the kicked objects move apart
    for d in datas:
        for _ in range(40):
            mujoco.mj_step(m, d)
        mujoco.mj_step1(m, d)
    cb = builder.build(m, datas, dtype=torch.float64, dynamics=True)
    assert cb.num_contacts >= 6 and (n == 1 or len(set(cb.contact_set.counts.tolist())) > 1)
    J = contact_jacobians(builder, cb)
    jp, jr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
    pos = cb.dynamics[0]
    ref = np.zeros_like(J)
    for e in range(cb.num_contacts):
        d = datas[cb.env[e]]
        for body, s in ((scene.object_body_id, 1.0), (int(builder.node_body[cb.contact_set.local[e]]), -1.0)):
            mujoco.mj_jac(m, d, jp, jr, pos[e], body)
            ref[e] += s * jp
    assert np.abs(ref).max() > 0.5 and (np.abs(ref[:, :, 6:]) > 0).any()  # the hand's columns take part
    np.testing.assert_allclose(J, ref, rtol=0, atol=1e-12)
    v = np.einsum("eiv,ev->ei", J, cb.dynamics[3][cb.env])
    vel, omega = cb.vel, cb.omega
    o, k = cb.env * cb.K, cb.node
    np.testing.assert_allclose(v, vel[o] + cross(omega[o], cb.r_obj) - vel[k] - cross(omega[k], cb.r_oth),
                               rtol=0, atol=1e-12)


def test_contact_set_is_kept_while_the_pairs_stay_and_renewed_when_they_change():
    """The builder keeps one contact set while the same geom pairs touch, makes a new one when they change, and
    every batch it builds equals a fresh builder's (nothing stale)."""
    scene = build_scene(make_object("box", 0), hand="parallel_jaw", setting="table")
    m = scene.model
    datas = _kicked_batch(scene, 2, 0.4)
    builder = GraphBuilder.from_scene(scene)
    set_contact_mode(m, scene, "external")
    sets, hits = [], 0
    for _ in range(40):
        for d in datas:
            mujoco.mj_step(m, d)  # no forces from the owned pairs: the kicked object leaves the pads
            mujoco.mj_step1(m, d)
        cb = builder.build(m, datas, dtype=torch.float64, dynamics=True)
        fresh = GraphBuilder.from_scene(scene).build(m, datas, dtype=torch.float64, dynamics=True)
        hits += bool(sets) and cb.contact_set is sets[-1]
        if not sets or cb.contact_set is not sets[-1]:
            sets.append(cb.contact_set)
        for f in ("env", "node", "r_obj", "r_oth", "normal", "dist"):
            np.testing.assert_array_equal(getattr(cb, f), getattr(fresh, f), err_msg=f)
        for f in ("counts", "start", "cid", "sign", "g_obj", "g_oth"):
            np.testing.assert_array_equal(getattr(cb.contact_set, f), getattr(fresh.contact_set, f), err_msg=f)
        assert not fresh.contact_set.solve  # its Jacobian tables are made anew below
        np.testing.assert_array_equal(contact_jacobians(builder, cb), contact_jacobians(builder, fresh))
    assert hits >= 5 and len(sets) >= 2, (hits, len(sets))
    # the same contact counts with other pairs (rows reversed, one contact's geoms swapped): a new set
    for d in datas:
        g = d.contact.geom
        g[:] = g[::-1, ::-1].copy()
    cb = builder.build(m, datas, dtype=torch.float64, dynamics=True)
    fresh = GraphBuilder.from_scene(scene).build(m, datas, dtype=torch.float64, dynamics=True)
    assert cb.contact_set is not sets[-1]
    for f in ("env", "node", "r_oth", "normal"):
        np.testing.assert_array_equal(getattr(cb, f), getattr(fresh, f), err_msg=f)


@pytest.mark.parametrize("shape", [(12, 3), (4, 12, 3), (3072, 3)])
def test_cross_small_and_large_forms_are_the_same_bits(shape):
    """``law.cross`` takes an outer product and a matmul on small arrays and component products on large ones:
    both give the bits of ``a1 b2 - a2 b1`` (and broadcast)."""
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=shape), rng.normal(size=shape)
    ref = np.stack([a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1], a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2],
                    a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]], axis=-1)
    np.testing.assert_array_equal(cross(a, b), ref)
    np.testing.assert_array_equal(cross(a, b[..., :1, :]), np.cross(a, b[..., :1, :]))
