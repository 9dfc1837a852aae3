"""``data.val_split``: validation that holds out whole objects or object families, so that the epoch and the
network a training keeps are chosen on objects it never trained on (as the benchmarks score it)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from surrogate.errors import ConfigError
from surrogate.learn.defaults import DATA_DEFAULTS
from surrogate.learn.episodes import episode_groups, load_split, split_episodes
from surrogate.rig.generate import generate


def test_split_without_groups_is_the_seeded_episode_split():
    """groups=None draws round(val_fraction x N) episodes in the order of ``default_rng(seed).permutation(N)``,
    the split every earlier training used."""
    ids = [f"e{i}" for i in range(40)]
    train, val = split_episodes(ids, val_fraction=0.2, seed=7)
    held = set(np.random.default_rng(7).permutation(40)[:8].tolist())
    assert val == [f"e{i}" for i in sorted(held)] and train == [i for i in ids if i not in val]


def test_split_by_group_holds_out_whole_groups_and_at_least_the_fraction():
    ids = [f"e{i}" for i in range(30)]
    groups = [f"obj{i % 7}" for i in range(30)]  # 7 objects, 4 or 5 episodes each
    for seed in range(5):
        train, val = split_episodes(ids, val_fraction=0.25, seed=seed, groups=groups)
        g = dict(zip(ids, groups))
        assert not {g[i] for i in train} & {g[i] for i in val}, seed
        assert len(val) >= round(0.25 * 30) and len(train) + len(val) == 30 and train


def _episode(i, name, family):
    geometry = {"kind": "procedural", "family": family} if family else {"kind": "mesh"}
    return SimpleNamespace(episode_id=f"e{i}", object=SimpleNamespace(name=name, geometry=geometry))


def test_episode_groups_are_objects_or_families_and_bad_values_are_refused():
    eps = [_episode(0, "box_s0", "box"), _episode(1, "box_s1", "box"), _episode(2, "mug", None)]
    assert episode_groups(eps, "episode") is None
    assert episode_groups(eps, "object") == ["box_s0", "box_s1", "mug"]
    assert episode_groups(eps, "family") == ["box", "box", "mug"]  # a mesh object is its own family
    with pytest.raises(ConfigError, match="val_split") as e:
        episode_groups(eps, "objects")
    assert e.value.location.field == "data.val_split"
    with pytest.raises(ConfigError, match="records no object"):
        episode_groups([SimpleNamespace(episode_id="e9", object=None)], "object")


def test_a_rig_capture_split_by_object_trains_on_none_of_its_validation_objects(tmp_path):
    """On rig captures (8 grasps of the training split's first objects, one family): the object split holds out whole
    objects; the family split of a one-family dataset is refused, naming the key, instead of validating on nothing;
    a suite's split takes no val_split."""
    root = tmp_path / "ds"
    generate(None, objects="train", episodes=8, out=root, workers=0, seed=5, progress=False, duration=1.0)
    base = {**DATA_DEFAULTS, "root": root, "val_fraction": 0.25}
    capture, train, val = load_split({**base, "val_split": "object"})
    key = dict(zip([e.episode_id for e in capture.episodes], episode_groups(capture.episodes, "object")))
    assert train and val and not {key[i] for i in train} & {key[i] for i in val}
    assert len(set(episode_groups(capture.episodes, "family"))) == 1
    with pytest.raises(ConfigError, match="hold one family"):
        load_split({**base, "val_split": "family"})
    with pytest.raises(ConfigError, match="bench_split"):
        load_split({**base, "val_split": "object", "bench_split": {"suite": "cube-real", "size": 8}})
