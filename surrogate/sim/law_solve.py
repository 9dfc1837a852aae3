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

Cost per environment: ``mj_fwdActuation`` + ``mj_fwdAcceleration`` (for ``qacc_smooth``), one
``mj_jacBodyCom`` per moving body in contact, one ``mj_solveM`` and a small dense solve.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from ..model.law import semi_implicit_solve


def _skew(r: np.ndarray) -> np.ndarray:
    """[E, 3] -> [E, 3, 3]."""
    z = np.zeros(len(r))
    x, y, w = r[:, 0], r[:, 1], r[:, 2]
    return np.stack([np.stack([z, -w, y], -1), np.stack([w, z, -x], -1), np.stack([-y, x, z], -1)], -2)


def law_forces(m: mujoco.MjModel, datas, cb, model) -> np.ndarray:
    """[E, 3] forces (N, world, on the object) of a law model for a ``ContactBatch`` ``cb`` of ``datas``.

    ``datas`` must be right after ``mj_step1`` with ``qfrc_applied`` zeroed (as the stepper leaves them).
    """
    g = cb.graph
    E = cb.num_contacts
    if E == 0:
        return np.zeros((0, 3))
    with torch.inference_mode():
        t = model.law_terms(g)
    f0, a, b = (t[k].numpy() for k in ("f0", "a", "b"))
    n = t["n"].numpy()
    K = a[:, None, None] * np.eye(3) + b[:, None, None] * n[:, :, None] * n[:, None, :]  # [E, 3, 3]
    rhs0 = f0[:, None] * n
    builder = cb.K
    node_body = np.asarray(g.body_id[:builder].numpy())
    static = np.asarray(g.static[:builder].numpy()) > 0
    S_obj, S_oth = _skew(cb.r_obj), _skew(cb.r_oth)
    out = np.zeros((E, 3))
    active = f0 > 0
    envs = np.unique(cb.env[active])
    nv = m.nv
    jacp, jacr = np.zeros((3, nv)), np.zeros((3, nv))
    for i in envs:
        d = datas[i]
        sel = np.flatnonzero((cb.env == i) & active)
        mujoco.mj_fwdActuation(m, d)
        mujoco.mj_fwdAcceleration(m, d)
        local = cb.node[sel] - i * builder
        J = np.zeros((len(sel), 3, nv))
        for k in np.unique(np.r_[0, local]):
            if static[k]:
                continue
            mujoco.mj_jacBodyCom(m, d, jacp, jacr, int(node_body[k]))
            if k == 0:
                J += jacp[None] - S_obj[sel] @ jacr[None]
            rows = local == k
            if k != 0 and rows.any():
                J[rows] -= jacp[None] - S_oth[sel][rows] @ jacr[None]
        J = J.reshape(-1, nv)
        X = np.zeros_like(J)
        mujoco.mj_solveM(m, d, X, J)
        W = J @ X.T
        Kb = np.zeros((3 * len(sel), 3 * len(sel)))
        for j in range(len(sel)):
            Kb[3 * j:3 * j + 3, 3 * j:3 * j + 3] = K[sel[j]]
        u_free = J @ (d.qvel + m.opt.timestep * d.qacc_smooth)
        out[sel] = semi_implicit_solve(Kb, W, rhs0[sel].ravel(), u_free, m.opt.timestep).reshape(-1, 3)
    return out
