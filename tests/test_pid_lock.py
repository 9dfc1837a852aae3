"""``atomic.pid_lock`` with real processes: of several that find a dead process's lock at once, exactly one takes it.

Taking over a stale lock had been two steps (remove it, create one's own): two processes that both found it stale
both removed it, the second removing the first's new lock, and both wrote the output.
"""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from surrogate.atomic import pid_lock
from surrogate.errors import ForeignOutputError, LockedError

CONTENDERS = 4
ROUNDS = 60
WAIT_S = 20  # a barrier that long means a contender hung: the test fails instead of hanging


def _contend(target: str, start, done, results) -> None:
    """Race for ``target``'s lock once all contenders are ready; hold it (if won) until every contender has tried."""
    start.wait(WAIT_S)
    try:
        with pid_lock(target):
            results.put(("won", os.getpid(), ""))
            done.wait(WAIT_S)
    except LockedError as e:
        results.put(("refused", os.getpid(), str(e)))
        done.wait(WAIT_S)
    except BaseException as e:  # anything else is a failure of the test, reported rather than lost in the child
        results.put(("error", os.getpid(), repr(e)))
        done.wait(WAIT_S)


def _dead_pid(ctx) -> int:
    child = ctx.Process(target=int)
    child.start()
    child.join()
    return child.pid


@pytest.fixture
def ctx():
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("needs fork (Linux): contenders started by spawn are too slow to race")
    return multiprocessing.get_context("fork")


def test_of_several_processes_that_find_a_stale_lock_exactly_one_takes_it(tmp_path, ctx):
    target = tmp_path / "ds"
    lock = Path(f"{target}.lock")
    results = ctx.Queue()
    for r in range(ROUNDS):
        lock.write_text(f"{_dead_pid(ctx)}\n")  # left by a killed run
        start, done = ctx.Barrier(CONTENDERS), ctx.Barrier(CONTENDERS)
        procs = [ctx.Process(target=_contend, args=(str(target), start, done, results)) for _ in range(CONTENDERS)]
        for p in procs:
            p.start()
        got = [results.get(timeout=WAIT_S) for _ in procs]
        for p in procs:
            p.join(WAIT_S)
        assert [p.exitcode for p in procs] == [0] * CONTENDERS
        winners = [pid for kind, pid, _ in got if kind == "won"]
        assert len(winners) == 1, f"round {r}: {len(winners)} processes took the lock at once: {got}"
        refusals = [msg for kind, _, msg in got if kind == "refused"]
        assert len(refusals) == CONTENDERS - 1, got
        assert all(f"PID {winners[0]}" in msg for msg in refusals), got  # the one that took it is named
        assert os.listdir(tmp_path) == [], f"round {r}: left behind"  # released; no temporary file left


def test_a_stale_lock_is_still_taken_over_and_a_live_or_foreign_one_is_not(tmp_path, ctx):
    lock = Path(f"{tmp_path / 'ds'}.lock")
    lock.write_text(f"{_dead_pid(ctx)}")  # no newline: still one of ours
    with pid_lock(tmp_path / "ds"):
        assert lock.read_text() == f"{os.getpid()}\n" and sorted(os.listdir(tmp_path)) == ["ds.lock"]
        with pytest.raises(LockedError, match=f"PID {os.getpid()}"):
            with pid_lock(tmp_path / "ds"):
                pass
    assert os.listdir(tmp_path) == []
    lock.write_text("notes\n")
    with pytest.raises(ForeignOutputError):
        with pid_lock(tmp_path / "ds"):
            pass
    assert lock.read_text() == "notes\n"
