"""Independent tasks run in this process, in local worker processes or on Ray, results in submission order.

``executor(backend, workers=..., address=...)`` opens a backend for one run; ``Executor.map(fn,
items, common=...)`` calls ``fn(common, item)`` for every item and returns the results in the
order of ``items``, whichever task finished first, so that every sum or mean over them is taken
in the same order as in a local run (results do not depend on the backend). A tqdm bar counts
completed tasks.

- ``local`` runs the tasks one after another in this process and never imports Ray.
- ``process`` runs them on ``workers`` processes of this machine, forked from this one (where the platform forks; else
  spawned), a pool per ``map``: a forked worker starts with what ``Executor.share`` gave this process, a spawned one
  builds it. One thread per task, as on Ray.
- ``ray`` runs each item as a task (one CPU) on a local instance of ``workers`` CPUs, or on the
  cluster at ``address`` (whose workers must have this package installed); ``common`` goes to
  the object store once per ``map``.

Task state that many tasks share (a scene, a loaded checkpoint) is built once per worker process
with ``task_cache(token, key, build)``; ``Executor.share`` hands the caller's already-built
objects to local tasks, which then build nothing twice.

``ray_session`` (also the rig generator's) starts a local instance, or connects to an address,
unless Ray is running in this process already, and shuts down only what it started.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

from .atomic import pid_alive
from .errors import ConfigError

BACKENDS = ("local", "process", "ray")

_STATE: dict = {"token": None, "values": {}}  # this process's task state (see ``task_cache``)


def import_ray(alternative: str = "--backend local"):
    """The ``ray`` module, or a ConfigError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"backend 'ray' needs Ray: pip install 'contact-surrogate[ray]' (or use {alternative})",
                          key="backend") from None
    return ray


@contextmanager
def ray_session(*, num_cpus: int | None = None, address: str | None = None, alternative: str = "--backend local"):
    """Ray, initialised for the ``with`` block: a local instance of ``num_cpus`` CPUs, or the cluster at
    ``address``; a session this process already holds is used as it is (and left running)."""
    ray = import_ray(alternative)
    started = not ray.is_initialized()
    if started:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


def task_cache(token: str, key, build: Callable):
    """``build()`` once per process and run ``token`` (an executor's), memoised under ``key``."""
    if _STATE["token"] != token:
        _STATE["token"], _STATE["values"] = token, {}
    values = _STATE["values"]
    if key not in values:
        values[key] = build()
    return values[key]


def map_large_blocks(threshold: int = 4 << 20) -> None:
    """Have glibc's malloc map every block of ``threshold`` bytes or more and unmap it when freed (Linux; elsewhere
    nothing).

    Why: glibc raises its mmap threshold after each large free (up to 32 MiB); MuJoCo's ``MjData`` arenas (about 14
    MiB for a hand scene) then come from the heap, and freed ones stay reserved there. Preparing 1,440 grasp
    replays reserved 27 GB of address space for 2 GB in use (about 9 MB per scene against 0.9 with a fixed
    threshold), and the process pool's ``fork`` then failed with ENOMEM under Linux's overcommit heuristic. Only
    where memory is reserved changes, never a value."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None).mallopt(-3, int(threshold))  # -3: M_MMAP_THRESHOLD (fixing it ends the dynamic raise)
    except (OSError, AttributeError):  # a libc without mallopt
        pass


def _call(fn, common, item):
    return fn(common, item)


def end_with(pid: int, poll_s: float = 0.5) -> None:
    """End this process as soon as process ``pid`` is gone (``atomic.pid_alive``; a daemon thread polls it every
    ``poll_s`` s): a worker or a job whose run was killed, even with SIGKILL, must not go on writing into that run's
    output. Polling tells where a closed pipe or ``PR_SET_PDEATHSIG`` would not (a forkserver's children, whose parent
    is not the run) and on any POSIX system."""
    def watch():
        while pid_alive(pid):
            time.sleep(poll_s)
        os._exit(1)

    threading.Thread(target=watch, name=f"end-with-{pid}", daemon=True).start()


def one_thread() -> None:
    """In a worker process (this module's, the rig generator's): one task at a time, so torch's intra-op threads
    would only fight over the cores."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)


@dataclass
class Executor:
    """Where a run's tasks execute (``executor`` makes one). ``token`` names the run's task state."""

    backend: str = "local"
    workers: int = 1
    address: str | None = None
    progress: bool = True
    token: str = field(default_factory=lambda: f"{os.getpid()}-{time.time_ns()}")
    _ray: object = None
    _remote: object = None

    @property
    def threads(self) -> int:
        """Threads one task may use: MuJoCo's rollout default (2) here, the task's one CPU in a worker."""
        return 2 if self.backend == "local" else 1

    def info(self) -> dict:
        """What the ledger records about the execution (results do not depend on it)."""
        return {"backend": self.backend, "workers": self.workers, "address": self.address}

    def share(self, key, value) -> None:
        """Give local tasks an object the caller built already (``task_cache`` under ``key``; forked workers inherit
        it); Ray and spawned workers build their own."""
        if self.backend in ("local", "process"):
            task_cache(self.token, key, lambda: value)

    def map(self, fn: Callable, items, *, common=None, desc: str = "tasks", unit: str = "task",
            progress: bool | None = None) -> list:
        """``[fn(common, item) for item in items]``, on this executor's backend (``fn`` must be a
        module-level function for Ray). A task's exception is raised here, as itself. ``progress``
        (default: the executor's) shows a bar over completed tasks."""
        from tqdm import tqdm

        items = list(items)
        show = self.progress if progress is None else progress
        bar = tqdm(total=len(items), desc=desc, unit=unit, disable=not show or not items)
        try:
            if self.backend == "local":
                out = []
                for it in items:
                    out.append(fn(common, it))
                    bar.update(1)
                return out
            if self.backend == "process":
                return self._map_process(fn, items, common, bar)
            return self._map_ray(fn, items, common, bar)
        finally:
            bar.close()

    def _map_process(self, fn, items, common, bar) -> list:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor, as_completed

        ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
        out = [None] * len(items)
        pool = ProcessPoolExecutor(min(self.workers, max(len(items), 1)), mp_context=ctx, initializer=one_thread)
        try:
            index = {pool.submit(_call, fn, common, it): i for i, it in enumerate(items)}
            for f in as_completed(index):
                out[index[f]] = f.result()  # a task's exception is raised here, as itself
                bar.update(1)
        finally:  # after an error the tasks not started are dropped, not run
            pool.shutdown(wait=True, cancel_futures=True)
        return out

    def _map_ray(self, fn, items, common, bar) -> list:
        ray = self._ray
        if self._remote is None:
            self._remote = ray.remote(num_cpus=1, max_retries=0)(_call)
        ref = ray.put(common)
        refs = [self._remote.remote(fn, ref, it) for it in items]
        index = {r: i for i, r in enumerate(refs)}
        out, pending = [None] * len(refs), list(refs)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                try:
                    out[index[done[0]]] = ray.get(done[0])
                except ray.exceptions.RayTaskError as e:
                    cause = getattr(e, "cause", None)
                    raise (cause if isinstance(cause, Exception) else e) from None
                bar.update(1)
        finally:
            for r in pending:
                ray.cancel(r, force=True)
        return out


@contextmanager
def executor(backend: str = "local", *, workers: int = 1, address: str | None = None, progress: bool = True):
    """An Executor for the ``with`` block (Ray: a session, ``ray_session``); local task state is
    released at the end."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; allowed: {list(BACKENDS)}", key="backend")
    if address and backend != "ray":
        raise ConfigError("a Ray address needs --backend ray", key="ray_address")
    ex = Executor(backend, max(1, int(workers)), address, progress)
    if backend == "process":  # before the run's allocations: what the heap reserves, each fork must be able to copy
        map_large_blocks()
    try:
        if backend == "ray":
            with ray_session(num_cpus=ex.workers, address=address) as ray:
                ex._ray = ray
                yield ex
        else:
            yield ex
    finally:
        if _STATE["token"] == ex.token:
            _STATE["token"], _STATE["values"] = None, {}
