"""Differentiable rigid-body integration of the object for unrolled training losses.

State per graph: pos [B,3] (world), quat [B,4] (w,x,y,z), vel [B,3] (world), omega_b [B,3] (body).
One step of semi-implicit (symplectic) Euler with the contact wrench (F, tau) [B,6] (world)::

    v'   = v + dt (g + F/m)
    w_b' = w_b + dt I_b^-1 (R^T tau - w_b x I_b w_b)
    c'   = c + dt v'
    q'   = normalize(q (x) exp(dt w_b' / 2))

Contacts over the short unroll keep the topology detected at the start frame; each
contact point is attached to the object (r_obj rotates with it) and its signed distance
moves along the frozen normal: d = d0 + ((c + r_obj) - (c0 + r_obj0)) . n - (v_oth t) . n
(the other body, when it moves, keeps its start velocity).
"""

from __future__ import annotations

import copy

import torch

from ..quat import quat_mul, quat_to_mat
from .gnn import body_wrenches


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
    pos = pos + dt * vel
    quat = quat_mul(quat, quat_exp(dt * omega_b))
    quat = quat / quat.norm(dim=-1, keepdim=True)
    return pos, quat, vel, omega_b


def unroll(model, g, *, frames: int, substeps: int):
    """Integrate each graph's object for ``frames`` x ``substeps`` steps with the model's contact forces.

    Uses ``g.state0`` [B,13], ``g.inertia_b``, ``g.mass_ref``, ``g.gravity``, ``g.frame_dt``.
    Returns (pos [B, frames, 3], quat [B, frames, 4]) at the end of every frame.
    """
    s0 = g.state0
    pos, quat, vel, omega_b = s0[:, :3], s0[:, 3:7], s0[:, 7:10], s0[:, 10:13]
    B = pos.shape[0]
    obj = g.object_index
    s, o = g.edge_index
    eg = g.batch[o]
    R0 = quat_to_mat(quat)
    r_body = torch.einsum("eji,ej->ei", R0[eg], g.r_obj)  # contact point in the object's body frame
    c0, r0, d0 = pos[eg], g.r_obj, g.dist
    dt = g.frame_dt / substeps
    poses, quats = [], []
    h = copy.copy(g)
    t = torch.zeros_like(dt)
    for _ in range(frames):
        for _ in range(substeps):
            R = quat_to_mat(quat)
            r_obj = torch.einsum("eij,ej->ei", R[eg], r_body)
            oth_shift = (g.vel[s] * t[eg, None] * (1 - g.static[s, None]))
            h.r_obj = r_obj
            h.dist = d0 + ((pos[eg] + r_obj - c0 - r0 - oth_shift) * g.normal).sum(-1)
            node_vel = g.vel.index_copy(0, obj, vel)
            node_om = g.omega.index_copy(0, obj, torch.einsum("bij,bj->bi", R, omega_b))
            f = model(h, node_vel, node_om)
            w = body_wrenches(h, f)[obj] if f.shape[0] else pos.new_zeros(B, 6)
            pos, quat, vel, omega_b = rigid_step(pos, quat, vel, omega_b, w, mass=g.mass_ref, inertia_b=g.inertia_b,
                                                 gravity=g.gravity, dt=dt)
            t = t + dt
        poses.append(pos)
        quats.append(quat)
    return torch.stack(poses, 1), torch.stack(quats, 1)
