"""The ``rig-grasp`` suite's data: generated test and training sets (cached by content), given test data.

``rig`` (``rig_settings``) says how the rig generates: its config and overrides, the hand, the
episode duration and the generation backend (``process`` or ``ray``: the same episodes either way).
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from ..capture import dataset_hash, read_dataset
from ..config import expand_env
from ..errors import ConfigError
from ..objects.folder import folder_sha256
from ..paths import config_dir, project_root
from .testsets import as_paths, require_kind, set_names

logger = logging.getLogger(__name__)

# Bump when the rig's output for the same config and seed changes, so cached test sets are regenerated.
RIG_FORMAT = 3  # 3: an object near the hand's opening is grasped centred instead of skipped


def rig_settings(cfg: dict, *, backend: str = "process") -> dict:
    """How this suite's rig generates (``data.rig_config``, ``rig_overrides``, ``hand``, ``duration``)."""
    d = cfg["data"]
    return {"config": rig_config_path(d.get("rig_config")), "overrides": d.get("rig_overrides", []),
            "hand": d.get("hand", "parallel_jaw"), "duration": d.get("duration"), "backend": backend}


def rig_config_path(path) -> Path | None:
    """A suite's rig config path: ``configs/...`` is the project's config folder (a checkout's, or the installed
    package's), any other relative path is relative to the project root; None stays None (the default rig)."""
    if path is None:
        return None
    p = Path(expand_env(str(path), key="data.rig_config"))
    if not p.is_absolute() and p.parts and p.parts[0] == "configs":
        return config_dir().joinpath(*p.parts[1:])
    return resolve(p)


def resolve(path) -> Path:
    p = Path(expand_env(str(path), key="data"))
    return p if p.is_absolute() else (project_root() / p)  # the checkout, installed: the current folder


def generated_dataset(spec: dict, *, rig: dict, cache_dir: Path, workers: int, progress: bool, label: str) -> Path | str:
    """A rig-generated capture dataset for ``spec`` ({objects, episodes, seed}), cached by content.

    Returns the dataset folder, or a string saying why the set is unavailable (e.g. a mesh
    folder that is absent on this machine).
    """
    from ..rig.generate import generate, load_config
    from ..rig.recorder import config_hash as rig_config_hash

    objects, content = str(spec["objects"]), None
    if "/" in objects or "$" in objects:
        folder = resolve(objects)
        if not folder.is_dir():
            return f"object folder {folder} not found"
        # keyed by what the folder holds, not only its path: an object added, removed or edited there makes new
        # captures (the path alone had replayed the old set without a word)
        objects, content = str(folder), folder_sha256(folder)  # the loader's own walk: linked folders too
    cfg = load_config(rig.get("config"), rig.get("overrides", ()))
    key = {"rig": rig_config_hash(cfg), "objects": objects, "episodes": int(spec["episodes"]), "seed": int(spec["seed"]),
           "hand": rig["hand"], "duration": rig.get("duration"), "format": RIG_FORMAT}
    if content is not None:
        key["objects_sha256"] = content
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    out = Path(cache_dir) / f"rig-{label}-{digest}"
    if not (out / "meta" / "contact.json").exists():
        generate(cfg, objects=objects, episodes=int(spec["episodes"]), out=out, workers=workers, seed=int(spec["seed"]),
                 hand=rig["hand"], duration=rig.get("duration"), progress=progress, overwrite=True,
                 backend=rig.get("backend", "process"))
    return out


def release_captures(cfg, *, card, rig, cache_dir, workers, progress):
    """The first episodes of the checkpoint's own training captures, regenerated where they are not on disk (a
    fresh clone: they are not in git), or None. ``data.train_release`` ({objects, seed, episodes}) says how
    ``data.train`` was generated (``rig_config``: the rig it was generated with); episode i of a rig run depends only on the seed, i and the object list
    (``rig.plan``), so the first K episodes of a K-episode run are the release's own, ids included. K covers
    ``baselines.identified.episodes`` of the card's training episodes twice over (cached by content)."""
    rel, data = cfg["data"].get("train_release"), (card or {}).get("data") or {}
    ids = [str(i) for i in data.get("train_episodes") or []]
    if not rel or not ids or Path(str(data.get("root", ""))).name != Path(str(cfg["data"].get("train", ""))).name:
        return None
    if rel.get("sha256") and data.get("sha256") != rel["sha256"]:
        # another run's captures of the same folder name (every rig run names its episodes rig_000000, ...):
        # the release's would be fitted and called the surrogate's own
        return None
    total, need = int(rel["episodes"]), 2 * int(cfg["baselines"]["identified"]["episodes"])
    k = min(total, -(-need * total // len(ids)))
    wanted = set(ids)
    if rel.get("rig_config"):  # the rig the release was trained on (v1), not the suite's test rig
        rig = {**rig, "config": rig_config_path(rel["rig_config"]), "overrides": []}
    while True:
        spec = {"objects": rel["objects"], "episodes": k, "seed": int(rel["seed"])}
        path = generated_dataset(spec, rig=rig, cache_dir=cache_dir, workers=workers, progress=progress,
                                 label="release-train")
        ds = read_dataset(path)
        have = [e.episode_id for e in ds.episodes if e.episode_id in wanted]
        if len(have) >= need or k >= total:
            logger.info("training captures: the first %d of the release's %d regenerated (seed %d), %d of them its "
                        "training episodes", k, total, int(rel["seed"]), len(have))
            return ds, have
        k = min(total, 2 * k)


def card_data_root(card: dict | None, checkpoint=None) -> Path | None:
    """Where a card's training captures are on this machine, or None. Cards hold no machine paths
    (``paths.portable_path``): ``data.root`` is relative to the project root or ``${SURROGATE_DATA}``, or, for
    captures made outside both, their folder's name, looked up beside the checkpoint folder (a run's captures
    and its export sit side by side); either is accepted only where its content hash is the card's ``data.sha256``
    (where the card has one): another run's captures in a folder of the same name hold other grasps under the same
    episode ids, and MuJoCo fitted on them would be called the surrogate's own."""
    data = (card or {}).get("data") or {}
    root = data.get("root")
    if not root:
        return None
    if (resolve(root) / "meta" / "contact.json").exists():
        found, want = dataset_hash(resolve(root)), data.get("sha256")
        if not want or found == want:
            return resolve(root)
        logger.warning("training captures %s are not the checkpoint's own (sha256 %s, the card's %s): not used as "
                       "its training grasps", resolve(root), found[:12], str(want)[:12])
        return None
    if checkpoint is None or Path(str(root)).is_absolute():
        return None
    cand = Path(checkpoint).resolve().parent / str(root)
    if (cand / "meta" / "contact.json").exists() and dataset_hash(cand) == data.get("sha256"):
        return cand
    return None


def train_dataset(cfg, *, card, rig, cache_dir, workers, progress, checkpoint=None):
    """The training captures: the checkpoint's own (if on disk, ``card_data_root``; else their first episodes
    regenerated, ``release_captures``), else ``data.train``."""
    root = card_data_root(card, checkpoint)
    if root is not None:
        return read_dataset(root), [str(i) for i in card["data"].get("train_episodes", [])]
    regen = release_captures(cfg, card=card, rig=rig, cache_dir=cache_dir, workers=workers, progress=progress)
    if regen is not None:
        return regen
    spec = cfg["data"]["train"]
    if isinstance(spec, str):
        path = resolve(spec)
        if not (path / "meta" / "contact.json").exists():
            # a fresh clone has no release captures (not in git): say in one line how to make them
            how = cfg["data"].get("train_generate") or "surrogate rig generate --objects train --out " + str(spec)
            own = (card or {}).get("data") or {}
            mine = (f"the checkpoint's own training captures ({own['root']!r}, sha256 {str(own.get('sha256'))[:12]}) "
                    "are not beside its folder nor under the project or ${SURROGATE_DATA}: put them there, or ") \
                if own.get("root") else ""
            raise ConfigError(f"training captures {path} not found (the identified baseline is fitted on them); "
                              f"{mine}generate the suite's once with: {how}", key="data.train")
    else:
        path = generated_dataset(spec, rig=rig, cache_dir=cache_dir, workers=workers, progress=progress, label="train")
        if isinstance(path, str):
            raise ConfigError(f"training captures unavailable: {path}", key="data.train")
    own = (card or {}).get("data") or {}
    if own.get("sha256") and dataset_hash(path) == own["sha256"]:  # data.train named the checkpoint's own captures
        return read_dataset(path), [str(i) for i in own.get("train_episodes", [])]
    return read_dataset(path), []


def load_sets(cfg, *, test_data, rig, cache_dir, workers, progress) -> tuple[dict, dict]:
    """({set name: dataset}, {skipped set: why}): the ``--test-data`` datasets (``testsets.set_names``),
    else the suite's ``data.test_sets``, generated once into ``cache_dir`` (a set given as null is not run: a suite
    whose ``base`` has sets it does not want names them so)."""
    paths = as_paths(test_data)
    if paths:
        sets = {name: read_dataset(p) for name, p in zip(set_names(paths), paths)}
        for ds in sets.values():  # before any baseline runs
            require_kind(ds, "grasps", suite=cfg.get("suite", "rig-grasp"))
        return sets, {}
    sets, skipped = {}, {}
    for name, spec in cfg["data"]["test_sets"].items():
        if spec is None:
            continue
        path = generated_dataset(spec, rig=rig, cache_dir=cache_dir, workers=workers, progress=progress, label=name)
        if isinstance(path, str):
            skipped[name] = path
            logger.warning("test set %s skipped: %s", name, path)
            continue
        sets[name] = read_dataset(path)
    return sets, skipped


def thresholds(rig) -> dict:
    """The rig script's outcome thresholds (lift, slip, slip angle): predictions are labelled as recordings."""
    from ..rig.generate import load_config

    s = load_config(rig.get("config"), rig.get("overrides", ()))["script"]
    return {k: float(s[k]) for k in ("lift_threshold", "slip_threshold", "slip_angle_threshold")}
