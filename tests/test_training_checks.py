"""``surrogate train``: the model's sizes, bounds and priors, the closed-loop stage's friction scales, an unreadable
resume checkpoint and a finished run's ``out_dir``, each refused before any work in one line naming where it came
from, the key (or file) and what is allowed."""

from __future__ import annotations

import json

import pytest
import torch

from surrogate.cli import main as cli
from surrogate.errors import ConfigError
from surrogate.training.config import load_config

from .test_model import tiny_capture  # noqa: F401  (a 4-episode capture of box drops)
from .test_train_cli import _snapshot

SET = "command line (--set)"


@pytest.mark.parametrize("config, override, key, match", [
    # each of these had started the run, which then failed with a traceback building or training the model
    ("rig_default", "model.hidden=0", "model.hidden", r"a whole number in \[1, 4096\], got 0"),
    ("rig_default", "model.steps=0", "model.steps", r"a whole number in \[1, 64\], got 0"),
    ("rig_default", "model.mlp_layers=0", "model.mlp_layers", r"a whole number in \[1, 16\], got 0"),
    ("rig_default", "model.hidden=abc", "model.hidden", "must be a whole number, got 'abc'"),
    ("rig_default", "model.friction_iterations=-1", "model.friction_iterations", r"in \[0, 32\], got -1"),
    ("rig_default", "model.members=2", "model.members", "must be 1 .*surrogate ensemble"),
    ("rig_default", "model.mu_max=-1", "model.mu_max", r"a number in \(0, 10\] .*got -1"),
    ("rig_default", "model.mu_max=.nan", "model.mu_max", "finite, got nan"),
    ("rig_default", "model.bounds=[0, 1, 1]", "model.bounds", r"3 numbers in \(0, 10\]"),
    ("rig_default", "model.bounds=[1, 1]", "model.bounds", r"3 numbers in \(0, 10\]"),
    ("rig_default", "model.presliding_bound=-1", "model.presliding_bound", r"a number in \(0, 10\]"),
    ("rig_default", "model.corrections=maybe", "model.corrections", "must be true or false"),
    ("gns_cube", "model.hidden=0", "model.hidden", r"a whole number in \[1, 4096\], got 0"),
    ("gns_cube", "model.floor_clip=0", "model.floor_clip", r"a number in \(0, 100\]"),
    # the priors: every value LawPrior needs > 0 or >= 0, its units; named as set on the command line
    ("rig_default", "model.prior.friction=-1", "model.prior.friction", "physical range"),
    ("rig_default", "model.prior_body.damping=-1", "model.prior_body.damping", "physical range"),
    ("cube_tosses", "model.prior.stiffness=-5", "model.prior.stiffness", "physical range"),
    ("rig_default", "model.prior.presliding_stiffness=-1", "model.prior.presliding_stiffness", "0 .*or more"),
    ("rig_default", "model.prior.units=kg", "model.prior.units", r"one of \['weight', 'si'\]"),
    # a friction cap below the (file's) prior names the command line that set the cap
    ("rig_default", "model.mu_max=0.1", "model.prior.friction", r"\[0.001, 0.1\] \(mu_max\).*model.mu_max = 0.1"),
    # the closed-loop stage's scales: [-1] had failed at that stage, after the whole training
    ("rig_default", "stages.closed_loop.friction_scales=[-1]", "stages.closed_loop.friction_scales", "above 0"),
    ("rig_default", "stages.closed_loop.friction_scales=[1.0, .nan]", "stages.closed_loop.friction_scales", "finite"),
    ("rig_default", "stages.closed_loop.friction_scales=[]", "stages.closed_loop.friction_scales", "non-empty"),
    ("rig_default", "stages.closed_loop.friction_scales=0.5", "stages.closed_loop.friction_scales", "non-empty list"),
    ("rig_default", "stages.closed_loop.friction_scales=null", "stages.closed_loop.friction_scales", "got None"),
])
def test_model_sizes_priors_and_friction_scales_are_refused_naming_the_command_line(config, override, key, match):
    with pytest.raises(ConfigError, match=match) as e:
        load_config(config, [override])
    assert e.value.location.field == key and e.value.location.file == SET, str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("model, key", [("{hidden: 0}", "model.hidden"), ("{mu_max: 0.1}", "model.prior.friction"),
                                        ("{mu_max: -1}", "model.mu_max"),
                                        ("{prior: {friction: 5}}", "model.prior.friction")])
def test_the_same_values_in_a_config_file_name_the_file(tmp_path, model, key):
    path = tmp_path / "mine.yaml"
    path.write_text(f"preset: grasps\ndata: {{root: caps}}\nmodel: {model}\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert e.value.location.field == key and e.value.location.file == path, str(e.value)


def test_the_model_ranges_are_the_checkpoint_loaders():
    """Training accepts what a checkpoint may hold (its loader's bounds, ``model.checkpoint._check_hparams``) and
    refuses what it refuses: a run never exports a model that cannot be loaded."""
    from surrogate.model.checkpoint import CheckpointError, _check_hparams
    from surrogate.training.setup import model_ranges

    for kind, config in (("law", "rig_default"), ("gns", "gns_cube")):
        for name, (lo, hi, lo_excluded, _) in model_ranges(kind).items():
            if name == "members":
                continue  # training builds one network; the loader takes ensembles (surrogate ensemble's)
            whole = isinstance(hi, int) and not lo_excluded
            inside = [(lo + hi) / 2 if lo_excluded else lo, hi]  # mu_max: not below the rig preset's pad friction
            outside = [lo if lo_excluded else lo - 1, hi + 1]
            for v, ok in [(v, True) for v in inside] + [(v, False) for v in outside]:
                value = [v, v, v] if name == "bounds" else int(v) if whole else v
                hp = {name: value}
                if ok:
                    load_config(config, [f"model.{name}={json.dumps(value)}"])
                    _check_hparams(hp, law=kind == "law", peer=kind == "gns", card="card.json")
                else:
                    with pytest.raises(ConfigError):
                        load_config(config, [f"model.{name}={json.dumps(value)}"])
                    with pytest.raises(CheckpointError):
                        _check_hparams(hp, law=kind == "law", peer=kind == "gns", card="card.json")


class _Trained(Exception):
    """Raised by the stand-in for the law fit: the run got past every check."""


def test_an_unreadable_resume_checkpoint_is_refused_naming_the_file(tiny_capture, tmp_path, monkeypatch):  # noqa: F811
    """A truncated or garbled ``last.ckpt`` (or the best epoch's checkpoint it names) ended a resume in torch's
    unpickling traceback once the data had loaded; it is refused before any work, naming the file and what to do."""
    from surrogate import training
    from surrogate.learn import fit as law_fit

    def trained(*a, **k):
        raise _Trained

    monkeypatch.setattr(law_fit, "fit_law", trained)
    out = tmp_path / "run"
    last = out / "checkpoints" / "corrections" / "last.ckpt"
    last.parent.mkdir(parents=True)
    best = last.parent / "best.ckpt"
    torch.save({"state_dict": {"model.w": torch.zeros(3)}, "epoch": 0,
                "callbacks": {"ModelCheckpoint{'monitor': 'val_score'}": {"best_model_path": str(best)}}}, last)
    good = last.read_bytes()
    torch.save({"state_dict": {"model.w": torch.ones(3)}, "epoch": 0}, best)
    sets = [f"data.root={tiny_capture}", "data.val_fraction=0.25", f"out_dir={out}", "ckpt_path=last"]
    for path, bad in ((last, good[: len(good) // 2]), (last, b"not a checkpoint " * 8), (best, b"")):
        kept = path.read_bytes()
        path.write_bytes(bad)
        with pytest.raises(ConfigError, match="cannot be read.*delete it.*without ckpt_path") as e:
            training.fit(load_config(None, sets))
        assert e.value.location.file == path and e.value.location.field == "ckpt_path", str(e.value)
        assert "\n" not in str(e.value) and path.read_bytes() == bad  # one line; the file is left as it was
        path.write_bytes(kept)
    torch.save({"epoch": 0}, best)  # loads, but holds no weights
    with pytest.raises(ConfigError, match="not a Lightning checkpoint"):
        training.fit(load_config(None, sets))
    torch.save({"state_dict": {}}, best)
    with pytest.raises(_Trained):  # readable: on to the training
        training.fit(load_config(None, sets))


def test_a_new_run_into_an_out_dir_that_holds_a_run_is_refused_and_a_resume_is_not(tmp_path, capsys):
    """A new ``surrogate train`` into a finished run's ``out_dir`` replaced its ``result.json`` and ``run_config.json``
    (and its checkpoints and export); it is refused before any work, and a resume (``ckpt_path=last``) is not."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "result.json").write_text('{"exported": "the first run"}')
    (run / "run_config.json").write_text("{}")
    before = _snapshot(run)

    def train(config, *sets):
        args = ["-c", config, "--set", f"data.root={tmp_path / 'none'}", "--set", f"out_dir={run}"]
        code = cli(["train", *args, *[a for s in sets for a in ("--set", s)]])
        return code, capsys.readouterr().err

    code, err = train("rig_default")
    assert code == 2 and "holds a run (result.json and run_config.json)" in err, err
    assert "--set ckpt_path=last" in err and "another out_dir" in err and len(err.strip().splitlines()) == 1
    code, err = train("rig_default", "ckpt_path=last")  # a resume reuses the folder: on to the data (missing here)
    assert code == 2 and "holds a run" not in err and f"capture dataset {tmp_path / 'none'}" in err, err
    (run / "result.json").unlink()  # an interrupted run (its run config only): refused too
    code, err = train("rig_default")
    assert code == 2 and "holds a run (run_config.json)" in err, err
    code, err = train("gns_cube")  # the end-to-end peer does not resume: only another out_dir
    assert code == 2 and "holds a run" in err and "ckpt_path" not in err, err
    assert cli(["train", "-c", "rig_default", "--set", f"out_dir={run}", "--print-config"]) == 0  # writes nothing
    capsys.readouterr()
    del before["result.json"]
    assert _snapshot(run) == before


# -- several processes: the law trains in one; the end-to-end peer's DDP ranks run under their parent's lock --------
@pytest.mark.parametrize("devices, nodes, key", [(2, 1, "trainer.devices"), ("2", 1, "trainer.devices"),
                                                 (1, 2, "trainer.num_nodes")])
def test_the_law_in_several_processes_is_refused_before_any_work(tmp_path, capsys, devices, nodes, key):
    """``--devices 2`` on the CPU had started the law fit in DDP: each rank validated on its own, unsynced, and the
    ranks' exports collided on the export's lock after the training (its child was refused by the run's own lock
    before that). Refused when the config is loaded, naming the key; one process (1, ``auto``) still loads."""
    with pytest.raises(ConfigError, match=f"{key.split('.')[1]} .*model.kind: law trains in one process") as e:
        load_config("rig_default", options={"trainer.devices": devices, "trainer.num_nodes": nodes})
    assert e.value.location.field == key and "\n" not in str(e.value)
    for ok in (1, "auto"):
        assert load_config("rig_default", options={"trainer.devices": ok})["trainer"]["devices"] == ok
    out = tmp_path / "run"
    code = cli(["train", "-c", "rig_default", "--accelerator", "cpu", "--devices", "2", "--set", f"out_dir={out}",
                "--set", f"data.root={tmp_path / 'none'}"])
    err = capsys.readouterr().err
    assert code == 2 and "field 'trainer.devices'" in err and "capture dataset" not in err, err
    assert not out.exists() and not (tmp_path / "run.lock").exists()


_TAKE = """
import sys
from surrogate.errors import LockedError
from surrogate.training.ddp import run_lock
try:
    with run_lock(sys.argv[1]) as lock:
        print("child" if lock is None else "took")
except LockedError as e:
    print("refused:", e)
"""


def _take(out, env, *, through_shell: bool = False) -> str:
    """What a process started here with ``env`` gets from ``run_lock(out)`` (through a shell: not this one's child)."""
    import os
    import subprocess
    import sys

    cmd = [sys.executable, "-c", _TAKE, str(out)]
    if through_shell:  # a grandchild: the shell's child, not the lock holder's (no exec: sh -c "...; true")
        cmd = ["sh", "-c", " ".join(f"'{c}'" for c in cmd) + "; true"]
    r = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip()


def test_the_runs_own_ddp_ranks_pass_its_lock_and_other_runs_are_refused(tmp_path, monkeypatch):
    """Lightning's DDP launcher starts each rank as the same command, ``LOCAL_RANK`` set, the parent's environment
    inherited: such a child of the lock's holder runs under its lock. Any other process is refused as before: one
    without ``LOCAL_RANK`` (a second run started from the run), one without the run's record, one the holder did not
    start; and once the run ends, its record is gone."""
    import os

    from surrogate.training.ddp import RUN_ENV, run_lock

    monkeypatch.delenv(RUN_ENV, raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    out = tmp_path / "run"
    assert _take(out, {}) == "took"
    with run_lock(out) as lock:
        assert lock.read_text() == f"{os.getpid()}\n" and RUN_ENV in os.environ
        assert _take(out, {"LOCAL_RANK": "1"}) == "child"
        assert _take(out, {}).startswith(f"refused: {lock}: another run (PID {os.getpid()})")
        assert _take(out, {"LOCAL_RANK": "0"}).startswith("refused:")
        assert _take(out, {"LOCAL_RANK": "1", RUN_ENV: ""}).startswith("refused:")
        assert _take(out, {"LOCAL_RANK": "1"}, through_shell=True).startswith("refused:")
        assert _take(tmp_path / "other", {"LOCAL_RANK": "1"}) == "took"  # another out_dir: its own lock
    assert RUN_ENV not in os.environ and not lock.exists()
    record = f"{os.getpid()}:{lock}"
    assert _take(out, {"LOCAL_RANK": "1", RUN_ENV: record}) == "took"  # a record without its lock: a run of its own


@pytest.mark.slow
def test_the_end_to_end_peer_trains_in_two_cpu_processes(tiny_capture, tmp_path):  # noqa: F811
    """``surrogate train -c gns_cube --accelerator cpu --devices 2`` (DDP, gloo): its second rank had been refused by
    the run's own lock, and Lightning then killed the run (exit 137). It trains in two processes, the first exporting
    and writing the summary (about 25 s on two cores)."""
    import os
    import subprocess
    import sys

    out = tmp_path / "run"
    sets = [f"data.root={tiny_capture}", "data.bench_split=null", "data.val_min=0", "data.val_fraction=0.25",
            "data.batch_size=32", "model.hidden=8", "model.steps=1", "trainer.max_epochs=1",
            "trainer.check_val_every_n_epoch=1", "trainer.enable_progress_bar=false", f"out_dir={out}"]
    # a subprocess: Lightning starts the second rank by running this process's command line again
    r = subprocess.run([sys.executable, "-m", "surrogate.cli", "train", "-c", "gns_cube", "--accelerator", "cpu",
                        "--devices", "2", *[a for s in sets for a in ("--set", s)]], cwd=tmp_path,
                       env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=300)
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-3000:]
    assert "Starting with 2 processes" in log and "GLOBAL_RANK: 1" in log, log[-3000:]
    assert (out / "export" / "card.json").is_file() and (out / "result.json").is_file()
    assert log.count("trained: checkpoint") == 1 and not (tmp_path / "run.lock").exists()
    assert json.loads((out / "result.json").read_text())["exported"] == str(out / "export")


# -- the fit's own rules (learn.fit, learn.lightning, learn.episodes) at config time --------------------------------
# keys whose default is null or a string, which the type check passes over: each had been refused only by the fit,
# after its captures had loaded (or, for a bench_split size 'abc', with a traceback there)
_MISSING = "/nonexistent/captures"  # data.root: no captures anywhere, so an error about the data would name it


@pytest.mark.parametrize("config, sets, key, match", [
    ("rig_default", ["stages.grid.static_friction=[1.2]"], "stages.grid.static_friction", "model.stribeck false"),
    ("cube_tosses", ["model.stribeck=false", "stages.grid.stribeck_speed=[0.1]"], "stages.grid.stribeck_speed",
     "set model.stribeck=true"),
    ("rig_default", ["stages.grid.group=pads"], "stages.grid.group", r"one of \['surface', 'body'\].*got 'pads'"),
    ("rig_default", ["stages.grid.friction=0.3"], "stages.grid.friction", "a list of numbers above 0.*got 0.3"),
    ("rig_default", ["stages.grid.damping=[1, -2]"], "stages.grid.damping", "above 0"),
    ("rig_default", ["stages.grid.stiffness=[.inf]"], "stages.grid.stiffness", "finite"),
    ("rig_default", ["stages.grid.friction=[true]"], "stages.grid.friction", "got \\[True\\]"),
    ("rig_default", ["stages.grid.max_episodes=0"], "stages.grid.max_episodes", "1 or more, or null.*got 0"),
    ("rig_default", ["stages.grid.max_episodes=abc"], "stages.grid.max_episodes", "got 'abc'"),
    ("rig_default", ["stages.prior.patience=0"], "stages.prior.patience", "1 or more, or null .*got 0"),
    ("rig_default", ["stages.corrections.patience=-1"], "stages.corrections.patience", "got -1"),
    ("rig_default", ["stages.corrections.patience=1.5"], "stages.corrections.patience", "got 1.5"),
    ("rig_default", ["stages.prior.patience=true"], "stages.prior.patience", "got True"),
    ("rig_default", ["data.hand=puppet"], "data.hand", r"one of \['kinematic', 'actuated'\]"),
    ("rig_default", ["data.val_hand=puppet"], "data.val_hand", r"one of \[None, 'kinematic', 'actuated'\]"),
    ("rig_default", ["data.val_split=objects"], "data.val_split", r"one of \['episode', 'object', 'family'\]"),
    ("cube_tosses", ["data.val_split=object"], "data.val_split", "not to a suite's"),
    ("cube_tosses", ["data.bench_split.size=abc"], "data.bench_split.size", "1 or more, got 'abc'"),
    ("cube_tosses", ["data.bench_split.size=0"], "data.bench_split.size", "got 0"),
    ("cube_tosses", ["data.bench_split.suite=cube-rea"], "data.bench_split.suite", "unknown suite 'cube-rea'"),
    ("cube_tosses", ["data.bench_split.validation=test"], "data.bench_split.validation", "'pool' or 'training'"),
    ("rig_default", ["data.bench_split={size: 8}"], "data.bench_split", "suite: NAME, size: N"),
    ("gns_cube", ["data.bench_split.size=abc"], "data.bench_split.size", "got 'abc'"),
])
def test_the_fits_own_rules_are_refused_when_the_config_is_loaded(config, sets, key, match):
    with pytest.raises(ConfigError, match=match) as e:
        load_config(config, [f"data.root={_MISSING}", *sets])
    assert e.value.location.field == key and e.value.location.file == SET, str(e.value)
    assert "\n" not in str(e.value) and _MISSING not in str(e.value)


def test_the_fits_own_rules_in_a_file_name_the_file_or_the_command_line_that_set_either_key(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(f"preset: tosses\ndata: {{root: {_MISSING}, bench_split: null}}\n"
                    "stages: {grid: {static_friction: [0.4]}, prior: {patience: 0}}\n")
    with pytest.raises(ConfigError, match="stages.prior.patience") as e:
        load_config(path)
    assert e.value.location.file == path
    # the grid's Stribeck keys need model.stribeck (the preset's): a command line that drops it is named
    with pytest.raises(ConfigError, match="model.stribeck false") as e:
        load_config(path, ["stages.prior.patience=2", "model.stribeck=false"])
    assert e.value.location.field == "stages.grid.static_friction" and e.value.location.file == SET, str(e.value)
    path.write_text(f"data: {{root: {_MISSING}, hand: puppet}}\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert e.value.location.field == "data.hand" and e.value.location.file == path, str(e.value)


def test_the_values_the_fit_takes_are_accepted():
    sets = [f"data.root={_MISSING}", "stages.prior.patience=null", "stages.corrections.patience=3",
            "stages.grid={group: body, friction: [0.5, 1.0], damping: [], stiffness: null, max_episodes: 4}",
            "data.hand=actuated", "data.val_hand=kinematic", "data.val_split=family"]
    cfg = load_config("rig_default", sets)
    assert cfg["stages"]["grid"]["friction"] == [0.5, 1.0] and cfg["stages"]["corrections"]["patience"] == 3
    cfg = load_config("cube_tosses", ["stages.grid.static_friction=[0.3, 0.4]", "stages.grid.stribeck_speed=[0.1]",
                                      "data.bench_split.validation=training"])  # the preset's model.stribeck: true
    assert cfg["data"]["bench_split"] == {"suite": "cube-real", "size": 64, "validation": "training"}


def test_the_fit_and_the_config_check_apply_one_rule():
    """The fit (``learn.fit.grid_prior``, ``_trainer``) and the config check call the same functions, which refuse
    with the key the config check names."""
    from surrogate.learn.defaults import STAGE_DEFAULTS
    from surrogate.learn.fit import check_grid, check_patience

    with pytest.raises(ConfigError) as e:
        check_grid({**STAGE_DEFAULTS["grid"], "stribeck_speed": [0.1]}, stribeck=False)
    assert e.value.location.field == "stages.grid.stribeck_speed" and e.value.keys[1] == "model.stribeck"
    check_grid({**STAGE_DEFAULTS["grid"], "stribeck_speed": [0.1]}, stribeck=True)
    with pytest.raises(ConfigError) as e:
        check_patience(0, stage="corrections")
    assert e.value.location.field == "stages.corrections.patience"


@pytest.mark.parametrize("sets, key", [(["stages.prior.patience=0"], "stages.prior.patience"),
                                       (["stages.grid.static_friction=[1.2]"], "stages.grid.static_friction"),
                                       (["data.bench_split={suite: cube-real, size: abc}"], "data.bench_split.size")])
def test_the_cli_refuses_them_before_it_looks_for_the_captures(tmp_path, capsys, sets, key):
    """Without the config check the run got as far as the missing captures (``capture dataset ... not found``), and
    with captures there it read and validated them all before the fit refused the key."""
    out = tmp_path / "run"
    code = cli(["train", "-c", "rig_default", "--set", f"out_dir={out}", "--set", f"data.root={tmp_path / 'none'}",
                *[a for s in sets for a in ("--set", s)]])
    err = capsys.readouterr().err
    assert code == 2 and f"{SET}: field '{key}'" in err and "capture dataset" not in err, err
    assert not out.exists() and not (tmp_path / "run.lock").exists()


# -- a number with an exponent is a float (surrogate.config.parse_yaml), on the command line and in a file ----------
@pytest.mark.parametrize("value, expected", [("1e5", 1.0e5), ("2.5E5", 2.5e5), ("+3e+4", 3.0e4), ("1.0e5", 1.0e5)])
def test_a_prior_stiffness_with_an_exponent_is_a_number(tmp_path, value, expected):
    """``--set model.prior.stiffness=1e5`` was the string '1e5' (PyYAML's YAML 1.1), refused as "outside its physical
    range"; it is the number, in a config file too, and a number outside the range is still refused as one."""
    cfg = load_config("rig_default", [f"model.prior.stiffness={value}"])
    assert cfg["model"]["prior"]["stiffness"] == expected and isinstance(cfg["model"]["prior"]["stiffness"], float)
    path = tmp_path / "mine.yaml"
    path.write_text(f"preset: grasps\ndata: {{root: caps}}\nmodel: {{prior_body: {{stiffness: {value}}}}}\n"
                    "stages: {corrections: {lr: 1e-3}}\n")
    cfg = load_config(path)
    assert cfg["model"]["prior_body"]["stiffness"] == expected and cfg["stages"]["corrections"]["lr"] == 1e-3
    with pytest.raises(ConfigError, match=r"stiffness = 1e\+13 is outside its physical range") as e:  # not '1e13'
        load_config("rig_default", ["model.prior.stiffness=1e13"])
    assert e.value.location.file == SET and e.value.location.field == "model.prior.stiffness"
