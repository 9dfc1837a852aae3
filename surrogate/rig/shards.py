"""The shards of a rig run (one episode each: npz + JSON, no pickle) and what makes a run resumable.

``<out>.parts/run.json`` records what determines the episodes (config sha256, objects, seed, hand,
noise seed, duration), and every shard records the same in its own metadata (``run``) with its
physics seed. A rerun with the same arguments skips every episode whose shard exists and belongs
to this run (and objects found ungraspable); different arguments, or a shard of another run, are
an error naming them; an unreadable shard is removed and its episode simulated again.
"""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import numpy as np

from ..atomic import write_bytes_atomic, write_json_atomic
from ..capture import Environment, Episode, ObjectSpec, Provenance
from ..capture.episode import OPTIONAL_ARRAYS
from ..config import plain
from ..errors import CaptureError, ConfigError
from .plan import EpisodePlan

MANIFEST = "run.json"

MANIFEST_KEYS = ("config_sha256", "objects", "object_names", "seed", "hand", "noise_seed", "duration")

SHARD_RUN_KEYS = ("config_sha256", "objects", "seed", "hand", "noise_seed", "duration")  # stored in every shard


# what a run writes in its folder: shards, skip records, and the temporary files of their atomic writes
RUN_FILE = re.compile(r"\.?episode_\d{6}(\.skip)?(\.[^/]*)?\.(npz|json)|\.run\.[^/]*\.tmp\.json")


def shard_path(parts: Path, index: int) -> Path:
    return parts / f"episode_{index:06d}.npz"


def skip_path(parts: Path, index: int) -> Path:
    return parts / f"episode_{index:06d}.skip.json"


def write_shard(path: Path, ep: Episode, *, joint_names, sensor_names, region_seeds, run=None) -> None:
    """One episode as an .npz: arrays by name, ``truth.<name>`` arrays, and the rest as JSON
    (``run``: what determines the run's episodes, checked when a later run resumes)."""
    arrays = {"timestamps": ep.timestamps, "object_pose": ep.object_pose, "region_seeds": np.asarray(region_seeds)}
    for name in OPTIONAL_ARRAYS:
        if getattr(ep, name) is not None:
            arrays[name] = np.asarray(getattr(ep, name))
    for name, v in ep.truth.items():
        arrays[f"truth.{name}"] = np.asarray(v)
    meta = {
        "episode_id": ep.episode_id, "object": ep.object.to_json(), "environment": ep.environment.to_json(),
        "provenance": ep.provenance.to_json(), "grasp_type": ep.grasp_type, "task": ep.task,
        "labels": ep.labels, "t0": ep.t0, "joint_names": list(joint_names), "sensor_names": list(sensor_names),
        "run": run,
    }
    # A 0-d unicode array loads with allow_pickle=False, unlike an object array.
    arrays["meta"] = np.array(json.dumps(plain(meta), allow_nan=False))
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    write_bytes_atomic(path, buf.getvalue())


def read_shard(path: Path) -> tuple[Episode, dict]:
    """(Episode, {"joint_names", "sensor_names", "region_seeds", "run"}) from a shard; CaptureError if unreadable."""
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(str(arrays.pop("meta")))
        return _shard_episode(arrays, meta)
    except CaptureError:
        raise
    except Exception as e:  # truncated or corrupt zip, bad JSON, missing keys: the shard is unusable
        raise CaptureError(f"unreadable shard ({type(e).__name__}: {e})", file=path) from None


def _shard_episode(arrays: dict, meta: dict) -> tuple[Episode, dict]:
    truth = {k[6:]: v for k, v in arrays.items() if k.startswith("truth.")}
    ep = Episode(
        episode_id=meta["episode_id"], timestamps=arrays["timestamps"], object_pose=arrays["object_pose"],
        object=ObjectSpec.from_json(meta["object"]), provenance=Provenance.from_json(meta["provenance"]),
        environment=Environment.from_json(meta["environment"]), grasp_type=meta["grasp_type"], task=meta["task"],
        labels=meta["labels"], t0=meta["t0"], truth=truth,
        **{name: arrays[name] for name in OPTIONAL_ARRAYS if name in arrays},
    )
    extra = {"joint_names": meta["joint_names"], "sensor_names": meta["sensor_names"], "region_seeds": arrays["region_seeds"],
             "run": meta.get("run")}
    return ep, extra


def check_manifest(parts: Path, manifest: dict) -> None:
    """Refuse to resume a run with other arguments (a missing manifest is written by ``write_manifest``
    once the shards already there are checked, so a refused run leaves none behind; each shard records its run too),
    and a folder of that name that holds anything else than a run writes there: the run removes the folder once the
    dataset is assembled."""
    path = parts / MANIFEST
    if not path.is_file():
        foreign = sorted(p.name for p in parts.iterdir() if not RUN_FILE.fullmatch(p.name)) if parts.is_dir() else []
        if foreign or (parts.exists() and not parts.is_dir()):
            raise ConfigError(f"holds what no `surrogate rig generate` wrote ({', '.join(foreign[:3]) or 'a file'}): "
                              "the run keeps its episodes there while it works and removes the folder after; move it "
                              "away, or give --out another name", file=parts, key="--out")
        return
    try:
        old = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CaptureError(f"unreadable run manifest ({e}); delete {parts} to start over", file=path) from None
    diff = [k for k in MANIFEST_KEYS if old.get(k) != manifest.get(k)]
    if diff:
        what = "; ".join(f"{k}: was {old.get(k)!r}, now {manifest.get(k)!r}" for k in diff if k != "object_names")
        raise ConfigError(f"an interrupted run with different arguments is in {parts} ({what or 'object list differs'}); "
                          f"rerun with the original arguments to resume it, or delete {parts} to start over",
                          file=path, key=diff[0])


def write_manifest(parts: Path, manifest: dict) -> None:
    parts.mkdir(parents=True, exist_ok=True)
    if not (parts / MANIFEST).is_file():
        write_json_atomic(parts / MANIFEST, manifest)


def _shard_mismatch(ep: Episode, extra: dict, plan: EpisodePlan, run: dict) -> tuple[str, str] | None:
    """(field, what differs) when a readable shard is not episode ``plan`` of ``run``; None when it is."""
    stored = extra.get("run")
    if not isinstance(stored, dict):
        return "run", "the shard does not record which run made it"
    for k in SHARD_RUN_KEYS:
        if stored.get(k) != run.get(k):
            return k, f"the shard has {stored.get(k)!r}, this run {run.get(k)!r}"
    gen = ep.provenance.generator or {}
    for k, have, want in (("episode_index", gen.get("episode_index"), plan.index), ("episode seed", gen.get("seed"), plan.seed),
                          ("hand", gen.get("hand"), plan.hand), ("object", ep.object.name, plan.object_name)):
        if have != want:
            return k, f"the shard has {have!r}, this run plans {want!r}"
    return None


def _check_shard(path: Path, plan: EpisodePlan, run: dict) -> bool:
    """True if ``path`` is a whole shard of episode ``plan`` of ``run``; False if unreadable (it is
    removed, to be simulated again); ConfigError if it is another run's episode (never mixed in)."""
    try:
        ep, extra = read_shard(path)
    except CaptureError:
        path.unlink(missing_ok=True)
        return False
    bad = _shard_mismatch(ep, extra, plan, run)
    if bad is not None:
        key, what = bad
        raise ConfigError(f"belongs to another run ({key}: {what}); rerun with that run's arguments to resume it, "
                          f"or delete {path.parent} to start over", file=path, key=key)
    return True


def done_before(parts: Path, plans, run: dict) -> tuple[set, list, list]:
    """(indices with a shard of this run, ungraspable skips recorded by an earlier run, indices
    whose unreadable shard was removed to be simulated again).

    Shards are renamed into place only when complete, but a disk error or a hand edit can
    still corrupt one: each is read and checked against ``run`` here. The temporary files of
    writes a kill interrupted are removed.
    """
    for tmp in parts.glob(".*.tmp"):
        tmp.unlink(missing_ok=True)
    done, skipped, redo = set(), [], []
    for p in plans:
        path = shard_path(parts, p.index)
        if path.is_file() or path.is_symlink() or path.exists():
            if path.is_file() and _check_shard(path, p, run):
                done.add(p.index)
            else:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
                redo.append(p.index)
        elif skip_path(parts, p.index).is_file():
            try:
                skipped.append(json.loads(skip_path(parts, p.index).read_text()))
            except (OSError, json.JSONDecodeError):
                pass  # rerun it
    return done, skipped, redo
