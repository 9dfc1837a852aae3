"""The law's step compiled (numba): per environment, the contacts' Jacobians, the law at the contacts, the joint-space
semi-implicit solve and ``J^T F``, in one call for the whole batch.

The hybrid stepper's other path (``law_solve.numpy_law_forces``) does the same work in some 80 array calls per physics step
whatever the batch size; on a single environment with four contacts each call costs more than its arithmetic, and the
step costs ~10x MuJoCo's own. This kernel does it in one call with loops over the batch's environments and contacts
(tens of microseconds for one environment, a fraction of MuJoCo's step per environment for a batch of 64).

It takes the path of every law without per-contact state: the constant law (the releases) and a network's per-contact
parameters (``k, c, mu`` from ``law_parameters``), Coulomb or static/kinetic friction, with or without the friction
re-linearization (``friction_iterations``), with or without torsional and rolling friction (``spin``: each contact's
angular row after its own, as ``joint_solve.solve_joint`` orders them), alone or with friction on one limit
(``ellipse``: ``law.patch_law``). A law with the presliding spring or history
features, and a step whose solve is recorded for training (``Stepper.tape``), take that path, whose solve is the law's
one solve (``model.joint_solve.solve_joint``). ``tests/test_law_kernel.py`` holds the kernel to it to 1e-10.

The mathematics is the other path's, line for line (``law.point_law``, ``joint_solve.solve_joint``,
``law_solve.contact_jacobians``); only the linear solve differs: a Cholesky factorization (the system
``M + dt J^T K J`` is symmetric positive definite: ``M`` is, ``K = a I + b n n^T`` is semi-definite for a passive law)
where ``torch.linalg.solve`` uses LU. A system that is not positive definite or not finite gives NaN forces for that environment,
which the stepper's force guard turns into an analytic fallback for that environment alone, as the other path's
``LinAlgError`` does.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def _cholesky_solve(A, x):
    """Solve ``A y = x`` in place of ``x`` (``A`` [n, n] SPD, of which only the lower triangle is read; overwritten by
    its Cholesky factor); False when ``A`` is not positive definite or not finite."""
    n = A.shape[0]
    for j in range(n):
        s = A[j, j]
        for k in range(j):
            s -= A[j, k] * A[j, k]
        if not (s > 0.0) or not math.isfinite(s):
            return False
        d = math.sqrt(s)
        A[j, j] = d
        for i in range(j + 1, n):
            s = A[i, j]
            for k in range(j):
                s -= A[i, k] * A[j, k]
            A[i, j] = s / d
    for i in range(n):  # L y = x
        s = x[i]
        for k in range(i):
            s -= A[i, k] * x[k]
        x[i] = s / A[i, i]
    for i in range(n - 1, -1, -1):  # L^T v = y
        s = x[i]
        for k in range(i + 1, n):
            s -= A[k, i] * x[k]
        x[i] = s / A[i, i]
    return True


@njit(cache=True, inline="always")
def _coefficient(prm, s2, stribeck):
    """``law.friction_coefficient`` of one contact: ``prm`` its row of the law's table (k, c, mu_k, r, v_s); Coulomb
    ``mu_k`` unless ``stribeck``."""
    if not stribeck:
        return prm[2]
    return prm[2] * (1.0 + (prm[3] - 1.0) * math.exp(-s2 / (prm[4] * prm[4])))


@njit(cache=True, inline="always")
def _solve(J, n, w0, a, b, M, rhs0, dt, cols, F, u, v1, A, x, nJ):
    """One solve of the environment's system (``joint_solve._solve_once``): fills ``v1`` [nv], ``u`` [c, 3] (J v1) and
    ``F`` [c, 3]; False for a system that is not positive definite. ``A`` [nv, nv], ``x``, ``nJ`` [nv]: scratch."""
    c, nv, m = J.shape[0], J.shape[2], len(cols)
    A[:] = M
    x[:] = rhs0
    for e in range(c):
        if a[e] == 0.0 and b[e] == 0.0 and w0[e, 0] == 0.0 and w0[e, 1] == 0.0 and w0[e, 2] == 0.0:
            continue  # a contact without force adds nothing (a separated or padded one)
        for i in range(m):
            p = cols[i]
            x[p] += dt * (J[e, 0, p] * w0[e, 0] + J[e, 1, p] * w0[e, 1] + J[e, 2, p] * w0[e, 2])
            nJ[i] = n[e, 0] * J[e, 0, p] + n[e, 1] * J[e, 1, p] + n[e, 2] * J[e, 2, p]
        for i in range(m):  # the lower triangle only: the system is symmetric and the Cholesky reads no other
            p = cols[i]
            for j in range(i, m):
                q = cols[j]  # >= p: the columns are increasing
                JJ = J[e, 0, p] * J[e, 0, q] + J[e, 1, p] * J[e, 1, q] + J[e, 2, p] * J[e, 2, q]
                A[q, p] += dt * (a[e] * JJ + b[e] * nJ[i] * nJ[j])
    if not _cholesky_solve(A, x):
        return False
    for k in range(nv):
        v1[k] = x[k]
    for e in range(c):
        un = 0.0
        for i in range(3):
            s = 0.0
            for j in range(len(cols)):
                s += J[e, i, cols[j]] * x[cols[j]]
            u[e, i] = s
            un += s * n[e, i]
        for i in range(3):
            F[e, i] = w0[e, i] - a[e] * u[e, i] - b[e] * un * n[e, i]
    return True


@njit(cache=True, inline="always")
def _columns(sign, local, s0, n_c, used, cols):
    """The dofs (increasing) that any of the environment's contacts (rows s0 .. s0 + n_c) moves: ``cols[:m]``."""
    used[:] = False
    for e in range(n_c):
        for j in range(sign.shape[1]):
            if sign[local[s0 + e], j] != 0.0:
                used[j] = True
    m = 0
    for j in range(sign.shape[1]):
        if used[j]:
            cols[m] = j
            m += 1
    return cols[:m]


@njit(cache=True, inline="always")
def _spin_terms(J, n, e, env, cols, sign, local, r, cdof, qvel, prm, fn, eps_w, a, b):
    """Row ``e`` (a contact's angular row): its relative angular-velocity Jacobian (``law_solve.angular_jacobians``)
    and torsional and rolling friction linearized at this step's angular velocity (``law.spin_law``), which it
    returns (3 floats, world axes)."""
    w0_, w1_, w2_ = 0.0, 0.0, 0.0
    for j in cols:
        sg = sign[local[r], j]
        if sg == 0.0:
            continue
        J[e, 0, j], J[e, 1, j], J[e, 2, j] = sg * cdof[env, j, 0], sg * cdof[env, j, 1], sg * cdof[env, j, 2]
        w0_ += J[e, 0, j] * qvel[env, j]
        w1_ += J[e, 1, j] * qvel[env, j]
        w2_ += J[e, 2, j] * qvel[env, j]
    _spin_law(w0_, w1_, w2_, n, e, prm, fn, eps_w, a, b)
    return w0_, w1_, w2_


@njit(cache=True, inline="always")
def _spin_law(w0_, w1_, w2_, n, e, prm, fn, eps_w, a, b):
    """``a[e], b[e]`` of ``law.spin_law`` at the angular velocity (w0_, w1_, w2_), normal ``n[e]``, force ``fn``."""
    wn = w0_ * n[e, 0] + w1_ * n[e, 1] + w2_ * n[e, 2]
    t0, t1, t2 = w0_ - wn * n[e, 0], w1_ - wn * n[e, 1], w2_ - wn * n[e, 2]
    a_roll = prm[6] * fn / math.sqrt(t0 * t0 + t1 * t1 + t2 * t2 + eps_w * eps_w)
    a[e] = a_roll
    b[e] = prm[5] * fn / math.sqrt(wn * wn + eps_w * eps_w) - a_roll


@njit(cache=True, inline="always")
def _contact_terms(env, s0, cols, pos, n, depth, local, cdof, dof_com, qvel, sign, table, rows, p, eps, dt, stribeck,
                   spin, eps_w, ellipse, J, w0, a, b, v):
    """Fill the environment's contact Jacobians ``J`` [R, 3, nv] (``law_solve.contact_jacobians``) and the law's
    linearization at this step's relative velocity (``law.point_law``): ``w0`` [R, 3], ``a``, ``b`` [R]; with ``spin``
    each contact's rows are 2c (its point) and 2c + 1 (its torsion and rolling: ``_spin_terms``), else c. Returns
    whether any contact pushes. ``n`` [R, 3]: each row's normal. ``v`` [3]: scratch."""
    any_force = False
    J[:] = 0.0
    w0[:] = 0.0
    a[:] = 0.0
    b[:] = 0.0
    stride = 2 if spin else 1
    for c in range(J.shape[0] // stride):
        e = c * stride
        r = s0 + c
        v[:] = 0.0
        for j in cols:
            sg = sign[local[r], j]
            if sg == 0.0:
                continue
            ax, ay, az = cdof[env, j, 0], cdof[env, j, 1], cdof[env, j, 2]
            rx, ry, rz = pos[r, 0] - dof_com[env, j, 0], pos[r, 1] - dof_com[env, j, 1], pos[r, 2] - dof_com[env, j, 2]
            J[e, 0, j] = sg * (cdof[env, j, 3] + ay * rz - az * ry)
            J[e, 1, j] = sg * (cdof[env, j, 4] + az * rx - ax * rz)
            J[e, 2, j] = sg * (cdof[env, j, 5] + ax * ry - ay * rx)
            for i in range(3):
                v[i] += J[e, i, j] * qvel[env, j]
        vn = v[0] * n[e, 0] + v[1] * n[e, 1] + v[2] * n[e, 2]
        t0, t1, t2 = v[0] - vn * n[e, 0], v[1] - vn * n[e, 1], v[2] - vn * n[e, 2]
        s2 = t0 * t0 + t1 * t1 + t2 * t2 + 1e-30  # the slip speed's square, as law_solve._terms
        prm = table[rows[r]]
        if depth[r] > 0.0:
            elastic = prm[0] * depth[r] ** p
            fn = elastic * (1.0 - prm[1] * vn)
            if fn > 0.0:
                any_force = True
                a[e] = _coefficient(prm, s2, stribeck) * fn / math.sqrt(s2 + eps * eps)
                b[e] = prm[1] * elastic + dt * p * prm[0] * depth[r] ** (p - 1.0) - a[e]
                for i in range(3):
                    w0[e, i] = elastic * n[e, i]
                if spin:
                    w0_, w1_, w2_ = _spin_terms(J, n, e + 1, env, cols, sign, local, r, cdof, qvel, prm, fn, eps_w,
                                                a, b)
                    if ellipse:  # rows e and e + 1 re-made at the same slip and spin, on one limit
                        _patch_law(w0_, w1_, w2_, n, e, prm, fn, s2, eps, eps_w, stribeck, a, b)
    return any_force


@njit(cache=True, inline="always")
def _patch_law(w0_, w1_, w2_, n, e, prm, fn, s2, eps, eps_w, stribeck, a, b):
    """``law.patch_law`` at the relative angular velocity (w0_, w1_, w2_) and squared slip ``s2`` of contact rows
    ``e`` and ``e + 1``: ``a[e]`` replaced (``b[e]`` so that ``a[e] + b[e]`` stays), ``a[e + 1]``, ``b[e + 1]`` set."""
    wn = w0_ * n[e, 0] + w1_ * n[e, 1] + w2_ * n[e, 2]
    t0, t1, t2 = w0_ - wn * n[e, 0], w1_ - wn * n[e, 1], w2_ - wn * n[e, 2]
    limit = _coefficient(prm, s2, stribeck) * fn / math.sqrt(s2 + prm[5] * prm[5] * wn * wn + eps * eps)
    b[e] += a[e] - limit
    a[e] = limit
    a_roll = prm[6] * fn / math.sqrt(t0 * t0 + t1 * t1 + t2 * t2 + eps_w * eps_w)
    a[e + 1] = a_roll
    b[e + 1] = limit * prm[5] * prm[5] - a_roll


@njit(cache=True, inline="always")
def _free_system(env, Msparse, M_take, M_nonzero, qvel, qacc, dt, M, rhs0):
    """Fill the dense inertia ``M`` [nv, nv] from MuJoCo's sparse one and ``rhs0`` = M (qvel + dt qacc_smooth)."""
    nv = M.shape[0]
    for i in range(nv):
        for j in range(nv):
            M[i, j] = Msparse[env, M_take[i, j]] if M_nonzero[i, j] else 0.0
    for i in range(nv):
        s = 0.0
        for j in range(nv):
            s += M[i, j] * (qvel[env, j] + dt * qacc[env, j])
        rhs0[i] = s


@njit(cache=True, inline="always")
def _relinearize(s0, u, F, n, table, rows, beta, eps, stribeck, spin, eps_w, ellipse, a, b):
    """Friction re-linearized at the solved state (``joint_solve.solve_joint``): ``a`` from the solved normal
    force and end-of-step slip, the normal damping ``a + b = beta`` kept; with ``spin`` each contact's angular row
    at its solved normal force and end-of-step angular velocity."""
    stride = 2 if spin else 1
    for c in range(u.shape[0] // stride):
        e = c * stride
        un = u[e, 0] * n[e, 0] + u[e, 1] * n[e, 1] + u[e, 2] * n[e, 2]
        fn = max(F[e, 0] * n[e, 0] + F[e, 1] * n[e, 1] + F[e, 2] * n[e, 2], 0.0)
        s2 = 0.0
        for i in range(3):
            ti = u[e, i] - un * n[e, i]
            s2 += ti * ti
        prm = table[rows[s0 + c]]
        a[e] = _coefficient(prm, s2, stribeck) * fn / math.sqrt(s2 + eps * eps)
        b[e] = beta[e] - a[e]
        if spin and ellipse:
            _patch_law(u[e + 1, 0], u[e + 1, 1], u[e + 1, 2], n, e, prm, fn, s2, eps, eps_w, stribeck, a, b)
        elif spin:
            _spin_law(u[e + 1, 0], u[e + 1, 1], u[e + 1, 2], n, e + 1, prm, fn, eps_w, a, b)


@njit(cache=True)
def law_step(pos, normal, depth, start, counts, local, cdof, dof_com, qvel, qacc, Msparse, M_take, M_nonzero, sign,
             table, rows, p, eps, dt, stribeck, iterations, spin, eps_w, ellipse=False):
    """``(F [E, 3], qfrc [B, nv])``: the law's forces on the object (N, world axes) and their generalized forces
    ``J^T F`` for B environments whose E owned contacts are consecutive rows per environment; with ``spin`` ``F`` is
    [E, 6], each contact's force and its torque about the contact point (N m), and ``qfrc`` adds ``J_w^T T``.

    Args:
      pos [E, 3] contact points; normal [E, 3] into the object; depth [E] penetration (m, <= 0 separated);
      start, counts [B] each environment's first row and contact count; local [E] the other body's node;
      cdof [B, nv, 6] MuJoCo's motion dofs (angular, linear); dof_com [B, nv, 3] the subtree COM of each dof's root;
      qvel, qacc [B, nv] joint velocity and this step's smooth acceleration (``qacc_smooth``);
      Msparse [B, nM] MuJoCo's sparse inertia ``M``, with M_take [nv, nv] its index of each dense entry and
      M_nonzero [nv, nv] the structural nonzeros; sign [K, nv] each dof's sign in the relative velocity of a contact
      with node k (+1 object chain, -1 a moving other body's, 0 neither: ``GraphBuilder.dof_sign``);
      table [G, 7] law parameters (stiffness k N / m^p, damping c s / m, friction (mu_k, r, v_s), torsional and
      rolling friction (mu_spin, mu_roll) m) and rows [E] each contact's row of it (``ContactLawGNN.numpy_law_table``);
      p exponent; eps slip regularization (m / s); dt step (s); stribeck: the static/kinetic law (else Coulomb
      ``mu_k``); iterations: friction re-linearizations; spin: torsional and rolling friction (``law.spin_law``,
      regularized by eps_w rad / s), a second row of the system per contact; ellipse: with ``spin``, friction and
      torsion on one limit (``law.patch_law``), the table's mu_spin column the patch's length e (m).
    """
    E, B, nv = pos.shape[0], start.shape[0], qvel.shape[1]
    F = np.zeros((E, 6 if spin else 3))
    qfrc = np.zeros((B, nv))
    C = 0
    for env in range(B):
        C = max(C, counts[env])
    # scratch for one environment, sliced to its rows (a contact's, and with ``spin`` its angular one after it)
    stride = 2 if spin else 1
    R = stride * C
    J_, w0_, F_, u_, n_ = np.zeros((R, 3, nv)), np.zeros((R, 3)), np.zeros((R, 3)), np.zeros((R, 3)), np.zeros((R, 3))
    a_, b_, beta_ = np.zeros(R), np.zeros(R), np.zeros(R)
    M, A, rhs0, x, v1, v = np.zeros((nv, nv)), np.zeros((nv, nv)), np.zeros(nv), np.zeros(nv), np.zeros(nv), np.zeros(3)
    used, cols_, nJ = np.zeros(nv, dtype=np.bool_), np.zeros(nv, dtype=np.int64), np.zeros(nv)
    for env in range(B):
        n_c, s0 = counts[env], start[env]
        if n_c == 0:
            continue
        cols = _columns(sign, local, s0, n_c, used, cols_)
        n_r = stride * n_c
        J, w0, Fe, u, a, b, beta = J_[:n_r], w0_[:n_r], F_[:n_r], u_[:n_r], a_[:n_r], b_[:n_r], beta_[:n_r]
        n = n_[:n_r]
        for e in range(n_r):
            n[e] = normal[s0 + e // stride]
        if not _contact_terms(env, s0, cols, pos, n, depth, local, cdof, dof_com, qvel, sign, table, rows, p, eps, dt,
                              stribeck, spin, eps_w, ellipse, J, w0, a, b, v):
            continue  # no contact pushes: zero forces, nothing to solve
        _free_system(env, Msparse, M_take, M_nonzero, qvel, qacc, dt, M, rhs0)
        ok = _solve(J, n, w0, a, b, M, rhs0, dt, cols, Fe, u, v1, A, x, nJ)
        for e in range(n_r):
            beta[e] = a[e] + b[e]
        for _ in range(iterations):
            if not ok:
                break
            _relinearize(s0, u, Fe, n, table, rows, beta, eps, stribeck, spin, eps_w, ellipse, a, b)
            ok = _solve(J, n, w0, a, b, M, rhs0, dt, cols, Fe, u, v1, A, x, nJ)
        if not ok:  # NaN: the stepper's force guard falls back to analytic contact for this environment
            F[s0:s0 + n_c] = math.nan
            qfrc[env] = math.nan
            continue
        for c in range(n_c):
            F[s0 + c, :3] = Fe[c * stride]
            if spin:
                F[s0 + c, 3:] = Fe[c * stride + 1]
        for e in range(n_r):  # J^T F, and with ``spin`` J_w^T T
            for j in cols:
                qfrc[env, j] += J[e, 0, j] * Fe[e, 0] + J[e, 1, j] * Fe[e, 1] + J[e, 2, j] * Fe[e, 2]
    return F, qfrc


def kernel_eligible(model, builder, *, tape) -> bool:
    """Whether a law model's step takes the kernel: no per-contact state (presliding spring, history features), no
    recorded solve, and a single-body object (an articulated one's Jacobians are ``link_graph``'s)."""
    return (tape is None and not getattr(model, "presliding", False)
            and not getattr(model, "history", False) and not hasattr(builder, "body_chain")
            and hasattr(model, "numpy_law_table"))
