"""``surrogate train`` / ``train.py``: key checks, --print-config, the path rule, missing datasets, logs, releases."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from surrogate.cli import main as cli
from surrogate.errors import ConfigError
from surrogate.paths import REPO_ROOT
from surrogate.training.config import load_config

from .conftest import SHARED, needs_shared
from .test_model import tiny_capture  # noqa: F401  (a 4-episode capture of box drops)

RELEASES = REPO_ROOT / "checkpoints"


def _snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file()}


def _printed(capsys, *argv) -> dict:
    assert cli(["train", *argv, "--print-config"]) == 0
    return yaml.safe_load(capsys.readouterr().out)


@pytest.mark.parametrize("config, sets, key, match", [
    ("plain_file", [], "data.val_fractoin", "did you mean 'data.val_fraction'"),
    ("cube_tosses", ["trainer.max_epoch=1"], "trainer.max_epoch", "lightning.Trainer.*did you mean 'trainer.max_epochs'"),
    ("cube_tosses", ["trainer.max_epochs=1"], "trainer.max_epochs", "stages.prior.epochs"),
    ("cube_tosses", ["model.prior.stifness=3"], "model.prior.stifness", "did you mean 'model.prior.stiffness'"),
    ("cube_tosses", ["optim.lr=0.1"], "optim", "stages.prior.lr"),
    ("cube_tosses", ["stages.prio.epochs=1"], "stages.prio", "did you mean 'stages.prior'"),
    ("cube_tosses", ["model.kind=lwa"], "model.kind", "did you mean 'law'"),
    ("cube_tosses", ["out_dri=x"], "out_dri", "did you mean 'out_dir'"),
    ("plain_file", ["model.kind=gnn"], "model.kind", r"the v1 raw-force network\) is no longer supported.*kind: law"),
    ("plain_file", ["trainer.logger=false"], "trainer.logger", "set by the training entry point"),
    # values of the wrong type, refused before any work rather than by a traceback once the data have loaded
    ("cube_tosses", ["stages.prior.epochs=abc"], "stages.prior.epochs", "must be a whole number, got 'abc'"),
    ("cube_tosses", ["stages.corrections.epochs=-1"], "stages.corrections.epochs", "0 or more, got -1"),
    ("cube_tosses", ["data.batch_size=2.5"], "data.batch_size", "must be a whole number"),
    ("cube_tosses", ["stages.prior.lr=fast"], "stages.prior.lr", "must be a number, got 'fast'"),
    ("gns_cube", ["optim.lr=[1]"], "optim.lr", "must be a number"),
    # and out of range: a traceback once training had started (or, a NaN weight, accepted)
    ("cube_tosses", ["data.batch_size=0"], "data.batch_size", "1 or more, got 0"),
    ("cube_tosses", ["data.substeps=0"], "data.substeps", "1 or more, got 0"),
    ("cube_tosses", ["stages.corrections.lr=.nan"], "stages.corrections.lr", "finite, got nan"),
    ("cube_tosses", ["stages.prior.lr=-1"], "stages.prior.lr", "above 0, got -1"),
    ("cube_tosses", ["threads=0"], "threads", "1 or more, got 0"),
    ("cube_tosses", ["loss.force_weight=.nan"], "loss.force_weight", "finite, got nan"),
    ("cube_tosses", ["stages.closed_loop.episodes=-1"], "stages.closed_loop.episodes", "0 or more, got -1"),
    ("plain_file", [], "data.val_min", "must be a whole number, got 'many'"),
    ("cube_tosses", ["trainer.accelerator=gpu"], "trainer.accelerator", "trains on the CPU"),
])
def test_misspelt_and_misplaced_keys_are_refused_naming_key_file_and_matches(tmp_path, config, sets, key, match):
    if config == "plain_file":  # no model.kind: the law's keys
        config = tmp_path / "plain.yaml"
        extra = {"data.val_fractoin": "  val_fractoin: 0.3\n", "data.val_min": "  val_min: many\n"}.get(key, "")
        config.write_text("data:\n  root: caps\n  val_fraction: 0.2\n" + extra)
    with pytest.raises(ConfigError, match=match) as e:
        load_config(config, sets)
    assert e.value.location.field == key
    where = str(e.value.location.file)
    assert (where == "command line (--set)") if sets else where.endswith("plain.yaml"), where


def test_the_cli_prints_the_error_and_exits_2_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli(["train", "-c", "cube_tosses", "--set", "data.val_fractoin=0.3"]) == 2
    err = capsys.readouterr().err
    assert "field 'data.val_fractoin'" in err and "did you mean 'data.val_fraction'" in err
    assert not list(tmp_path.iterdir())


def test_print_config_resolves_defaults_options_and_the_path_rule(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # a packaged config (by name, or spelt as its repository path from another folder): the checkout's paths
    for name in ("cube_tosses", "configs/train/cube_tosses.yaml"):
        cfg = _printed(capsys, "-c", name, "--seed", "5", "--set", "out_dir=rel/run")
        assert cfg["seed"] == 5 and cfg["model"]["kind"] == "law"
        assert cfg["data"]["root"] == str(REPO_ROOT / "datasets/generated/contactnets_cube")  # in the file: the project's
        assert cfg["out_dir"] == str(tmp_path / "rel/run")                                    # on the command line: here
        assert cfg["export"]["dir"] == str(tmp_path / "rel/run/export")
        assert cfg["export"]["release_dir"] == str(REPO_ROOT / "checkpoints/cube_tosses")
        assert cfg["stages"]["prior"]["epochs"] == 8 and cfg["data"]["max_val_episodes"] is None  # defaults filled in
    # a config outside any project: relative to the current folder; the law by default
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "law.yaml").write_text("data: {root: caps}\n")
    cfg = _printed(capsys, "-c", "mine/law.yaml")
    assert cfg["data"]["root"] == str(tmp_path / "caps") and cfg["out_dir"] == str(tmp_path / "runs/train")
    assert cfg["model"]["kind"] == "law" and cfg["stages"]["prior"]["epochs"] == 8
    # the end-to-end peer's defaults, --device and --devices
    (tmp_path / "mine" / "my.yaml").write_text("model: {kind: gns}\ndata: {root: caps}\ntrainer: {max_epochs: 2}\n")
    cfg = _printed(capsys, "-c", "mine/my.yaml", "--device", "auto", "--devices", "2")
    assert cfg["trainer"] == {**cfg["trainer"], "accelerator": "auto", "devices": 2, "max_epochs": 2}
    assert cfg["optim"]["lr"] == 1e-3 and cfg["model"]["kind"] == "gns"
    # a config under <project>/configs/ next to pyproject.toml: relative to <project>, from any folder
    proj = tmp_path / "proj"
    (proj / "configs" / "train").mkdir(parents=True)
    (proj / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (proj / "configs" / "train" / "x.yaml").write_text("data: {root: datasets/x}\nout_dir: runs/x\n")
    monkeypatch.chdir(tmp_path / "mine")
    cfg = _printed(capsys, "-c", str(proj / "configs" / "train" / "x.yaml"))
    assert cfg["data"]["root"] == str(proj / "datasets/x") and cfg["out_dir"] == str(proj / "runs/x")


def _user_keys(cfg: dict, where: str = "") -> list[str]:
    """The dotted keys a config file sets; a law prior or a split given as one mapping counts as one key."""
    out = []
    for k, v in cfg.items():
        dotted = f"{where}.{k}" if where else k
        whole = k in ("prior", "prior_body", "bench_split") or where in ("stages.prior", "stages.corrections")
        out += _user_keys(v, dotted) if isinstance(v, dict) and not whole else [dotted]
    return out


@pytest.mark.parametrize("name, preset, checks", [
    ("rig_default", "grasps", {"loss.force_weight": 0.5, "stages.closed_loop.episodes": 24, "data.window_stride": 120,
                               "model.prior_body.units": "si", "stages.corrections.patience": 2}),
    ("cube_tosses", "tosses", {"model.friction_iterations": 4, "data.detach_every": 32, "stages.prior.lr": 0.03,
                               "model.prior.stiffness": 2494.0, "trainer.gradient_clip_val": 1.0})])
def test_the_release_configs_are_short_and_their_presets_fill_the_rest(name, preset, checks):
    """A user-facing training config names its captures and a few choices (at most 15 keys); its ``preset`` (the
    defaults of a kind of captures, ``learn.defaults.PRESETS``) fills the expert keys, and the file and ``--set``
    override it."""
    from surrogate.config import get_dotted
    from surrogate.training.config import find_config, resolved_config

    written = yaml.safe_load(find_config(name).read_text())
    assert written["preset"] == preset and len(_user_keys(written)) <= 15, _user_keys(written)

    def resolved(*sets):
        return resolved_config(load_config(name, list(sets)))

    for key, value in checks.items():
        assert get_dotted(resolved(), key) == value, key
    assert get_dotted(resolved("data.window_stride=7"), "data.window_stride") == 7  # --set over the preset
    # the plain default again (without its preset cube_tosses' static friction needs the Stribeck law set by hand)
    assert get_dotted(resolved("preset=null", "model.stribeck=true"), "loss.rot_weight") == 0.5


def test_a_prior_in_other_units_replaces_the_presets_and_one_in_its_units_changes_it():
    from surrogate.training.config import resolved_config

    own = resolved_config(load_config("rig_default", ["model.prior={stiffness: 3000, units: weight}",
                                                      "model.prior_body={stiffness: 2000, units: weight}"]))["model"]
    assert own["prior"] == {"stiffness": 3000, "units": "weight"}  # nothing of the preset's SI law left in it
    assert own["prior_body"] == {"stiffness": 2000, "units": "weight"}
    with pytest.raises(ConfigError, match="units"):  # one prior in weight units beside the preset's SI one
        load_config("rig_default", ["model.prior={stiffness: 3000, units: weight}"])
    tweak = resolved_config(load_config("rig_default", ["model.prior_body.friction=0.6"]))["model"]["prior_body"]
    assert tweak["friction"] == 0.6 and tweak["units"] == "si" and tweak["stiffness"] == 1.0e5


def test_an_unknown_preset_or_one_on_the_gns_path_is_refused():
    with pytest.raises(ConfigError, match="unknown preset 'grasp'.*did you mean 'grasps'") as e:
        load_config("rig_default", ["preset=grasp"])
    assert e.value.location.field == "preset"
    with pytest.raises(ConfigError, match="unknown preset"):
        load_config("rig_default", ["preset=[grasps]"])
    with pytest.raises(ConfigError, match="presets are the law fit's"):
        load_config("gns_cube", ["preset=tosses"])


def test_law_path_refuses_another_accelerator_and_an_unknown_config(tmp_path):
    with pytest.raises(ConfigError, match="trains on the CPU") as e:
        load_config("cube_tosses", [], options={"trainer.accelerator": "gpu"})
    assert e.value.location.field == "trainer.accelerator"
    with pytest.raises(ConfigError, match="did you mean 'rig_default'"):
        load_config("rig_defautl")


@pytest.mark.parametrize("config, command", [("cube_tosses", "surrogate import contactnets"),
                                             ("rig_default", "surrogate rig generate --objects train")])
def test_a_missing_dataset_names_the_command_that_creates_it(tmp_path, capsys, monkeypatch, config, command):
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "datasets" / ("contactnets_cube" if config == "cube_tosses" else "rig_default")
    assert cli(["train", "-c", config, "--set", f"data.root={root}", "--set", "out_dir=run"]) == 2
    err = capsys.readouterr().err
    assert f"capture dataset {root} not found" in err and f"{command}" in err and f"--out {root}" in err, err
    assert not (tmp_path / "run").exists()


def _scalar_tags(folder: Path) -> set:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = set()
    for events in folder.rglob("events.out.tfevents.*"):
        acc = EventAccumulator(str(events))
        acc.Reload()
        tags |= set(acc.Tags()["scalars"])
    return tags


def test_law_run_from_another_folder_logs_the_learning_rate_and_leaves_releases(tiny_capture, tmp_path,  # noqa: F811
                                                                                monkeypatch):
    before = _snapshot(RELEASES)
    monkeypatch.chdir(tmp_path)
    sets = [f"data.root={tiny_capture}", "data.val_fraction=0.25", "data.margin=0.01", "data.window_frames=16",
            "model.hidden=8", "model.steps=1", "stages.prior.epochs=1", "stages.corrections.epochs=1",
            "trainer.log_every_n_steps=1", "trainer.enable_progress_bar=false", "out_dir=run"]
    assert cli(["train", "--seed", "3", *[a for s in sets for a in ("--set", s)]]) == 0  # no model.kind: the law
    assert (tmp_path / "run" / "export" / "card.json").is_file() and (tmp_path / "run" / "run_config.json").is_file()
    tags = _scalar_tags(tmp_path / "run" / "tb_prior")
    assert any(t.startswith("lr-") for t in tags), tags
    assert "hp_metric" not in tags and "val_score" in tags, tags
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # nothing else written here (no checkpoints/)
    assert _snapshot(RELEASES) == before


@needs_shared("contactnets_cube")
def test_one_epoch_law_run_leaves_checkpoints_unchanged(tmp_path, monkeypatch):
    """A 1-epoch run of a release's packaged config (by name, from another folder) exports under its own
    folder; every file under checkpoints/ keeps its bytes and time stamp."""
    from surrogate.importers.contactnets import import_contactnets

    src = tmp_path / "src"
    src.mkdir()
    for p in sorted(SHARED.joinpath("contactnets_cube").glob("*.pt"))[:4]:
        shutil.copy(p, src / p.name)
    import_contactnets(src, tmp_path / "cube", progress=False)
    before = _snapshot(RELEASES)
    monkeypatch.chdir(tmp_path)
    sets = ["data.root=cube", "data.bench_split=null", "data.val_min=0", "data.max_train_episodes=2", "data.max_val_episodes=2",
            "stages.prior.epochs=1", "stages.corrections.epochs=0", "trainer.log_every_n_steps=1", "trainer.enable_progress_bar=false", "out_dir=run"]
    assert cli(["train", "-c", "cube_tosses", *[a for s in sets for a in ("--set", s)]]) == 0
    assert (tmp_path / "run" / "export" / "card.json").is_file()
    groups = json.loads((tmp_path / "run" / "export" / "card.json").read_text())["data"]["contact_groups"]
    assert groups["surface"]["trained"] and not groups["body"]["trained"]  # tosses: no hand, so no pad law was fitted
    tags = _scalar_tags(tmp_path / "run" / "tb_prior")
    assert any(t.startswith("lr-") for t in tags) and "hp_metric" not in tags and "val_score" in tags, tags
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cube", "run", "src"]
    assert _snapshot(RELEASES) == before


def test_train_py_is_a_thin_wrapper_runnable_from_any_folder(tmp_path, capsys, monkeypatch):
    base = ["fit", "-c", "configs/train/rig_default.yaml"]  # the repository's spelling, from another folder
    r = subprocess.run([sys.executable, str(REPO_ROOT / "train.py"), *base, "--print-config", "--seed", "2"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    cfg = yaml.safe_load(r.stdout)
    assert cfg["seed"] == 2 and cfg["data"]["root"] == str(REPO_ROOT / "datasets/generated/rig_v3")
    # an error is one line naming the key, exit status 2 (no traceback); in-process, the same entry point
    from surrogate.training.cli import script_main

    monkeypatch.chdir(tmp_path)
    assert script_main([*base, "--set", "trainer.max_epoch=1"]) == 2
    assert "field 'trainer.max_epoch'" in capsys.readouterr().err
    assert len((REPO_ROOT / "train.py").read_text().splitlines()) < 30  # only wiring: the logic is in surrogate.training


def test_law_run_killed_with_sigkill_resumes_to_the_uninterrupted_result(tiny_capture, tmp_path,  # noqa: F811
                                                                         monkeypatch):
    """A law run killed (SIGKILL) after its first epoch and resumed with ``ckpt_path=last`` continues each stage from
    its own last.ckpt and exports what the same run uninterrupted exports, bit for bit (a resumed epoch was shuffled
    as the run's next one, and the network started from other weights: the run's figures differed); a resume under
    another split is refused before any work."""
    import os
    import signal
    import time

    import lightning as L
    from safetensors.torch import load_file

    def sets(out):
        return [f"data.root={tiny_capture}", "data.val_fraction=0.25", "data.margin=0.01", "data.window_frames=16",
                "data.batch_size=2",  # several batches an epoch: a resumed epoch in another order than the run's fails
                "model.hidden=8", "model.steps=1", "stages.prior.epochs=3", "stages.corrections.epochs=2",
                "trainer.enable_progress_bar=false", f"out_dir={out}"]

    def args(out):
        return ["train", *[a for s in sets(out) for a in ("--set", s)]]

    assert cli(args(tmp_path / "whole")) == 0
    proc = subprocess.Popen([sys.executable, "-m", "surrogate.cli", *args(tmp_path / "cut")], cwd=REPO_ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    last = tmp_path / "cut" / "checkpoints" / "prior" / "last.ckpt"
    deadline = time.time() + 600
    while not last.is_file():  # Lightning writes it atomically at the end of the first validated epoch
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        assert time.time() < deadline, "no checkpoint after 600 s"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL and not (tmp_path / "cut" / "export" / "card.json").exists()
    # a resume under another split is refused before any work, naming the key; the checkpoint is untouched
    stamp = last.stat().st_mtime_ns
    from surrogate import training

    with pytest.raises(ConfigError, match=r"data\.split_seed: 0 -> 1") as e:
        training.fit(load_config(None, [*sets(tmp_path / "cut"), "ckpt_path=last", "data.split_seed=1"]))
    assert e.value.location.field == "data.split_seed" and last.stat().st_mtime_ns == stamp
    # so is a resume on other captures in the same folder (it resumed, and the card named the new captures' hash)
    stats = tiny_capture / "meta" / "stats.json"
    original = stats.read_bytes()
    try:
        stats.write_bytes(original + b" ")
        with pytest.raises(ConfigError, match="the captures in data.root: sha256"):
            training.fit(load_config(None, [*sets(tmp_path / "cut"), "ckpt_path=last"]))
    finally:
        stats.write_bytes(original)
    fits, fit = [], L.Trainer.fit

    def spy(self, *a, **kw):
        fits.append(kw.get("ckpt_path"))
        return fit(self, *a, **kw)

    monkeypatch.setattr(L.Trainer, "fit", spy)
    assert cli([*args(tmp_path / "cut"), "--set", "ckpt_path=last"]) == 0
    assert fits[0] == str(last), fits  # the prior stage resumed from its checkpoint, not from the start
    a, b = (load_file(str(tmp_path / k / "export" / "weights.safetensors")) for k in ("whole", "cut"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)  # bit for bit
    cards = [json.loads((tmp_path / k / "export" / "card.json").read_text())["training"]["metrics"]
             for k in ("whole", "cut")]
    for stage in ("prior", "corrections"):
        h0, h1 = (c[stage]["history"] for c in cards)
        assert [h["epoch"] for h in h0] == [h["epoch"] for h in h1] == list(range(3 if stage == "prior" else 2))
        assert h0 == h1
    assert cards[1]["release"] == cards[0]["release"]
    with pytest.raises(ConfigError, match="ckpt_path: last"):  # a path names no stage: refused
        load_config(None, ["ckpt_path=some/file.ckpt"])


def test_export_folders_are_checked_before_any_work(tmp_path, capsys, monkeypatch):
    """An export folder holding a user's file was found only at the export, after the whole training; one holding a
    colleague's checkpoint was replaced without --overwrite; and export.dir=<the release folder> without --release had
    replaced the shipped release. Each is now refused before the data are read (here there are none)."""
    def ckpt(path):
        path.mkdir(parents=True)
        (path / "card.json").write_text("{}")
        (path / "weights.safetensors").write_bytes(b"")
        return path

    def run(*sets, flags=()):
        args = ["train", "-c", "rig_default", "--set", f"data.root={tmp_path / 'none'}", "--set",
                f"out_dir={tmp_path / 'run'}", *[a for s in sets for a in ("--set", s)], *flags]
        code = cli(args)
        return code, capsys.readouterr().err

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "README.txt").write_text("mine")
    code, err = run(f"export.dir={notes}")
    assert code == 2 and "README.txt" in err and (notes / "README.txt").read_text() == "mine"
    theirs = ckpt(tmp_path / "colleague")
    code, err = run(f"export.network_dir={theirs}")
    assert code == 2 and "holds a checkpoint this run did not write" in err and "--overwrite" in err
    release = ckpt(tmp_path / "release")
    code, err = run(f"export.dir={release}", f"export.release_dir={release}")
    assert code == 2 and "write it with --release" in err
    import shutil

    import surrogate.paths

    releases = tmp_path / "checkpoints"  # a copy of the releases stands in for them: a regression cannot hurt them
    shutil.copytree(surrogate.paths.checkpoints_dir() / "cube_tosses", releases / "cube_tosses")
    monkeypatch.setattr(surrogate.paths, "checkpoints_dir", lambda: releases)
    shipped = releases / "cube_tosses"  # any shipped release, not only the config's release_dir
    before = (shipped / "card.json").read_bytes()
    code, err = run(f"export.network_dir={shipped}", flags=["--overwrite"])
    assert code == 2 and "is a release (checkpoints/cube_tosses): write it with --release" in err
    assert (shipped / "card.json").read_bytes() == before
    code, err = run(f"export.prior_dir={tmp_path / 'x'}", f"export.network_dir={tmp_path / 'x'}")
    assert code == 2 and "is also export.prior_dir: each export needs its own folder" in err
    code, err = run(f"export.dir={tmp_path / 'run'}")  # the run's own folder: its lock had refused after training
    assert code == 2 and "is also out_dir" in err
    code, err = run(f"export.dir={theirs}", flags=["--overwrite"])  # given: on to the data, which are missing
    assert code == 2 and "holds a checkpoint" not in err and str(tmp_path / "none") in err
    assert (theirs / "card.json").read_text() == "{}"
