"""Issue #29 A and B: absurd physics is refused wherever a law enters, and a singular solve falls back.

Each test is named after the behaviour it guards; the defect it reproduces is in its docstring.
"""

from __future__ import annotations

import hashlib
import json
import math
import warnings

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from surrogate.errors import ConfigError
from surrogate.model.checkpoint import CheckpointError, export_checkpoint, load_checkpoint, model_sha256
from surrogate.model.contact_law import ContactLawGNN
from surrogate.model.law_ranges import LawRangeError, clamp_friction, range_problems


def _tamper(ckpt, *, weights: dict | None = None, prior: dict | None = None):
    """Edit a checkpoint's law as a careless script would, recomputing the card's hashes so that only the
    law's values are wrong: ``weights`` {parameter: value of both groups} (log-parameters set to log(value), the
    card's priors updated to match), ``prior`` {card prior key: value} (both groups)."""
    w, c = ckpt / "weights.safetensors", ckpt / "card.json"
    card = json.loads(c.read_text())
    hp = card["model"]["hparams"]
    if weights:
        state = load_file(str(w))
        for name, v in weights.items():
            state[f"log_{name}"] = torch.full((2,), math.log(v))
        save_file(state, str(w))
    for name, v in {**(weights or {}), **(prior or {})}.items():
        hp["prior"][name] = hp["prior_body"][name] = v
    card["weights_sha256"] = hashlib.sha256(w.read_bytes()).hexdigest()
    card["model_sha256"] = model_sha256(card)
    c.write_text(json.dumps(card))


@pytest.mark.parametrize("weights, prior, key", [
    ({"friction": 1e6}, None, "prior.friction"),
    ({"stiffness": 1e-35}, None, "prior.stiffness"),
    ({"damping": 1e26}, None, "prior.damping"),
    (None, {"exponent": 60.0}, "prior.exponent"),
    (None, {"slip_eps": 1e9}, "prior.slip_eps"),
])
def test_a_corrupt_but_hashed_checkpoint_with_an_absurd_law_is_refused_naming_the_parameter(tmp_path, weights, prior,
                                                                                             key):
    """Defect A: with the hash recomputed, mu = 1e6, k = 1e-35, damping 1e26, exponent 60, slip_eps 1e9 all loaded."""
    ckpt = export_checkpoint(ContactLawGNN(corrections=False), tmp_path / "ckpt")
    load_checkpoint(ckpt)  # as exported: loads
    _tamper(ckpt, weights=weights, prior=prior)
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(ckpt)
    msg = str(e.value)
    value = next(iter((weights or prior).values()))
    assert str(ckpt / "card.json") in msg and key in msg and f"{value:.6g}" in msg and "physical range [" in msg, msg


def test_a_card_prior_that_disagrees_with_the_weights_is_refused(tmp_path):
    """Defect A: a card saying mu = 1e6 over weights holding 0.48 loaded (the card describes another law)."""
    ckpt = export_checkpoint(ContactLawGNN(corrections=False, prior={"friction": 0.48}), tmp_path / "ckpt")
    card = json.loads((ckpt / "card.json").read_text())
    card["model"]["hparams"]["prior"]["friction"] = 1e6
    (ckpt / "card.json").write_text(json.dumps(card))
    with pytest.raises(CheckpointError, match=r"model\.hparams\.prior disagrees with the weights \(friction: card 1e\+06, "
                                              r"weights 0\.48\)"):
        load_checkpoint(ckpt)


def test_the_released_checkpoints_are_inside_the_ranges():
    """The ranges are not so tight that the project's own releases fall outside them."""
    from surrogate.paths import checkpoints_dir

    for card in sorted(checkpoints_dir().glob("*/card.json")):
        load_checkpoint(card.parent)


def test_an_absurd_law_is_never_exported(tmp_path):
    """Defect A: training exported priors of friction 1e6, exponent 40, slip_eps 1e6 (no check on export)."""
    for prior, key in (({"friction": 1e6}, "prior.friction"), ({"exponent": 40.0}, "prior.exponent"),
                       ({"slip_eps": 1e6}, "prior.slip_eps")):
        with pytest.raises(LawRangeError, match=key.replace(".", r"\.")) as e:
            export_checkpoint(ContactLawGNN(corrections=False, prior=prior), tmp_path / "x")
        assert e.value.key == key
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("override, key", [
    ("model.prior.friction=1e6", "model.prior.friction"), ("model.prior.exponent=40", "model.prior.exponent"),
    ("model.prior_body.slip_eps=1e6", "model.prior_body.slip_eps"), ("model.prior.stiffness=1e-35", "model.prior.stiffness"),
])
def test_training_refuses_an_absurd_prior_before_any_work_naming_the_key(override, key):
    """Defect A: ``surrogate train --set model.prior.friction=1e6`` (or exponent 40, slip_eps 1e6) trained and exported."""
    from surrogate.training.config import load_config

    with pytest.raises(ConfigError) as e:
        load_config("rig_default", [override])
    assert e.value.location.field == key and "physical range" in str(e.value), str(e.value)


def test_the_constant_law_friction_is_clamped_at_mu_max():
    """Defect A: the constant law was not clamped to ``mu_max`` (the network's corrections are)."""
    model = ContactLawGNN(corrections=False, prior={"friction": 3.0}, mu_max=2.0)
    assert range_problems(model.prior().to_json(), mu_max=model.mu_max)  # 3 > mu_max: out of range
    assert clamp_friction(model) is True
    assert model.prior("surface").friction == pytest.approx(2.0) and model.prior("body").friction == pytest.approx(2.0)
    assert not range_problems(model.prior().to_json(), mu_max=model.mu_max)
    assert clamp_friction(model) is False  # already within: unchanged


def test_a_singular_law_solve_falls_back_to_analytic_for_that_env_only():
    """Defect B: damping 1e26 made the stepper die with numpy's LinAlgError (the force guard never saw it). A stiffness
    of 1e300 overflows the law's terms, so that the system is not finite: the compiled step (``sim.law_kernel``)
    gives that environment NaN forces, as the numpy path does after its singular solve; either way that environment
    falls back alone, or the step raises the stepper's own error (``tests/test_law_kernel.py`` checks the compiled
    step's NaN directly)."""
    from surrogate.objects import make_object
    from surrogate.scenes import build_scene
    from surrogate.sim import Stepper, step

    s = build_scene(make_object("box", 0), hand="parallel_jaw", setting="table")
    model = ContactLawGNN(corrections=False, prior={"stiffness": 1e300}).eval()  # built directly: no range check
    st = Stepper(s, model, on_bad_force="fallback")
    ds = [s.make_data(), s.make_data()]
    ds[1].qpos[s.object_qpos_adr + 2] += 0.5  # env 1 in the air: no contact, its own steps untouched
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        step(s.model, ds, st, nstep=20)
    stats = st.stats()
    assert stats["fallbacks"] >= 1 and set(stats["fallback_envs"]) == {0}, stats
    assert any("env 0" in str(x.message) and "falling back" in str(x.message) for x in w)
    assert all(np.isfinite(d.qpos).all() for d in ds) and ds[1].time == pytest.approx(ds[0].time)
    with pytest.raises(Exception) as e:  # on_bad_force="raise": the step error, not numpy's
        step(s.model, [s.make_data()], Stepper(s, model, on_bad_force="raise"), nstep=40)
    assert type(e.value).__name__ == "SurrogateStepError", repr(e.value)


def test_a_card_edited_after_the_export_is_refused(tmp_path):
    """``weights_sha256`` covers the weights only: an edited ``model.hparams.bounds`` (a valid value, another model
    than the one trained) loaded silently. The card's ``model_sha256`` covers what builds and feeds the model."""
    ckpt = export_checkpoint(ContactLawGNN(), tmp_path / "ckpt")
    load_checkpoint(ckpt)
    card = json.loads((ckpt / "card.json").read_text())
    card["model"]["hparams"]["bounds"] = [5.0, 5.0, 5.0]
    (ckpt / "card.json").write_text(json.dumps(card))
    with pytest.raises(CheckpointError, match="differs from the card's model_sha256"):
        load_checkpoint(ckpt)
