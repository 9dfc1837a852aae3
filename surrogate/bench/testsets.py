"""Test datasets given on the command line (``surrogate bench --test-data A [B ...]``).

One dataset is the set ``test_data`` (as always); several are named after their folders (a
repeated name gets ``_2``, ``_3``...). Episode ids are unique within a dataset only, so the
episodes of several sets are scored under ``SET/ID`` keys, as ``rig-grasp`` does for its sets.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from ..capture import dataset_hash
from ..capture.schema import FEATURE_KEYS
from ..errors import ConfigError

SINGLE = "test_data"
logger = logging.getLogger(__name__)


def as_paths(test_data) -> list[Path]:
    """``--test-data`` as a list of paths: None -> [], one path -> [it], several -> them."""
    if test_data is None:
        return []
    if isinstance(test_data, (str, Path)):
        return [Path(test_data)]
    return [Path(p) for p in test_data]


def set_names(paths: list[Path]) -> list[str]:
    """The set name of each test dataset (see the module docstring)."""
    if len(paths) == 1:
        return [SINGLE]
    names, seen = [], {}
    for p in paths:
        base = Path(p).resolve().name or "test_data"
        seen[base] = seen.get(base, 0) + 1
        names.append(base if seen[base] == 1 else f"{base}_{seen[base]}")
    return names


def keyed(episodes, set_name: str) -> list:
    """Copies of ``episodes`` whose ``episode_id`` is ``SET/ID`` (the arrays are shared, not copied)."""
    return [dataclasses.replace(e, episode_id=f"{set_name}/{e.episode_id}") for e in episodes]


def long_enough(ds, min_frames: int) -> tuple[list, list[dict]]:
    """(the episodes of ``ds`` with at least ``min_frames`` frames, the others as {"episode", "reason"}): a suite
    scores the first and names the second in its ledger (``describe``'s ``left_out``)."""
    kept = [e for e in ds.episodes if e.num_frames >= min_frames]
    out = [{"episode": e.episode_id, "reason": f"{e.num_frames} frames, fewer than data.min_frames={min_frames}"}
           for e in ds.episodes if e.num_frames < min_frames]
    return kept, out


def describe(ds, episodes, source=None, left_out=()) -> dict:
    """The ledger's entry for one test dataset: where it is, its hash, how many episodes it gave; ``source``: the
    raw tosses it was imported from (``toss_data.load_tosses``), where that is not the dataset itself; what it lost
    (``name_losses``: ``left_out``, the episodes the suite does not score, from ``long_enough``)."""
    out = {"name": ds.meta.name, "path": str(ds.root), "episodes": len(episodes), "hash": dataset_hash(ds.root),
           "objects": sorted({e.object.name for e in episodes})}
    if source is not None and Path(source).resolve() != Path(ds.root).resolve():
        out["source"] = str(source)
    return name_losses(out, ds, left_out, what=f"test data {source or ds.root}")


def data_block(ds, min_frames: int) -> dict:
    """The ledger's ``data`` for a toss suite's own dataset ``ds``: name, path, the episodes it scores or trains on
    (at least ``min_frames`` frames), real or not, sources, hash, and what it lost (``name_losses``)."""
    eps, left_out = long_enough(ds, min_frames)
    out = {"name": ds.meta.name, "path": str(ds.root), "episodes": len(eps), "real": sorted({e.provenance.real for e in eps}),
           "sources": sorted({e.provenance.source for e in eps}), "hash": dataset_hash(ds.root)}
    return name_losses(out, ds, left_out, what=f"data {ds.root}")


def name_losses(out: dict, ds, left_out, *, what: str) -> dict:
    """``out`` with what a dataset lost named: ``skipped``, the files or episodes its import or reading skipped (file,
    episode, field, reason), and ``left_out`` (each {"episode", "reason"}); and a warning saying so, once."""
    skipped = [dict(s) for s in getattr(ds, "skipped", None) or []]
    if skipped:
        out["skipped"] = skipped
    if left_out:
        out["left_out"] = list(left_out)
    if skipped or left_out:
        first = (skipped or list(left_out))[0]
        logger.warning("%s: %d file(s) or episode(s) skipped at import or reading, %d episode(s) left out; %d kept "
                       "(the ledger's data names each; first: %s)", what, len(skipped), len(left_out), out["episodes"],
                       ", ".join(f"{k} {first[k]}" for k in ("file", "episode", "field", "reason") if first.get(k)))
    return out


KINDS = {  # what a suite scores: its test data must be of that kind
    "tosses": "free tosses of an object (no hand: the cube-real suites)",
    "grasps": "grasps of an object by a hand (joint positions every frame: the rig-grasp suites)",
}


def require_kind(ds, kind: str, *, suite: str) -> None:
    """Refuse, before any baseline runs, a ``--test-data`` dataset ``ds`` (a ``CaptureDataset``) of the wrong kind
    for the suite: grasps (a hand) given to a toss suite, tosses (no hand) given to a grasp suite. Scored anyway
    they gave verdicts on errors of 100 % and 268 %. Names the dataset, what it holds and what it lacks."""
    eps = ds.episodes
    with_hand = [e for e in eps if e.joint_pos is not None]
    hand = ds.meta.hand_name
    if kind == "tosses" and (with_hand or hand):
        raise ConfigError(f"holds grasps, not tosses (hand {hand!r}; joint positions in {len(with_hand)} of "
                          f"{len(eps)} episodes): suite {suite} scores {KINDS['tosses']}; give it a toss dataset",
                          file=ds.root, key="test_data")
    if kind == "grasps" and (len(with_hand) < len(eps) or not eps):
        raise ConfigError(f"holds no grasps: {len(eps) - len(with_hand)} of {len(eps)} episodes have no hand joint "
                          f"positions ({FEATURE_KEYS['joint_pos']}){'' if hand else ' and the dataset names no hand'}: "
                          f"suite {suite} scores {KINDS['grasps']}; give it grasp captures (surrogate rig generate)",
                          file=ds.root, key="test_data")
