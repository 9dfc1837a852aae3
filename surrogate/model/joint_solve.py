"""The law's semi-implicit step, the one solve of it: in joint coordinates (``solve_joint``), torch, float64,
differentiable in the law's terms and the free velocity. Its callers: the twin's free object against kinematic other
bodies (``solve_free_object``: the object's 6 dofs, the other bodies' velocity held), the hybrid stepper's path for
laws with per-contact state or a recorded solve (``sim.law_solve.solve_law``, numpy in and out) and training through
the stepper (``learn.actuated``: each step's system of object and hand dofs solved again). The stepper's compiled
step (``sim.law_kernel``) is its fast path, held to it by ``tests/test_law_kernel.py``; the twin-stepper parity tests
(``tests/test_contact_law.py``, ``tests/test_history.py``) hold the twin to the stepper.

Shapes: B environments, E contacts in consecutive rows per environment, nv joint dofs.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from .law import friction_coefficient, patch_law, spin_law, spin_slip


class Spin(NamedTuple):
    """The contacts' torsional and rolling friction (``law.spin_law``) for ``solve_joint``: ``Jw`` [E, 3, nv] the
    relative angular-velocity Jacobians; ``a``, ``b`` [E] the law linearized at the step's start; ``mu_spin``,
    ``mu_roll`` [E] (m) and ``eps`` (rad/s) for the re-linearizations; ``w_other`` [E, 3] the other body's angular
    velocity, held for the step, where ``Jw`` moves the object alone (the twin; given with ``u_other``); ``ellipse``:
    friction and torsion on one limit (``law.patch_law``, ``mu_spin`` the patch's length e), re-linearized so."""

    Jw: torch.Tensor
    a: torch.Tensor
    b: torch.Tensor
    mu_spin: torch.Tensor
    mu_roll: torch.Tensor
    eps: object
    w_other: torch.Tensor | None = None
    ellipse: bool = False


def _pairs(lin: torch.Tensor, ang: torch.Tensor) -> torch.Tensor:
    """[E, ...] and [E, ...] -> [2E, ...]: each contact's row then its angular row (an environment's rows stay
    consecutive)."""
    return torch.stack([lin, ang], 1).flatten(0, 1)


def solve_joint(w0, a, b, n, J, env, M, v_free, dt, *, mu=None, eps=None, iterations: int = 0, a_spring=None,
                u_other=None, spin: Spin | None = None):
    """``(F [E, 3], v' [B, nv], u [E, 3])``: the end-of-step joint velocity of
    ``(M + dt J^T K J) v' = M v_free + dt J^T (w0 + K u_other)`` (``K = a I + b n n^T`` per contact) and the law's
    forces at the end-of-step slip ``u = J v' - u_other``, ``F = w0 - K u``; with ``iterations`` > 0 friction is
    re-linearized at the solved normal force and end-of-step slip.

    Args:
      w0: [E, 3] elastic forces.  a, b: [E] damping terms (``point_law``, a spring's added).  n: [E, 3] unit normals.
      J: [E, 3, nv] contact-point velocity Jacobians.  env: [E] long, each contact's environment, non-decreasing (an
        environment's contacts in consecutive rows; an environment may have none).
      M: [B, nv, nv] joint-space inertia.  v_free: [B, nv] end-of-step velocity without contact.
      dt: step (s), a float or per contact [E].
      mu, eps: [E] (``mu`` [E, 3]: ``friction_coefficient``) for ``iterations``.  a_spring: [E] a presliding
        spring's ``dt k_z``, kept in every re-linearization (None: no spring).
      u_other: [E, 3] the other body's point velocity, held for the step, where ``J`` moves the object alone (the
        twin: ``solve_free_object``); None where ``J`` gives the relative velocity (the stepper's).
      spin: the contacts' torsional and rolling friction (``Spin``), solved with the forces: each contact gets a second
        row of the same system, its torque ``T = -K_w (Jw v' - w_other)`` (``K_w = a_w I + b_w n n^T``, no elastic
        part), and the results are ``F`` [E, 6] (force, torque) and ``u`` [E, 6] (slip, relative angular velocity).
    """
    beta = a + b  # the normal damping: fixed in the iterations
    if spin is not None:  # each contact's angular row after its own: rows [2E]
        zero = torch.zeros_like(w0)
        rw0, rn, rJ, renv = _pairs(w0, zero), _pairs(n, n), _pairs(J, spin.Jw), env.repeat_interleave(2)
        rdt = dt.repeat_interleave(2) if torch.is_tensor(dt) and dt.ndim else dt
        ruo = None if u_other is None else _pairs(u_other, zero if spin.w_other is None else spin.w_other)
        ra, rb = _pairs(a, spin.a), _pairs(b, spin.b)
    else:
        rw0, rn, rJ, renv, rdt, ruo, ra, rb = w0, n, J, env, dt, u_other, a, b
    lay = _Layout(renv, len(M), rJ, rn)
    Mv = (M @ v_free[..., None])[..., 0]  # [B, nv]: what the iterations share, formed once with the padded J
    F, v1, u = _solve_once(rw0, ra, rb, rn, lay, M, Mv, rdt, ruo)
    for _ in range(int(iterations)):
        F_lin, u_lin = (F, u) if spin is None else (F[0::2], u[0::2])
        fn = (F_lin * n).sum(-1).clamp_min(0.0)
        ut = u_lin - (u_lin * n).sum(-1, keepdim=True) * n
        s2 = (ut * ut).sum(-1)
        if spin is not None and spin.ellipse:  # friction and torsion at the solved slip and spin, on one limit
            a, a_w, b_w = patch_law(fn, mu, s2, *spin_slip(u[1::2], n), e=spin.mu_spin, mu_roll=spin.mu_roll, eps=eps,
                                    eps_w=spin.eps)
        else:
            a = friction_coefficient(mu, s2) * fn / torch.sqrt(s2 + eps * eps)
        if a_spring is not None:
            a = a + a_spring
        ra, rb = a, beta - a
        if spin is not None:  # torsion and rolling at the solved normal force and end-of-step angular slip
            if not spin.ellipse:
                a_w, b_w = spin_law(fn, *spin_slip(u[1::2], n), mu_spin=spin.mu_spin, mu_roll=spin.mu_roll,
                                    eps_w=spin.eps)
            ra, rb = _pairs(a, a_w), _pairs(rb, b_w)
        F, v1, u = _solve_once(rw0, ra, rb, rn, lay, M, Mv, rdt, ruo)
    if spin is not None:
        return F.reshape(-1, 6), v1, u.reshape(-1, 6)
    return F, v1, u


def _stiff(a, b, n, x):
    """[E, 3] ``K x`` with ``K = a I + b n n^T``."""
    return a[:, None] * x + (b * (x * n).sum(-1))[:, None] * n


class _Layout:
    """The contacts padded to the largest count per environment, so that sums over an environment's contacts are
    batched matrix products ([B, nv, 3C] @ [B, 3C, nv]) instead of per-contact products and segment sums (several times
    faster at 256 environments of 12 contacts); a padded row is zero and adds nothing. When every environment has
    the same count the rows already are that layout (a reshape, no copy)."""

    def __init__(self, env: torch.Tensor, B: int, J: torch.Tensor, n: torch.Tensor):
        """``env`` [E] long, each contact's environment, non-decreasing (an environment's contacts are consecutive
        rows); ``B`` environments; ``J`` [E, 3, nv] and the normals ``n`` [E, 3], padded once for every iteration:
        ``Jp`` [B, 3C, nv] and ``nJp`` [B, C, nv] (n^T J)."""
        if len(env) > 1 and bool((env[1:] < env[:-1]).any()):
            raise ValueError("solve_joint: contacts must be in consecutive rows per environment (env non-decreasing)")
        counts = torch.bincount(env, minlength=B)
        self.B, self.C, self.nv, self.env = B, int(counts.max()) if len(env) else 0, J.shape[-1], env
        self.even = bool(len(env)) and bool((counts == self.C).all())
        first = torch.cumsum(counts, 0) - counts
        self.row = None if self.even else torch.arange(len(env), device=env.device) - first[env]
        Jb = self.pad(J)  # [B, C, 3, nv]
        self.Jp = Jb.reshape(B, 3 * self.C, self.nv)
        self.nJp = torch.einsum("bci,bciv->bcv", self.pad(n), Jb)

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """[E, ...] -> [B, C, ...] (zero rows where an environment has fewer contacts)."""
        if self.even:
            return x.reshape(self.B, self.C, *x.shape[1:])
        out = x.new_zeros(self.B, self.C, *x.shape[1:])
        return out.index_put((self.env, self.row), x)


def _solve_once(w0, a, b, n, lay: _Layout, M, Mv, dt, u_other=None):
    """One solve of ``solve_joint``'s system at the damping ``a``, ``b`` [E]: ``(F [E, 3], v' [B, nv], u [E, 3])``.
    ``lay``: the contacts' padded layout; ``Mv`` [B, nv]: ``M v_free``."""
    dt = torch.as_tensor(dt, dtype=w0.dtype)
    B, C = lay.B, lay.C
    # dt K per contact: the twin's step may differ per environment (then ``dt`` is given per contact)
    adt, bdt = a * dt, b * dt
    Jp, nJp = lay.Jp, lay.nJp
    # J^T (dt K) J = dt a J^T J + dt b (n^T J)^T (n^T J), summed over each environment's contacts
    A = M + Jp.transpose(1, 2) @ (lay.pad(adt).repeat_interleave(3, dim=1)[..., None] * Jp) \
        + nJp.transpose(1, 2) @ (lay.pad(bdt)[..., None] * nJp)
    src = w0 if u_other is None else w0 + _stiff(a, b, n, u_other)
    dts = dt[:, None] if dt.ndim else dt
    rhs = Mv + (Jp.transpose(1, 2) @ lay.pad(dts * src).reshape(B, 3 * C, 1))[..., 0]
    v1 = torch.linalg.solve(A, rhs[..., None])[..., 0]
    u = (Jp @ v1[..., None]).reshape(B, C, 3)
    u = u.reshape(-1, 3) if lay.even else u[lay.env, lay.row]
    u = u if u_other is None else u - u_other
    return w0 - _stiff(a, b, n, u), v1, u


def skew(r: torch.Tensor) -> torch.Tensor:
    """[..., 3] -> [..., 3, 3] cross-product matrices ([r]x u = r x u)."""
    z = torch.zeros_like(r[..., 0])
    x, y, w = r.unbind(-1)
    return torch.stack([torch.stack([z, -w, y], -1), torch.stack([w, z, -x], -1), torch.stack([-y, x, z], -1)], -2)


def solve_free_object(w0, a, b, normal, r_obj, u_oth, env, *, vel, omega, mass, inertia_w, gravity, dt, num_envs: int,
                      mu=None, eps=None, iterations: int = 0, a_spring=None, spin: Spin | None = None):
    """Contact forces of the semi-implicit law for free objects against kinematic other bodies (torch).

    The object's end-of-step twist xi' = (v', w') solves (M the object's 6x6 inertia at its COM,
    B_j xi = v + w x r_j the velocity of contact point j, K_j = a_j I + b_j n_j n_j^T)::

        (M + dt sum_j B_j^T K_j B_j) xi' = M xi_free + dt sum_j B_j^T (w0_j + K_j u_oth_j)

    with xi_free the contact-free prediction (gravity, gyroscopic torque) and u_oth_j the
    other body's velocity at the point (held for the step), w0_j the elastic force (``f0_j n_j``, plus a
    presliding spring's ``-k_z z_j``). The forces are then the law's at the end-of-step velocity,
    ``F_j = w0_j - K_j (B_j xi' - u_oth_j)``: applied as
    external forces to the same rigid-body step, they produce exactly xi'.

    ``iterations`` > 0 (with ``mu``, ``eps``) makes friction fully implicit: the tangential damping
    is re-linearized at the solved normal force and end-of-step slip, ``a = mu F_n' / sqrt(|v_t'|^2 + eps^2)``,
    and the system solved again (a lagged fixed point): a point that slides keeps the full Coulomb
    force mu F_n through the step instead of the force at its start-of-step speed scaled by
    ``v_t' / v_t`` (which under-brakes a landing cube); a point that sticks still cannot reverse.

    Args:
      w0: [E, 3] elastic forces.  a, b: [E] from ``point_law`` (``presliding_force``'s terms added).
      normal: [E, 3] unit, into the object.
      r_obj: [E, 3] contact point minus the object's COM (m, world).  u_oth: [E, 3] other body's
        point velocity (m/s).  env: [E] long, the environment of each contact.
      vel, omega: [B, 3] object COM velocity and angular velocity (world).  mass: [B] kg.
      inertia_w: [B, 3, 3] inertia about the COM in world axes.  gravity: [B, 3].  dt: [B] or float (s).
      mu, eps: [E] friction coefficient (or [E, 3], ``friction_coefficient``) and slip regularization (m/s),
        for ``iterations``.
      a_spring: [E] a presliding spring's ``dt k_z``, kept in every re-linearization (None: no spring).
      spin: torsional and rolling friction (``Spin`` with ``Jw`` None: the object's angular rows are made here;
        ``w_other`` the other body's angular velocity [E, 3]).
    Returns:
      (forces [E, 3] on the object, N, or [E, 6] (force, torque N m) with ``spin``; xi' [B, 6] the end-of-step twist).
    """
    dtype = vel.dtype
    B = num_envs
    dt = torch.as_tensor(dt, dtype=dtype).expand(B) if not torch.is_tensor(dt) or dt.ndim == 0 else dt.to(dtype)
    eye = torch.eye(3, dtype=dtype)
    M = torch.zeros(B, 6, 6, dtype=dtype)
    M[:, :3, :3] = mass[:, None, None] * eye
    M[:, 3:, 3:] = inertia_w
    Iw = torch.einsum("bij,bj->bi", inertia_w, omega)
    w_free = omega - dt[:, None] * torch.linalg.solve(inertia_w, torch.cross(omega, Iw, dim=-1)[..., None])[..., 0]
    xi_free = torch.cat([vel + dt[:, None] * gravity, w_free], dim=-1)
    rhs0 = torch.einsum("bij,bj->bi", M, xi_free)
    if not env.numel():
        return vel.new_zeros(0, 3 if spin is None else 6), torch.linalg.solve(M, rhs0[..., None])[..., 0]
    Bm = torch.cat([eye.expand(len(env), 3, 3), -skew(r_obj)], dim=-1)  # [E, 3, 6]: B_j xi = v + w x r_j
    if spin is not None:  # the object's angular velocity: w = [0 I] xi
        spin = spin._replace(Jw=torch.cat([torch.zeros_like(eye), eye], dim=-1).expand(len(env), 3, 6))
    forces, xi, _ = solve_joint(w0, a, b, normal, Bm, env, M, xi_free, dt[env], mu=mu, eps=eps, iterations=iterations,
                                a_spring=a_spring, u_other=u_oth, spin=spin)
    return forces, xi
