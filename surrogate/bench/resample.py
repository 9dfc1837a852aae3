"""The percentile bootstrap of a statistic of resampled units (held-out objects): the one resampling loop behind
``grasp_outcome.pooled_gap`` (one sample of objects) and ``transfer.abs_gap_difference`` (two rows' objects, paired
or apart).

``metrics.paired_difference`` resamples a mean of per-episode differences; a pooled rate gap is a ratio of sums over
the resampled objects (and a difference of absolute ones across rows), not a mean, so it needs the resample's
indices: this passes them to the statistic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def unit_bootstrap(sizes: Sequence[int], statistic: Callable[..., float | None], *, seed: int = 0,
                   n_boot: int = 1000) -> dict:
    """95 % percentile bootstrap interval of ``statistic`` over units resampled with replacement.

    Args:
      sizes: the number of units of each sample resampled apart, e.g. ``(n_objects,)``; a paired comparison
        resamples one sample whose units carry both sides.
      statistic: ``statistic(*idx) -> float or None``, ``idx[k]``: [sizes[k]] int indices into sample k (repeats
        allowed); None where the resample has no value (e.g. no lifted episode): it is left out.
      seed, n_boot: the generator's seed (``np.random.default_rng``) and the number of resamples. Each resample draws
        ``rng.integers(0, n, n)`` for each size in turn, so a seed gives the same indices wherever this is used.
    Returns:
      {"ci95": [lo, hi] (2.5 % and 97.5 % quantiles) or None where no resample has a value, "boot_n": resamples
      with a value}.
    """
    rng = np.random.default_rng(seed)
    boots = [statistic(*[rng.integers(0, n, n) for n in sizes]) for _ in range(n_boot)]
    boots = np.array([b for b in boots if b is not None], dtype=float)
    if not len(boots):
        return {"ci95": None, "boot_n": 0}
    return {"ci95": [float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))], "boot_n": len(boots)}
