"""``surrogate train``: model keys that are each in range but that the law's constructor refuses together (priors in
other units, exponents or slip regularizations; a static friction ratio without ``model.stribeck``; the friction
ellipse without a torsional friction) are refused when the config is loaded, before any data is read, naming both
keys, their values and what to set instead; the combinations it accepts still load."""

from __future__ import annotations

import inspect
import re

import pytest
import torch

from surrogate.cli import main as cli
from surrogate.errors import ConfigError
from surrogate.model.contact_law import ContactLawGNN
from surrogate.training import combinations
from surrogate.training.combinations import _KNOWN, explain
from surrogate.training.config import load_config

SET = "command line (--set)"


def _builds(cfg: dict) -> bool:
    """Whether the model's own constructor takes the loaded config's model (the fit builds it with these keys)."""
    try:
        ContactLawGNN(**{k: v for k, v in cfg["model"].items() if k != "kind"}, hidden=2, steps=1, mlp_layers=1)
    except ValueError:
        return False
    return True


REFUSED = [
    # (config, overrides, the key named, phrases the message holds: both keys, their values, what to set instead)
    ("cube_tosses", ["model.stribeck=false"], "model.stribeck",
     ["model.stribeck = false", "model.prior.static_friction = 0.4", "set model.stribeck=true",
      "model.prior.static_friction=1"]),
    ("rig_default", ["model.prior.static_friction=0.5"], "model.prior.static_friction",
     ["model.stribeck = false (the default)", "model.prior.static_friction = 0.5", "set model.stribeck=true"]),
    ("rig_default", ["model.prior_body.static_friction=2"], "model.prior_body.static_friction",
     ["model.stribeck = false (the default)", "model.prior_body.static_friction = 2", "prior_body.static_friction=1"]),
    ("rig_default", ["model.friction_ellipse=true"], "model.friction_ellipse",
     ["model.friction_ellipse = true", "model.prior_body.torsional_friction = 0 (the default)",
      "set model.prior_body.torsional_friction above 0", "model.friction_ellipse=false"]),
    (None, ["model.friction_ellipse=true"], "model.friction_ellipse",
     ["model.prior_body.torsional_friction = 0 (no model.prior_body: the prior's)"]),
    # the preset's priors are in si units: a body prior in weight units (which replaces the preset's whole)
    ("rig_default", ["model.prior_body.units=weight"], "model.prior_body.units",
     ["model.prior.units = si", "model.prior_body.units = weight", "model.prior_body.slip_eps = 0.001 (the default)",
      "set model.prior_body.units=si, model.prior_body.slip_eps=0.0001", "or model.prior.units=weight"]),
    ("rig_default", ["model.prior.exponent=1.2"], "model.prior.exponent",
     ["model.prior.exponent = 1.2", "model.prior_body.exponent = 1.5", "set model.prior_body.exponent=1.2"]),
    (None, ["model.prior_body.slip_eps=0.01"], "model.prior_body.slip_eps",
     ["model.prior.slip_eps = 0.001 (the default)", "model.prior_body.slip_eps = 0.01"]),
    (None, ["model.prior_body.units=si", "model.prior_body.stiffness=100000.0"], "model.prior_body.units",
     ["model.prior.units = weight (the default)", "model.prior_body.units = si"]),
]


@pytest.mark.parametrize("config, overrides, key, phrases", REFUSED)
def test_keys_the_constructor_refuses_together_are_refused_naming_both(config, overrides, key, phrases, monkeypatch):
    with pytest.raises(ConfigError) as e:
        load_config(config, overrides)
    msg = str(e.value)
    assert e.value.location.field == key and e.value.location.file == SET, msg
    assert all(p in msg for p in phrases), msg
    assert "\n" not in msg
    # without the check the config loads, and the model's own constructor refuses it: what had failed once the
    # run's data had loaded
    monkeypatch.setattr(combinations, "check_model_combination", lambda *a, **k: None)
    assert not _builds(load_config(config, overrides))


@pytest.mark.parametrize("model", [
    {"stribeck": False, "prior": {"static_friction": 0.4}},
    {"prior_body": {"static_friction": 0.4}},
    {"friction_ellipse": True, "prior": {"torsional_friction": 0.0}},
    {"prior": {"units": "si", "stiffness": 1e5}, "prior_body": {"units": "weight"}},
    {"prior": {"exponent": 1.2}, "prior_body": {"exponent": 1.5}},
])
def test_the_refused_models_are_the_ones_the_constructor_refuses(model):
    """The config check's verdict is the constructor's: each refused model fails to build, and is refused by name."""
    with pytest.raises(ValueError):
        ContactLawGNN(**model)
    with pytest.raises(ConfigError) as e:
        load_config(None, [f"model={model!r}".replace("True", "true").replace("False", "false")])
    assert e.value.location.field != "model", str(e.value)  # worded: a key of the combination, not the section


ACCEPTED = [
    ("cube_tosses", []),  # static friction 0.4 with the preset's stribeck
    ("rig_default", []),
    ("rig_default", ["model.friction_ellipse=true", "model.prior_body.torsional_friction=0.005"]),
    ("rig_default", ["model.prior.static_friction=0.5", "model.stribeck=true"]),
    (None, ["model.friction_ellipse=true", "model.prior.torsional_friction=0.1"]),
    (None, ["model.prior_body.units=weight", "model.prior_body.friction=0.5"]),
    (None, ["model.prior.exponent=1.2", "model.prior_body.exponent=1.2"]),
]


@pytest.mark.parametrize("config, overrides", ACCEPTED)
def test_combinations_the_constructor_takes_still_load(config, overrides):
    cfg = load_config(config, overrides)
    assert _builds(cfg)


def test_the_refusal_is_before_the_data_is_looked_at(tmp_path, capsys):
    """From the command line: exit 2 with the combination's one line, where the missing dataset would otherwise be
    the first error (and a dataset that is there is not read: nothing under out_dir is made)."""
    out = tmp_path / "run"
    args = ["train", "-c", "cube_tosses", "--set", f"data.root={tmp_path / 'none'}", "--set", f"out_dir={out}"]
    assert cli([*args, "--set", "model.stribeck=false"]) == 2
    err = capsys.readouterr().err
    assert "field 'model.stribeck'" in err and "capture dataset" not in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
    assert cli(args) == 2  # the same config but the combination: on to the (missing) data
    assert "capture dataset" in capsys.readouterr().err


def test_a_config_file_is_named_where_it_holds_both_keys(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("preset: tosses\ndata: {root: caps}\nmodel: {stribeck: false}\n")
    with pytest.raises(ConfigError, match="model.stribeck = false with model.prior.static_friction") as e:
        load_config(path, ["model.prior.static_friction=0.4"])  # one of the two on the command line: named there
    assert e.value.location.file == SET and e.value.location.field == "model.prior.static_friction"
    path.write_text("data: {root: caps}\nmodel: {stribeck: false, prior: {static_friction: 0.4}}\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert e.value.location.file == path and e.value.location.field == "model.stribeck", str(e.value)


def test_the_check_draws_nothing_from_the_run_generator():
    """The check builds a (tiny) network: its initial weights must not move torch's generator, which seeds the run."""
    torch.manual_seed(0)
    a = torch.rand(3)
    torch.manual_seed(0)
    load_config("rig_default", ["model.friction_ellipse=true", "model.prior_body.torsional_friction=0.005"])
    assert torch.equal(torch.rand(3), a)


def test_every_combination_the_constructor_refuses_is_worded():
    """Each ``raise ValueError`` of the constructor is a combination worded here, or a single key's refusal checked
    before (members: ``setup.model_ranges``); a new rule of the constructor is refused with its own words anyway."""
    src = inspect.getsource(ContactLawGNN.__init__)
    messages = re.findall(r'raise ValueError\(f?"([^"]+)"', src)
    assert len(messages) == 4, messages
    worded = [m for m in messages if any(phrase in m for phrase, _ in _KNOWN)]
    assert len(worded) == len(_KNOWN) == 3 and all(any(p in m for m in messages) for p, _ in _KNOWN), messages
    assert [m for m in messages if m not in worded] == ["members must be 1, or 2-16 with corrections, got {members!r}"]
    keys, text = explain("a rule added later", {"hidden": 8})
    assert keys == ["model"] and text.endswith("a rule added later")
