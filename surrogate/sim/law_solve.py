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

The same system is solved in joint coordinates (``joint_solve.solve_joint``, the one solve of the law, which the twin
and training through the stepper differentiate: nv unknowns instead of 3 per contact, 12 against 36 for a parallel
jaw holding a box at 12 points); ``law_kernel`` is its compiled fast path, held to it by ``tests/test_law_kernel.py``.

Cost per environment: ``mj_fwdActuation`` + ``mj_fwdAcceleration`` (for ``qacc_smooth``); the contact
Jacobians (from MuJoCo's motion dofs ``cdof``, as ``mj_jac``), the contacts' relative velocities (``J qvel``),
the dense inertia (from ``MjData.M``) and the solves run in one call of the compiled step (``law_kernel``) for a law
without per-contact state, and batched over environments otherwise (``numpy_law_forces``, the solve in torch;
``GraphBuilder.build(..., dynamics=True)`` reads the arrays); what follows from the contact set alone (the
Jacobians' signs and columns, the layout) is derived once per set (``batch_graph.ContactSet``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import mujoco
import numpy as np
import torch

from ..model.data_views import DataViews
from ..model.history import ContactState, contact_keys
from ..model.joint_solve import Spin, solve_joint
from ..model.law import contact_velocities, cross, patch_law, spin_law, spin_slip
from ..model.network_numpy import numpy_network
from ..model.presliding import contact_state_after, with_presliding
from .law_kernel import kernel_eligible, law_step


def contact_jacobians(builder, cb) -> np.ndarray:
    """[E, 3, nv] the relative-velocity Jacobians (object point minus other body's point) of every contact,
    vectorized over environments from MuJoCo's motion dofs as ``mj_jac`` computes them: for a point p on body b
    and each dof j of b's chain, ``J[:, j] = cdof_lin[j] + cdof_ang[j] x (p - subtree_com[root(b)])``, with sign
    +1 on the object's chain and -1 on the other body's (none for a static one).

    Written as ``J[:, j] = s_j (L_j + cdof_ang[j] x p)`` with ``L_j = cdof_lin[j] - cdof_ang[j] x subtree_com``
    (each dof's point velocity at the world origin): ``s L`` and ``s cdof_ang`` are made once per environment and
    node (a few dozen rows), so that per contact only gathers, and a cross product for the dofs that rotate
    (``GraphBuilder.dof_rotates``: a sliding dof's column is ``s L``, the same for every point), remain. The
    signs and the columns any contact uses are derived once per contact set (``ContactSet.solve``).

    ``cb`` must carry ``dynamics`` (``GraphBuilder.build(..., dynamics=True)``). An articulated object's builder
    (``link_graph.LinkGraphBuilder``): each contact with the dofs of the link it touches (``link_jacobians``)."""
    if hasattr(builder, "body_chain"):
        from .link_graph import link_jacobians

        return link_jacobians(builder, cb)
    pos, cdof, _, _, dof_com = cb.dynamics
    cs, nv, K = cb.contact_set, cdof.shape[1], cb.K
    tab = cs.solve.get("jacobian")
    if tab is None:
        tab = cs.solve["jacobian"] = _jacobian_table(builder, cs, nv)
    sign_t, sign_rot, cols, rot, rot_cols = tab
    B = cb.num_envs
    cd = cdof[:, cols]  # [B, c, 6]: (angular, linear) per dof
    ang = cd[..., :3]
    L = cd[..., 3:] - cross(ang, dof_com[:, cols])  # [B, c, 3]
    # per (env, node): s L in the Jacobian's layout [B * K, 3, c], so that one gather makes J, and s cdof_ang
    sL = (np.ascontiguousarray(L.transpose(0, 2, 1))[:, None] * sign_t).reshape(B * K, 3, -1)
    sA = np.take((sign_rot * ang[:, None, rot]).reshape(B * K, len(rot), 3), cs.node, axis=0)  # [E, r, 3]
    if isinstance(cols, slice):
        J = np.take(sL, cs.node, axis=0)  # [E, 3, nv], contiguous: the solve reshapes it without a copy
    else:
        J = np.zeros((len(cs.env), 3, nv))
        J[:, :, cols] = np.take(sL, cs.node, axis=0)
    if sA.size <= 192:  # a batch of one: the fewest numpy calls (one cross product, one scatter)
        J.transpose(0, 2, 1)[:, rot_cols] += cross(sA, pos[:, None, :])
    else:  # many contacts: one rotating column at a time, [E, 3] products with long rows
        for i, j in enumerate(rot_cols):
            J[:, :, j] += cross(sA[:, i], pos)
    return J


def angular_jacobians(builder, cb) -> np.ndarray:
    """[E, 3, nv] the relative angular-velocity Jacobians (the object's body minus the other body's) of every contact:
    column j is ``s_j cdof_ang[j]`` with ``contact_jacobians``' signs (zero for a sliding dof). For torsional and
    rolling friction (``law.spin_law``)."""
    cdof = cb.dynamics[1]
    cs = cb.contact_set
    if hasattr(builder, "body_chain"):  # an articulated object: the dofs of the link each contact touches
        gb = builder.geom_body
        sign = builder.body_chain[gb[cs.g_obj]] - builder.body_chain[gb[cs.g_oth]]
    else:
        sign = builder.dof_sign[cs.local]  # [E, nv]
    return np.ascontiguousarray((sign[..., None] * cdof[cs.env][..., :3]).transpose(0, 2, 1))


def _jacobian_table(builder, cs, nv: int) -> tuple:
    """``contact_jacobians``' tables of a contact set: (signs [K, 1, c] of the c used columns per node, signs
    [K, r, 1] of the r rotating ones, the used columns (a slice when all), the rotating ones: among them, and
    as columns of J)."""
    K = len(builder.node_body)
    sign = builder.dof_sign  # [K, nv]: contacts of the object with node k
    used = np.zeros(K, dtype=bool)
    used[cs.local] = True
    cols = np.flatnonzero((sign[used] != 0).any(axis=0))
    rot = np.flatnonzero(builder.dof_rotates[cols])  # among ``cols``
    return (np.ascontiguousarray(sign[:, None, cols]), np.ascontiguousarray(sign[:, cols[rot], None]),
            slice(None) if len(cols) == nv else cols, rot, cols[rot].tolist())


class SolveRecord(NamedTuple):
    """One surrogate step's solved system (``law_forces`` with a ``tape``), numpy: the ``ContactBatch`` ``cb`` (all
    E contacts; its graph), the contacts' ``state`` (``history.ContactState`` or None), ``rows`` (None: every
    contact; else the contact rows of the environments that solved), ``envs`` (``slice(None)`` or the indices of
    the nB environments that solved), ``counts`` [nB] their contacts; of those rows and environments the
    Jacobians ``J`` [R, 3, nv], the inertia ``M`` [nB, nv, nv], the free velocity ``qv`` [nB, nv] and the solution
    ``F`` [R, 3], ``v1`` [nB, nv]; ``Jw`` [R, 3, nv] the angular Jacobians of a law with torsional and rolling
    friction (``angular_jacobians``; None without)."""

    cb: object
    J: np.ndarray
    M: np.ndarray
    qv: np.ndarray
    state: object
    rows: np.ndarray | None
    envs: object
    counts: np.ndarray
    F: np.ndarray
    v1: np.ndarray
    Jw: np.ndarray | None = None


def constant_law(model) -> bool:
    """Whether ``model`` is a law without a network (``ContactLawGNN`` with ``corrections=False``): its terms come
    from the contact arrays alone (``numpy_law_terms``), so its step needs no graph."""
    return not getattr(model, "corrections", True) and hasattr(model, "numpy_law_terms")


def _network_parameters(model, cb, features, state) -> np.ndarray:
    """[E, 3] or [E, 4] the per-contact law parameters the model's network gives on the batch's graph (numpy): by its
    numpy copy (``model.network_numpy``) where it has one, else by the torch model."""
    net = numpy_network(model)
    if net is not None:
        return net.law_parameters(cb.arrays, features=features, state=state)
    kw = {} if state is None else {"state": ContactState(*(torch.from_numpy(x) for x in state))}
    with torch.inference_mode():
        return model.law_parameters(cb.graph, features=features, **kw).double().numpy()


def _terms(m: mujoco.MjModel, cb, model, builder, features=None, J=None, state=None):
    """``(f0, w0, a, b, n, mu, eps, spring, spin)`` of every contact, in numpy (``ContactLawGNN.numpy_law_terms``): the
    constant law's from the contact arrays alone, a network's from its per-contact parameters on the batch's graph
    (``features``: its precomputed inputs, as the stepper checks them); ``spring``: None, or ``(z, kz, a_spring)``
    [E, 3], [E], [E] of the presliding spring (``presliding.with_presliding``), from the contacts' ``state`` (a
    ``history.ContactState``, z in world axes; None: fresh contacts); ``spin``: None, or ``(Jw, a_w, b_w, mu_spin,
    mu_roll, eps_w, None, ellipse)`` of torsional and rolling friction (``joint_solve.Spin``'s fields, numpy)."""
    presliding, spinning = getattr(model, "presliding", False), getattr(model, "spin", False)
    params = None if constant_law(model) else _network_parameters(model, cb, features, state)
    cs = cb.contact_set
    v = contact_velocities(J, cb.dynamics[3], cs.counts, cs.env)  # the relative velocity at each contact, J qvel
    n = cb.normal
    vn = np.einsum("ej,ej->e", v, n)
    vt = v - vn[:, None] * n
    speed = np.sqrt(np.einsum("ej,ej->e", vt, vt) + 1e-30)
    dt = m.opt.timestep
    moving, gravity = builder.static[cs.local] < 0.5, math.sqrt(float(m.opt.gravity @ m.opt.gravity))
    t = model.numpy_law_terms(-cb.dist, vn, speed, moving, length=builder.length,
                              mass=float(m.body_mass[builder.object_body]), gravity=gravity, dt=dt,
                              with_spring=presliding or spinning, params=params)
    f0, a, b, mu, eps = t[:5]  # mu [E] (or [E, 3] with stribeck), eps a scalar
    spin = None
    if spinning:  # torsion and rolling at this step's relative angular velocity, J_w qvel
        Jw = angular_jacobians(builder, cb)
        mu_s, mu_r = model.numpy_spin_parameters(moving, length=builder.length, params=params)
        eps_w = eps / builder.length  # the slip regularization over the object's size, as law_terms
        w_n, w_t2 = spin_slip(contact_velocities(Jw, cb.dynamics[3], cs.counts, cs.env), n)
        ellipse = bool(getattr(model, "ellipse", False))
        if ellipse:  # friction and torsion on one limit (law.patch_law): the normal damping a + b kept
            a_e, a_w, b_w = patch_law(t[5], mu, speed * speed, w_n, w_t2, e=mu_s, mu_roll=mu_r, eps=eps, eps_w=eps_w)
            a, b = a_e, b + a - a_e
        else:
            a_w, b_w = spin_law(t[5], w_n, w_t2, mu_spin=mu_s, mu_roll=mu_r, eps_w=eps_w)
        spin = (Jw, a_w, b_w, mu_s, mu_r, eps_w, None, ellipse)
    if not presliding:
        return f0, f0[:, None] * n, a, b, n, mu, eps, None, spin
    fn, kz = t[5:]
    z, k_last = (np.zeros((len(f0), 3)), None) if state is None else (state.z, state.k_last)
    w0, a, b, a_z, z = with_presliding(f0, a, b, n, fn, mu, speed * speed, kz, z, k_last, dt)
    return f0, w0, a, b, n, mu, eps, (z, kz, a_z), spin


def law_forces(m: mujoco.MjModel, datas, cb, model, builder, *, features=None, views=None, accelerated: bool = False,
               history=None, tape=None):
    """``(F [E, 3], qfrc [B, nv])``: the forces (N, world, on the object) of a law model for a ``ContactBatch``
    ``cb`` of ``datas`` (built by ``builder``, a ``GraphBuilder``), and their generalized forces ``J^T F``
    (object and other bodies), which the stepper adds to ``qfrc_applied`` in one write per environment. With
    torsional and rolling friction (a model with ``spin``) ``F`` is [E, 6], each contact's force and its torque about
    the contact point (N m), and ``qfrc`` is ``J^T F + J_w^T T``.

    ``datas`` must be right after ``mj_step1`` with ``qfrc_applied`` the user's alone (as the stepper leaves it), and
    ``cb`` built with ``dynamics=True``; ``views``: the batch's ``data_views.DataViews`` (made here if not given),
    or a ``sim.copies.CopiesViews`` (B copies in one ``MjData``: then ``m`` is the scene's one-copy model, and
    ``accelerated`` must be True);
    ``accelerated``: ``mj_fwdActuation`` and ``mj_fwdAcceleration`` already ran on every MjData after ``mj_step1``
    (the stepper calls them in its ``mj_step1`` loop), else they are called here.
    ``history``: the ``model.history.ContactHistory`` of the batch, for a model with the presliding spring (or
    history features): the contacts' state is looked up before the solve and the state after it stored (None: every
    contact starts fresh and nothing is kept).
    ``tape``: a list that each solve appends its system to (``SolveRecord``), for training through this step
    (``learn.actuated`` solves it again in torch); None: nothing is kept.
    A law without per-contact state whose solve is not recorded is stepped by the compiled step (``law_kernel``);
    every other by ``numpy_law_forces``, which it is held to (``tests/test_law_kernel.py``).
    """
    if cb.num_contacts and kernel_eligible(model, builder, tape=tape):
        return _kernel_forces(m, datas, cb, model, builder, features, views, accelerated)
    return numpy_law_forces(m, datas, cb, model, builder, features=features, views=views, accelerated=accelerated,
                            history=history, tape=tape)


def numpy_law_forces(m: mujoco.MjModel, datas, cb, model, builder, *, features=None, views=None,
                     accelerated: bool = False, history=None, tape=None):
    """``law_forces`` in numpy, batched over environments (contacts padded to the largest count; a padded or separated
    contact has K = 0 and gets no force): the path of every law, and the one of a law with per-contact state
    (presliding spring, history features) or a recorded solve (``tape``). Arguments as ``law_forces``."""
    E, nv = cb.num_contacts, m.nv
    stateful = history is not None and (getattr(model, "presliding", False) or getattr(model, "history", False))
    keys = contact_keys(cb, builder.length) if stateful else None
    if E == 0:
        if stateful:
            history.store(keys, ContactState.zeros(0))
        return np.zeros((0, 3)), np.zeros((cb.num_envs, nv))
    J = contact_jacobians(builder, cb)
    state = history.lookup(keys) if stateful else None
    f0, w0, a, b, n, mu, eps, spring, spin = _terms(m, cb, model, builder, features, J, state)
    dt = m.opt.timestep
    cs = cb.contact_set
    every = cs.solve.get("every_env")  # every environment has a contact
    if every is None:
        every = cs.solve["every_env"] = bool(cs.counts.min() > 0)
    active = None if every and (f0 > 0).all() else np.bincount(cb.env[f0 > 0], minlength=cb.num_envs) > 0
    if active is None or active.all():  # the usual case: every environment solves, no rows to pick
        envs, rows, counts, start = slice(None), None, cs.counts, cs.start
        todo = datas
    elif not active.any():
        if stateful:
            history.store(keys, ContactState.zeros(E))
        return np.zeros((E, 3)), np.zeros((cb.num_envs, nv))
    else:
        out, qfrc = np.zeros((E, 3 if spin is None else 6)), np.zeros((cb.num_envs, nv))
        envs = np.flatnonzero(active)
        rows = np.flatnonzero(active[cb.env])  # every contact of the environments with a force (contiguous per env)
        counts = cs.counts[envs]
        start = np.cumsum(counts) - counts  # first row of each environment's contacts within ``rows``
        todo = () if accelerated else [datas[i] for i in envs]
    qv, M = _free_motion(m, datas, cb, builder, envs, () if accelerated else todo, views)
    nB = len(qv)
    a_z = None if spring is None else spring[2]
    if rows is not None:  # only the environments with a force
        w0, a, b, n, J = w0[rows], a[rows], b[rows], n[rows], J[rows]
        mu, eps = (x[rows] if np.ndim(x) else x for x in (mu, eps))
        a_z = None if a_z is None else a_z[rows]
        spin = None if spin is None else tuple(x[rows] if np.ndim(x) else x for x in spin)
    # the joint space (object 6 + hand dofs) is smaller than the contact space (3 per contact)
    its = getattr(model, "friction_iterations", 0)
    try:
        F, v1 = solve_law(w0, a, b, n, J, counts, M, qv, dt, mu=mu, eps=eps, iterations=its, a_spring=a_z, spin=spin)
    except torch.linalg.LinAlgError:  # one singular system stops the batched solve: each env alone, NaN where
        F, v1 = _solve_each(w0, a, b, n, J, start, counts, M, qv, dt, mu, eps, its, a_z, spin)  # singular (the fallback)
    wrench = F  # [R, 3], or [R, 6] with the torques about the contact points (``spin``)
    if spin is not None:  # the torques' generalized forces J_w^T T
        F, T, Jw = F[:, :3], F[:, 3:], spin[0]
    if tape is not None:
        tape.append(SolveRecord(cb, J, M, qv, state, rows, envs, counts, F, v1, None if spin is None else Jw))
    if stateful:
        _store_state(history, keys, state, spring, F, contact_velocities(J, v1, counts), n, mu, dt, rows, E)
    # J^T F: the forces on the object and, opposite, on the other bodies, as generalized forces
    q = _generalized(J, F, counts, start, nB)
    if spin is not None:
        q = q + _generalized(Jw, T, counts, start, nB)
    if rows is None:
        return wrench, q
    out[rows], qfrc[envs] = wrench, q
    return out, qfrc


def _generalized(J: np.ndarray, F: np.ndarray, counts: np.ndarray, start: np.ndarray, nB: int) -> np.ndarray:
    """[nB, nv] ``J^T F`` summed over each environment's contacts (``J`` [E, 3, nv], ``F`` [E, 3])."""
    nv = J.shape[2]
    if counts.min() == counts.max():  # the same count everywhere: one batched product
        C3 = 3 * int(counts[0])
        return (J.reshape(nB, C3, nv).transpose(0, 2, 1) @ F.reshape(nB, C3, 1))[..., 0]
    return np.add.reduceat(np.einsum("eiv,ei->ev", J, F), start, axis=0)


def _kernel_forces(m, datas, cb, model, builder, features, views, accelerated) -> tuple[np.ndarray, np.ndarray]:
    """``law_forces`` of a law without per-contact state, in one call of the compiled step (``law_kernel``)."""
    if not accelerated:
        for d in datas:
            mujoco.mj_fwdActuation(m, d)
            mujoco.mj_fwdAcceleration(m, d)
    pos, cdof, Msparse, qvel, dof_com = cb.dynamics
    cs = cb.contact_set
    params = None if constant_law(model) else _network_parameters(model, cb, features, None)
    group = cs.solve.get("group")  # [E] bool: the other side moves (prior group ``body``), else a static surface
    if group is None:
        group = cs.solve["group"] = builder.static[cs.local] < 0.5
    gx, gy, gz = m.opt.gravity
    table, rows, eps = model.numpy_law_table(group, length=builder.length, mass=float(m.body_mass[builder.object_body]),
                                             gravity=math.sqrt(gx * gx + gy * gy + gz * gz), params=params)
    sign = builder.dof_sign
    acc = (views or DataViews(datas)).stack("qacc_smooth").reshape(cb.num_envs, m.nv)
    take, nonzero = builder.M_take
    c_ = np.ascontiguousarray
    return law_step(c_(pos), c_(cb.normal), -cb.dist, cs.start, cs.counts, cs.local, c_(cdof), c_(dof_com), c_(qvel),
                    c_(acc), c_(Msparse), take, nonzero, sign, table, rows, float(model.exponent), eps,
                    float(m.opt.timestep), bool(getattr(model, "stribeck", False)),
                    int(getattr(model, "friction_iterations", 0)), bool(getattr(model, "spin", False)),
                    eps / builder.length, bool(getattr(model, "ellipse", False)))


def _free_motion(m, datas, cb, builder, envs, todo, views) -> tuple[np.ndarray, np.ndarray]:
    """``(qv [B, nv], M [B, nv, nv])`` of the environments ``envs``: the end-of-step joint velocity without contact
    forces and the dense joint-space inertia. The free velocity needs this step's smooth acceleration: MuJoCo's
    calls run on ``todo`` (the ``MjData`` whose acceleration is not computed yet)."""
    _, _, Msparse, qvel, _ = cb.dynamics
    for d in todo:
        mujoco.mj_fwdActuation(m, d)
        mujoco.mj_fwdAcceleration(m, d)
    acc = (views or DataViews(datas)).stack("qacc_smooth").reshape(cb.num_envs, m.nv)
    take, nonzero = builder.M_take
    return qvel[envs] + m.opt.timestep * acc[envs], np.where(nonzero, Msparse[envs][:, take], 0.0)


def solve_law(w0, a, b, n, J, counts, M, v_free, dt, *, mu=None, eps=None, iterations: int = 0, a_spring=None,
              spin=None):
    """``(F [E, 3], v' [B, nv])`` in numpy: ``joint_solve.solve_joint`` (float64) for B environments whose contacts
    are consecutive rows, ``counts`` [B] per environment (every one at least one). Arguments as ``solve_joint``'s,
    numpy arrays (``mu``, ``eps``, ``a_spring`` per contact, scalars or None; ``spin`` the fields of a
    ``joint_solve.Spin`` without ``w_other``: then ``F`` is [E, 6], force and torque). Raises
    ``torch.linalg.LinAlgError`` where a system is singular."""
    t = torch.from_numpy
    env = torch.repeat_interleave(torch.arange(len(counts)), t(np.asarray(counts, dtype=np.int64)))

    def opt(x):
        return t(np.ascontiguousarray(x, dtype=np.float64)) if np.ndim(x) else x

    sp = None if spin is None else Spin(*(opt(x) for x in spin))
    with torch.no_grad():
        F, v1, _ = solve_joint(t(w0), t(a), t(b), t(n), t(J), env, t(M), t(v_free), float(dt), mu=opt(mu),
                               eps=opt(eps), iterations=iterations, a_spring=opt(a_spring), spin=sp)
    return F.numpy(), v1.numpy()


def _solve_each(w0, a, b, n, J, start, counts, M, qv, dt, mu, eps, iterations, a_spring, spin=None) -> tuple:
    """``(F [E, 3] (or [E, 6] with ``spin``), v' [B, nv])`` of ``solve_law`` one environment at a time (after a batched solve met a singular
    system): an environment whose own system is singular gets NaN, which the stepper's force guard turns into an
    analytic fallback for that environment alone (``hybrid_step._bad_force_envs``)."""
    F, v1 = np.full((len(w0), 3 if spin is None else 6), np.nan), np.full(qv.shape, np.nan)
    for i, (s, c) in enumerate(zip(start.tolist(), counts.tolist())):
        if c == 0:
            continue
        r = slice(s, s + c)
        mu_r, eps_r, az_r = (x[r] if np.ndim(x) else x for x in (mu, eps, a_spring))
        spin_r = None if spin is None else tuple(x[r] if np.ndim(x) else x for x in spin)
        try:
            F[r], v1[i : i + 1] = solve_law(w0[r], a[r], b[r], n[r], J[r], counts[i : i + 1], M[i : i + 1],
                                            qv[i : i + 1], dt, mu=mu_r, eps=eps_r, iterations=iterations, a_spring=az_r,
                                            spin=spin_r)
        except torch.linalg.LinAlgError:
            pass
    return F, v1


def _store_state(history, keys, state, spring, F, u, n, mu, dt, rows, E) -> None:
    """The contacts' state after the step (``presliding.contact_state_after``) into ``history``; the contacts of the
    environments that did not solve (no force: ``rows`` leaves them out) are stored fresh."""
    sel = slice(None) if rows is None else rows
    if spring is None:  # history features without a spring: the force and the time under load only
        z, kz = np.zeros((len(F), 3)), np.zeros(len(F))
    else:
        z, kz = spring[0][sel], spring[1][sel]
    z_end, age, fn = contact_state_after(z, u, n, kz, mu, F, state.age[sel], dt)
    if rows is None:
        return history.store(keys, ContactState(z_end, age, fn, kz))
    out = ContactState.zeros(E)
    for full, part in zip(out, (z_end, age, fn, kz)):
        full[rows] = part
    history.store(keys, out)
