"""Generate a capture dataset with the rig: plan, simulate + record in parallel, assemble.

``generate`` runs in three steps:

1. Plan (``plan``). Episode i uses object ``i mod n_objects`` and physics seed
   ``SeedSequence(seed, spawn_key=(i,))`` (with ``hand="both"``: hand ``i mod 2`` and object
   ``(i // 2) mod n_objects``, so every object is grasped by both hands). The plan depends on
   nothing else, so results do not depend on the worker count or on scheduling.
2. Simulate + record each planned episode in a worker (``workers``: local processes, or Ray) and
   write it atomically as a shard ``<out>.parts/episode_<i>.npz`` (numpy arrays plus one
   JSON string; no pickle). An episode that raises is reported (index, object, reason)
   and skipped; a worker that dies takes only its own episode with it (the episodes that
   were in flight beside it are rerun one at a time to find the culprit).
3. Assemble the shards in episode order into one capture dataset per hand with
   ``CaptureWriter`` (atomic), then remove ``<out>.parts``.

Resume (``shards``): ``<out>.parts/run.json`` records what determines the episodes (config sha256,
objects, seed, hand, noise seed, duration), and every shard records the same in its own
metadata (``run``) with its physics seed. Rerunning with the same arguments skips every
episode whose shard exists and belongs to this run (and objects found ungraspable), so an
interrupted run neither duplicates nor loses episodes; different arguments, or a shard
of another run, are an error naming them. A shard that cannot be read (corrupt,
truncated) is removed and its episode simulated again. ``episodes`` may differ on resume
(per-episode seeds do not depend on it).

One writer at a time: ``<out>.lock`` holds the PID of the run writing ``out``; a second
run is refused while that process lives. Pool workers watch the PID of the run that
started them and exit when it dies (even by ``kill -9``), so no orphan keeps simulating.
"""

from __future__ import annotations

import logging
import shutil
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..atomic import pid_lock, write_json_atomic
from ..capture import CaptureWriter, DatasetMeta
from ..capture.writer import check_replaceable_dataset
from ..config import apply_overrides
from ..errors import CaptureError, ConfigError
from ..scenes.from_capture import HANDS_MODULE
from ..scenes.hand_model import capture_entry, hand_model
from .plan import HANDS, RIG_HANDS, EpisodePlan, episode_seed, plan_episodes
from .recorder import config_hash, validate_recorder_config
from .shards import (
    SHARD_RUN_KEYS,
    check_manifest,
    done_before,
    read_shard,
    shard_path,
    skip_path,
    write_manifest,
    write_shard,
)
from .workers import run_inline, run_processes, run_ray

__all__ = ["BACKENDS", "EpisodePlan", "GenerateReport", "HANDS", "episode_seed", "generate", "load_config",
           "load_objects", "plan_episodes", "read_shard", "shard_path", "write_shard"]
log = logging.getLogger(__name__)

BACKENDS = ("process", "ray")


@dataclass
class GenerateReport:
    """What ``generate`` did.

    Attributes:
      datasets: dataset directories written (one per hand).
      requested: number of planned episodes.
      written: episodes in the datasets.
      reused: episodes found finished by an earlier (interrupted) run.
      regenerated: indices whose shard from an earlier run was unreadable and was simulated again.
      simulated: episodes simulated by this run (successful ones).
      skipped: [{"index", "object", "hand", "kind", "reason"}], kind one of
        ungraspable | error | crash | invalid.
      elapsed_s: wall time of the simulation phase of this run (s).
      worker_s: summed per-episode worker time of this run (s).
      config_sha256: the rig config's hash.
    """

    datasets: list = field(default_factory=list)
    requested: int = 0
    written: int = 0
    reused: int = 0
    regenerated: list = field(default_factory=list)
    simulated: int = 0
    skipped: list = field(default_factory=list)
    skipped_files: list = field(default_factory=list)  # a folder's files that gave no object (load_objects)
    elapsed_s: float = 0.0
    worker_s: float = 0.0
    config_sha256: str = ""

    @property
    def episodes_per_s(self) -> float:
        return self.simulated / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def s_per_episode(self) -> float:
        return self.elapsed_s / self.simulated if self.simulated else 0.0

    def rate_line(self) -> str:
        return (f"{self.simulated} episodes in {self.elapsed_s:.1f} s: {self.episodes_per_s:.2f} episodes/s, "
                f"{self.s_per_episode:.2f} s/episode wall ({self.worker_s / max(self.simulated, 1):.2f} s/episode per worker)")

    def summary(self, *, rate: bool = True) -> str:
        """Counts, datasets, every skipped episode with its reason, and (``rate``) the episode rate."""
        lines = [f"wrote {self.written} of {self.requested} episodes -> {', '.join(map(str, self.datasets)) or '(nothing)'}"
                 f" ({self.reused} reused from an interrupted run); skipped {len(self.skipped)}"]
        if self.regenerated:
            lines.append(f"  regenerated {len(self.regenerated)} unreadable shard(s) of the interrupted run: episodes "
                         + ", ".join(map(str, self.regenerated)))
        lines += [f"  - episode {s['index']} ({s['object']}, {s['hand']}): {s['kind']}: {s['reason']}" for s in self.skipped]
        if rate:
            lines.append(self.rate_line())
        return "\n".join(lines)


def load_config(config, overrides=()) -> dict:
    """The rig config (a YAML path via ``load_rig_config``, or an already loaded dict), with
    ``overrides`` applied and the recorder section validated with defaults filled in."""
    if isinstance(config, dict):
        cfg = apply_overrides(config, list(overrides))
        file = None
    else:
        from .config import DEFAULT_CONFIG, load_rig_config

        cfg = load_rig_config(config, overrides=tuple(overrides))
        file = DEFAULT_CONFIG if config is None else config
    cfg = dict(cfg)
    cfg["recorder"] = validate_recorder_config(cfg.get("recorder"), file=file)
    return cfg


def load_objects(objects: str) -> tuple[list, str, list]:
    """(objects, key, skipped): an existing folder of meshes/URDFs, else a split name. A folder's files that give no
    object are warned about and returned as {"file", "episode": None, "field": "object", "reason"} (a dataset's
    ``skipped``: its captures name the objects they could not hold)."""
    from ..objects import load_object_folder, load_split

    p = Path(objects)
    bad = []
    if p.is_dir():
        objs, bad = load_object_folder(p)
        if bad:
            warnings.warn(f"{p}: skipped {len(bad)} file(s): " + "; ".join(f"{a}: {b}" for a, b in bad), stacklevel=2)
        key = f"folder:{p.resolve()}"
    elif p.exists() or "/" in objects or "\\" in objects:  # a path, not a split's name: say what is wrong with it
        raise ConfigError(f"{objects!r} is {'a file' if p.exists() else 'no folder that exists'}: objects are a "
                          "folder of meshes, URDFs or MJCF files, or a split's name", key="objects")
    else:
        objs, key = load_split(objects), f"split:{objects}"
    if not objs:
        raise ConfigError(f"no objects in {objects!r}", key="objects")
    return objs, key, [{"file": str(a), "episode": None, "field": "object", "reason": str(b)} for a, b in bad]


def pad_material(cfg: dict) -> str:
    """What the rig's pads are, for a capture's ``hand.pad_material`` (a checkpoint's card carries it: a pad law says
    what it was fitted on)."""
    on = sorted(k for k, e in (cfg.get("effects") or {}).items() if isinstance(e, dict) and e.get("enabled"))
    return (f"the capture rig's elastomer fingertip pad, 2 x 2 cm x 5 mm (rig config sha256 {config_hash(cfg)[:12]}; "
            f"effects on: {', '.join(on) or 'none'})")


def hand_entry(hand: str, cfg: dict) -> tuple[dict, dict]:
    """(``DatasetMeta.hand``, ``DatasetMeta.robot_files``) of the rig's captures with ``hand``: its MJCF, meshes and
    description (``scenes.hand_model``), built by this package (``HANDS_MODULE``), its pads' material."""
    described, files = capture_entry(hand_model(hand))
    return {**described, "model": HANDS_MODULE, "pad_material": pad_material(cfg)}, files


def _assemble(out: Path, parts: Path, plans, hands, report, *, overwrite: bool, cfg: dict) -> None:
    """Write one dataset per hand from the shards, in episode order."""
    for hand in hands:
        root = out if len(hands) == 1 else out / hand
        meta, writer, added = None, None, 0
        described, robot_files = hand_entry(hand, cfg)  # the hand's MJCF travels with its captures
        for plan in (p for p in plans if p.hand == hand):
            path = shard_path(parts, plan.index)
            if not path.is_file():
                continue
            try:
                ep, extra = read_shard(path)
                if writer is None:
                    meta = DatasetMeta(
                        name=root.name, robot_type=hand, hand=described,
                        robot_files=robot_files,
                        joint_names=list(extra["joint_names"]),
                        wrench_sensors=list(extra["sensor_names"]) if ep.wrench is not None else None,
                        tactile_unit="N" if ep.tactile is not None else None,
                        skipped=report.skipped_files + [
                            {"file": None, "episode": s["index"], "field": s["kind"], "reason": s["reason"]}
                            for s in report.skipped if s["hand"] == hand])
                    writer = CaptureWriter(root, meta, overwrite=overwrite)
                meta.contact_region_seeds.setdefault(ep.object.name, extra["region_seeds"])
                writer.add(ep)
                added += 1
                report.written += 1
            except CaptureError as e:
                report.skipped.append({"index": plan.index, "object": plan.object_name, "hand": hand,
                                       "kind": "invalid", "reason": str(e)})
        if writer is not None and added:
            writer.close()
            report.datasets.append(root)
        elif writer is not None:  # every episode of this hand was rejected: publish nothing
            writer.abort()


def generate(config_path, *, objects: str, episodes: int, out, workers: int = 1, seed: int = 0,
             backend: str = "process", overrides=(), hand: str = "parallel_jaw", progress: bool = True,
             duration: float | None = None, noise_seed: int | None = None, simulate_fn=None,
             overwrite: bool = False, keep_parts: bool = False) -> GenerateReport:
    """Generate ``episodes`` rig episodes into the capture dataset ``out``.

    Args:
      config_path: rig config YAML (``load_rig_config``; None: ``configs/rig/default.yaml``) or an
        already loaded config dict.
      objects: split name (``load_split``) or a folder of meshes/URDFs.
      episodes: number of episodes (>= 1).
      out: dataset directory; with ``hand="both"`` a folder holding ``parallel_jaw/`` and
        ``three_finger/`` datasets (features such as joint names are dataset-wide).
      workers: parallel workers (>= 1); 0 runs everything in this process (debugging).
      seed: run seed; episode i's physics seed is ``episode_seed(seed, i)``.
      backend: "process" (local processes) or "ray" (local Ray instance, ``pip install ray``).
      overrides: ``key=value`` config overrides.
      hand: "parallel_jaw", "three_finger", "jaco" or "both" (the first two, alternating).
      progress: tqdm bar and the rate line (logged, INFO).
      duration: episode duration (s) passed to the simulator; None uses the config's.
      noise_seed: re-record the same physics with another sensor-noise draw (see ``recorder_rng``).
      simulate_fn: ``f(cfg, obj, *, hand, seed, duration) -> RigTrace``; default the rig's
        ``simulate_episode``. Must be importable by name for the process backend.
      overwrite: replace an existing dataset at ``out``.
      keep_parts: keep ``<out>.parts`` after assembling.
    Returns:
      GenerateReport (datasets, counts, skipped episodes with reasons, rates).
    """
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; allowed: {list(BACKENDS)}", key="backend")
    if hand not in (*RIG_HANDS, "both"):
        raise ConfigError(f"unknown hand {hand!r}; allowed: {[*RIG_HANDS, 'both']}", key="hand")
    if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) or episodes < 1:
        raise ConfigError(f"episodes must be a positive integer, got {episodes!r}", key="episodes")
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 0:
        raise ConfigError(f"workers must be a non-negative integer, got {workers!r}", key="workers")
    if hand == "jaco":  # its assets are dm_control's: say how to get them before any work
        from ..scenes.kinova import jaco_assets

        jaco_assets()
    out = Path(out)
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out}: already exists (pass overwrite=True / --overwrite to replace it)")
    hands = HANDS if hand == "both" else (hand,)
    if overwrite:
        _check_replaceable(out, hands)
    with pid_lock(out):
        return _generate(config_path, objects=objects, episodes=episodes, out=out, workers=workers, seed=seed,
                         backend=backend, overrides=overrides, hand=hand, hands=hands, progress=progress,
                         duration=duration, noise_seed=noise_seed, simulate_fn=simulate_fn, overwrite=overwrite,
                         keep_parts=keep_parts)


def _check_replaceable(out: Path, hands) -> None:
    """With ``--overwrite``: refuse up front (before any simulation) to replace a folder that is not ours."""
    if len(hands) == 1:
        if out.exists() or out.is_symlink():
            check_replaceable_dataset(out)
        return
    for h in hands:
        if (out / h).exists() or (out / h).is_symlink():
            check_replaceable_dataset(out / h)


def _generate(config_path, *, objects, episodes, out: Path, workers, seed, backend, overrides, hand, hands, progress,
              duration, noise_seed, simulate_fn, overwrite, keep_parts) -> GenerateReport:
    """``generate`` after its arguments are checked, holding the output's lock."""
    from tqdm.auto import tqdm

    parts = Path(f"{out}.parts")

    cfg = load_config(config_path, overrides)
    objs, objects_key, skipped_files = load_objects(objects)
    report = GenerateReport(requested=int(episodes), config_sha256=config_hash(cfg), skipped_files=skipped_files)
    names = [o.name for o in objs]
    manifest = {
        "config_sha256": report.config_sha256, "objects": objects_key, "object_names": names, "seed": int(seed),
        "hand": hand, "noise_seed": noise_seed, "duration": duration, "episodes": int(episodes)}
    check_manifest(parts, manifest)
    run = {k: manifest[k] for k in SHARD_RUN_KEYS}
    plans = plan_episodes(names, episodes, seed=seed, hand=hand, noise_seed=noise_seed)
    done, skipped_before, report.regenerated = done_before(parts, plans, run)
    write_manifest(parts, manifest)
    report.reused = len(done)
    report.skipped.extend(skipped_before)
    skipped_ids = {s["index"] for s in skipped_before}
    todo = [p for p in plans if p.index not in done and p.index not in skipped_ids]

    bar = tqdm(total=len(todo), desc="rig episodes", unit="ep", disable=not progress)

    def on_result(r: dict) -> None:
        if r["status"] == "ok":
            report.simulated += 1
            report.worker_s += r["seconds"]
        else:
            entry = {k: r[k] for k in ("index", "object", "hand", "kind", "reason")}
            report.skipped.append(entry)
            if r["kind"] == "ungraspable":  # deterministic: no point retrying on resume
                write_json_atomic(skip_path(parts, r["index"]), entry)
            bar.set_postfix(skipped=len(report.skipped))
        bar.update(1)

    init_args = (cfg, objs, simulate_fn, str(parts), duration, cfg["recorder"]["contact_regions"], run)
    t0 = time.perf_counter()
    try:
        if not todo:
            pass
        elif workers == 0:
            run_inline(todo, init_args, on_result)
        elif backend == "ray":
            run_ray(todo, workers, init_args, on_result)
        else:
            run_processes(todo, workers, init_args, on_result)
    finally:
        bar.close()
    report.elapsed_s = time.perf_counter() - t0
    report.skipped.sort(key=lambda s: s["index"])

    if len(hands) > 1:
        out.mkdir(parents=True, exist_ok=overwrite)
    _assemble(out, parts, plans, hands, report, overwrite=overwrite, cfg=cfg)
    if not report.datasets:
        reasons = "; ".join(f"episode {s['index']}: {s['reason']}" for s in report.skipped[:3])
        raise CaptureError(f"no episode succeeded ({reasons})", file=out)
    if not keep_parts:
        shutil.rmtree(parts, ignore_errors=True)
    if progress:
        log.info(report.rate_line())
    return report
