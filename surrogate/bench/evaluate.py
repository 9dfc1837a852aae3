"""Per-episode scores of predicted trajectories and their aggregation into ledger metrics.

A model's predictions for N episodes are scored against the recorded poses (tracking
dropouts excluded); each episode gets a handful of scalars, and the ledger stores for
each scalar the mean, median and 95 % bootstrap intervals over episodes.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..metrics import first_divergence, horizon_errors, pose_errors, summarize

BLOWUP_ROT_DEG = 180.0  # the rotation error a blown-up frame counts: the largest there is


def episode_errors(pred: np.ndarray, ep, max_error_m: float | None) -> dict:
    """Per-frame pose errors of a prediction under the one blow-up rule (ledger, report, videos, plots).

    The rule: from the first frame at which the prediction is non-finite or more than ``max_error_m``
    from the recording (a simulation that blew up, an object flung out of the scene), the rollout has
    blown up: that frame and every later one count ``max_error_m`` and 180 deg, so one blow-up weighs
    as a bounded, known error in every mean instead of thousands of metres (or NaN). ``None``: no rule
    (errors as they are).

    Args:
      pred: [T, 7] predicted poses at the episode's first T frames.
      ep: the recorded Episode.
    Returns:
      {"pos_m": [T], "rot_deg": [T], "valid": [T] bool (tracked frames), "blew_up_at": frame or None}.
    """
    T = len(pred)
    valid = None if ep.object_pose_valid is None else np.asarray(ep.object_pose_valid[:T], bool)
    e = pose_errors(pred, ep.object_pose[:T], valid)
    e["blew_up_at"] = None
    if max_error_m is None:
        return e
    bad = ~np.isfinite(e["pos_m"]) | ~np.isfinite(e["rot_deg"]) | (np.nan_to_num(e["pos_m"], nan=np.inf) > max_error_m)
    if bad.any():
        k = int(np.argmax(bad))
        e["pos_m"], e["rot_deg"] = e["pos_m"].copy(), e["rot_deg"].copy()
        e["pos_m"][k:], e["rot_deg"][k:] = float(max_error_m), BLOWUP_ROT_DEG
        e["blew_up_at"] = k
    return e


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
      max_error_m: the blow-up rule's bound (``episode_errors``); a rollout that blew up is flagged
        ``unstable`` (and ``unstable_at_s``: when, from the horizon origin).
    """
    T = min(len(pred), ep.num_frames)
    e = episode_errors(pred[:T], ep, max_error_m)
    v, unstable = e["valid"], e["blew_up_at"] is not None
    t = ep.timestamps[:T] - ep.timestamps[0] - origin
    hp = horizon_errors(e["pos_m"] / size * 100.0, v, t, horizons)
    hr = horizon_errors(e["rot_deg"], v, t, horizons)
    series = {"pose_position": e["pos_m"] / size, "pose_rotation": e["rot_deg"]}
    limits = {"pose_position": divergence["pos_frac"], "pose_rotation": divergence["rot_deg"]}
    for name, (x, thr) in (extra_series or {}).items():
        series[name], limits[name] = np.asarray(x, float)[:T], float(thr)
    art = articulated_scores(pred[:T], ep, v, t, horizons, e["blew_up_at"]) if is_articulated(pred, ep) else None
    if art is not None:  # the joints diverge too: the first frame any joint is more than joint_deg off
        series["joint"], limits["joint"] = art.pop("_joint_series"), float(divergence.get("joint_deg", 30.0))
    div = first_divergence(series, limits, v)
    return {**(art or {}),
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
        "unstable_at_s": float(t[e["blew_up_at"]]) if unstable else None,
    }


def is_articulated(pred: np.ndarray, ep) -> bool:
    """Whether ``pred`` [T, 7 + J] predicts an articulated object's joints too (and ``ep`` records them)."""
    return getattr(ep, "object_joint_pos", None) is not None and pred.ndim == 2 and pred.shape[1] > 7


def articulated_scores(pred: np.ndarray, ep, valid: np.ndarray, t: np.ndarray, horizons, blew_up_at) -> dict:
    """An articulated object's extra scalars: ``joint_deg`` (mean over tracked frames and joints of the joint error,
    deg; m for a prismatic joint), ``horizon_joint_deg``, and per link (``links``: name -> ``pos_pct_size`` of the
    link's own size, at its centre of mass, and ``rot_deg``), from the one forward kinematics
    (``Articulation.link_poses``); from a blow-up on, every link counts the blow-up rule's error (its position error
    capped by nothing: the rule already flags the row ``unstable``) and joints 180 deg."""
    from ..metrics import joint_errors, link_errors
    from ..objects.articulated import articulation_from_json

    art = articulation_from_json(ep.object.geometry, pieces=False)
    T = len(pred)
    true_q = np.asarray(ep.object_joint_pos[:T], float)
    true_links = np.concatenate([art.com_positions(ep.object_pose[:T], true_q),
                                 art.link_poses(ep.object_pose[:T], true_q)[..., 3:7]], axis=-1)
    pq = np.nan_to_num(pred[:, 7:], nan=0.0, posinf=0.0, neginf=0.0)
    pp = np.nan_to_num(pred[:, :7], nan=0.0, posinf=0.0, neginf=0.0)
    pp[:, 3] = np.where(np.linalg.norm(pp[:, 3:7], axis=1) > 0, pp[:, 3], 1.0)
    pred_links = np.concatenate([art.com_positions(pp, pq), art.link_poses(pp, pq)[..., 3:7]], axis=-1)
    pos, rot = link_errors(pred_links, true_links)
    jerr = joint_errors(pred[:, 7:], true_q, [j.type != "prismatic" for j in art.joints])
    if blew_up_at is not None:
        rot[blew_up_at:], jerr[blew_up_at:] = 180.0, 180.0
    per_frame = jerr.mean(axis=1)
    links = {lk.name: {"pos_pct_size": float(pos[valid, i].mean() / lk.size * 100.0), "rot_deg": float(rot[valid, i].mean())}
             for i, lk in enumerate(art.links)}
    return {"joint_deg": float(per_frame[valid].mean()), "links": links,
            "horizon_joint_deg": horizon_errors(per_frame, valid, t, horizons)["at"], "_joint_series": per_frame}


def _articulated_aggregate(scores: list[dict], *, horizons, seed: int) -> dict:
    """``aggregate``'s extra metrics of an articulated object's scores (none for rigid ones: their metrics are as before)."""
    if not scores or "joint_deg" not in scores[0]:
        return {}
    names = list(scores[0]["links"])
    return {"joint_deg": summarize([s["joint_deg"] for s in scores], seed=seed),
            "links": {n: {k: summarize([s["links"][n][k] for s in scores], seed=seed) for k in ("pos_pct_size", "rot_deg")}
                      for n in names},
            "horizons_joint_deg": {f"{h:g}": summarize([s["horizon_joint_deg"].get(f"{h:g}") for s in scores], seed=seed)
                                   for h in horizons}}


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
        **_articulated_aggregate(scores, horizons=horizons, seed=seed),
    }


def per_object(scores: list[dict], *, horizons, seed: int = 0) -> dict:
    objs = sorted({s["object"] for s in scores})
    return {o: aggregate([s for s in scores if s["object"] == o], horizons=horizons, seed=seed) for o in objs}


def ensemble_mean_score(rows: list[dict]) -> dict:
    """One episode's score for an ensemble: the mean over its members' scores of each error
    scalar (the ensemble's expected error), ``unstable`` the fraction of members that blew up, the median
    divergence time of the members that diverged (and the signal of the member at it); other fields come from the
    first member (the first member's divergence had stood for the ensemble's in the toss suites)."""
    s = dict(rows[0])
    diverged = sorted((r["divergence_time_s"], k) for k, r in enumerate(rows) if r.get("divergence_time_s") is not None)
    if "divergence_time_s" in s:
        s["divergence_time_s"] = float(np.median([t for t, _ in diverged])) if diverged else None
        s["divergence_which"] = rows[diverged[(len(diverged) - 1) // 2][1]].get("divergence_which") if diverged else None
    s["unstable"] = float(np.mean([bool(r.get("unstable")) for r in rows]))
    s["unstable_at_s"] = min((r["unstable_at_s"] for r in rows if r.get("unstable_at_s") is not None), default=None)
    for key in ("pos_m", "pos_pct_size", "rot_deg", "final_pos_pct_size"):
        s[key] = float(np.mean([r[key] for r in rows]))
    for key in ("penetration_m", "pad_force_weights"):
        vals = [r.get(key) for r in rows if r.get(key) is not None]
        s[key] = float(np.mean(vals)) if vals else None
    for key in ("horizon_pos_pct_size", "horizon_rot_deg", "integrated_pos_pct_size") + (
            ("horizon_joint_deg",) if "joint_deg" in s else ()):
        s[key] = {h: (None if any(r[key][h] is None for r in rows) else float(np.mean([r[key][h] for r in rows])))
                  for h in rows[0][key]}
    if "joint_deg" in s:  # an articulated object's members: their mean joint and per-link errors
        s["joint_deg"] = float(np.mean([r["joint_deg"] for r in rows]))
        s["links"] = {n: {k: float(np.mean([r["links"][n][k] for r in rows])) for k in ("pos_pct_size", "rot_deg")}
                      for n in rows[0]["links"]}
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
