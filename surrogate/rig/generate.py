"""Generate a capture dataset with the rig: plan, simulate + record in parallel, assemble.

``generate`` runs in three steps:

1. Plan. Episode i uses object ``i mod n_objects`` and physics seed
   ``SeedSequence(seed, spawn_key=(i,))`` (with ``hand="both"``: hand ``i mod 2`` and object
   ``(i // 2) mod n_objects``, so every object is grasped by both hands). The plan depends on
   nothing else, so results do not depend on the worker count or on scheduling.
2. Simulate + record each planned episode in a worker (local processes, or Ray) and
   write it atomically as a shard ``<out>.parts/episode_<i>.npz`` (numpy arrays plus one
   JSON string; no pickle). An episode that raises is reported (index, object, reason)
   and skipped; a worker that dies takes only its own episode with it (the episodes that
   were in flight beside it are rerun one at a time to find the culprit).
3. Assemble the shards in episode order into one capture dataset per hand with
   ``CaptureWriter`` (atomic), then remove ``<out>.parts``.

Resume: ``<out>.parts/run.json`` records what determines the episodes (config sha256,
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

import io
import json
import multiprocessing as mp
import os
import shutil
import sys
import threading
import time
import warnings
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..atomic import pid_alive, pid_lock, write_bytes_atomic, write_json_atomic
from ..capture import CaptureWriter, DatasetMeta, Environment, Episode, ObjectSpec, Provenance
from ..capture.writer import check_replaceable_dataset
from ..capture.episode import OPTIONAL_ARRAYS
from ..capture.validate import validate_episode
from ..config import apply_overrides
from ..errors import CaptureError, ConfigError
from ..parallel import ray_session
from .recorder import _plain, config_hash, contact_region_seeds, record, recorder_rng, validate_recorder_config

HANDS = ("parallel_jaw", "three_finger")
BACKENDS = ("process", "ray")
MANIFEST = "run.json"
_MANIFEST_KEYS = ("config_sha256", "objects", "object_names", "seed", "hand", "noise_seed", "duration")
_SHARD_RUN_KEYS = ("config_sha256", "objects", "seed", "hand", "noise_seed", "duration")  # stored in every shard
PARENT_POLL_S = 0.5  # how often a pool worker checks that the run that started it is alive


# ----------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class EpisodePlan:
    """What one episode is: its index, object, hand and seeds."""

    index: int
    object_index: int
    object_name: str
    hand: str
    seed: int
    noise_seed: int | None = None


def episode_seed(seed: int, index: int) -> int:
    """Physics seed of episode ``index`` of a run with ``seed`` (a 63-bit int from SeedSequence)."""
    state = np.random.SeedSequence(int(seed), spawn_key=(int(index),)).generate_state(1, np.uint64)[0]
    return int(state >> np.uint64(1))


def plan_episodes(object_names: list, episodes: int, *, seed: int, hand: str, noise_seed=None) -> list:
    """[episodes] EpisodePlan in index order (see the module docstring for the rule)."""
    n = len(object_names)
    plans = []
    for i in range(int(episodes)):
        if hand == "both":
            h, o = HANDS[i % 2], (i // 2) % n
        else:
            h, o = hand, i % n
        plans.append(EpisodePlan(i, o, object_names[o], h, episode_seed(seed, i), noise_seed))
    return plans


# ----------------------------------------------------------------------------- shards (npz + JSON, no pickle)


def shard_path(parts: Path, index: int) -> Path:
    return parts / f"episode_{index:06d}.npz"


def _skip_path(parts: Path, index: int) -> Path:
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
    arrays["meta"] = np.array(json.dumps(_plain(meta), allow_nan=False))
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


# ----------------------------------------------------------------------------- workers

_STATE: dict = {}


def _limit_threads() -> None:
    # Workers run one episode each; intra-op threads would only fight over the cores.
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)


def _init_worker(cfg, objects, simulate_fn, parts, duration, regions, run=None) -> None:
    _limit_threads()
    _STATE.update(cfg=cfg, objects=objects, simulate_fn=simulate_fn, parts=Path(parts), duration=duration, regions=regions,
                  run=run)


def _watch_parent(parent_pid: int, poll_s: float = PARENT_POLL_S) -> None:
    """Exit this process as soon as ``parent_pid`` is gone (runs in a daemon thread)."""
    while pid_alive(parent_pid):
        time.sleep(poll_s)
    os._exit(1)


def _init_pool_worker(parent_pid, *init_args) -> None:
    """Pool initializer: the usual state, plus a watchdog that ends this worker when the run
    that started it dies. Pool workers are children of the forkserver, not of the run, so
    neither a closed pipe nor PR_SET_PDEATHSIG would tell them; polling the run's PID does."""
    threading.Thread(target=_watch_parent, args=(int(parent_pid),), name="parent-watchdog", daemon=True).start()
    _init_worker(*init_args)


def _ungraspable_types() -> tuple:
    try:
        from .scripts import UngraspableObject
    except ImportError:  # the rig's scripts are absent: nothing can raise it then
        return ()
    return (UngraspableObject,)


def _run_one(plan: EpisodePlan) -> dict:
    """Simulate, record and write one episode; never raises (failures come back as a dict)."""
    s = _STATE
    out = {"index": plan.index, "object": plan.object_name, "hand": plan.hand}
    t0 = time.perf_counter()
    try:
        _limit_threads()
        simulate = s["simulate_fn"]
        if simulate is None:
            from .simulate import simulate_episode as simulate
        obj = s["objects"][plan.object_index]
        trace = simulate(s["cfg"], obj, hand=plan.hand, seed=plan.seed, duration=s["duration"])
        seeds = contact_region_seeds(obj, s["regions"])
        ep = record(trace, s["cfg"], rng=recorder_rng(plan.seed, plan.noise_seed), objects_regions=s["regions"],
                    region_seeds=seeds, episode_id=f"rig_{plan.index:06d}")
        ep.provenance.generator["noise_seed"] = plan.noise_seed
        ep.provenance.generator["episode_index"] = plan.index
        validate_episode(ep)
        write_shard(shard_path(s["parts"], plan.index), ep, joint_names=trace.joint_names,
                    sensor_names=trace.sensor_names, region_seeds=seeds, run=s.get("run"))
    except Exception as e:  # one bad episode must not stop the run: it is reported and skipped
        kind = "ungraspable" if isinstance(e, _ungraspable_types()) else "error"
        return {**out, "status": "skipped", "kind": kind, "reason": f"{type(e).__name__}: {e}"}
    return {**out, "status": "ok", "seconds": time.perf_counter() - t0}


def _ray_run_one(common, plan: EpisodePlan) -> dict:
    if _STATE.get("token") != common["token"]:
        _init_worker(*common["init"])
        _STATE["token"] = common["token"]
    return _run_one(plan)


def _crash(plan: EpisodePlan, reason: str) -> dict:
    return {"index": plan.index, "object": plan.object_name, "hand": plan.hand, "status": "skipped",
            "kind": "crash", "reason": reason}


def _run_inline(plans, init_args, on_result) -> None:
    _init_worker(*init_args)
    for plan in plans:
        on_result(_run_one(plan))


def _mp_context():
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        # Imported once in the server; missing modules are skipped silently by multiprocessing.
        ctx.set_forkserver_preload(["surrogate.rig.generate", "surrogate.rig.simulate"])
        return ctx
    return mp.get_context("spawn")


def _run_processes(plans, workers, init_args, on_result) -> None:
    """Local process pool: forkserver where the OS has it (workers fork from a clean server
    that imported the rig once, so a pool restarted after a crash is up in milliseconds),
    spawn elsewhere. Neither inherits the caller's threads or state.

    A dead worker breaks the whole pool and fails every episode in flight; those are
    rerun one at a time in a fresh pool, so only the episode that kills its worker is lost.
    """
    ctx = _mp_context()
    pending, suspects = deque(plans), deque()
    pool, inflight = None, {}
    try:
        while pending or suspects or inflight:
            if pool is None:
                pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_pool_worker,
                                           initargs=(os.getpid(), *init_args))
            isolating = bool(suspects)
            if isolating:
                if not inflight:
                    p = suspects.popleft()
                    inflight[pool.submit(_run_one, p)] = p
            else:
                while pending and len(inflight) < 2 * workers:
                    p = pending.popleft()
                    inflight[pool.submit(_run_one, p)] = p
            done, _ = wait(inflight, return_when=FIRST_COMPLETED)
            lost = []
            for f in done:
                plan = inflight.pop(f)
                try:
                    on_result(f.result())
                except BrokenProcessPool:
                    lost.append(plan)
            if lost:
                lost += list(inflight.values())
                inflight.clear()
                pool.shutdown(wait=True, cancel_futures=True)
                pool = None
                if isolating:
                    for plan in lost:
                        on_result(_crash(plan, "the worker process died (crash, kill or out of memory)"))
                else:
                    suspects.extend(sorted(lost, key=lambda q: q.index))
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _run_ray(plans, workers, init_args, on_result) -> None:
    """Ray: a local instance with ``workers`` CPUs (or the one already initialised; ``parallel.ray_session``)."""
    with ray_session(num_cpus=workers, alternative="--backend process") as ray:
        task = ray.remote(num_cpus=1, max_retries=0)(_ray_run_one)
        common = ray.put({"token": f"{time.time_ns()}", "init": init_args})
        refs = {task.remote(common, p): p for p in plans}
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            plan = refs.pop(done[0])
            try:
                on_result(ray.get(done[0]))
            except ray.exceptions.RayError as e:  # worker died or the task could not run
                on_result(_crash(plan, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"))


# ----------------------------------------------------------------------------- report


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


# ----------------------------------------------------------------------------- generate


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


def load_objects(objects: str) -> tuple[list, str]:
    """(objects, key): an existing folder of meshes/URDFs, else a split name."""
    from ..objects import load_object_folder, load_split

    p = Path(objects)
    if p.is_dir():
        objs, skipped = load_object_folder(p)
        if skipped:
            warnings.warn(f"{p}: skipped {len(skipped)} file(s): " + "; ".join(f"{a}: {b}" for a, b in skipped), stacklevel=2)
        key = f"folder:{p.resolve()}"
    else:
        objs, key = load_split(objects), f"split:{objects}"
    if not objs:
        raise ConfigError(f"no objects in {objects!r}", key="objects")
    return objs, key


def _check_manifest(parts: Path, manifest: dict) -> None:
    """Refuse to resume a run with other arguments (a missing manifest is written by ``_write_manifest``
    once the shards already there are checked, so a refused run leaves none behind)."""
    path = parts / MANIFEST
    if not path.is_file():
        return
    try:
        old = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CaptureError(f"unreadable run manifest ({e}); delete {parts} to start over", file=path) from None
    diff = [k for k in _MANIFEST_KEYS if old.get(k) != manifest.get(k)]
    if diff:
        what = "; ".join(f"{k}: was {old.get(k)!r}, now {manifest.get(k)!r}" for k in diff if k != "object_names")
        raise ConfigError(f"an interrupted run with different arguments is in {parts} ({what or 'object list differs'}); "
                          f"rerun with the original arguments to resume it, or delete {parts} to start over",
                          file=path, key=diff[0])


def _write_manifest(parts: Path, manifest: dict) -> None:
    parts.mkdir(parents=True, exist_ok=True)
    if not (parts / MANIFEST).is_file():
        write_json_atomic(parts / MANIFEST, manifest)


def _shard_mismatch(ep: Episode, extra: dict, plan: EpisodePlan, run: dict) -> tuple[str, str] | None:
    """(field, what differs) when a readable shard is not episode ``plan`` of ``run``; None when it is."""
    stored = extra.get("run")
    if not isinstance(stored, dict):
        return "run", "the shard does not record which run made it"
    for k in _SHARD_RUN_KEYS:
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


def _done_before(parts: Path, plans, run: dict) -> tuple[set, list, list]:
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
        elif _skip_path(parts, p.index).is_file():
            try:
                skipped.append(json.loads(_skip_path(parts, p.index).read_text()))
            except (OSError, json.JSONDecodeError):
                pass  # rerun it
    return done, skipped, redo


def _assemble(out: Path, parts: Path, plans, hands, report, *, overwrite: bool) -> None:
    """Write one dataset per hand from the shards, in episode order."""
    for hand in hands:
        root = out if len(hands) == 1 else out / hand
        meta, writer, added = None, None, 0
        for plan in (p for p in plans if p.hand == hand):
            path = shard_path(parts, plan.index)
            if not path.is_file():
                continue
            try:
                ep, extra = read_shard(path)
                if writer is None:
                    meta = DatasetMeta(
                        name=root.name, robot_type=hand, hand={"name": hand, "model": "surrogate.scenes.hands"},
                        joint_names=list(extra["joint_names"]),
                        wrench_sensors=list(extra["sensor_names"]) if ep.wrench is not None else None,
                        tactile_unit="N" if ep.tactile is not None else None,
                        skipped=[{"file": None, "episode": s["index"], "field": s["kind"], "reason": s["reason"]}
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
      hand: "parallel_jaw", "three_finger" or "both" (alternating).
      progress: tqdm bar and a printed rate line.
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
    if hand not in (*HANDS, "both"):
        raise ConfigError(f"unknown hand {hand!r}; allowed: {[*HANDS, 'both']}", key="hand")
    if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) or episodes < 1:
        raise ConfigError(f"episodes must be a positive integer, got {episodes!r}", key="episodes")
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 0:
        raise ConfigError(f"workers must be a non-negative integer, got {workers!r}", key="workers")
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
    objs, objects_key = load_objects(objects)
    names = [o.name for o in objs]
    report = GenerateReport(requested=int(episodes), config_sha256=config_hash(cfg))
    manifest = {
        "config_sha256": report.config_sha256, "objects": objects_key, "object_names": names, "seed": int(seed),
        "hand": hand, "noise_seed": noise_seed, "duration": duration, "episodes": int(episodes)}
    _check_manifest(parts, manifest)
    run = {k: manifest[k] for k in _SHARD_RUN_KEYS}
    plans = plan_episodes(names, episodes, seed=seed, hand=hand, noise_seed=noise_seed)
    done, skipped_before, report.regenerated = _done_before(parts, plans, run)
    _write_manifest(parts, manifest)
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
                write_json_atomic(_skip_path(parts, r["index"]), entry)
            bar.set_postfix(skipped=len(report.skipped))
        bar.update(1)

    init_args = (cfg, objs, simulate_fn, str(parts), duration, cfg["recorder"]["contact_regions"], run)
    t0 = time.perf_counter()
    try:
        if not todo:
            pass
        elif workers == 0:
            _run_inline(todo, init_args, on_result)
        elif backend == "ray":
            _run_ray(todo, workers, init_args, on_result)
        else:
            _run_processes(todo, workers, init_args, on_result)
    finally:
        bar.close()
    report.elapsed_s = time.perf_counter() - t0
    report.skipped.sort(key=lambda s: s["index"])

    if len(hands) > 1:
        out.mkdir(parents=True, exist_ok=overwrite)
    _assemble(out, parts, plans, hands, report, overwrite=overwrite)
    if not report.datasets:
        reasons = "; ".join(f"episode {s['index']}: {s['reason']}" for s in report.skipped[:3])
        raise CaptureError(f"no episode succeeded ({reasons})", file=out)
    if not keep_parts:
        shutil.rmtree(parts, ignore_errors=True)
    if progress:
        print(report.rate_line())
    return report
