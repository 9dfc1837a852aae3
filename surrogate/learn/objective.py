"""What rollout training optimizes and selects by: pose errors of twin rollouts.

* ``pose_loss``: the training loss of a batch of windows, position error in object sizes plus
  the geodesic rotation error (rad, weighted), averaged over tracked frames; smooth at zero.
* ``force_loss``: where windows carry fingertip force measurements, the error of the twin's pad
  forces in object weights (poses of a held object identify only friction times grip force; the
  sensors pin the grip force, so friction is identified as what it is).
* ``rollout_episodes`` + ``episode_scores``: whole-episode rollouts from the benchmarks'
  first-state estimate, scored with the benchmarks' metric (``surrogate.metrics.pose_errors``:
  mean position error in % of the object size, mean geodesic rotation in degrees, over tracked
  frames). For free objects the twin *is* the hybrid stepper (same trajectory to ~1e-12 m), so
  this is the number ``surrogate bench cube-real`` reports for the same episodes.
* ``stepper_scores``: the same scores of whole toss rollouts (free or articulated objects) through the hybrid
  stepper (the one rollout API, ``sim.rollout``), about 3x cheaper than the twin when no gradient is needed.
"""

from __future__ import annotations

import numpy as np
import torch

from ..estimate import initial_state
from ..metrics import pose_errors
from ..sim.rollout import object_states, rollout
from ..sim.twin import rollout as twin_rollout
from .windows import Window, episode_windows, group_episodes


def pose_loss(pos, quat, target, valid, size, *, rot_weight: float = 0.5, eps: float = 1e-4) -> torch.Tensor:
    """Mean over tracked frames of |dp| / L + rot_weight * angle (rad).

    Args:
      pos [B, F, 3], quat [B, F, 4]: the rollout.  target [B, F, 7]: recorded poses.
      valid [B, F] bool.  size [B] m.
    """
    dp = pos - target[..., :3]
    e_pos = torch.sqrt((dp * dp).sum(-1) + (eps * size[:, None]) ** 2) / size[:, None]
    q = quat / quat.norm(dim=-1, keepdim=True)
    dot = (q * target[..., 3:7]).sum(-1).abs().clamp(max=1.0)
    # 2 atan2(|vector part of q^-1 q_true|, |dot|) without the arccos's infinite slope at 0
    sin_half = torch.sqrt((1.0 - dot * dot).clamp_min(0.0) + eps * eps)
    angle = 2.0 * torch.atan2(sin_half, dot)
    w = valid.to(pos.dtype)
    return ((e_pos + rot_weight * angle) * w).sum() / w.sum().clamp_min(1.0)


def force_loss(pred, meas, valid, weight) -> torch.Tensor:
    """Mean over valid (frame, pad) of ``log(1 + |f_pred - f_meas| / (|f_meas| + m |g|))``.

    The error is relative to the measured force plus the object's weight (a 4 N grip and a 0.2 N
    touch of a 20 g object are both errors of scale 1 when missed entirely), and logarithmic
    beyond that: a window whose object squeezes through the pads (hundreds of N) cannot drown the
    pose loss of the batch, while a grip force off by a factor still pulls with a useful gradient.

    Args:
      pred, meas [B, F, P, 3]: the twin's and the sensors' force on each pad (N).  valid [B, F, P] bool.
      weight [B]: the object's weight m |g| (N).
    """
    df = pred - meas
    err = torch.sqrt((df * df).sum(-1) + 1e-12) / (meas.norm(dim=-1) + weight[:, None, None])
    w = valid.to(pred.dtype)
    return (torch.log1p(err) * w).sum() / w.sum().clamp_min(1.0)


def stack_forces(windows: list[Window], F: int):
    """(pad bodies [B, P] long (-1: none), measured forces [B, F, P, 3], valid [B, F, P] bool) of a batch
    padded to F frames and the most pads of any window; None if no window has force measurements.
    Frame 0 is never valid (the twin has taken no step yet)."""
    P = max((0 if w.pad_body is None else len(w.pad_body)) for w in windows)
    if P == 0:
        return None
    B = len(windows)
    bodies = -np.ones((B, P), np.int64)
    meas = np.zeros((B, F, P, 3))
    valid = np.zeros((B, F, P), bool)
    for i, w in enumerate(windows):
        if w.pad_body is None:
            continue
        n, p = len(w.pad_force), len(w.pad_body)
        bodies[i, :p] = w.pad_body
        meas[i, :n, :p] = w.pad_force
        valid[i, 1:n, :p] = True
    return torch.as_tensor(bodies), torch.as_tensor(meas), torch.as_tensor(valid)


def stack_windows(windows: list[Window], substeps: int):
    """Tensors of a batch of windows, padded to the longest: state0 [B, 13] ([B, 13 + 2J] for an articulated object's,
    ``Window.state0``), target [B, F, 7], valid [B, F]
    (False on padding), size [B], and per window qpos / qvel [S + 1, *] (lists, padded with their last
    row; None without a hand)."""
    F = max(len(w.target) for w in windows)
    S = (F - 1) * substeps + 1
    f64 = lambda a: torch.as_tensor(np.stack(a), dtype=torch.float64)  # noqa: E731
    state0 = f64([w.state0 for w in windows])
    target = f64([_pad(w.target, F) for w in windows])
    valid = torch.as_tensor(np.stack([np.r_[w.valid, np.zeros(F - len(w.valid), bool)] for w in windows]))
    size = f64([w.size for w in windows])
    qpos = [_pad(w.qpos, S) for w in windows] if windows[0].qpos is not None else None
    qvel = [_pad(w.qvel, S) for w in windows] if windows[0].qvel is not None else None
    return state0, target, valid, size, qpos, qvel


def window_loss(twins, model, windows: list[Window], *, substeps: int, rot_weight: float,
                detach_every: int = 0, force_weight: float = 0.0) -> torch.Tensor:
    """The pose loss of one batch of windows (``batches``) rolled out through their twins, plus
    ``force_weight`` x ``force_loss`` where the windows carry pad force measurements; ``detach_every``
    > 0 truncates backpropagation every that many frames (the loss still covers every frame)."""
    state0, target, valid, size, qpos, qvel = stack_windows(windows, substeps)
    tw = [twins[w.group] for w in windows]
    forces = stack_forces(windows, target.shape[1]) if force_weight > 0 else None
    out = twin_rollout(model, tw, state0, target.shape[1], substeps=substeps, qpos=qpos, qvel=qvel,
                       detach_every=detach_every, force_bodies=None if forces is None else forces[0])
    loss = pose_loss(out[0], out[1], target, valid, size, rot_weight=rot_weight)
    if forces is not None:
        weight = torch.tensor([t.weight for t in tw], dtype=torch.float64)
        loss = loss + force_weight * force_loss(out[-1], forces[1], forces[2], weight)
    return loss


def _pad(a: np.ndarray | None, n: int):
    if a is None or len(a) >= n:
        return a
    return np.concatenate([a, np.repeat(a[-1:], n - len(a), axis=0)])


@torch.no_grad()
def rollout_episodes(twins, model, episodes, meta, *, groups, substeps: int, init_frames: int = 5, chunk: int = 16) -> dict:
    """{episode_id: [T, 7] predicted poses} of whole episodes from their first-state estimate.

    ``twins``: one per scene group; ``groups``: [len(episodes)] the group of each episode. Episodes of
    similar length are rolled out together (``chunk`` at a time, scenes mixed)."""
    out = {}
    wins = [episode_windows(e, meta, twins[gi].scene, frames=0, stride=1, substeps=substeps, init_frames=init_frames,
                            group=gi)[0] for e, gi in zip(episodes, groups)]
    order = np.argsort([len(w.target) for w in wins], kind="stable")
    for k in range(0, len(order), chunk):
        idx = sorted(order[k:k + chunk], key=lambda i: wins[i].group)
        state0, target, _, _, qpos, qvel = stack_windows([wins[i] for i in idx], substeps)
        F = target.shape[1]
        pos, quat = twin_rollout(model, [twins[wins[i].group] for i in idx], state0, F, substeps=substeps, qpos=qpos,
                                 qvel=qvel)[:2]  # an articulated object's joints follow: the base link is scored
        pred = torch.cat([pos, quat], -1).numpy()
        for j, i in enumerate(idx):
            out[wins[i].episode_id] = pred[j, :len(wins[i].target)]
    return out


def episode_scores(preds: dict, episodes, *, max_error_size: float = 10.0) -> list[dict]:
    """Per episode {id, pos_pct, rot_deg}: the benchmarks' mean errors over tracked frames (a rollout that
    blows up counts ``max_error_size`` object sizes, as the suites bound it)."""
    rows = []
    for e in episodes:
        p = preds[str(e.episode_id)]
        valid = None if e.object_pose_valid is None else np.asarray(e.object_pose_valid[:len(p)], bool)
        err = pose_errors(p, e.object_pose[:len(p)], valid)
        v = err["valid"]
        pos = np.where(np.isfinite(err["pos_m"]), np.minimum(err["pos_m"], max_error_size * e.object.size), max_error_size * e.object.size)
        rot = np.where(np.isfinite(err["rot_deg"]), err["rot_deg"], 180.0)
        rows.append({"id": str(e.episode_id), "object": e.object.name,
                     "pos_pct": float(pos[v].mean() / e.object.size * 100.0), "rot_deg": float(rot[v].mean())})
    return rows


@torch.no_grad()
def stepper_scores(model, episodes, meta, *, margin: float, substeps: int, init_frames: int = 5) -> list[dict]:
    """``episode_scores`` of whole toss rollouts (an articulated object's base link scored) through the hybrid stepper
    (``sim.rollout``) from the benchmarks' first-state estimate (``estimate.initial_state``); episodes that share a
    scene (``windows.group_episodes``) are one batch."""
    preds = {}
    for g in group_episodes(episodes, meta, margin=margin, substeps=substeps):
        states = [initial_state(e, k=init_frames) for e in g.episodes]
        state0 = object_states(g.scene, np.stack([q for q, _ in states]), np.stack([v for _, v in states]))
        traj = rollout(g.scene, state0, contact=model, substeps=substeps, frames=max(e.num_frames for e in g.episodes))
        qa = g.scene.object_qpos_adr
        for e, p in zip(g.episodes, traj.qpos[:, :, qa:qa + 7]):
            preds[str(e.episode_id)] = p[: e.num_frames]
    return episode_scores(preds, episodes)
