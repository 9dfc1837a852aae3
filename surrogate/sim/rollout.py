"""Rollouts of captured tosses with the surrogate inside MuJoCo, and their errors.

``rollout_mujoco`` rolls out free objects with the hybrid stepper (``stepper``):
``mj_step1`` -> one batched contact graph -> one GNN call -> wrenches into
``qfrc_applied`` -> ``mj_step2``. With ``model=None`` the same loop runs MuJoCo's analytic
contact.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from ..model import targets as T
from ..metrics import geodesic_deg
from ..scenes.from_capture import scene_for_episode


def initial_state(ep, *, window=T.DEFAULT_WINDOW, order=T.DEFAULT_ORDER):
    """(pos [3], quat [4], vel [3] world, omega_b [3] body) at the first frame, from the smoothed pose (not recorded velocities)."""
    sm = T.smooth_pose(ep.timestamps, ep.object_pose, ep.object_pose_valid, window=window, order=order)
    return sm["pos"][0], sm["quat"][0], sm["vel"][0], sm["omega_b"][0]


@torch.no_grad()
def rollout_mujoco(model, scene, states, n_frames: int, *, substeps: int, models=None) -> np.ndarray:
    """Simulate B objects from their initial states; returns poses [B, n_frames, 7] at frame times.

    The hybrid stepper (``stepper``) does the stepping: one batched network call per
    physics step for all B MjData.

    Args:
      model: a ``ContactGNN`` (surrogate contact) or None (MuJoCo's analytic contact).
      scene: the scene (one MjModel shared by all B MjData).
      states: B tuples (pos, quat, vel world, omega body).
      n_frames: frames to return (frame 0 is the initial state).
      substeps: MuJoCo steps per frame.
    """
    from .stepper import Stepper, step

    m = scene.model
    stepper = Stepper(scene, model, contact="analytic" if model is None else "surrogate")
    qa, da = scene.object_qpos_adr, scene.object_dof_adr
    ds = []
    for pos, quat, vel, om in states:
        d = mujoco.MjData(m)
        d.qpos[qa:qa + 3], d.qpos[qa + 3:qa + 7] = pos, quat
        d.qvel[da:da + 3], d.qvel[da + 3:da + 6] = vel, om
        mujoco.mj_forward(m, d)
        ds.append(d)
    out = np.zeros((len(ds), n_frames, 7))
    for i, d in enumerate(ds):
        out[i, 0] = d.qpos[qa:qa + 7]
    for f in range(1, n_frames):
        step(m, ds, stepper, nstep=substeps)
        for i, d in enumerate(ds):
            out[i, f] = d.qpos[qa:qa + 7]
    return out


def toss_errors(pred, ep, width: float) -> dict:
    """Per-toss mean position error (% of width) and rotation error (deg) against the recorded poses."""
    rec = ep.object_pose[: pred.shape[0]]
    pos = np.linalg.norm(pred[:, :3] - rec[:, :3], axis=1) / width * 100
    rot = geodesic_deg(pred[:, 3:7], rec[:, 3:7])
    return {"pos_pct": float(pos.mean()), "rot_deg": float(rot.mean()), "final_pos_pct": float(pos[-1]),
            "final_rot_deg": float(rot[-1])}


def evaluate_tosses(model, episodes, meta, *, margin=0.02, substeps=4, min_frames=149, max_frames=None,
                    contact="surrogate", cone="pyramidal") -> dict:
    """Roll out whole tosses (>= ``min_frames`` frames, i.e. >= 1 s at 148 Hz) from their first state.

    ``contact``: ``surrogate`` (model inside MuJoCo) or ``analytic`` (MuJoCo's own contact with
    the capture's nominal friction). Returns mean/median of the per-toss errors and the list.
    """
    eps = [e for e in episodes if e.num_frames >= min_frames]
    if not eps:
        return {"n": 0}
    groups = {}
    for e in eps:  # episodes sharing an object and scene share one model
        groups.setdefault((e.object.name, e.provenance.capture_rate_hz, tuple(e.environment.gravity)), []).append(e)
    rows = []
    for grp in groups.values():
        mode = "external" if contact == "surrogate" else "analytic"
        scene = scene_for_episode(grp[0], meta, margin=margin, substeps=substeps, contact_mode=mode, cone=cone)
        n = max(e.num_frames for e in grp) if max_frames is None else max_frames
        pred = rollout_mujoco(model if contact == "surrogate" else None, scene, [initial_state(e) for e in grp], n,
                              substeps=substeps)
        for e, p in zip(grp, pred):
            r = toss_errors(p[: e.num_frames], e, e.object.size)
            r["episode"] = e.episode_id
            rows.append(r)
    pos = np.array([r["pos_pct"] for r in rows])
    rot = np.array([r["rot_deg"] for r in rows])
    return {"n": len(rows), "pos_pct_mean": float(pos.mean()), "pos_pct_median": float(np.median(pos)),
            "rot_deg_mean": float(rot.mean()), "rot_deg_median": float(np.median(rot)), "per_toss": rows}


def main(argv=None):
    """``python -m surrogate.sim.rollout CKPT --data ROOT [--analytic]``: roll out the held-out tosses
    of the checkpoint's card (its validation episodes) and print mean/median errors as JSON."""
    import argparse
    import json

    import torch

    from ..model.checkpoint import load_checkpoint, read_card
    from ..model.data import load_capture

    p = argparse.ArgumentParser()
    p.add_argument("ckpt")
    p.add_argument("--data", default=None)
    p.add_argument("--analytic", action="store_true", help="MuJoCo's analytic contact (nominal friction) instead")
    p.add_argument("--cone", default="pyramidal")
    p.add_argument("--limit", type=int, default=0)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    card = read_card(a.ckpt)
    model = None if a.analytic else load_checkpoint(a.ckpt)[0]
    cap = load_capture(a.data or card["data"]["root"])
    val = set(card["data"]["val_episodes"])
    eps = [e for e in cap.episodes if e.episode_id in val]
    eps = eps[: a.limit] if a.limit else eps
    res = evaluate_tosses(model, eps, cap.meta, margin=card["data"]["margin_m"], substeps=card["data"]["substeps"],
                          contact="analytic" if a.analytic else "surrogate", cone=a.cone)
    print(json.dumps({k: v for k, v in res.items() if k != "per_toss"}, indent=1))
    return res


if __name__ == "__main__":
    main()
