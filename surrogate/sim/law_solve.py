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

Cost per environment: ``mj_fwdActuation`` + ``mj_fwdAcceleration`` (for ``qacc_smooth``), one
``mj_jacBodyCom`` per moving body in contact, one ``mj_solveM`` and a small dense solve.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from ..errors import ConfigError
from ..model.law import semi_implicit_solve_joint


def _skew(r: np.ndarray) -> np.ndarray:
    """[E, 3] -> [E, 3, 3]."""
    z = np.zeros(len(r))
    x, y, w = r[:, 0], r[:, 1], r[:, 2]
    return np.stack([np.stack([z, -w, y], -1), np.stack([w, z, -x], -1), np.stack([-y, x, z], -1)], -2)


def law_forces(m: mujoco.MjModel, datas, cb, model, *, generalized: bool = False):
    """[E, 3] forces (N, world, on the object) of a law model for a ``ContactBatch`` ``cb`` of ``datas``;
    with ``generalized`` also [B, nv] their generalized forces ``J^T F`` (object and other bodies), which
    the stepper adds to ``qfrc_applied`` in one write per environment instead of a ``mj_applyFT`` per body.

    ``datas`` must be right after ``mj_step1`` with ``qfrc_applied`` zeroed (as the stepper leaves them).
    Per environment only MuJoCo's calls run in Python; the rest is batched over environments (contacts
    padded to the largest count; a padded or separated contact has K = 0 and gets no force).
    """
    if getattr(model, "friction_iterations", 0):
        raise ConfigError("the hybrid stepper linearizes friction once per step; a model with friction_iterations > 0 "
                          "would step differently from the twin it was trained through", key="friction_iterations")
    g = cb.graph
    E = cb.num_contacts
    if E == 0:
        return (np.zeros((0, 3)), np.zeros((cb.num_envs, m.nv))) if generalized else np.zeros((0, 3))
    with torch.inference_mode():
        t = model.law_terms(g)
    f0, a, b = (t[k].numpy() for k in ("f0", "a", "b"))
    n = t["n"].numpy()
    Kn = cb.K
    node_body = g.body_id[:Kn].numpy()
    dynamic = g.static[:Kn].numpy() < 0.5
    envs = np.unique(cb.env[f0 > 0])
    if not len(envs):
        return (np.zeros((E, 3)), np.zeros((cb.num_envs, m.nv))) if generalized else np.zeros((E, 3))
    B, nv, dt = len(envs), m.nv, m.opt.timestep
    slot = np.full(cb.num_envs, -1)
    slot[envs] = np.arange(B)
    keep = np.flatnonzero(slot[cb.env] >= 0)
    env = slot[cb.env[keep]]
    # position of each contact within its environment (contacts of one env are contiguous)
    first = np.searchsorted(env, np.arange(B))
    row = np.arange(len(keep)) - first[env]
    C = int(row.max()) + 1
    # Jacobians of every node body's COM, per environment (MuJoCo calls, then numpy)
    Jp, Jr = np.zeros((B, Kn, 3, nv)), np.zeros((B, Kn, 3, nv))
    qv = np.zeros((B, nv))
    movers = [(int(k), int(node_body[k])) for k in np.flatnonzero(dynamic)]
    for j, i in enumerate(envs):
        d = datas[i]
        mujoco.mj_fwdActuation(m, d)
        mujoco.mj_fwdAcceleration(m, d)
        for k, body in movers:
            mujoco.mj_jacBodyCom(m, d, Jp[j, k], Jr[j, k], body)
        qv[j] = d.qacc_smooth
    qv = qv * dt + np.stack([datas[i].qvel for i in envs])
    node = cb.node[keep] - cb.env[keep] * Kn
    Jc = (Jp[env, 0] - _skew(cb.r_obj[keep]) @ Jr[env, 0]) - (Jp[env, node] - _skew(cb.r_oth[keep]) @ Jr[env, node])
    J = np.zeros((B, C, 3, nv))
    J[env, row] = Jc
    X = np.zeros((B, 3 * C, nv))
    Jf = J.reshape(B, 3 * C, nv)
    for j, i in enumerate(envs):
        mujoco.mj_solveM(m, datas[i], X[j], Jf[j])
    Kc = np.zeros((B, C, 3, 3))
    Kc[env, row] = a[keep, None, None] * np.eye(3) + b[keep, None, None] * n[keep, :, None] * n[keep, None, :]
    w0 = np.zeros((B, C, 3))
    w0[env, row] = f0[keep, None] * n[keep]
    # the joint space (object 6 + hand dofs) is smaller than the contact space (3 per contact)
    F, _ = semi_implicit_solve_joint(Kc, J, X.transpose(0, 2, 1), w0, qv, dt)
    out = np.zeros((E, 3))
    out[keep] = F[env, row]
    if not generalized:
        return out
    # J^T F: the forces on the object and, opposite, on the other bodies, as generalized forces
    qfrc = np.zeros((cb.num_envs, nv))
    qfrc[envs] = np.einsum("bkv,bk->bv", Jf, F.reshape(B, 3 * C))
    return out, qfrc
