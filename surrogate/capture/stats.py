"""Feature statistics in LeRobot's shape (per episode and aggregated over a dataset).

LeRobot v3 keeps per-episode stats as ``stats/<key>/<stat>`` columns of the episode
metadata and the dataset's aggregate in ``meta/stats.json``; its tools read both.
"""

from __future__ import annotations

import numpy as np

QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)


def feature_stats(x: np.ndarray) -> dict:
    """Stats of one feature over frames.

    Args:
      x: [T, n] values (bools are counted as 0/1).
    Returns:
      {"min","max","mean","std": [n], "count": [1], "q01".."q99": [n]} as Python lists.
    """
    x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    out = {
        "min": x.min(0).tolist(),
        "max": x.max(0).tolist(),
        "mean": x.mean(0).tolist(),
        "std": x.std(0).tolist(),
        "count": [int(len(x))],
    }
    for q, v in zip(QUANTILES, np.quantile(x, QUANTILES, axis=0)):
        out[f"q{int(round(q * 100)):02d}"] = v.tolist()
    return out


def aggregate_stats(per_episode: list[dict]) -> dict:
    """Combine per-episode stats of one feature into dataset stats.

    Mean and std are exact (pooled); quantiles are count-weighted means of the episode
    quantiles, the same approximation LeRobot makes.
    """
    counts = np.array([s["count"][0] for s in per_episode], dtype=np.float64)
    w = counts / counts.sum()
    means = np.array([s["mean"] for s in per_episode])
    stds = np.array([s["std"] for s in per_episode])
    mean = (w[:, None] * means).sum(0)
    var = (w[:, None] * (stds**2 + (means - mean) ** 2)).sum(0)
    out = {
        "min": np.min([s["min"] for s in per_episode], axis=0).tolist(),
        "max": np.max([s["max"] for s in per_episode], axis=0).tolist(),
        "mean": mean.tolist(),
        "std": np.sqrt(np.maximum(var, 0)).tolist(),
        "count": [int(counts.sum())],
    }
    for key in per_episode[0]:
        if key.startswith("q"):
            out[key] = (w[:, None] * np.array([s[key] for s in per_episode])).sum(0).tolist()
    return out
