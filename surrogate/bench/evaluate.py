"""Per-episode scores of predicted trajectories and their aggregation into ledger metrics.

A model's predictions for N episodes are scored against the recorded poses (tracking
dropouts excluded); each episode gets a handful of scalars, and the ledger stores for
each scalar the mean, median and 95 % bootstrap intervals over episodes.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..metrics import first_divergence, horizon_errors, pose_errors, summarize


def score_episode(pred: np.ndarray, ep, *, size: float, horizons, divergence: dict, penetration=None,
                  origin: float = 0.0, extra_series: dict | None = None, max_error_m: float | None = None) -> dict:
    """Scalars for one episode.

    Args:
      pred: [T, 7] predicted poses at the episode's frames.
      ep: the recorded Episode (its object_pose is the reference).
      size: object size (m) for relative errors.
      horizons: seconds at which errors are reported.
      divergence: thresholds {"pos_frac": fraction of size, "rot_deg": degrees}.
      penetration: [T] m penetration depth of the prediction, or None.
      origin: s after the first frame from which horizons (and the divergence time) count.
      extra_series: more divergence signals {name: ([T] error, threshold)}, e.g. the object's
        slip in the hand or a timing mismatch; checked after the pose signals.
      max_error_m: if set, a prediction that leaves the scene (position error beyond this, or
        non-finite: a simulation that blew up) counts this error, not thousands of metres, so
        one unstable rollout cannot swamp a mean; the episode is flagged ``unstable``.
    """
    T = min(len(pred), ep.num_frames)
    valid = None if ep.object_pose_valid is None else np.asarray(ep.object_pose_valid[:T], bool)
    e = pose_errors(pred[:T], ep.object_pose[:T], valid)
    v = e["valid"]
    unstable = False
    if max_error_m is not None:
        bad = ~np.isfinite(e["pos_m"]) | (e["pos_m"] > max_error_m) | ~np.isfinite(e["rot_deg"])
        unstable = bool(bad.any())
        e["pos_m"] = np.where(np.isfinite(e["pos_m"]), np.minimum(e["pos_m"], max_error_m), max_error_m)
        e["rot_deg"] = np.where(np.isfinite(e["rot_deg"]), e["rot_deg"], 180.0)
    t = ep.timestamps[:T] - ep.timestamps[0] - origin
    hp = horizon_errors(e["pos_m"] / size * 100.0, v, t, horizons)
    hr = horizon_errors(e["rot_deg"], v, t, horizons)
    series = {"pose_position": e["pos_m"] / size, "pose_rotation": e["rot_deg"]}
    limits = {"pose_position": divergence["pos_frac"], "pose_rotation": divergence["rot_deg"]}
    for name, (x, thr) in (extra_series or {}).items():
        series[name], limits[name] = np.asarray(x, float)[:T], float(thr)
    div = first_divergence(series, limits, v)
    return {
        "id": ep.episode_id,
        "object": ep.object.name,
        "pos_m": float(e["pos_m"][v].mean()),
        "pos_pct_size": float(e["pos_m"][v].mean() / size * 100.0),
        "rot_deg": float(e["rot_deg"][v].mean()),
        "final_pos_pct_size": float(e["pos_m"][v][-1] / size * 100.0),
        "penetration_m": None if penetration is None else float(np.mean(penetration[:T])),
        "horizon_pos_pct_size": hp["at"],
        "horizon_rot_deg": hr["at"],
        "integrated_pos_pct_size": hp["mean_to"],
        "divergence_step": div["step"],
        "divergence_time_s": None if div["step"] is None else float(t[div["step"]]),
        "divergence_which": div["which"],
        "unstable": unstable,
    }


def aggregate(scores: list[dict], *, horizons, seed: int = 0) -> dict:
    """Ledger metrics (mean/median/95 % CI per scalar) over episode scores."""
    def col(key):
        return [s[key] for s in scores]

    def hcol(key, h):
        return [s[key].get(f"{h:g}") for s in scores]

    which = Counter(s["divergence_which"] or "never" for s in scores)
    return {
        "episodes": len(scores),
        "pos_m": summarize(col("pos_m"), seed=seed),
        "pos_pct_size": summarize(col("pos_pct_size"), seed=seed),
        "rot_deg": summarize(col("rot_deg"), seed=seed),
        "final_pos_pct_size": summarize(col("final_pos_pct_size"), seed=seed),
        "penetration_m": summarize(col("penetration_m"), seed=seed),
        # the sensed pads' force error (object weights, mean over frames of the largest pad's): rig grasps only
        "pad_force_weights": summarize([s.get("pad_force_weights") for s in scores], seed=seed),
        "horizons": {
            "pos_pct_size": {f"{h:g}": summarize(hcol("horizon_pos_pct_size", h), seed=seed) for h in horizons},
            "rot_deg": {f"{h:g}": summarize(hcol("horizon_rot_deg", h), seed=seed) for h in horizons},
            "integrated_pos_pct_size": {f"{h:g}": summarize(hcol("integrated_pos_pct_size", h), seed=seed) for h in horizons},
        },
        "divergence": {
            "time_s": summarize(col("divergence_time_s"), seed=seed),
            "first_signal": dict(which),
        },
        # fraction of rollouts that blew up or left the scene (an ensemble's episode counts its members' fraction)
        "unstable_rate": float(np.mean([float(s.get("unstable") or 0.0) for s in scores])) if scores else None,
    }


def per_object(scores: list[dict], *, horizons, seed: int = 0) -> dict:
    objs = sorted({s["object"] for s in scores})
    return {o: aggregate([s for s in scores if s["object"] == o], horizons=horizons, seed=seed) for o in objs}


def ensemble_mean_score(rows: list[dict]) -> dict:
    """One episode's score for an ensemble: the mean over its members' scores of each error
    scalar (the ensemble's expected error); other fields come from the first member."""
    s = dict(rows[0])
    for key in ("pos_m", "pos_pct_size", "rot_deg", "final_pos_pct_size"):
        s[key] = float(np.mean([r[key] for r in rows]))
    for key in ("penetration_m", "pad_force_weights"):
        vals = [r.get(key) for r in rows if r.get(key) is not None]
        s[key] = float(np.mean(vals)) if vals else None
    for key in ("horizon_pos_pct_size", "horizon_rot_deg", "integrated_pos_pct_size"):
        s[key] = {h: (None if any(r[key][h] is None for r in rows) else float(np.mean([r[key][h] for r in rows])))
                  for h in rows[0][key]}
    return s


def spread_coverage(members: np.ndarray, true: np.ndarray, valid: np.ndarray | None) -> tuple[int, int]:
    """(frames where the true position lies within the ensemble's spread, tracked frames).

    Within the spread: distance to the ensemble median <= the farthest member's distance to it.

    Args:
      members: [K, T, 3] predicted positions; true: [>= T, 3]; valid: [>= T] bool or None.
    """
    med = np.median(members, axis=0)
    radius = np.linalg.norm(members - med, axis=2).max(axis=0)
    T = members.shape[1]
    d = np.linalg.norm(true[:T] - med, axis=1)
    v = np.ones(T, bool) if valid is None else np.asarray(valid[:T], bool)
    return int((d <= radius)[v].sum()), int(v.sum())
