"""Running planned rig episodes: in this process, in a local process pool, or on Ray.

Each worker simulates, records and writes one episode at a time as a shard (``shards``); an
episode that raises is reported (index, object, reason) and skipped; a worker that dies takes
only its own episode with it (the episodes in flight beside it are rerun one at a time to find
the culprit). Pool workers watch the PID of the run that started them and exit when it dies
(even by ``kill -9``), so no orphan keeps simulating.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from ..capture.validate import validate_episode
from ..parallel import end_with, one_thread, ray_session
from .plan import EpisodePlan
from .recorder import contact_region_seeds, record, recorder_rng
from .shards import shard_path, write_shard

PARENT_POLL_S = 0.5  # how often a pool worker checks that the run that started it is alive

_STATE: dict = {}


def _init_worker(cfg, objects, simulate_fn, parts, duration, regions, run=None) -> None:
    one_thread()
    _STATE.update(cfg=cfg, objects=objects, simulate_fn=simulate_fn, parts=Path(parts), duration=duration, regions=regions,
                  run=run)


def _init_pool_worker(parent_pid, *init_args) -> None:
    """Pool initializer: the usual state, plus a watchdog that ends this worker when the run
    that started it dies. Pool workers are children of the forkserver, not of the run, so
    neither a closed pipe nor PR_SET_PDEATHSIG would tell them; polling the run's PID does (``parallel.end_with``)."""
    end_with(int(parent_pid), PARENT_POLL_S)
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
        one_thread()
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


def run_inline(plans, init_args, on_result) -> None:
    _init_worker(*init_args)
    for plan in plans:
        on_result(_run_one(plan))


def _mp_context():
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        # Imported once in the server; missing modules are skipped silently by multiprocessing.
        ctx.set_forkserver_preload(["surrogate.rig.workers", "surrogate.rig.simulate"])
        return ctx
    return mp.get_context("spawn")


def run_processes(plans, workers, init_args, on_result) -> None:
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


def run_ray(plans, workers, init_args, on_result) -> None:
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
