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
