"""A job run in a process of its own beside the caller's work: its output in a log file, its result (or its error, as
one line) read back when the caller joins it.

The main job (``quickstart``) runs the ``cube-real-small`` benchmark this way beside the rig stages: it needs only the
imported tosses, and the rig's training stage keeps one of the two cores busy, so the benchmark's minutes fill the
other instead of following them. The job is a fresh interpreter (``python -m surrogate.background``), not a fork of a
process that holds MuJoCo and torch state and a pool's threads, so its result is the one it gives in the caller's
process. It is a ``subprocess`` child, which only ``join`` or ``stop`` waits for: its CPU time reaches the caller's
``RUSAGE_CHILDREN`` there and nowhere else (a ``multiprocessing`` child would be reaped by whichever pool starts next).
The job ends with its caller, even one killed with SIGKILL (``parallel.end_with``).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

from .atomic import write_json_atomic
from .errors import SurrogateError
from .parallel import end_with

PARENT_ENV = "SURROGATE_BACKGROUND_PARENT"  # the caller's pid, for the job to end with it


class BackgroundError(SurrogateError):
    """A job run beside the caller failed; the message names the job, its error and its log."""


def start(target: str, kwargs: dict, *, log: Path, result: Path) -> dict:
    """Run ``module:function`` (``target``, importable in a fresh interpreter) with the JSON ``kwargs`` in a process of
    its own; its stdout and stderr go to ``log``, its return value (JSON) to ``result`` (both replaced). Returns a
    handle for ``join``, ``stop`` and ``pid``."""
    log, result = Path(log), Path(result)
    result.unlink(missing_ok=True)  # a result from an earlier run must not pass for this one's
    with open(log, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "surrogate.background", target, json.dumps(kwargs), str(result)],
                                stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, "PYTHONUNBUFFERED": "1",  # the log readable as it runs
                                     PARENT_ENV: str(os.getpid())})
    return {"proc": proc, "target": target, "log": log, "result": result}


def pid(handle: dict) -> int:
    """The job's process id (the caller's accounts leave its CPU out while it runs)."""
    return handle["proc"].pid


def join(handle: dict) -> dict:
    """Wait for the job: ``{"result": its return value, "wall_s": its own wall time}``; a ``BackgroundError`` naming the
    job, its error and its log where it failed or died."""
    code = handle["proc"].wait()
    try:
        out = json.loads(handle["result"].read_text())
    except (OSError, ValueError):
        out = {"error": f"its process ended without a result (exit code {code})"}
    if "error" in out:
        raise BackgroundError(f"{handle['target']} (run beside the other stages) failed: {out['error']}; its output: "
                              f"{handle['log']}")
    return out


def stop(handle: dict) -> None:
    """End the job without its result (the caller failed first): nothing of it outlives the caller."""
    proc = handle["proc"]
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _main(target: str, kwargs: str, result: str) -> int:
    if os.environ.get(PARENT_ENV, "").isdigit():  # a caller killed with SIGKILL never stops its job: end with it
        end_with(int(os.environ[PARENT_ENV]))
    handler = logging.StreamHandler(sys.stderr)  # the package's progress notes, as the command line shows them
    handler.setFormatter(logging.Formatter("%(message)s"))
    logging.getLogger("surrogate").addHandler(handler)
    logging.getLogger("surrogate").setLevel(logging.INFO)
    module, name = target.split(":")
    t0 = time.time()
    try:
        out = {"result": getattr(importlib.import_module(module), name)(**json.loads(kwargs))}
    except (SurrogateError, OSError) as e:  # bad input, or the file system: its one line, as the command line's
        out = {"error": str(e)}
    except Exception as e:  # a bug: the traceback into the log, its last line to the caller
        traceback.print_exc()
        out = {"error": f"{type(e).__name__}: {e}"}
    out["wall_s"] = time.time() - t0
    write_json_atomic(Path(result), out)
    return 1 if "error" in out else 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: python -m surrogate.background MODULE:FUNCTION KWARGS_JSON RESULT_JSON")
    sys.exit(_main(*sys.argv[1:]))
