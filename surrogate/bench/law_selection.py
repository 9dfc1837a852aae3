"""Closed-loop selection of a contact law's pad friction by replays: the benchmark's own metric.

Training through the twin moves the hand *kinematically* along its recorded joints. That fits the
pads' stiffness (the fingertip force sensors pin the grip force) but biases their friction high:
in the pose loss a grasp the twin lets slip costs the whole fall, while a weak grasp the twin holds
where the rig slipped costs only the lift height, so the fit leans toward holding. In the
benchmarks (``rig-grasp``) and in users' rollouts the hand is *actuated*: the recorded commands
drive MuJoCo's servos, the grip force comes from the servo and the law's friction alone decides
whether a weak grasp holds. So, as the analytic baselines are identified by replays
(``bench.identify``), the pad friction is chosen by closed-loop replays of the training data's
validation episodes (``bench.replay``: the same replays ``rig-grasp`` scores), over a small grid
of scales of the fitted value; the selection and its paired comparison with the fitted value go
into the card.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from tqdm import tqdm

from ..metrics import paired_difference
from .replay import replay_errors, replay_with_model

BODY = 1  # index of the moving-body (pad) group in ContactLawGNN's prior parameters


def with_pad_friction_scale(model, scale: float):
    """A copy of a ``ContactLawGNN`` whose pad (moving-body) prior friction is ``scale`` x its own."""
    out = copy.deepcopy(model).eval()
    with torch.no_grad():
        out.log_friction[BODY] += math.log(float(scale))
    return out


def replay_scores(model, episodes, meta, *, substeps: int, margin: float, rot_weight: float,
                  progress: bool = True, desc: str = "closed-loop replays", delay_s: float = 0.0) -> list[dict]:
    """Per episode {id, pos_pct, rot_deg, score}: the recorded commands replayed through the hybrid
    stepper with ``model`` owning the contacts, each ``delay_s`` late (the hand's latency,
    ``command_delay``), scored over the tracked frames as ``rig-grasp`` does."""
    rows = []
    for ep in tqdm(episodes, desc=desc, unit="episode", disable=not progress, leave=False):
        r, q, _, _ = replay_with_model(ep, meta, model, substeps=substeps, margin=margin, delay_s=delay_s)
        a = r.scene.object_qpos_adr
        pos, rot = replay_errors(q[None, :, a:a + 7], ep)
        p, d = float(pos[0]) * 100.0, float(rot[0])
        rows.append({"id": str(ep.episode_id), "object": ep.object.name, "pos_pct": p, "rot_deg": d,
                     "score": p + rot_weight * d})
    return rows


def scored_replays(model, episodes, meta, *, substeps: int, margin: float, rot_weight: float, delay_s: float = 0.0,
                   horizon_s: float | None = None, progress: bool = True) -> list[dict]:
    """Per episode rows with a ``score``: position plus ``rot_weight`` x rotation error over the episode
    (``replay_scores``), or with ``horizon_s`` ``rig-grasp``'s verdict, the position error ``horizon_s`` after the
    close starts (``benchmark_scores``; None where the episode ends before it)."""
    if horizon_s is None:
        return replay_scores(model, episodes, meta, substeps=substeps, margin=margin, rot_weight=rot_weight,
                             progress=progress, delay_s=delay_s)
    return [{**r, "score": r["at_horizon"]} for r in benchmark_scores(
        model, episodes, meta, substeps=substeps, margin=margin, horizon_s=horizon_s, delay_s=delay_s,
        progress=progress, desc="closed-loop replays")]


def mean_score(rows: list[dict] | None) -> float | None:
    """The mean ``score`` of replayed episodes (an episode without one, ending before the horizon, left out)."""
    vals = [r["score"] for r in rows or () if r["score"] is not None]
    return float(sum(vals) / len(vals)) if vals else None


def select_pad_friction(model, episodes, meta, *, scales, substeps: int, margin: float, rot_weight: float,
                        progress: bool = True, delay_s: float = 0.0, horizon_s: float | None = None) -> dict:
    """Replay ``episodes`` (with a hand) under each scale of the pad friction; keep the best mean score.

    Each episode is scored by ``scored_replays`` (with ``horizon_s``: ``rig-grasp``'s verdict; an episode that ends
    before it is left out of the mean).

    Returns:
      {model (the selected copy), scale, friction (the selected pad mu), candidates: [{scale, friction,
       pos_pct_mean, rot_deg_mean, score}], paired_minus_fitted: the paired score difference of the
       selection against scale 1 (mean, 95 % bootstrap interval; negative: better), n: episodes, per_episode}.
    """
    scales = [float(s) for s in scales]
    if 1.0 not in scales:
        scales = [1.0] + scales
    if any(not (s > 0 and math.isfinite(s)) for s in scales):
        raise ValueError(f"friction scales must be positive numbers, got {scales}")
    results = []
    for s in tqdm(scales, desc="pad friction candidates", unit="candidate", disable=not progress):
        m = with_pad_friction_scale(model, s)
        rows = scored_replays(m, episodes, meta, substeps=substeps, margin=margin, rot_weight=rot_weight,
                              delay_s=delay_s, horizon_s=horizon_s, progress=progress)
        results.append((s, m, rows))
    cands = [{"scale": s, "friction": m.prior("body").friction,
              "pos_pct_mean": float(np.mean([r["pos_pct"] for r in rows])),
              "rot_deg_mean": float(np.mean([r["rot_deg"] for r in rows])),
              "score": mean_score(rows)} for s, m, rows in results]
    best = min(range(len(results)), key=lambda i: cands[i]["score"])
    fitted = scales.index(1.0)
    s, m, rows = results[best]
    return {"model": m, "scale": s, "friction": cands[best]["friction"], "candidates": cands, "n": len(episodes),
            "paired_minus_fitted": paired_difference(results[fitted][2], rows, "score", by="object"),
            "per_episode": rows}


def benchmark_scores(model, episodes, meta, *, substeps: int, margin: float, horizon_s: float = 1.0,
                     delay_s: float = 0.0, progress: bool = True, desc: str = "decision replays") -> list[dict]:
    """Per episode {id, object, at_horizon, pos_pct, rot_deg, outcome}: the recorded commands replayed through the
    hybrid stepper (``replay_with_model``, each ``delay_s`` late) and scored by ``rig-grasp``'s own scorer
    (``rig_scoring.EpisodeScorer`` with the suite's metrics): the position error in % of the object's size
    ``horizon_s`` after the close phase starts (the suite's verdict; None where the episode ends before it) and over
    the episode, the rotation error in degrees, the replay's outcome labels (``rig.scripts.episode_labels``). What
    training decides a network by, where it has the data for it (``stages.closed_loop.decision_data``)."""
    from ..suites import load_suite
    from .rig_data import thresholds
    from .rig_scoring import EpisodeScorer

    cfg = load_suite("rig-grasp")
    cfg["metrics"]["horizons_s"] = sorted({*map(float, cfg["metrics"]["horizons_s"]), float(horizon_s)})
    key, thr = f"{float(horizon_s):g}", thresholds({"config": None, "overrides": ()})
    rows = []
    for ep in tqdm(episodes, desc=desc, unit="episode", disable=not progress, leave=False):
        r, q, _, _ = replay_with_model(ep, meta, model, substeps=substeps, margin=margin, delay_s=delay_s)
        sc = EpisodeScorer(r, cfg, thr).score(q)
        rows.append({"id": str(ep.episode_id), "object": ep.object.name, "at_horizon": sc["horizon_pos_pct_size"][key],
                     "pos_pct": sc["pos_pct_size"], "rot_deg": sc["rot_deg"], "outcome": sc["outcome"]})
    return rows
