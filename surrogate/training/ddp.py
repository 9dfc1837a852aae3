"""A run of several processes (Lightning's DDP, ``trainer.devices`` > 1) and the run's lock on its ``out_dir``.

Lightning's DDP launcher starts the other ranks at the first ``Trainer.fit`` by running the same command again
(``LOCAL_RANK`` = 1, 2, ... in their environment). Such a child loads the config and reaches the run's
``<out_dir>.lock`` (``atomic.pid_lock``) while the process that started it holds it: it was refused by its own run
("another run (PID of the parent) is writing out_dir"), and Lightning then killed the whole run. ``run_lock`` takes
the lock and records it in ``RUN_ENV``, which the children inherit; ``child_of_run`` recognises a child by that
record, its ``LOCAL_RANK``, the lock's PID and its parent's PID, so a second, independent run (no such record, or
not started by the lock's holder) is still refused.

A child trains its rank and writes nothing the parent writes (the export, the run config, the summary). Only the
end-to-end peer trains in several processes: ``model.kind: law`` is refused with ``trainer.devices`` > 1 before
any work (``keys.check_processes``).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

RUN_ENV = "SURROGATE_RUN_LOCK"  # "<pid>:<lock path>" of the run holding <out_dir>.lock, inherited by its DDP children


def lock_path(out_dir) -> Path:
    """``<out_dir>.lock`` (``atomic.pid_lock``'s name for it), absolute: a child may resolve paths anew."""
    return Path(f"{Path(out_dir).absolute()}.lock")


def _local_rank() -> int:
    try:
        return int(os.environ.get("LOCAL_RANK", "0"))
    except ValueError:
        return 0


def child_of_run(out_dir) -> bool:
    """Whether this process is a DDP child of the run that holds ``<out_dir>.lock``: ``LOCAL_RANK`` > 0 (Lightning's
    launcher started it), the record in ``RUN_ENV`` names this lock, the lock holds the record's PID, and that PID is
    this process's parent. A record copied into an unrelated process, or one of a run that has ended, fails one."""
    pid, _, path = os.environ.get(RUN_ENV, "").partition(":")
    if _local_rank() < 1 or not pid.isdigit() or path != str(lock_path(out_dir)):
        return False
    try:
        held = Path(path).read_text().strip()
    except OSError:
        return False
    return held == pid and int(pid) == os.getppid()


@contextlib.contextmanager
def run_lock(out_dir):
    """Hold ``<out_dir>.lock`` for the run (a second run is refused naming the PID), its DDP children excepted:
    they run under their parent's lock. Yields the lock's path (None in a child)."""
    from ..atomic import pid_lock

    if child_of_run(out_dir):
        yield None
        return
    with pid_lock(out_dir) as lock:
        before = os.environ.get(RUN_ENV)
        os.environ[RUN_ENV] = f"{os.getpid()}:{lock_path(out_dir)}"  # inherited by the ranks Lightning starts
        try:
            yield lock
        finally:
            if before is None:
                os.environ.pop(RUN_ENV, None)
            else:
                os.environ[RUN_ENV] = before
