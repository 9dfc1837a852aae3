"""Statistics of the rig gap study (``bench.gap``): residuals over stable episodes, each effect's paired
share of the residual with a bootstrap interval, and outcome agreement with a Wilson interval.

Per-episode scores are dicts ``{"id", "hand", "pos_mm", "rot_deg", "unstable", "outcome", "recorded"}``
(``gap._score``). Unstable identified rollouts (blew up or left the scene: ``evaluate.score_episode``)
are counted and left out of every mean and of every pair.
"""

from __future__ import annotations

import math

import numpy as np

from ..metrics import summarize

N_BOOT = 4000


def stable(scores: list[dict]) -> list[dict]:
    return [s for s in scores if not s["unstable"]]


def residual(scores: list[dict], *, seed: int = 0) -> dict:
    """{"episodes", "unstable", "pos_mm": summarize, "rot_deg": summarize} over the stable episodes."""
    ok = stable(scores)
    return {"episodes": len(scores), "unstable": len(scores) - len(ok),
            "pos_mm": summarize([s["pos_mm"] for s in ok], seed=seed),
            "rot_deg": summarize([s["rot_deg"] for s in ok], seed=seed)}


def paired_share(on, off, *, seed: int = 0, n_boot: int = N_BOOT) -> dict:
    """An effect's share of the residual, paired over episodes: ``mean(on - off) / mean(on)``.

    Args:
      on: [n] residual of each episode with all effects on.  off: [n] the same episodes (same seeds and
        scripts) with the effect off, MuJoCo identified again on that rig.
    Returns:
      {"n", "diff_mean", "diff_ci95", "share", "share_ci95"}: the mean difference (units of the inputs)
      and the share of the all-on mean, each with a 95 % percentile bootstrap interval (episodes resampled
      with their pairs; ``n_boot`` resamples).
    """
    on, off = np.asarray(on, dtype=float), np.asarray(off, dtype=float)
    n = len(on)
    if n == 0:
        return {"n": 0, "diff_mean": None, "diff_ci95": None, "share": None, "share_ci95": None}
    diff = on - off
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    d_b = diff[idx].mean(axis=1)
    share_b = d_b / np.maximum(on[idx].mean(axis=1), 1e-12)
    q = lambda x: [float(np.quantile(x, 0.025)), float(np.quantile(x, 0.975))]  # noqa: E731
    return {"n": n, "diff_mean": float(diff.mean()), "diff_ci95": q(d_b),
            "share": float(diff.mean() / max(on.mean(), 1e-12)), "share_ci95": q(share_b)}


def pairs(on: list[dict], off: list[dict], key: str) -> tuple[list[float], list[float]]:
    """The ``key`` values of the episodes stable in both lists, matched by (hand, id)."""
    other = {(s["hand"], s["id"]): s for s in stable(off)}
    both = [(s, other[(s["hand"], s["id"])]) for s in stable(on) if (s["hand"], s["id"]) in other]
    return [a[key] for a, _ in both], [b[key] for _, b in both]


def wilson(k: int, n: int, z: float = 1.96) -> list[float] | None:
    """95 % Wilson score interval of a proportion k / n (None for n = 0)."""
    if n == 0:
        return None
    p = k / n
    den = 1.0 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return [max(0.0, mid - half), min(1.0, mid + half)]


def outcome_agreement(scores: list[dict]) -> dict:
    """Episodes whose predicted outcome (lifted, slipped, dropped) equals the recorded one, stable or not
    (a rollout that blew up predicts an outcome too): {"episodes", "agree", "rate", "ci95"}."""
    keys = ("lifted", "slipped", "dropped")
    rows = [s for s in scores if s["outcome"] is not None and s["recorded"]]
    k = sum(all(bool(s["outcome"][c]) == bool(s["recorded"][c]) for c in keys) for s in rows)
    return {"episodes": len(rows), "agree": k, "rate": k / len(rows) if rows else None, "ci95": wilson(k, len(rows))}


def overlapping(shares: dict[str, dict]) -> list[tuple[str, str]]:
    """Pairs of effects whose share intervals overlap (cannot be told apart at this budget), largest first."""
    names = sorted((n for n, s in shares.items() if s["share_ci95"]), key=lambda n: -shares[n]["share"])
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            (lo_a, _), (_, hi_b) = shares[a]["share_ci95"], shares[b]["share_ci95"]
            if lo_a <= hi_b:
                out.append((a, b))
    return out
