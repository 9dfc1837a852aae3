"""Training through the hybrid stepper's own step: windows replayed with the hand actuated (``data.hand: actuated``).

The twin (``sim.twin``) moves the hand kinematically along its recorded joints, so there the grip force comes from
how far the recorded fingers press into the simulated object. Users' rollouts and the benchmarks actuate the hand
through the scene's servos, where the grip force comes from the servo: a law or network fitted against the
kinematic hand need not hold up there (measured: ``docs/contact-model.md``). Here a batch of windows is stepped by
the hybrid stepper itself, the hand following the recorded commands with the episode's grip force bound (what
``surrogate bench rig-grasp`` replays), and each step's joint-space solve of the law (``law_solve.SolveRecord``)
is solved again in torch (``model.joint_solve``) for its gradients:

* the values are the stepper's: the trajectory is the closed-loop one, bit for bit;
* the gradients are straight-through: each step's end velocity of the object carries a zero-valued perturbation
  ``v' - v'.detach()`` into the next step's free velocity and, integrated, into the object's pose, the contacts'
  depths (``d + n . J dq``, linearized as the twin does) and the pad forces. Kept: every step's forces as
  functions of the law's parameters, of the velocities carried from earlier steps (friction braking a slide, a grip
  holding a lift) and of the object's displacement (a deeper or shallower grip). The hand is held on its closed-loop
  path, as the twin holds it on the recorded one: a perturbation of the hand's dofs is not carried, because the
  stepper's hand answers it with what this re-solve does not hold (the servos' gains and force bounds, MuJoCo's joint
  limits), and carrying it without them gives gradients that disagree with finite differences of the same loss
  through the stepper (70x too small for the pads' friction, three signs wrong: ``eval/gradient_check.py``). Left
  out: how a changed pose moves the contact points, and how the hand would answer a changed object.

Shapes: B windows, F frames, S = (F - 1) * substeps physics steps, nv dofs, P pads.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from ..model.history import ContactState
from ..model.joint_solve import solve_joint
from ..quat import quat_mul
from ..scenes import set_grip_force
from ..scenes.from_capture import recorded_grip_force, scene_for_episode
from ..sim import Stepper, step
from ..sim.twin import body_forces
from .objective import force_loss, pose_loss, stack_forces, stack_windows
from .windows import episode_windows


def episode_scene(ep, meta, *, margin: float, substeps: int):
    """The episode's scene (owned pairs external) with its recorded grip force bound, as the benchmark replays it."""
    scene = scene_for_episode(ep, meta, margin=margin, substeps=substeps, contact_mode="external")
    grip = recorded_grip_force(ep)
    if grip is not None and scene.hand is not None:
        set_grip_force(scene.model, scene.hand, grip)
    return scene


def _start(scene, w) -> mujoco.MjData:
    """A fresh ``MjData`` at the window's first state: the recorded hand joints and the object's state0."""
    m = scene.model
    d = mujoco.MjData(m)
    qa, da = scene.object_qpos_adr, scene.object_dof_adr
    if w.qpos is not None:
        d.qpos[:], d.qvel[:] = w.qpos[0], w.qvel[0]
    d.qpos[qa:qa + 7], d.qvel[da:da + 6] = w.state0[:7], w.state0[7:13]
    if w.ctrl is not None:
        d.ctrl[:] = w.ctrl[0]
    mujoco.mj_forward(m, d)
    return d


def _trackable(g):
    """A shallow copy of the graph ``g`` whose tensors made under the stepper's ``torch.inference_mode`` (its cached
    pieces) are normal tensors, which autograd may save."""
    return type(g)(**{k: v.clone() if torch.is_tensor(v) and v.is_inference() else v for k, v in vars(g).items()})


def _resolve(model, rec, carry: torch.Tensor, shift: torch.Tensor, obj: torch.Tensor, idx: torch.Tensor, dt: float):
    """The record's system solved again in torch with the carried velocity perturbations ``carry`` [B, nv] and the
    contacts' depths moved by the integrated position perturbations ``shift`` [B, nv] (``d + n . J shift``, as the
    twin linearizes them in the pose); returns (the new carry [B, nv], nonzero only where ``obj`` [B, nv] is 1, the
    object's dofs: the hand stays on its closed-loop path; the forces [E, 3] on the object of every contact of the
    record's batch, zero where none solved)."""
    state = None if rec.state is None else ContactState(*(torch.from_numpy(np.asarray(x)) for x in rec.state))
    g = _trackable(rec.cb.graph)
    E = len(g.dist)
    rows = torch.arange(E) if rec.rows is None else torch.from_numpy(rec.rows)
    counts = torch.from_numpy(np.asarray(rec.counts, dtype=np.int64))
    env = torch.repeat_interleave(torch.arange(len(counts)), counts)
    envs = idx[torch.arange(len(idx))[rec.envs]]  # the windows that solved
    J = torch.from_numpy(rec.J)
    moved = torch.einsum("eiv,ev->ei", J, shift[envs[env]])  # each solved contact's relative displacement
    g.dist = g.dist.double().index_add(0, rows, (g.normal.double()[rows] * moved).sum(-1))
    t = model.law_terms(g, state=state)
    pick = lambda x: None if x is None else (x[rows] if torch.is_tensor(x) and x.ndim else x)  # noqa: E731
    qv = torch.from_numpy(rec.qv) + carry[envs]
    spin = t["spin"]  # J_w gives the relative angular velocity (the stepper's): no other body's to hold
    if spin is not None:
        spin = spin._replace(Jw=torch.from_numpy(rec.Jw), w_other=None, **{k: pick(getattr(spin, k)) for k in
                                                                         ("a", "b", "mu_spin", "mu_roll", "eps")})
    F, v1, _ = solve_joint(pick(t["w0"]), pick(t["a"]), pick(t["b"]), pick(t["n"]), J,
                           env, torch.from_numpy(rec.M), qv, dt, mu=pick(t["mu"]), eps=pick(t["eps"]),
                           iterations=int(getattr(model, "friction_iterations", 0)), a_spring=pick(t["a_spring"]),
                           spin=spin)
    F = F[:, :3]  # the pads' sensors read forces
    ok = torch.isfinite(v1).all(-1, keepdim=True)  # an environment the stepper sent to analytic contact: no gradient
    delta = torch.where(ok, v1 - v1.detach(), torch.zeros_like(v1))
    forces = torch.zeros(E, 3, dtype=F.dtype).index_copy(0, rows, torch.where(torch.isfinite(F), F, 0.0))
    return carry.index_copy(0, envs, delta * obj[envs]), forces


def actuated_rollout(model, scenes: list, windows: list, n_frames: int, *, substeps: int, force_bodies=None):
    """``(pos [B, F, 3], quat [B, F, 4])``, with ``force_bodies`` [B, P] (-1: none) also the pad forces
    [B, F, P, 3] (the force the object exerts on each pad at the frame's last step): the windows stepped by the
    hybrid stepper with the hand actuated by their recorded commands (``Window.ctrl``, padded with the last),
    values the stepper's, gradients straight-through (module docstring). ``scenes``: [B] each window's scene
    (``episode_scene``); the windows of one scene are stepped as one batch."""
    B = len(windows)
    by_scene: dict[int, list[int]] = {}
    for i, s in enumerate(scenes):
        by_scene.setdefault(id(s), []).append(i)
    runs = []
    for ids in by_scene.values():
        scene = scenes[ids[0]]
        st = Stepper(scene, model, on_bad_force="fallback", check_inputs=False)
        st.tape = [] if torch.is_grad_enabled() else None  # no gradient wanted: the stepper alone
        runs.append((scene, st, [_start(scene, windows[i]) for i in ids], torch.as_tensor(ids)))
    nv = runs[0][0].model.nv
    carry = torch.zeros(B, nv, dtype=torch.float64)
    dof = torch.as_tensor([scenes[i].object_dof_adr for i in range(B)])[:, None] + torch.arange(6)
    obj = torch.zeros(B, nv, dtype=torch.float64).scatter(1, dof, 1.0)  # the object's dofs carry perturbations
    shift = torch.zeros(B, nv, dtype=torch.float64)  # the integrated position perturbation of every dof
    fb = None if force_bodies is None else torch.as_tensor(np.asarray(force_bodies, dtype=np.int64))
    poses = [_poses(runs, B, shift.gather(1, dof))]
    pads = [] if fb is None else [torch.zeros(B, fb.shape[1], 3, dtype=torch.float64)]
    S = (n_frames - 1) * substeps
    for s in range(S):
        last = (s + 1) % substeps == 0
        pad = None if fb is None or not last else torch.zeros(B, fb.shape[1], 3, dtype=torch.float64)
        for scene, st, datas, idx in runs:
            for i, d in zip(idx.tolist(), datas):
                c = windows[i].ctrl
                if c is not None:
                    d.ctrl[:] = c[min(s, len(c) - 1)]
            if st.tape is not None:
                st.tape.clear()
            step(scene.model, datas, st)
            for rec in st.tape or ():
                carry, forces = _resolve(model, rec, carry, shift, obj, idx, scene.model.opt.timestep)
                if pad is not None:
                    pad = pad.index_add(0, idx, body_forces(rec.cb.graph, forces, fb[idx]))
        dt = torch.as_tensor([scenes[i].model.opt.timestep for i in range(B)], dtype=torch.float64)[:, None]
        shift = shift + dt * carry
        if last:
            poses.append(_poses(runs, B, shift.gather(1, dof)))
            if pad is not None:
                pads.append(pad)
    pos = torch.stack([p for p, _ in poses], 1)
    quat = torch.stack([q for _, q in poses], 1)
    return (pos, quat) if fb is None else (pos, quat, torch.stack(pads, 1))


@torch.no_grad()
def actuated_episodes(model, episodes, meta, scenes: list, *, substeps: int, init_frames: int = 5) -> dict:
    """{episode_id: [T, 7] predicted poses} of whole episodes from the benchmarks' first-state estimate, the hand
    actuated by the recorded commands (``actuated_rollout`` without gradients: the hybrid stepper alone), each in
    its scene (``episode_scene``); what validation scores with ``data.hand: actuated``."""
    wins = [episode_windows(e, meta, s, frames=0, stride=0, substeps=substeps, init_frames=init_frames)[0]
            for e, s in zip(episodes, scenes)]
    pos, quat = actuated_rollout(model, scenes, wins, max(len(w.target) for w in wins), substeps=substeps)
    pred = torch.cat([pos, quat], -1).numpy()
    return {w.episode_id: pred[i, :len(w.target)] for i, w in enumerate(wins)}


def _poses(runs, B: int, moved: torch.Tensor):
    """([B, 3], [B, 4]) the stepper's object poses plus the straight-through perturbation ``moved`` [B, 6]."""
    q = np.zeros((B, 7))
    for scene, _, datas, idx in runs:
        a = scene.object_qpos_adr
        q[idx.numpy()] = [d.qpos[a:a + 7] for d in datas]
    q = torch.from_numpy(q)
    half = torch.cat([torch.ones(B, 1, dtype=q.dtype), 0.5 * moved[:, 3:]], dim=1)  # body-frame rotation, to first order
    return q[:, :3] + moved[:, :3], quat_mul(q[:, 3:], half)


def actuated_window_loss(scenes: list, model, windows: list, *, substeps: int, rot_weight: float,
                         force_weight: float = 0.0) -> torch.Tensor:
    """``objective.window_loss`` of a batch of windows stepped with the hand actuated (``actuated_rollout``):
    the same pose loss, plus ``force_weight`` x the pad force loss where the windows carry sensors."""
    _, target, valid, size, _, _ = stack_windows(windows, substeps)
    forces = stack_forces(windows, target.shape[1]) if force_weight > 0 else None
    out = actuated_rollout(model, scenes, windows, target.shape[1], substeps=substeps,
                           force_bodies=None if forces is None else forces[0])
    loss = pose_loss(out[0], out[1], target, valid, size, rot_weight=rot_weight)
    if forces is not None:
        g = np.array([np.linalg.norm(s.model.opt.gravity) for s in scenes])
        mass = np.array([s.model.body_mass[s.object_body_id] for s in scenes])
        loss = loss + force_weight * force_loss(out[2], forces[1], forces[2], torch.as_tensor(mass * g))
    return loss
