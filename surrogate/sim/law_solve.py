"""The semi-implicit solve of a contact law inside MuJoCo, with every body's mobility.

A law model (``ContactLawGNN.law_terms``) gives, per contact, the linearized law
``F(v') = f0 n - K v'`` with ``K = a I + b n n^T`` (``surrogate.model.law``). Inside MuJoCo the
end-of-step relative velocity at the contacts depends on *all* bodies that can move: the object,
and a hand whose fingertip pad is a light link on a servo. Solving only for the object (the
twin's ``solve_free_object``, exact when the other body is static or kinematic) would leave the
pad's side explicit: a stiff spring and a steep friction law on a 30 g link chatter and let a
held object creep. So, as the capture rig does (``surrogate.rig.physics``), the forces of each
environment solve

    (I + dt K W) F = f0 n - K u_free,      W = J M^-1 J^T,   u_free = J (qvel + dt qacc_smooth)

with ``J`` [3E, nv] the contacts' relative-velocity Jacobians (object point minus other body's
point), ``M`` MuJoCo's joint-space inertia and ``qacc_smooth`` this step's acceleration without
contact (gravity, servos, bias forces): the forces are the law's at the end-of-step velocity of
the whole system. For a free object against static bodies this is the same system as
``solve_free_object`` (``tests/test_contact_law.py`` checks the two agree).

The same system is solved in joint coordinates (``law.semi_implicit_solve_joint``: nv unknowns
instead of 3 per contact, 12 against 36 for a parallel jaw holding a box at 12 points).

Cost per environment: ``mj_fwdActuation`` + ``mj_fwdAcceleration`` (for ``qacc_smooth``); the contact
Jacobians (from MuJoCo's motion dofs ``cdof``, as ``mj_jac``), the dense inertia (from ``MjData.M``) and the
solves are numpy batched over environments (``GraphBuilder.build(..., dynamics=True)`` reads the arrays).
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
import torch

from ..model.batch_graph import DataViews
from ..model.law import cross, semi_implicit_solve_joint


def contact_jacobians(builder, cb, rows: np.ndarray | None = None) -> np.ndarray:
    """[n, 3, nv] the relative-velocity Jacobians (object point minus other body's point) of contacts ``rows``,
    vectorized over environments from MuJoCo's motion dofs as ``mj_jac`` computes them: for a point p on
    body b and each dof j of b's chain, ``J[:, j] = cdof_lin[j] + cdof_ang[j] x (p - subtree_com[root(b)])``,
    with sign +1 on the object's chain and -1 on the other body's (none for a static one). The signs and the
    columns any contact uses are derived once per contact set (``ContactSet.solve``); one expression then
    serves both sides of every contact. ``rows`` None: every contact.

    ``cb`` must carry ``dynamics`` (``GraphBuilder.build(..., dynamics=True)``)."""
    pos, cdof, _, _, dof_com = cb.dynamics
    cs, nv = cb.contact_set, cdof.shape[1]
    tab = cs.solve.get("jacobian")
    if tab is None:
        chain = builder.dof_chain
        sign = chain[0][None, :].astype(np.float64) - chain[cs.local] * ~cs.oth_static  # [E, nv]
        cols = np.flatnonzero((sign != 0).any(axis=0))
        cols = slice(None) if len(cols) == nv else cols
        tab = cs.solve["jacobian"] = (np.ascontiguousarray(sign[:, cols, None]), cols)
    sign, cols = tab
    env, p = (cs.env, pos) if rows is None else (cs.env[rows], pos[rows])
    if rows is not None:
        sign = sign[rows]
    cd = cdof[env][:, cols]  # [n, c, 6]: (angular, linear) per dof
    off = p[:, None, :] - dof_com[env][:, cols]  # [n, c, 3]
    J = np.zeros((len(env), 3, nv))  # [n, 3, nv], contiguous: the solve reshapes it without a copy
    Jt = J.transpose(0, 2, 1)  # [n, nv, 3]: the layout of cdof, a view written through
    blk = cd[..., 3:] + cross(cd[..., :3], off)
    if isinstance(cols, slice):
        np.multiply(sign, blk, out=Jt)
    else:
        Jt[:, cols] = sign * blk
    return J


def _terms(m: mujoco.MjModel, cb, model, builder, features=None):
    """``(f0, a, b, n, mu, eps)`` of every contact: numpy directly for a constant law (no network), else the model's
    ``law_terms`` on the batch's graph (``features``: its precomputed inputs, as the stepper checks them)."""
    if not getattr(model, "corrections", True) and hasattr(model, "constant_law_terms"):
        K = cb.K
        o = cb.env * K
        v = cb.vel[o] + cross(cb.omega[o], cb.r_obj) - cb.vel[cb.node] - cross(cb.omega[cb.node], cb.r_oth)
        n = cb.normal
        vn = np.einsum("ej,ej->e", v, n)
        vt = v - vn[:, None] * n
        speed = np.sqrt(np.einsum("ej,ej->e", vt, vt) + 1e-30)
        f0, a, b, mu, eps = model.constant_law_terms(-cb.dist, vn, speed, builder.static[cb.node % K] < 0.5,
                                                     length=builder.length, mass=float(m.body_mass[builder.object_body]),
                                                     gravity=math.sqrt(float(m.opt.gravity @ m.opt.gravity)),
                                                     dt=m.opt.timestep)
        return f0, a, b, n, mu, eps  # mu [E] (per prior group), eps a scalar
    with torch.inference_mode():
        t = model.law_terms(cb.graph, features=features)
    return tuple(t[k].numpy() if t[k].ndim else float(t[k]) for k in ("f0", "a", "b", "n", "mu", "eps"))


def law_forces(m: mujoco.MjModel, datas, cb, model, builder, *, features=None, views=None):
    """``(F [E, 3], qfrc [B, nv])``: the forces (N, world, on the object) of a law model for a ``ContactBatch``
    ``cb`` of ``datas`` (built by ``builder``, a ``GraphBuilder``), and their generalized forces ``J^T F``
    (object and other bodies), which the stepper adds to ``qfrc_applied`` in one write per environment.

    ``datas`` must be right after ``mj_step1`` with ``qfrc_applied`` zeroed (as the stepper leaves them), and
    ``cb`` built with ``dynamics=True``; ``views``: the batch's ``batch_graph.DataViews`` (made here if not given).
    Per environment only MuJoCo's calls run in Python; the rest is batched over environments (contacts
    padded to the largest count; a padded or separated contact has K = 0 and gets no force).
    """
    E, nv = cb.num_contacts, m.nv
    out, qfrc = np.zeros((E, 3)), np.zeros((cb.num_envs, nv))
    if E == 0:
        return out, qfrc
    f0, a, b, n, mu, eps = _terms(m, cb, model, builder, features)
    cs = cb.contact_set
    every = cs.solve.get("every_env")  # every environment has a contact
    if every is None:
        every = cs.solve["every_env"] = bool(cs.counts.min() > 0)
    active = None if every and (f0 > 0).all() else np.bincount(cb.env[f0 > 0], minlength=cb.num_envs) > 0
    if active is None or active.all():  # the usual case: every environment solves, no rows to pick
        envs, keep, rows, counts, start = slice(None), slice(None), None, cs.counts, cs.start
        todo = datas
    elif not active.any():
        return out, qfrc
    else:
        envs = np.flatnonzero(active)
        keep = rows = np.flatnonzero(active[cb.env])  # every contact of the environments with a force (contiguous per env)
        counts = cs.counts[envs]
        start = np.cumsum(counts) - counts  # first row of each environment's contacts within ``keep``
        todo = [datas[i] for i in envs]
    dt = m.opt.timestep
    # the contact-free end-of-step velocity needs this step's smooth acceleration: MuJoCo's calls, per env
    _, _, Msparse, qvel, _ = cb.dynamics
    acc = (views or DataViews(datas)).qacc_smooth
    for d in todo:
        mujoco.mj_fwdActuation(m, d)
        mujoco.mj_fwdAcceleration(m, d)
    nB = len(todo)
    qv = qvel[envs] + dt * np.concatenate(acc if rows is None else [acc[i] for i in envs]).reshape(nB, nv)
    J = contact_jacobians(builder, cb, rows)
    take, nonzero = builder.M_take
    M = np.where(nonzero, Msparse[envs][:, take], 0.0)  # [B, nv, nv] dense joint-space inertia
    if rows is not None:  # only the environments with a force
        f0, a, b, n = f0[rows], a[rows], b[rows], n[rows]
        mu, eps = (x[rows] if np.ndim(x) else x for x in (mu, eps))
    # the joint space (object 6 + hand dofs) is smaller than the contact space (3 per contact)
    F, _ = semi_implicit_solve_joint(f0, a, b, n, J, start, M, qv, dt, mu=mu, eps=eps,
                                     iterations=getattr(model, "friction_iterations", 0), counts=counts)
    out[keep] = F
    # J^T F: the forces on the object and, opposite, on the other bodies, as generalized forces
    if counts.min() == counts.max():  # the same count everywhere: one batched product
        C3 = 3 * int(counts[0])
        qfrc[envs] = (J.reshape(nB, C3, nv).transpose(0, 2, 1) @ F.reshape(nB, C3, 1))[..., 0]
    else:
        qfrc[envs] = np.add.reduceat(np.einsum("eiv,ei->ev", J, F), start, axis=0)
    return out, qfrc
