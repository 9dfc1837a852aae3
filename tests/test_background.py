"""``surrogate.background``: a job in a process of its own beside the caller (the main job's cube-real stage)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from surrogate import background
from surrogate.atomic import pid_alive


def test_a_job_beside_returns_its_result_and_its_output_goes_to_its_log(tmp_path):
    job = background.start("json:dumps", {"obj": [1, 2.5]}, log=tmp_path / "job.log", result=tmp_path / "job.json")
    assert background.pid(job) > 0
    got = background.join(job)
    assert got["result"] == "[1, 2.5]" and got["wall_s"] >= 0.0
    assert (tmp_path / "job.log").is_file()


def test_a_failed_job_is_one_error_naming_the_job_its_reason_and_its_log(tmp_path):
    absent = tmp_path / "no_such_dataset"
    job = background.start("surrogate.inspect:summarize", {"root": str(absent)}, log=tmp_path / "job.log",
                           result=tmp_path / "job.json")
    with pytest.raises(background.BackgroundError) as e:
        background.join(job)
    msg = str(e.value)
    assert "surrogate.inspect:summarize" in msg and str(tmp_path / "job.log") in msg and "no_such_dataset" in msg


def test_a_result_left_by_an_earlier_run_does_not_pass_for_a_job_that_died(tmp_path):
    (tmp_path / "job.json").write_text('{"result": "stale"}')
    job = background.start("os:_exit", {"status": 3}, log=tmp_path / "job.log", result=tmp_path / "job.json")
    with pytest.raises(background.BackgroundError, match="without a result .exit code 3"):
        background.join(job)


def test_stopping_a_job_ends_its_process(tmp_path):
    job = background.start("subprocess:call", {"args": ["sleep", "30"]}, log=tmp_path / "job.log",
                           result=tmp_path / "job.json")
    t0 = time.time()
    background.stop(job)
    assert job["proc"].returncode is not None and time.time() - t0 < 20
    assert not (tmp_path / "job.json").exists()


def test_a_job_ends_when_its_caller_is_killed_without_a_chance_to_stop_it(tmp_path):
    caller = subprocess.Popen([sys.executable, "-c", f"""
import time
from surrogate import background
job = background.start("subprocess:call", {{"args": ["sleep", "20"]}}, log={str(tmp_path / "job.log")!r},
                       result={str(tmp_path / "job.json")!r})
print(background.pid(job), flush=True)
time.sleep(60)
"""], stdout=subprocess.PIPE, text=True)
    job = int(caller.stdout.readline())
    time.sleep(1.0)  # the job is running its function
    assert pid_alive(job)
    caller.kill()  # SIGKILL: no finally, no stop()
    caller.wait()
    deadline = time.time() + 15
    while pid_alive(job) and time.time() < deadline:
        time.sleep(0.1)
    assert not pid_alive(job)
