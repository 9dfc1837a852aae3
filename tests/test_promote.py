"""``surrogate release``: a candidate becomes a release only by the paired rule on a suite's ledger, into a new folder,
with the decision on its card (the end-to-end refusal on a real suite run is in test_rig_grasp.py)."""

from __future__ import annotations

import json
import shutil

import pytest

from surrogate.bench.promote import decide, promote
from surrogate.cli import main
from surrogate.errors import ConfigError, OutputError
from surrogate.model.checkpoint import load_checkpoint
from surrogate.paths import REPO_ROOT

RELEASE = REPO_ROOT / "checkpoints" / "rig_default"
OTHER = REPO_ROOT / "checkpoints" / "cube_tosses"


def _paired(at, at_ci, whole, units=40):
    return {"pos_pct_at_horizon": {"n": 40, "mean": at, "ci95": at_ci, "units": units, "by": "object"},
            "pos_pct_size": {"n": 40, "mean": whole, "ci95": [whole - 1.0, whole + 1.0], "by": "object"},
            "pad_force_weights": {"n": 40, "mean": -0.1, "ci95": [-0.2, -0.01], "by": "object"}, "horizon_s": 1.0}


def _ledger(tmp_path, candidate, *, at=-0.7, at_ci=(-1.3, -0.2), whole=-0.4, units=40):
    """A suite's ledger (as ``run_suite`` writes it) that scored ``candidate`` as row ``cand`` beside the release."""
    sha = json.loads((candidate / "card.json").read_text())["weights_sha256"]
    release_sha = json.loads((RELEASE / "card.json").read_text())["weights_sha256"]
    overall = {"episodes": 40, "pos_pct_size": {"mean": 9.0}, "pad_force_weights": {"mean": 0.6},
               "horizons": {"pos_pct_size": {"1": {"mean": 8.0}}}}
    ledger = {"suite_name": "rig-grasp-small", "created": "2026-12-05T10:00:00+00:00", "config_hash": "abc",
              "data": {"test_data": {"meshes": {"path": "somewhere", "episodes": 40}}},
              "models": {"analytic_identified": {"overall": overall},
                         "surrogate": {"checkpoint": "checkpoints/rig_default", "card": {"weights_sha256": release_sha},
                                       "overall": overall},
                         "cand": {"checkpoint": str(candidate), "card": {"weights_sha256": sha}, "overall": overall,
                                  "paired_minus_surrogate": _paired(at, list(at_ci), whole, units)}}}
    path = tmp_path / "ledger.json"
    path.write_text(json.dumps(ledger))
    return path


@pytest.fixture
def candidate(tmp_path):
    cand = tmp_path / "run" / "network"
    shutil.copytree(RELEASE, cand)  # a trained checkpoint: the weights the release has
    return cand


def test_a_candidate_below_the_release_is_released_with_the_decision_on_its_card(tmp_path, candidate):
    ledger = _ledger(tmp_path, candidate)
    out = tmp_path / "release"
    block = promote(candidate, ledger, row="cand", out=out)
    model, card = load_checkpoint(out)  # loads, its hash checked
    assert (out / "weights.safetensors").read_bytes() == (candidate / "weights.safetensors").read_bytes()
    assert card["release"] == block and block["row"] == "cand" and block["suite"] == "rig-grasp-small"
    assert block["paired_minus_release"]["pos_pct_at_horizon"]["ci95"] == [-1.3, -0.2]
    assert block["rows"]["analytic_identified"]["pos_pct_at_horizon"] == 8.0 and block["rows"]["cand"]["episodes"] == 40
    assert block["replaces"]["checkpoint"] == "checkpoints/rig_default" and "interval" in block["rule"]
    assert {k: v for k, v in card.items() if k != "release"} == json.loads((candidate / "card.json").read_text())
    with pytest.raises(OutputError, match="not empty"):  # never over a folder that holds something, a release above all
        promote(candidate, ledger, row="cand", out=out)


@pytest.mark.parametrize("kw, why", [({"at": -0.6, "at_ci": (-1.4, +0.1)}, r"-0.60 \[-1.40, \+0.10\] does not lie below"),
                                     ({"at": +0.5, "at_ci": (+0.1, +0.9)}, "does not lie below zero"),
                                     ({"whole": +1.5}, r"over the episode \+1.50 \[\+0.50, \+2.50\] lies above zero"),
                                     ({"units": 3}, "3 objects, fewer than 10: too few to decide")])
def test_a_tie_or_a_loss_is_refused_and_nothing_is_written(tmp_path, candidate, kw, why):
    ledger = _ledger(tmp_path, candidate, **kw)
    out = tmp_path / "release"
    with pytest.raises(ConfigError, match=f"not released: .*{why}"):
        promote(candidate, ledger, row="cand", out=out)
    assert not out.exists()
    assert main(["release", str(candidate), "--ledger", str(ledger), "--row", "cand", "--out", str(out)]) == 2
    assert not out.exists()


def test_the_row_must_be_the_candidate_and_must_be_paired(tmp_path, candidate):
    ledger = _ledger(tmp_path, candidate)
    with pytest.raises(ConfigError, match="scored another model"):  # the ledger's row holds other weights
        promote(OTHER, ledger, row="cand", out=tmp_path / "r1")
    with pytest.raises(ConfigError, match=r"no learned row 'nope'.*\['cand'\]"):
        promote(candidate, ledger, row="nope", out=tmp_path / "r2")
    data = json.loads(ledger.read_text())
    del data["models"]["cand"]["paired_minus_surrogate"]
    with pytest.raises(ConfigError, match="no paired difference"):
        decide(data, "cand")
    assert not (tmp_path / "r1").exists() and not (tmp_path / "r2").exists()


def test_the_cli_prints_the_intervals_it_released_on(tmp_path, candidate, capsys):
    ledger = _ledger(tmp_path, candidate)
    out = tmp_path / "release"
    assert main(["release", str(candidate), "--ledger", str(ledger), "--row", "cand", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "position % of size at 1.0 s: -0.70 [-1.30, -0.20] against the release" in text and str(out) in text


def test_one_object_grasped_many_times_is_too_few_objects(tmp_path, candidate):
    """``paired_difference`` leaves out its units where a single object holds every episode: the objects are counted
    from the row's own test episodes of the suite's target sets."""
    ledger = json.loads(_ledger(tmp_path, candidate).read_text())
    ledger["split"] = {"target_sets": ["meshes"]}
    ledger["models"]["cand"]["paired_minus_surrogate"]["pos_pct_at_horizon"] = {"n": 12, "mean": -0.7, "ci95": [-1.3, -0.2]}
    ledger["models"]["cand"]["per_episode"] = [{"id": f"meshes/{i}", "object": "mug", "set": "meshes",
                                                "horizon_pos_pct_size": {"1": 5.0}} for i in range(12)]
    ledger["models"]["cand"]["per_episode"].append({"id": "train/0", "object": "box", "set": "train",
                                                    "horizon_pos_pct_size": {"1": 5.0}})  # not a target set
    assert decide(ledger, "cand")["reasons"] == ["1 objects, fewer than 10: too few to decide"]


def test_every_seed_row_of_the_recipe_must_be_kept_too(tmp_path, candidate):
    data = json.loads(_ledger(tmp_path, candidate).read_text())
    cand = data["models"]["cand"]
    other = {**cand, "card": {"weights_sha256": "another seed's"}}
    data["models"]["tie"] = {**other, "paired_minus_surrogate": _paired(-0.4, [-1.0, +0.2], -0.2)}
    data["models"]["gain"] = {**other, "paired_minus_surrogate": _paired(-0.3, [-0.6, -0.01], -0.3)}
    data["models"]["same"] = {**cand, "paired_minus_surrogate": _paired(-0.3, [-0.6, -0.01], -0.3)}
    ledger = tmp_path / "seeds.json"
    ledger.write_text(json.dumps(data))
    out = tmp_path / "release"
    with pytest.raises(ConfigError, match=r"another seed of its recipe, row 'tie', is not kept.*-0.40 \[-1.00, \+0.20\]"):
        promote(candidate, ledger, row="cand", out=out, seed_rows=["gain", "tie"])
    assert not out.exists()
    with pytest.raises(ConfigError, match="the candidate's own row"):
        promote(candidate, ledger, row="cand", out=out, seed_rows=["cand"])
    with pytest.raises(ConfigError, match="'same' scored the candidate's own weights"):
        promote(candidate, ledger, row="cand", out=out, seed_rows=["same"])
    assert main(["release", str(candidate), "--ledger", str(ledger), "--row", "cand", "--seed-row", "gain", "--out",
                 str(out)]) == 0
    assert load_checkpoint(out)[1]["release"]["seed_rows"]["gain"]["pos_pct_at_horizon"]["ci95"] == [-0.6, -0.01]


def test_a_seed_row_of_another_recipe_is_refused(tmp_path, candidate):
    data = json.loads(_ledger(tmp_path, candidate).read_text())
    card = json.loads((candidate / "card.json").read_text())
    other = {**card["model"], "hparams": {**card["model"]["hparams"], "hidden": 64}}
    data["models"]["cand"]["card"]["model"] = card["model"]
    data["models"]["wide"] = {**data["models"]["cand"], "card": {"weights_sha256": "x", "model": other}}
    ledger = tmp_path / "seeds.json"
    ledger.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="'wide' is not a seed of the candidate's recipe"):
        promote(candidate, ledger, row="cand", out=tmp_path / "release", seed_rows=["wide"])


@pytest.mark.parametrize("ledger", [[1, 2], {"models": [1]}, {"models": {"cand": 1}}])
def test_a_file_that_is_not_a_ledger_is_refused_naming_what_it_holds(tmp_path, ledger):
    from surrogate.bench.promote import decide
    from surrogate.errors import ConfigError

    with pytest.raises(ConfigError, match="not a benchmark ledger"):
        decide(ledger, "cand", file=tmp_path / "ledger.json")
