"""Trajectory metrics in the terms of the contact-learning literature.

Cube-toss papers (ContactNets; Parmar et al. 2021; Acosta, Yang and Posa 2022) score a
rollout against the recorded toss by the per-step position error (reported as a percentage
of the cube width) and the geodesic rotation error in degrees, averaged per toss and then
over tosses. Rotation errors have heavy tails, so medians are reported beside means.

Shapes: T = steps, N = episodes/tosses.
"""

from __future__ import annotations

import numpy as np


def geodesic_deg(q_pred: np.ndarray, q_true: np.ndarray) -> np.ndarray:
    """Geodesic angle between orientations, degrees.

    Args:
      q_pred, q_true: [..., 4] quaternions (w, x, y, z); need not be normalized.
    Returns:
      [...] angle in [0, 180]. q and -q are the same rotation (the hemisphere does not matter).
    """
    a = q_pred / np.linalg.norm(q_pred, axis=-1, keepdims=True)
    b = q_true / np.linalg.norm(q_true, axis=-1, keepdims=True)
    dot = np.abs(np.sum(a * b, axis=-1)).clip(0.0, 1.0)
    return np.degrees(2.0 * np.arccos(dot))


def pose_errors(pred: np.ndarray, true: np.ndarray, valid: np.ndarray | None = None) -> dict:
    """Per-step errors of a predicted pose trajectory.

    Args:
      pred, true: [T, 7] poses (m; quaternion w, x, y, z).
      valid: [T] bool, frames where ``true`` is a real measurement (tracking dropouts are
        excluded from every average), or None for all.
    Returns:
      {"pos_m": [T], "rot_deg": [T], "valid": [T] bool}
    """
    pos = np.linalg.norm(pred[:, :3] - true[:, :3], axis=1)
    rot = geodesic_deg(pred[:, 3:7], true[:, 3:7])
    v = np.ones(len(pos), bool) if valid is None else np.asarray(valid, bool)
    return {"pos_m": pos, "rot_deg": rot, "valid": v}


def link_errors(pred_links: np.ndarray, true_links: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-step, per-link errors of an articulated object's predicted link poses.

    Args:
      pred_links, true_links: [T, L, 7] every link's pose (position of its centre of mass, m; quaternion w x y z).
    Returns:
      ([T, L] position error m, [T, L] rotation error deg).
    """
    return (np.linalg.norm(pred_links[..., :3] - true_links[..., :3], axis=-1),
            geodesic_deg(pred_links[..., 3:7], true_links[..., 3:7]))


def joint_errors(pred_q: np.ndarray, true_q: np.ndarray, revolute) -> np.ndarray:
    """[T, J] joint coordinate errors: revolute joints in degrees, the difference wrapped to [0, 180] (recorded
    angles are wrapped to (-pi, pi]); prismatic ones in metres.

    Args:
      pred_q, true_q: [T, J]; revolute: [J] bool.
    """
    d = np.asarray(pred_q, float) - np.asarray(true_q, float)
    rev = np.asarray(revolute, bool)
    wrapped = np.degrees(np.abs((d + np.pi) % (2 * np.pi) - np.pi))
    return np.where(rev[None, :], wrapped, np.abs(d))


def horizon_errors(err: np.ndarray, valid: np.ndarray, times: np.ndarray, horizons) -> dict:
    """Error at each horizon (the last valid frame at or before it) and the integrated error.

    Args:
      err: [T] per-step error; valid: [T] bool; times: [T] s from the horizon origin (the start of the
        rollout, or e.g. the first contact of a grasp; earlier frames are negative and ignored).
      horizons: seconds.
    Returns:
      {"at": {h: value or None}, "mean_to": {h: mean of valid errors over [0, h] or None}}.
      None where the episode is shorter than the horizon.
    """
    at, mean_to = {}, {}
    for h in horizons:
        key = f"{h:g}"
        inside = (times >= -1e-9) & (times <= h + 1e-9) & valid  # frames before the origin do not count
        if times[-1] + 1e-9 < h or not inside.any():
            at[key] = mean_to[key] = None
            continue
        at[key] = float(err[np.flatnonzero(inside)[-1]])
        mean_to[key] = float(err[inside].mean())
    return {"at": at, "mean_to": mean_to}


def first_divergence(series: dict, thresholds: dict, valid: np.ndarray | None = None) -> dict:
    """The first step at which any error series exceeds its threshold, and which one.

    Args:
      series: name -> [T] error (e.g. "pose", "force", "slip", "timing").
      thresholds: name -> threshold in the series' unit.
      valid: [T] bool frames to consider, or None.
    Returns:
      {"step": int or None, "which": name or None, "per_series": {name: step or None}}.
      Ties go to the series listed first.
    """
    per = {}
    for name, e in series.items():
        e = np.asarray(e, dtype=float)
        hit = e > thresholds[name]
        if valid is not None:
            hit &= np.asarray(valid, bool)
        per[name] = int(np.argmax(hit)) if hit.any() else None
    steps = [(s, name) for name, s in per.items() if s is not None]
    if not steps:
        return {"step": None, "which": None, "per_series": per}
    step, which = min(steps, key=lambda x: x[0])
    return {"step": step, "which": which, "per_series": per}


def bootstrap_ci(values, *, stat=np.mean, n_boot: int = 2000, level: float = 0.95, seed: int = 0):
    """Percentile bootstrap interval of ``stat`` over ``values`` (resampling episodes).

    ``stat`` must accept ``axis`` (np.mean, np.median, ...): all resamples are reduced in one call.
    Returns (lo, hi); (nan, nan) for no values, (v, v) for one.
    """
    x = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if len(x) == 0:
        return (float("nan"), float("nan"))
    if len(x) == 1:
        return (float(x[0]), float(x[0]))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))
    stats = stat(x[idx], axis=1)
    a = (1.0 - level) / 2.0
    return (float(np.quantile(stats, a)), float(np.quantile(stats, 1.0 - a)))


def summarize(values, *, seed: int = 0) -> dict:
    """Mean, median and 95 % bootstrap intervals of per-episode values (None/NaN dropped)."""
    x = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if len(x) == 0:
        return {"n": 0, "mean": None, "median": None, "mean_ci95": None, "median_ci95": None}
    return {
        "n": int(len(x)),
        "mean": float(x.mean()),
        "median": float(np.median(x)),
        "mean_ci95": list(bootstrap_ci(x, stat=np.mean, seed=seed)),
        "median_ci95": list(bootstrap_ci(x, stat=np.median, seed=seed)),
    }


def paired_difference(a: list[dict], b: list[dict], key: str, *, by: str | None = None, seed: int = 0,
                      n_boot: int = 2000) -> dict:
    """Mean of b - a over the episodes both have (rows ``{"id", key}``; a None or non-finite value drops the
    episode) with a 95 % bootstrap interval: negative, b is lower. The one paired comparison of models (training's
    selections, the suites' verdicts).

    ``by``: a field of ``b``'s rows naming the unit a claim generalizes over (``"object"`` for a benchmark of unseen
    objects). Where some unit holds several episodes, the bootstrap resamples units, each with all its episodes (a
    cluster bootstrap): the episodes of one object share its grip and its slips, so resampling them one by one counts
    one object's luck as many independent draws. The result then also carries ``units``, ``by`` and the interval over
    episodes (``ci95_episodes``) beside the one over units (``ci95``). Without ``by``, with one episode per unit, or
    with a single unit (the cube's tosses: a claim about that object's episodes), the interval is over episodes, as
    it always was."""
    da = {r["id"]: r[key] for r in a if r.get(key) is not None and np.isfinite(r[key])}
    rows = [r for r in b if r["id"] in da and r.get(key) is not None and np.isfinite(r[key])]
    diff = np.array([r[key] - da[r["id"]] for r in rows])
    if not len(diff):
        return {"n": 0, "mean": None, "ci95": None}
    rng = np.random.default_rng(seed)
    boots = diff[rng.integers(0, len(diff), size=(n_boot, len(diff)))].mean(1)
    out = {"n": int(len(diff)), "mean": float(diff.mean()),
           "ci95": [float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))]}
    if by is None:
        return out
    _, unit = np.unique([str(r.get(by)) for r in rows], return_inverse=True)
    sums, counts = np.bincount(unit, weights=diff), np.bincount(unit)
    if counts.max() == 1 or len(counts) == 1:
        return out
    pick = np.random.default_rng(seed).integers(0, len(counts), size=(n_boot, len(counts)))
    boots = sums[pick].sum(1) / counts[pick].sum(1)
    return {**out, "ci95": [float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))],
            "ci95_episodes": out["ci95"], "units": int(len(counts)), "by": by}


MIN_PAIRED_UNITS = 10  # fewer objects never replace a model: a few objects' interval says nothing about objects


def below_zero(diff: dict, min_units: int = MIN_PAIRED_UNITS) -> bool:
    """The paired rule for replacing a model: ``paired_difference``'s interval lies below zero, over at least
    ``min_units`` units (the objects it resamples, else its episodes): one episode's "interval" is a point."""
    units = diff.get("units") or diff.get("n") or 0
    return diff.get("ci95") is not None and diff["ci95"][1] < 0 and units >= min_units


def signed_interval(mean: float, ci) -> str:
    """``"+m [lo, hi]"``, two decimals with signs: how reports and commands write a difference and its interval (``ci``:
    [lo, hi])."""
    return f"{mean:+.2f} [{ci[0]:+.2f}, {ci[1]:+.2f}]"


def replacement_refusals(at: dict, whole: dict, *, units: int, min_units: int = MIN_PAIRED_UNITS) -> list[str]:
    """The paired rule by which a candidate replaces a model (a network its law in training, a checkpoint the
    release): ``at`` and ``whole`` are ``paired_difference`` results, candidate minus model, of the position error
    at the verdict's horizon and over the episode; ``units``: how many objects carry ``at`` (counted by the caller:
    ``paired_difference`` does not say so where one object holds every episode). Returns why it does not replace it
    (empty: it does): the interval at the horizon must lie below zero, the one over the episode must not lie above
    zero, and at least ``min_units`` objects must carry the first."""
    out = []
    if at.get("ci95") is None or not at["ci95"][1] < 0:
        ci = at.get("ci95") or [float("nan")] * 2
        out.append(f"at the horizon {signed_interval(at.get('mean') or 0, ci)} does not lie below zero")
    if whole.get("ci95") is None or whole["ci95"][0] > 0:
        ci = whole.get("ci95") or [float("nan")] * 2
        out.append(f"over the episode {signed_interval(whole.get('mean') or 0, ci)} lies above zero")
    if units < min_units:
        out.append(f"{units} objects, fewer than {min_units}: too few to decide")
    return out


def box_corners(pose: np.ndarray, half_extents) -> np.ndarray:
    """[T, 8, 3] the corners of a box (half extents [3], m) at poses [T, 7] (position, quaternion w x y z)."""
    from scipy.spatial.transform import Rotation

    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float)
    rot = Rotation.from_quat(np.asarray(pose)[:, 3:7], scalar_first=True).as_matrix()
    return np.einsum("tij,pj->tpi", rot, signs * np.asarray(half_extents, float)) + np.asarray(pose)[:, None, :3]


def box_penetration(pose: np.ndarray, half_extents, surface_z: float = 0.0) -> np.ndarray:
    """Depth (m, >= 0) of the lowest box corner below a horizontal surface, per step.

    Args:
      pose: [T, 7]; half_extents: [3] m.
    Returns:
      [T] penetration depth.
    """
    return np.maximum(0.0, surface_z - box_corners(pose, half_extents)[..., 2].min(axis=1))
