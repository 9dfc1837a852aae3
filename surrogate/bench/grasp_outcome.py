"""Grasp outcomes (lifted, slipped, dropped) of a predicted replay, by the rig's own definition.

The rig labels each recorded episode from its exact trajectory (``rig.scripts.episode_labels``:
the object rose more than ``lift_threshold``; it moved more than ``slip_threshold`` relative
to a pad, or turned more than ``slip_angle_threshold`` relative to the hand, during hold and
perturbation; it was lifted and then lost). A model's replay of the episode is labelled by
the same function on the predicted trajectory (``rig.outcomes.outcome_series``), so success and slip
rates of models and of the recordings compare like with like.
"""

from __future__ import annotations

import numpy as np

from ..rig.outcomes import outcome_series
from ..rig.scripts import episode_labels
from .resample import unit_bootstrap

__all__ = ["OUTCOMES", "agreement", "counts", "outcome_class", "outcome_series", "pooled_gap", "pooled_rate",
           "pooled_rate_gap", "predicted_labels", "rates"]


def predicted_labels(scene, qpos: np.ndarray, ep, thresholds: dict, *, series: dict | None = None) -> dict | None:
    """Outcome labels of a predicted trajectory of episode ``ep`` (None when the episode does
    not record its script phases, e.g. a capture from elsewhere).

    Args:
      thresholds: ``lift_threshold`` (m), ``slip_threshold`` (m), ``slip_angle_threshold`` (rad).
      series: ``outcome_series(scene, qpos)`` if the caller has it already.
    """
    phases = ((ep.provenance.generator or {}).get("script") or {}).get("phases")
    if not phases or scene.hand is None:
        return None
    s = outcome_series(scene, qpos) if series is None else series
    t = ep.timestamps[: len(qpos)] - ep.timestamps[0]
    return episode_labels(t, s["object_pos"], s["rel_pad"], s["rel_pos"], s["rel_quat"], s["hand_object_distance"],
                          phases, thresholds)


def rates(labels: list[dict | None]) -> dict:
    """Success (lifted and not dropped), slip (among lifted) and drop rates over episodes with labels (``counts``)."""
    c = counts(labels)
    n, nl = c["episodes"], c["lifted"]
    dropped = sum(bool(x["lifted"] and x["dropped"]) for x in labels if x is not None)
    return {"episodes": n, "success_rate": None if n == 0 else c["successes"] / n,
            "slip_rate": None if not nl else c["slipped"] / nl, "drop_rate": None if not nl else dropped / nl,
            "lifted": nl}


OUTCOMES = ("no_lift", "hold", "slip", "drop")  # one grasp's outcome, as ``outcome_class`` names it


def outcome_class(labels: dict | None) -> str | None:
    """The one outcome of a grasp's labels (``episode_labels``): ``drop`` (lifted, then lost), ``slip`` (lifted, held,
    but moved or turned in the grip beyond the thresholds), ``hold`` (lifted and held still) or ``no_lift``; None
    without labels."""
    if labels is None:
        return None
    if not labels["lifted"]:
        return "no_lift"
    return "drop" if labels["dropped"] else "slip" if labels["slipped"] else "hold"


def agreement(pred: list[dict | None], true: list[dict | None]) -> dict:
    """Per-episode agreement of predicted with recorded outcomes: the fraction of episodes whose success and whose
    slip label agree, and ``confusion`` {recorded outcome: {predicted outcome: episodes}} (``OUTCOMES``), which says
    which way a model errs (e.g. holding the grasps the recording lets slip)."""
    pairs = [(p, t) for p, t in zip(pred, true) if p is not None and t is not None]
    confusion = {t: dict.fromkeys(OUTCOMES, 0) for t in OUTCOMES}
    for p, t in pairs:
        confusion[outcome_class(t)][outcome_class(p)] += 1
    if not pairs:
        return {"episodes": 0, "success": None, "slip": None, "confusion": confusion}
    ok = lambda x: bool(x["lifted"] and not x["dropped"])  # noqa: E731
    return {"episodes": len(pairs),
            "success": sum(ok(p) == ok(t) for p, t in pairs) / len(pairs),
            "slip": sum(bool(p["slipped"]) == bool(t["slipped"]) for p, t in pairs) / len(pairs),
            "confusion": confusion}


def counts(labels: list[dict | None]) -> dict:
    """{episodes, successes, lifted, slipped} of outcome labels (None: not labelled, left out; slipped among the
    lifted): what ``rates`` divides and ``pooled_rate`` adds over objects."""
    ls = [x for x in labels if x is not None]
    lifted = [x for x in ls if x["lifted"]]
    return {"episodes": len(ls), "successes": sum(not x["dropped"] for x in lifted), "lifted": len(lifted),
            "slipped": sum(bool(x["slipped"]) for x in lifted)}


RATES = {"success": ("successes", "episodes"), "slip": ("slipped", "lifted")}  # key: (numerator, denominator) counts


def pooled_rate(per_obj: list[dict], side: str, key: str) -> float | None:
    """One side's rate pooled over objects: the summed numerators over the summed denominators (not a mean of the
    objects' rates), the one pooled rate of the grasp suites.

    Args:
      per_obj: one entry per object (repeats allowed: a resample), each {side: ``counts`` of its rollouts
        ({episodes, successes, lifted, slipped}), ...}.
      side: which counts of each entry (``sim`` or ``rig``; ``policy.rate_target`` puts its two models there).
      key: ``success`` (successes over episodes) or ``slip`` (slipped over lifted episodes).
    Returns:
      The rate, or None where the denominator is zero (no episode; no lifted episode for ``slip``).
    """
    num, den = RATES[key]
    d = sum(v[side][den] for v in per_obj)
    return sum(v[side][num] for v in per_obj) / d if d else None


def pooled_rate_gap(per_obj: list[dict], key: str) -> float | None:
    """``pooled_rate`` of the ``sim`` side minus that of the ``rig`` side (``per_obj`` and ``key`` as there); None
    where either is undefined."""
    s, r = pooled_rate(per_obj, "sim", key), pooled_rate(per_obj, "rig", key)
    return None if s is None or r is None else s - r


def pooled_gap(per_obj: dict, key: str, *, seed: int = 0, n_boot: int = 1000) -> dict:
    """Sim minus rig pooled ``key`` rate (``pooled_rate_gap``; ``success`` or ``slip``), and its 95 % percentile
    bootstrap interval with the held-out objects resampled (``resample.unit_bootstrap``; a resample where a side has
    no lifted episode gives no slip gap and is left out).

    Args:
      per_obj: {object: {"sim": counts, "rig": counts}} (``counts``).
    Returns:
      {"gap": float or None, "ci95": [lo, hi] or None, "boot_n": resamples used}."""
    vals = list(per_obj.values())
    g = pooled_rate_gap(vals, key)
    if g is None:
        return {"gap": None, "ci95": None, "boot_n": 0}
    return {"gap": float(g), **unit_bootstrap((len(vals),), lambda i: pooled_rate_gap([vals[j] for j in i], key),
                                              seed=seed, n_boot=n_boot)}
