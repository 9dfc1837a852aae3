"""The differentiable twin of the hybrid step, in torch: what contact models are trained through.

For B episodes (windows) at once, every physics step:

1. the current object pose (detached) and the other bodies' recorded configuration are written
   into a scratch ``MjData`` per episode, and MuJoCo's own collision detection runs on the
   owned pairs (``mj_kinematics`` -> ``mj_comPos`` -> ``mj_comVel`` -> ``mj_collision``);
2. the batched contact graph is built by the stepper's ``GraphBuilder`` (float64);
3. the contacts are attached to the differentiable object state: each contact point rides on
   the object (``r_obj = R R0^T r0``) and its signed distance is *linearized* around MuJoCo's
   value, ``d = d0 + n . (dx_point)``: equal to MuJoCo's in value, differentiable in the pose;
4. the contact model gives forces (``ContactLawGNN.solve``: the semi-implicit law), and the object
   takes the same semi-implicit Euler step MuJoCo takes for a free body
   (``surrogate.sim.rigid_body.rigid_step``).

A law with the presliding spring or history features (``ContactLawGNN.presliding`` / ``history``) carries each
contact's state across the steps as the hybrid stepper does (``model.history``: the same matching, the same state;
detached, as the stepper holds it in numpy: gradients reach the law through each step's forces).

Other bodies (a hand) are kinematic: their joint positions and velocities are given per step
(recorded joint positions for grasps), so gradients flow through the object only. With the
same parameters, the twin and the hybrid stepper in MuJoCo produce the same trajectory
(``tests/test_contact_law.py`` states the tolerance).

Shapes: B episodes, S physics steps, F frames (S = (F - 1) * substeps).
"""

from __future__ import annotations

import copy

import mujoco
import numpy as np
import torch

from ..errors import ConfigError
from ..model.contact_graph import concat_graphs
from ..model.history import ContactHistory, ContactState, concat_keys, contact_keys
from ..quat import quat_to_mat
from ..scenes import set_contact_mode
from .link_graph import LinkGraphBuilder, scene_builder
from .rigid_body import rigid_step


def body_inertia(model: mujoco.MjModel, body: int) -> np.ndarray:
    """[3, 3] inertia about the COM in the body frame (MuJoCo keeps principal moments and their axes)."""
    R = np.zeros(9)
    mujoco.mju_quat2Mat(R, model.body_iquat[body])
    R = R.reshape(3, 3)
    return R @ np.diag(model.body_inertia[body]) @ R.T


class Twin:
    """The twin for one scene (its owned pairs in ``external`` mode, as the stepper steps them).

    Args:
      scene: the ``Scene``; the twin switches a private copy of its model to ``external``.
      model: optional ``MjModel`` of the scene to use instead (e.g. with another mass).
    """

    def __init__(self, scene, model: mujoco.MjModel | None = None):
        self.scene = scene
        m = copy.copy(scene.model if model is None else model)
        set_contact_mode(m, scene, "external")
        self.m = m
        self.builder = scene_builder(scene, m, scene.owned_pair_ids)
        self.articulated = isinstance(self.builder, LinkGraphBuilder)  # several links: the joint-space twin
        self.ob = scene.object_body_id
        self.qa, self.da = scene.object_qpos_adr, scene.object_dof_adr
        self.inertia_b = torch.as_tensor(body_inertia(m, self.ob))
        self.mass = float(m.body_mass[self.ob])
        self.weight = self.mass * float(np.linalg.norm(m.opt.gravity))  # N: forces in object weights
        self._datas: list[mujoco.MjData] = []

    def scratch(self, n: int) -> list[mujoco.MjData]:
        """``n`` scratch ``MjData`` of this scene (reused between rollouts)."""
        while len(self._datas) < n:
            self._datas.append(mujoco.MjData(self.m))
        return self._datas[:n]

    def rollout(self, contact_model, state0: torch.Tensor, n_frames: int, *, substeps: int,
                qpos=None, qvel=None, force_bodies=None):
        """Roll out B objects of this scene (``rollout`` with every environment here)."""
        return rollout(contact_model, [self] * state0.shape[0], state0, n_frames, substeps=substeps, qpos=qpos, qvel=qvel,
                       force_bodies=force_bodies)


def rollout(contact_model, twins: list[Twin], state0: torch.Tensor, n_frames: int, *, substeps: int,
            qpos=None, qvel=None, detach_every: int = 0, force_bodies=None):
    """Roll out B objects, each in its own twin's scene (scenes may differ: one batched contact model
    call per physics step for all of them); differentiable in ``state0`` and the contact model.

    Args:
      contact_model: a model with ``solve(graph, vel, omega) -> (forces [E, 3], twist)`` (``ContactLawGNN``).
      twins: [B] the scene of each environment; all environments of one twin must be contiguous.
      state0: [B, 13] float64: position (3, world), quaternion (4, w x y z), velocity (3, world),
        angular velocity (3, body) at frame 0.
      n_frames: F frames to return (frame 0 is the initial state).
      substeps: physics steps per frame (every scene's timestep is the frame period / substeps).
      qpos, qvel: optional per environment [S + 1, nq] / [S + 1, nv] configuration and velocity of the
        other (kinematic) joints per step (a list, or an array [B, S + 1, *]); the object's entries are
        ignored. Default: the model's ``qpos0`` and zero velocity (a static world).
      detach_every: if > 0, the state is detached from the graph every that many frames (truncated
        backpropagation through long episodes: gradients of later frames reach the contact model
        through the last segment only, so chaotic tosses do not explode them).
      force_bodies: optional [B, P] MuJoCo body ids (-1: none) whose contact force is also returned:
        the force the object exerts on each of them (N, world axes) at the last physics step of each
        frame, as a fingertip force/torque sensor samples it.
    Returns:
      (pos [B, F, 3], quat [B, F, 4]) float64 at the frame times; with ``force_bodies`` also
      pad forces [B, F, P, 3] (frame 0: zero, no step taken yet).
    An articulated object's twins: ``twin_links.link_rollout`` (state0 [B, 13 + 2J]; joints [B, F, J] after quat).
    """
    if any(tw.articulated for tw in twins):
        from .twin_links import link_rollout

        if not all(tw.articulated for tw in twins):
            raise ConfigError("a twin rollout takes free objects or articulated ones, not both in one batch",
                              key="twins")
        return link_rollout(contact_model, twins, state0, n_frames, substeps=substeps, qpos=qpos, qvel=qvel,
                            detach_every=detach_every, force_bodies=force_bodies)
    return _free_rollout(contact_model, twins, state0, n_frames, substeps=substeps, qpos=qpos, qvel=qvel,
                         detach_every=detach_every, force_bodies=force_bodies)


def _free_rollout(contact_model, twins: list[Twin], state0: torch.Tensor, n_frames: int, *, substeps: int,
                  qpos=None, qvel=None, detach_every: int = 0, force_bodies=None):
    """``rollout`` of free rigid objects (the module docstring's steps)."""
    groups, datas = _scene_groups(twins)
    pos, quat, vel, om_b = state0[:, :3], state0[:, 3:7], state0[:, 7:10], state0[:, 10:13]
    mass = torch.tensor([tw.mass for tw in twins], dtype=torch.float64)
    inertia_b = torch.stack([tw.inertia_b for tw in twins])
    gravity = torch.as_tensor(np.stack([np.asarray(tw.m.opt.gravity) for tw in twins]), dtype=torch.float64)
    dt = torch.tensor([tw.m.opt.timestep for tw in twins], dtype=torch.float64)
    poses, quats = [pos], [quat]
    fb = None if force_bodies is None else torch.as_tensor(np.asarray(force_bodies, dtype=np.int64))
    pad_forces = [] if fb is None else [pos.new_zeros(fb.shape[0], fb.shape[1], 3)]
    stateful = getattr(contact_model, "presliding", False) or getattr(contact_model, "history", False)
    history = ContactHistory() if stateful else None
    for s in range((n_frames - 1) * substeps):
        p_np, q_np = pos.detach().numpy(), quat.detach().numpy()
        v_np, w_np = vel.detach().numpy(), om_b.detach().numpy()
        graphs, keys = [], []
        for (tw, idx), ds in zip(groups, datas):
            m, qa, da = tw.m, tw.qa, tw.da
            for i, d in zip(idx, ds):
                if qpos is not None:
                    d.qpos[:] = qpos[i][s]
                if qvel is not None:
                    d.qvel[:] = qvel[i][s]
                d.qpos[qa:qa + 3], d.qpos[qa + 3:qa + 7] = p_np[i], q_np[i]
                d.qvel[da:da + 3], d.qvel[da + 3:da + 6] = v_np[i], w_np[i]
                mujoco.mj_kinematics(m, d)
                mujoco.mj_comPos(m, d)
                mujoco.mj_comVel(m, d)
                mujoco.mj_collision(m, d)
            cb = tw.builder.build(m, ds, dtype=torch.float64, patch=getattr(contact_model, "patch", None))
            graphs.append(cb.graph)
            if history is not None:
                keys.append(contact_keys(cb, tw.builder.length, env_offset=idx[0]))
        g = concat_graphs(graphs)
        if history is None:
            forces, w = _wrench(contact_model, g, pos, quat, vel, om_b)
        else:
            k = concat_keys(keys)
            state = ContactState(*(torch.from_numpy(x) for x in history.lookup(k)))
            forces, w, after = _wrench(contact_model, g, pos, quat, vel, om_b, state=state)
            history.store(k, ContactState(*(x.detach().numpy() for x in after)))
        pos, quat, vel, om_b = rigid_step(pos, quat, vel, om_b, w, mass=mass, inertia_b=inertia_b, gravity=gravity,
                                          dt=dt)
        if (s + 1) % substeps == 0:
            poses.append(pos)
            quats.append(quat)
            if fb is not None:
                pad_forces.append(body_forces(g, forces, fb))
            if detach_every > 0 and (len(poses) - 1) % detach_every == 0:
                pos, quat, vel, om_b = pos.detach(), quat.detach(), vel.detach(), om_b.detach()
    if fb is not None:
        return torch.stack(poses, 1), torch.stack(quats, 1), torch.stack(pad_forces, 1)
    return torch.stack(poses, 1), torch.stack(quats, 1)



def _scene_groups(twins: list[Twin]) -> tuple[list[tuple[Twin, list[int]]], list[list[mujoco.MjData]]]:
    """The environments grouped by twin, ``[(twin, [env indices])]`` in order (one twin's must be contiguous), and
    each group's scratch ``MjData`` reset."""
    groups: list[tuple[Twin, list[int]]] = []
    for i, tw in enumerate(twins):
        if groups and groups[-1][0] is tw:
            groups[-1][1].append(i)
        elif any(g[0] is tw for g in groups):
            raise ValueError("the environments of one twin must be contiguous")
        else:
            groups.append((tw, [i]))
    datas = []
    for tw, idx in groups:
        ds = tw.scratch(len(idx))
        for d in ds:
            mujoco.mj_resetData(tw.m, d)
        datas.append(ds)
    return groups, datas

def body_forces(g, forces: torch.Tensor, bodies: torch.Tensor) -> torch.Tensor:
    """[B, P, 3] the force the object exerts on each of ``bodies`` [B, P] (minus the summed contact
    forces [E, 3] on the object of the edges whose other node is that body)."""
    B, P = bodies.shape
    out = forces.new_zeros(B, P, 3)
    if not forces.shape[0]:
        return out
    s, o = g.edge_index
    env = g.batch[o]
    match = (bodies[env] == g.body_id[s][:, None]).to(forces.dtype)  # [E, P]
    return out.index_add(0, env, -match[:, :, None] * forces[:, None, :])


def _wrench(contact_model, g, pos, quat, vel, om_b, state=None):
    """Attach the detected contacts to the differentiable state; ([E, 3] forces, [B, 6] object wrench, with a law's
    torques about the contact points: torsional and rolling friction), and with ``state`` (the contacts'
    ``history.ContactState``) the state after the step too."""
    B = pos.shape[0]
    s, o = g.edge_index
    env = g.batch[o] if len(o) else o
    R = quat_to_mat(quat)
    h = copy.copy(g)
    if len(o):
        R0 = R.detach()
        r0 = g.r_obj
        r_obj = torch.einsum("eij,ekj,ek->ei", R[env], R0[env], r0)  # R R0^T r0: the point rides on the object
        c0 = pos.detach()[env]
        h.r_obj = r_obj
        h.dist = g.dist + ((pos[env] - c0 + r_obj - r0) * g.normal).sum(-1)
    obj = g.object_index
    node_vel = g.vel.index_copy(0, obj, vel)
    node_om = g.omega.index_copy(0, obj, torch.einsum("bij,bj->bi", R, om_b))
    torque = getattr(contact_model, "spin", False)  # torsional and rolling friction: a torque at each contact too
    kw = {"with_torque": True} if torque else {}
    if state is None:
        forces, _ = contact_model.solve(h, node_vel, node_om, **kw)
    else:
        forces, _, after = contact_model.solve(h, node_vel, node_om, state=state, with_state=True, **kw)
    w = pos.new_zeros(B, 6)
    if len(o):
        f = forces[:, :3]
        moment = torch.cross(h.r_obj, f, dim=-1)
        if torque:
            moment = moment + forces[:, 3:]
        w = w.index_add(0, env, torch.cat([f, moment], dim=-1))
    forces = forces[:, :3]
    return (forces, w) if state is None else (forces, w, after)
