"""The command line: version, help for every argument, scene export and the main job end to end."""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import mujoco
import pytest

from surrogate import __version__
from surrogate.cli import build_parser, main

REPO = Path(__file__).resolve().parent.parent


def _commands(parser: argparse.ArgumentParser, path=("surrogate",)):
    """(command path, parser) for the parser and every subcommand under it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, path + (name,))


def test_version(capsys):
    with pytest.raises(SystemExit) as ei:
        main(["--version"])
    assert ei.value.code == 0
    assert capsys.readouterr().out.strip() == f"surrogate {__version__}"
    out = subprocess.run([sys.executable, "-m", "surrogate.cli", "--version"], capture_output=True, text=True,
                         timeout=60, cwd=REPO, check=True)
    assert out.stdout.strip() == f"surrogate {__version__}"


def test_the_parser_imports_no_heavy_library():
    """``surrogate --help`` and ``--version`` are instant (cli's docstring): building every subcommand's parser imports
    no torch, MuJoCo, Lightning, PyG or trimesh (they took 5 s before a command ran); a fresh interpreter, so that
    nothing another test imported counts."""
    heavy = ("torch", "mujoco", "lightning", "torch_geometric", "trimesh")
    code = ("import sys; from surrogate.cli import build_parser; build_parser(); "
            f"print(' '.join(m for m in {heavy!r} if m in sys.modules))")
    # without a MuJoCo log file named: with one, importing the package sets MuJoCo's log up (a command's, by design)
    env = {k: v for k, v in os.environ.items() if k != "SURROGATE_MUJOCO_LOG"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO, check=True,
                         env=env)
    assert out.stdout.strip() == ""


def test_every_argument_and_command_has_help():
    missing = []
    for path, parser in _commands(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                missing += [f"{' '.join(path)} {c.dest}" for c in action._choices_actions if not c.help]
            elif not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{' '.join(path)} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


def test_help_text_shows_every_argument(capsys):
    for path, parser in _commands(build_parser()):
        text = parser.format_help()
        for action in parser._actions:
            if action.help and not isinstance(action, argparse._SubParsersAction):
                assert action.help.split("%")[0][:30] in " ".join(text.split()), (path, action.dest)
    with pytest.raises(SystemExit) as ei:
        main(["rig", "generate", "--help"])
    assert ei.value.code == 0 and "--episodes" in capsys.readouterr().out


def test_speed_json_names_the_checkpoint_and_every_batch(capsys):
    assert main(["speed", "--batches", "1", "2", "--steps", "2", "--min-seconds", "0.01", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["checkpoint"].endswith("rig_default") and out["object"] == "box"
    assert [r["batch"] for r in out["rows"]] == [1, 2]
    assert all(r["hybrid_sps"] > 0 and r["analytic_sps"] > 0 and r["ratio"] > 0 for r in out["rows"])
    # --threads reaches the steppers it times (they set the network's threads; before, they reset them to 1)
    import torch

    try:
        assert main(["speed", "--batches", "1", "--steps", "2", "--min-seconds", "0.01", "--json", "--threads", "2"]) == 0
        assert json.loads(capsys.readouterr().out)["threads"] == 2 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(1)


@pytest.mark.parametrize("flag, value", [("--threads", "0"), ("--batches", "0"), ("--steps", "-2"), ("--steps", "x")])
def test_speed_refuses_a_count_below_one_as_a_usage_error_naming_the_flag(capsys, flag, value):
    with pytest.raises(SystemExit) as ei:
        main(["speed", flag, value])
    err = capsys.readouterr().err
    assert ei.value.code == 2 and flag in err and "a whole number of 1 or more" in err and "Traceback" not in err


def test_scene_command_writes_loadable_mjcf(tmp_path, capsys):
    xml = tmp_path / "scene.xml"
    assert main(["scene", "--family", "dumbbell", "--seed", "3", "--hand", "three_finger", "--xml", str(xml)]) == 0
    out = capsys.readouterr().out
    assert "owned pairs" in out and "own:pad_f0" in out
    m = mujoco.MjModel.from_xml_path(str(xml))
    assert m.nu == 13 and m.npair > 0


def test_unknown_family_is_a_clear_error(capsys):
    assert main(["scene", "--family", "teapot"]) == 2
    assert "teapot" in capsys.readouterr().err


def test_quickstart_runs_every_stage(tmp_path):
    from surrogate.quickstart import _cpu_s

    tiny = ["data.n_test=4", "data.train_sizes=[8]", "baselines.identified.sizes=[8]", "baselines.identified.maxiter=1",
            "baselines.identified.popsize=3", "baselines.identified.cones=[elliptic]", "baselines.randomized.n=2"]
    sets = '{heldout_families: {objects: heldout, episodes: 1, seed: 1}, meshes: {objects: "${SURROGATE_DATA}/ycb_sample/ycb", episodes: 1, seed: 2}}'
    rig_tiny = [f"data.test_sets={sets}", "data.duration=2.0", "workers=0", "baselines.identified.episodes=1",
                "baselines.identified.maxiter=1", "baselines.identified.popsize=3", "baselines.identified.cones=[pyramidal]",
                "baselines.randomized.n=2"]
    tiny_video = ["video.width=64", "video.height=48", "video.fps=5"]
    tiny, rig_tiny = tiny + tiny_video, rig_tiny + tiny_video
    # two workers, as the main job runs: stage 7 runs beside stages 5-6 in a process of its own (``background``)
    args = ["quickstart", "--out", str(tmp_path / "qs"), "--rig-episodes", "5", "--epochs", "1", "--workers", "2"]
    cpu_before = _cpu_s()
    assert main(args + [f"--set={o}" for o in tiny] + [f"--rig-set={o}" for o in rig_tiny]) == 0
    cpu_used = _cpu_s() - cpu_before
    s = json.loads((tmp_path / "qs" / "summary.json").read_text())
    stages = {"contactnets", "objects", "scenes", "rig", "train", "bench_rig_grasp", "bench_cube_real"}
    assert stages <= set(s) and set(s["stage_wall_s"]) == stages  # each stage's wall time, where the minutes go
    assert sum(s["stage_wall_s"].values()) <= s["wall_s"] + 1.0 and all(t >= 0 for t in s["stage_wall_s"].values())
    # and its CPU time (this process and its workers, finished or live): the cost a shared machine's load does not inflate
    assert set(s["stage_cpu_s"]) == stages and all(t >= 0 for t in s["stage_cpu_s"].values())
    assert s["stage_cpu_s"]["train"] > 0 and s["cpu_s"] == round(sum(s["stage_cpu_s"].values()), 1)
    assert s["rig"]["episodes"] == 5 and s["train"]["epochs"] == 1
    assert s["bench_rig_grasp"]["verdict"] in ("supported", "falsified", "tie")
    led = json.loads((tmp_path / "qs" / "bench_rig_grasp" / "ledger.json").read_text())
    assert led["models"]["surrogate"]["checkpoint"] == s["train"]["checkpoint"]  # the surrogate the job just trained
    assert [v["which"] for v in led["videos"]["videos"]] == ["median", "worst"]  # its report links both videos
    # the job's floor: the rig with each grasp's own values (read from the captures) and one redraw, not the suite's 3
    assert led["models"]["rig_redrawn"]["redraws"] == 1 and "rig_redrawn_medoid" not in led["models"]
    assert led["models"]["rig_exact"]["overall"]["episodes"] == led["models"]["surrogate"]["overall"]["episodes"]
    if "skipped" not in s["bench_cube_real"]:
        assert s["bench_cube_real"]["verdict"] in ("supported", "falsified", "tie")
        assert (tmp_path / "qs" / "bench_cube_real" / "ledger.json").exists()
        # it ran beside the rig stages; its CPU is counted once, by the stage that waited for it, not also by the
        # stages it overlapped: the stages' sum is no more than what the whole run used
        assert s["bench_cube_real"]["wall_beside_s"] > 0 and s["stage_cpu_s"]["bench_cube_real"] > 1.0
        assert s["cpu_s"] <= cpu_used + 1.0
        assert "suite cube-real-small" in (tmp_path / "qs" / "bench_cube_real.log").read_text()
    assert s["scenes"] and all(r["settled"] for r in s["scenes"])
    assert {"train", "heldout"} <= set(s["objects"])


def test_quickstart_refuses_a_folder_it_did_not_write(tmp_path):
    """``--out`` holding a user's files (a dataset of the same name as a stage's, say) is refused before any stage
    runs, nothing in it touched; a new folder, or one an earlier main job wrote, is taken (and marked)."""
    from surrogate.quickstart import MARKER, claim_output

    mine = tmp_path / "mine"
    (mine / "contactnets_cube").mkdir(parents=True)
    (mine / "contactnets_cube" / "notes.txt").write_text("mine")
    assert main(["quickstart", "--out", str(mine)]) != 0
    assert sorted(p.name for p in mine.rglob("*")) == ["contactnets_cube", "notes.txt"]
    claim_output(tmp_path / "new")
    assert (tmp_path / "new" / MARKER).is_file()
    claim_output(tmp_path / "new")  # its own: taken again
    earlier = tmp_path / "earlier"  # a main job's from before the marker: it wrote summary.json
    earlier.mkdir()
    (earlier / "summary.json").write_text("{}")
    claim_output(earlier)


@pytest.mark.skipif(not Path("/proc").is_dir() or "forkserver" not in mp.get_all_start_methods(),
                    reason="needs /proc and the forkserver start method (Linux)")
def test_the_main_jobs_cpu_time_counts_the_workers_of_a_forkserver_pool():
    """A stage's CPU time includes its pool workers: the rig's are children of a forkserver that outlives the stage,
    so this process's own accounts (``RUSAGE_CHILDREN``) never see them (the rig stage read 2 s of CPU for 88 s on
    two busy workers)."""
    from surrogate.quickstart import _cpu_s

    work = [range(2 * 10**7)] * 2
    t0 = time.process_time()
    sum(work[0])  # what one task costs here
    one = time.process_time() - t0
    before = _cpu_s()
    # as the rig's pool ends (``rig/workers.py``): shut down and joined, so the forkserver has reaped its workers and
    # holds their time (``mp.Pool``'s ``with`` terminated them, and a worker not yet reaped was missed: seen once)
    with ProcessPoolExecutor(2, mp_context=mp.get_context("forkserver")) as pool:
        list(pool.map(sum, work))
    assert _cpu_s() - before >= 0.6 * 2 * one > 0.05


@pytest.mark.parametrize("workers, expected", [(2, {"backend": "process", "workers": 2}), (1, {}), (0, {})])
def test_the_main_jobs_benchmarks_run_their_tasks_on_its_worker_processes(tmp_path, monkeypatch, workers, expected):
    """``quickstart --workers N`` (N > 1) runs each benchmark's tasks on N processes (``--backend process``, whose
    ledgers equal a local run's: ``tests/test_bench_backends.py``); 0 or 1 keeps them in this process."""
    import surrogate.bench.run as run
    from surrogate import quickstart

    seen = []

    def run_suite(suite, **kw):
        seen.append(kw)
        return {"result": {"verdict": "tie", "detail": "-"}, "wall_s": 0.0}

    monkeypatch.setattr(run, "run_suite", run_suite)
    monkeypatch.setattr(run, "summary_lines", lambda ledger: [])
    quickstart.rig_benchmark(tmp_path, "ckpt", ["x=1"], workers)
    assert len(seen) == 1 and {k: seen[0][k] for k in ("backend", "workers") if k in seen[0]} == expected
    # the job's floor first (one redraw), the caller's overrides after it: `--rig-set floor.redraws=3` wins
    assert seen[0]["overrides"] == [*quickstart.JOB_FLOOR, "x=1"] and seen[0]["checkpoint"] == "ckpt"
