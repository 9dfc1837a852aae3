"""Differentiable rigid-body integration of a free object (the twin's step, ``sim.twin``).

State per object: pos [B, 3] (world), quat [B, 4] (w, x, y, z), vel [B, 3] (world), omega_b [B, 3] (body).
One step of semi-implicit (symplectic) Euler with the contact wrench (F, tau) [B, 6] (world)::

    v'   = v + dt (g + F/m)
    w_b' = w_b + dt I_b^-1 (R^T tau - w_b x I_b w_b)
    c'   = c + dt v'
    q'   = normalize(q (x) exp(dt w_b' / 2))
"""

from __future__ import annotations

import torch

from ..quat import quat_mul, quat_to_mat


def quat_exp(phi):
    """Rotation vectors [B, 3] -> unit quaternions, smooth at zero for autograd (the +1e-16 under the root
    keeps the gradient finite at phi = 0; ``surrogate.quat.quat_exp`` is the numpy one)."""
    ang = torch.sqrt((phi * phi).sum(-1, keepdim=True) + 1e-16)
    return torch.cat([torch.cos(ang / 2), phi * torch.sin(ang / 2) / ang], -1)


def rigid_step(pos, quat, vel, omega_b, wrench, *, mass, inertia_b, gravity, dt):
    """One semi-implicit Euler step (see module docstring); all per-graph tensors, dt [B] or float."""
    dt = dt if torch.is_tensor(dt) else torch.tensor(dt, dtype=pos.dtype)
    dt = dt.reshape(-1, 1) if dt.ndim else dt
    R = quat_to_mat(quat)
    vel = vel + dt * (gravity + wrench[:, :3] / mass[:, None])
    tau_b = torch.einsum("bji,bj->bi", R, wrench[:, 3:])
    Iw = torch.einsum("bij,bj->bi", inertia_b, omega_b)
    rhs = tau_b - torch.cross(omega_b, Iw, dim=-1)
    omega_b = omega_b + dt * torch.linalg.solve(inertia_b, rhs[..., None])[..., 0]
    pos, quat = integrate_pose(pos, quat, vel, omega_b, dt)
    return pos, quat, vel, omega_b


def integrate_pose(pos, quat, vel, omega_b, dt):
    """``(pos + dt v, normalize(q (x) exp(dt w_b)))``: MuJoCo's free-joint position step (``mj_integratePos``) with the
    end-of-step velocity (world) and body angular velocity; ``dt`` [B, 1] or a float. The free twin's and the
    articulated twin's base link's (``twin_links``)."""
    pos = pos + dt * vel
    quat = quat_mul(quat, quat_exp(dt * omega_b))
    return pos, quat / quat.norm(dim=-1, keepdim=True)
