"""The law's semi-implicit step in joint coordinates, in torch: differentiable in the law's terms and the free
velocity. The same system as ``law.semi_implicit_solve_joint`` (numpy), which the hybrid stepper runs as its fast
path; ``tests/test_actuated.py`` holds the two to 1e-10. Training through the stepper's own step
(``learn.actuated``) solves each step's system again here, so that gradients reach the law.

Shapes: B environments, E contacts in consecutive rows per environment, nv joint dofs (object and hand).
"""

from __future__ import annotations

import torch

from .law import friction_coefficient


def solve_joint(w0, a, b, n, J, env, M, v_free, dt, *, mu=None, eps=None, iterations: int = 0, a_spring=None):
    """``(F [E, 3], v' [B, nv], J v' [E, 3])``: the end-of-step joint velocity of
    ``(M + dt J^T K J) v' = M v_free + dt J^T w0`` (``K = a I + b n n^T`` per contact) and the law's forces there,
    ``F = w0 - K J v'``; with ``iterations`` > 0 friction is re-linearized at the solved normal force and slip, as
    ``law.semi_implicit_solve_joint`` does.

    Args:
      w0: [E, 3] elastic forces.  a, b: [E] damping terms (``point_law``, a spring's added).  n: [E, 3] unit normals.
      J: [E, 3, nv] contact-point relative-velocity Jacobians.  env: [E] long, each contact's environment.
      M: [B, nv, nv] joint-space inertia.  v_free: [B, nv] end-of-step velocity without contact.  dt: step (s).
      mu, eps: [E] (``mu`` [E, 3]: ``friction_coefficient``) for ``iterations``.  a_spring: [E] a presliding
        spring's ``dt k_z``, kept in every re-linearization (None: no spring).
    """
    beta = a + b  # the normal damping: fixed in the iterations
    F, v1, u = _solve_once(w0, a, b, n, J, env, M, v_free, dt)
    for _ in range(int(iterations)):
        fn = (F * n).sum(-1).clamp_min(0.0)
        ut = u - (u * n).sum(-1, keepdim=True) * n
        s2 = (ut * ut).sum(-1)
        a = friction_coefficient(mu, s2) * fn / torch.sqrt(s2 + eps * eps)
        if a_spring is not None:
            a = a + a_spring
        F, v1, u = _solve_once(w0, a, beta - a, n, J, env, M, v_free, dt)
    return F, v1, u


def _solve_once(w0, a, b, n, J, env, M, v_free, dt):
    nJ = torch.einsum("ei,eiv->ev", n, J)  # [E, nv] n^T J
    JtKJ = a[:, None, None] * (J.transpose(1, 2) @ J) + b[:, None, None] * (nJ[:, :, None] * nJ[:, None, :])
    A = M.index_add(0, env, dt * JtKJ)
    rhs = torch.einsum("bij,bj->bi", M, v_free).index_add(0, env, dt * torch.einsum("eiv,ei->ev", J, w0))
    v1 = torch.linalg.solve(A, rhs[..., None])[..., 0]
    u = torch.einsum("eiv,ev->ei", J, v1[env])
    return w0 - a[:, None] * u - (b * (u * n).sum(-1))[:, None] * n, v1, u
