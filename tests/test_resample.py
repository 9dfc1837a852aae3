"""``bench.resample.unit_bootstrap``: the resampling loop of the pooled rate gaps (``grasp_outcome.pooled_gap``,
``transfer.abs_gap_difference``). Pure numpy: no simulation."""

from __future__ import annotations

import numpy as np
import pytest

from surrogate.bench.resample import unit_bootstrap


def test_resamples_draw_each_sample_in_turn_from_the_seed():
    """Resample k draws ``integers(0, n, n)`` for each size in order from ``default_rng(seed)``: the statistic sees
    those indices, so a seed gives the same resamples wherever the loop is used."""
    seen = []
    unit_bootstrap((3, 5), lambda i, j: seen.append((i, j)) or 0.0, seed=4, n_boot=20)
    rng = np.random.default_rng(4)
    for i, j in seen:
        assert np.array_equal(i, rng.integers(0, 3, 3)) and np.array_equal(j, rng.integers(0, 5, 5))
    assert len(seen) == 20 and all(len(i) == 3 and len(j) == 5 for i, j in seen)


def test_interval_is_the_percentiles_of_the_resamples_with_a_value():
    x = np.array([0.0, 1.0, 2.0, 10.0])
    out = unit_bootstrap((4,), lambda i: float(x[i].mean()), seed=0, n_boot=500)
    idx = np.random.default_rng(0).integers(0, 4, size=(500, 4))  # the same indices as 500 draws one by one
    means = x[idx].mean(1)
    assert out == {"ci95": [float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))], "boot_n": 500}
    # resamples without a value (here: those holding unit 3) are left out and counted out of boot_n
    part = unit_bootstrap((4,), lambda i: None if 3 in i else float(x[i].mean()), seed=0, n_boot=500)
    kept = means[~(idx == 3).any(1)]
    assert part["boot_n"] == len(kept) < 500 and part["ci95"] == pytest.approx(np.quantile(kept, [0.025, 0.975]))
    assert unit_bootstrap((4,), lambda i: None, n_boot=50) == {"ci95": None, "boot_n": 0}
