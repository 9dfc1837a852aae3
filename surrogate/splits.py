"""The benchmarks' seeded episode split, shared by the suites and by training on a suite's split.

``split`` holds out ``n_test`` ids and takes nested training sets from the shuffled rest;
``suite_split`` applies it to the episodes a suite scores, as ``bench.cube_real`` does and as
training with ``data.bench_split`` does (``learn.episodes.bench_split_ids``), so that both
see the same ids for the same suite config. Object splits (train/held-out objects) are
``objects.splits``.
"""

from __future__ import annotations

import numpy as np


def split(ids: list[str], *, seed: int, n_test: int, sizes) -> dict:
    """Seeded split: ``test`` ids and nested training sets {size: ids} from the remaining pool."""
    order = np.random.default_rng(seed).permutation(len(ids))
    shuffled = [ids[i] for i in order]
    test, pool = shuffled[:n_test], shuffled[n_test:]
    train = {int(k): pool[:k] for k in sizes if k <= len(pool)}
    return {"seed": seed, "test": test, "pool": pool, "train": train}


def suite_split(episodes, data: dict, sizes) -> tuple[list, dict]:
    """(the episodes a suite scores, their ``split``) under a suite's ``data`` settings.

    The episodes are those of at least ``data.min_frames`` frames (default 2); their ids are
    split in (length, name) order with ``data.split_seed`` and ``data.n_test``.
    """
    eps = [e for e in episodes if e.num_frames >= data.get("min_frames", 2)]
    ids = sorted((e.episode_id for e in eps), key=lambda s: (len(s), s))
    return eps, split(ids, seed=data["split_seed"], n_test=data["n_test"], sizes=sizes)
