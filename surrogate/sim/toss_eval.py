"""Whole-toss rollouts of recorded free-object episodes and their errors (training's held-out check).

Every toss starts from the one first-state estimate (``surrogate.estimate.initial_free_state``, as
the benchmarks and the training windows) and is rolled out by the one rollout API
(``surrogate.sim.rollout``).
"""

from __future__ import annotations

import logging

import numpy as np

from ..estimate import initial_free_state
from ..metrics import pose_errors
from ..scenes.from_capture import scene_for_episode
from .rollout import object_states, rollout

log = logging.getLogger(__name__)


def toss_errors(pred, ep, width: float) -> dict:
    """Per-toss mean position error (% of width) and rotation error (deg) against the recorded poses.

    pred: [T, 7] predicted poses (T <= the episode's frames).
    """
    e = pose_errors(pred, ep.object_pose[: pred.shape[0]])
    pos, rot = e["pos_m"] / width * 100, e["rot_deg"]
    return {"pos_pct": float(pos.mean()), "rot_deg": float(rot.mean()), "final_pos_pct": float(pos[-1]),
            "final_rot_deg": float(rot[-1])}


def evaluate_tosses(model, episodes, meta, *, margin=0.02, substeps=4, min_frames=149, max_frames=None,
                    contact="surrogate", cone="pyramidal", init_frames: int = 5) -> dict:
    """Roll out whole tosses (>= ``min_frames`` frames, i.e. >= 1 s at 148 Hz) from their first state.

    ``contact``: ``surrogate`` (model inside MuJoCo, the hybrid stepper) or ``analytic`` (MuJoCo's own
    contact with the capture's nominal friction). Returns mean/median of the per-toss errors and the list.
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
        states = [initial_free_state(e, k=init_frames) for e in grp]
        state0 = object_states(scene, np.stack([q for q, _ in states]), np.stack([v for _, v in states]))
        traj = rollout(scene, state0, contact=model if contact == "surrogate" else "analytic", substeps=substeps,
                       frames=n)
        qa = scene.object_qpos_adr
        for e, p in zip(grp, traj.qpos[:, :, qa:qa + 7]):
            r = toss_errors(p[: e.num_frames], e, e.object.size)
            r["episode"] = e.episode_id
            rows.append(r)
        log.debug("rolled out %d tosses of %s", len(grp), grp[0].object.name)
    pos = np.array([r["pos_pct"] for r in rows])
    rot = np.array([r["rot_deg"] for r in rows])
    return {"n": len(rows), "pos_pct_mean": float(pos.mean()), "pos_pct_median": float(np.median(pos)),
            "rot_deg_mean": float(rot.mean()), "rot_deg_median": float(np.median(rot)), "per_toss": rows}


def main(argv=None):
    """``python -m surrogate.sim.toss_eval CKPT --data ROOT [--analytic]``: roll out the held-out tosses
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
