"""Which episodes a training reads: the capture dataset, and its split into training and validation episodes.

Used by the law fit (``learn.lightning.RolloutData``) and the end-to-end peer (``baselines.gns``): both
validate on whole episodes, both follow a benchmark suite's split with ``data.bench_split`` (so that no test
episode of the suite is ever trained or validated on).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..capture import read_dataset
from ..errors import ConfigError
from ..splits import suite_split
from ..suites import load_suite, suite_path


def load_capture(root, *, max_episodes=None):
    """Read and validate a capture dataset (raises CaptureError naming the episode on bad data)."""
    ds = read_dataset(root, on_error="raise")
    if max_episodes:
        ds.episodes = ds.episodes[: int(max_episodes)]
    return ds


VAL_SPLITS = ("episode", "object", "family")  # data.val_split: what validation holds out whole


def split_episodes(ids, *, val_fraction: float, seed: int, groups=None) -> tuple[list, list]:
    """Fixed seeded split of episode ids: (train ids, val ids), each in the given order; ``val_fraction`` of
    them are drawn for validation with ``numpy.random.default_rng(seed)``.

    ``groups``: a key per episode (its object or object family): whole groups are drawn, in the seeded order, until
    at least ``val_fraction`` of the episodes are held out (one group always stays for training), so that no
    validation object (or family) is trained on; None: every episode its own group (the same split as before groups
    existed)."""
    ids = list(ids)
    groups = list(range(len(ids))) if groups is None else list(groups)
    keys = list(dict.fromkeys(groups))  # in order of first appearance
    perm = np.random.default_rng(seed).permutation(len(keys))
    n_val = int(round(val_fraction * len(ids))) if len(ids) > 1 else 0
    held, count = set(), 0
    size = Counter(groups)
    for k in perm.tolist():
        if count >= n_val or len(held) == len(keys) - 1:  # a group always stays for training
            break
        held.add(keys[k])
        count += size[keys[k]]
    val = {k for k, g in enumerate(groups) if g in held}
    return [i for k, i in enumerate(ids) if k not in val], [i for k, i in enumerate(ids) if k in val]


def episode_groups(episodes, val_split: str):
    """The key ``split_episodes`` holds out whole for ``data.val_split``: None (``episode``), each episode's object
    name (``object``), or its object's family (``family``: a procedural family, a mesh object its own)."""
    if val_split not in VAL_SPLITS:
        raise ConfigError(f"data.val_split must be one of {list(VAL_SPLITS)}, got {val_split!r}", key="data.val_split")
    if val_split == "episode":
        return None
    out = []
    for e in episodes:
        obj = getattr(e, "object", None)
        if obj is None:
            raise ConfigError(f"data.val_split={val_split!r}: episode {e.episode_id} records no object",
                              key="data.val_split")
        family = (getattr(obj, "geometry", None) or {}).get("family") if val_split == "family" else None
        out.append(family or obj.name)
    return out


def check_bench_split(spec) -> None:
    """``data.bench_split`` as ``bench_split_ids`` reads it: {suite: a benchmark suite, size: N (1 or more),
    validation: pool | training (null: pool)}; whether the suite's training pool holds N episodes of this dataset is
    known once the dataset is read (``bench_split_ids``)."""
    if not isinstance(spec, dict) or "suite" not in spec or "size" not in spec:
        raise ConfigError(f"bench_split must be {{suite: NAME, size: N[, validation: pool | training]}}, got {spec!r}",
                          key="data.bench_split")
    try:
        suite_path(spec["suite"])
    except (ConfigError, TypeError) as e:
        raise ConfigError(getattr(e, "reason", f"must be a suite name, got {spec['suite']!r}"),
                          key="data.bench_split.suite") from None
    size = spec["size"]
    if not (isinstance(size, int) and not isinstance(size, bool) and size >= 1):
        raise ConfigError(f"must be a whole number of the suite's training episodes, 1 or more, got {size!r}",
                          key="data.bench_split.size")
    if (spec.get("validation") or "pool") not in ("pool", "training"):
        raise ConfigError(f"bench_split.validation must be 'pool' or 'training', got {spec['validation']!r}",
                          key="data.bench_split.validation")


def check_split_keys(c: dict) -> None:
    """The split's keys of a data config, before its dataset is read: ``val_split`` one of ``VAL_SPLITS``, and
    ``bench_split`` null or as ``check_bench_split`` takes it, with ``val_split`` episode (a suite's split holds out
    its own episodes). The one rule of them: ``load_split`` applies it, and the config check
    (``training.setup.check_fit_rules``) before any captures are read."""
    val_split = c.get("val_split", "episode")
    if val_split not in VAL_SPLITS:
        raise ConfigError(f"data.val_split must be one of {list(VAL_SPLITS)}, got {val_split!r}", key="data.val_split")
    if not c.get("bench_split"):  # null (or empty): the dataset's own split, as load_split reads it
        return
    check_bench_split(c["bench_split"])
    if val_split != "episode":
        raise ConfigError(f"data.val_split={val_split!r} applies to a dataset's own split, not to a suite's "
                          "(data.bench_split): set data.val_split=episode, or data.bench_split=null",
                          key="data.val_split", keys=("data.val_split", "data.bench_split"))


def bench_split_ids(episodes, spec: dict, *, val_fraction: float) -> tuple[list, list]:
    """Training and validation ids that follow a benchmark suite's split (``cube-real``).

    ``spec`` = {"suite": name, "size": N, "validation": "pool" | "training"}: training is the suite's training set
    of size N (the first N of its shuffled pool). Validation (which epoch, and whether the network's corrections
    ship) is by default the next ``val_fraction`` x N pool episodes, so that no test episode of the suite is ever
    trained or validated on and the checkpoint scores cleanly in ``surrogate bench`` at that size; with
    ``validation: training`` it is the N training episodes themselves, so that the model has seen exactly N
    episodes, as MuJoCo identified on the same N has (the clean data-efficiency sweep, ``eval/cube_sweep.py``).
    """
    check_bench_split(spec)
    validation = spec.get("validation") or "pool"
    n = int(spec["size"])
    _, sp = suite_split(episodes, load_suite(spec["suite"])["data"], [n])
    if n not in sp["train"]:
        raise ConfigError(f"bench_split size {n} exceeds the {len(sp['pool'])} episodes of the suite's training pool "
                          f"(suite {spec['suite']}'s split of these {len(episodes)} episodes, less its test ones); a "
                          "dataset that is not the suite's: --set data.bench_split=null splits it by val_fraction",
                          key="data.bench_split.size")
    if validation == "training":
        return list(sp["train"][n]), list(sp["train"][n])
    n_val = max(1, int(round(val_fraction * n)))
    return list(sp["train"][n]), list(sp["pool"][n:n + n_val])


def checked_data_config(cfg: dict, defaults: dict) -> dict:
    """``defaults`` updated with ``cfg``; a key ``defaults`` lacks is refused, naming it (``data.<key>``)."""
    unknown = sorted(set(cfg) - set(defaults))
    if unknown:
        raise ConfigError(f"unknown data keys {unknown}; known: {sorted(defaults)}", key=f"data.{unknown[0]}")
    return {**defaults, **cfg}


def load_split(c: dict) -> tuple:
    """(capture dataset, training ids, validation ids) of the trainings validated on whole episodes (the
    law fit, the end-to-end peer).

    ``c`` is a data config: ``root`` (at most ``max_episodes`` read); with ``bench_split`` the suite's
    training set and at least ``val_min`` validation episodes of its pool (``bench_split_ids``), else a
    seeded ``val_fraction`` split that holds out whole episodes, objects or families (``val_split``); then at most
    ``max_train_episodes`` / ``max_val_episodes`` of each.
    """
    check_split_keys(c)  # before the captures are read
    capture = load_capture(c["root"], max_episodes=c["max_episodes"])
    episodes = capture.episodes
    if c["bench_split"]:
        n = int(c["bench_split"]["size"])
        frac = max(c["val_fraction"], c["val_min"] / max(n, 1))
        train, val = bench_split_ids(episodes, c["bench_split"], val_fraction=frac)
    else:
        ids = [e.episode_id for e in episodes]
        val_split = c.get("val_split", "episode")
        groups = episode_groups(episodes, val_split)
        train, val = split_episodes(ids, val_fraction=c["val_fraction"], seed=c["split_seed"], groups=groups)
        if groups is not None and not val:
            raise ConfigError(f"data.val_split={val_split!r}: the {len(ids)} episodes of {c['root']} hold one "
                              f"{val_split} ({groups[0]!r}), so none can be held out whole for validation; use "
                              "'episode' or a dataset of several", key="data.val_split")
    if c["max_train_episodes"]:
        train = train[: int(c["max_train_episodes"])]
    if c["max_val_episodes"]:
        val = val[: int(c["max_val_episodes"])]
    return capture, train, val
