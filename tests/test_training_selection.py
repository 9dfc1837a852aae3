"""How a rig training run chooses what ships: early stopping of a stage (``stages.<stage>.patience``) and the
closed-loop decision between the law and the network (the benchmark's own replays, paired), with the ablation rows
in the card."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from surrogate.errors import ConfigError
from surrogate.rig.generate import generate
from surrogate.training.config import load_config
from surrogate.training.run import fit

RELEASE = Path(__file__).resolve().parents[1] / "checkpoints" / "rig_default"


@pytest.fixture(scope="module")
def grasps(tmp_path_factory):
    out = tmp_path_factory.mktemp("rig") / "ds"
    generate(None, objects="train", episodes=4, out=out, workers=0, seed=3, progress=False, duration=2.0)
    return out


def _config(root, out, *sets):
    base = [f"data.root={root}", "data.val_fraction=0.5", "data.val_min=0", "data.window_frames=24",
            "data.window_stride=60", "model.hidden=8", "model.steps=1", "trainer.enable_progress_bar=false",
            f"out_dir={out}", f"export.dir={out / 'export'}", "stages.prior.epochs=1"]
    return load_config("rig_default", [*base, *sets])


def _no_longer_plateau_than(history: list[dict], patience: int, epochs: int) -> None:
    best, since = float("inf"), 0
    for h in history:
        since = 0 if h["score"] < best else since + 1
        best = min(best, h["score"])
        assert since <= patience, history  # early stopping ends a stage after `patience` epochs without a better score
    if len(history) < epochs:  # stopped early: only because the last `patience` epochs did not improve
        assert since == patience, history


def test_closed_loop_replays_decide_whether_the_network_ships_and_the_card_lists_the_ablation(grasps, tmp_path):
    cfg = _config(grasps, tmp_path / "run", "stages.corrections.epochs=4", "stages.corrections.patience=1",
                  "stages.corrections.lr=0.01", "stages.closed_loop.episodes=2", "stages.closed_loop.friction_scales=[1.0, 0.7]",
                  f"export.prior_dir={tmp_path / 'law'}", f"export.network_dir={tmp_path / 'net'}",
                  f"stages.closed_loop.reference={RELEASE}")
    fit(cfg)
    card = json.loads((tmp_path / "run" / "export" / "card.json").read_text())
    m = card["training"]["metrics"]
    _no_longer_plateau_than(m["corrections"]["history"], 1, 4)
    net = m["closed_loop"]["network"]
    hi, ref_hi = net["paired_minus_law"]["ci95"][1], net["paired_minus_reference"]["ci95"][1]
    # the paired rule on the replays, against the law and the reference, over at least MIN_PAIRED_UNITS units: two
    # replays never ship a network (two episodes' interval had decided it)
    assert net["kept"] == (hi < 0 and ref_hi < 0 and net["paired_minus_law"]["n"] >= 10) and not net["kept"]
    assert m["release"]["structure"] == ("law+corrections" if net["kept"] else "law")
    assert card["model"]["hparams"]["corrections"] is net["kept"]  # what is exported is what was decided
    # the ablation's checkpoints, each at its own selected pad friction: the law alone and the network
    law_card = json.loads((tmp_path / "law" / "card.json").read_text())
    net_card = json.loads((tmp_path / "net" / "card.json").read_text())
    assert law_card["model"]["hparams"]["corrections"] is False and net_card["model"]["hparams"]["corrections"] is True
    for c in (card, law_card, net_card):  # grasps: both groups trained, the pads those of the captures' hand, in SI
        groups = c["data"]["contact_groups"]
        assert groups["surface"]["trained"] and groups["body"]["trained"] and groups["body"]["units"] == "si"
        assert groups["body"]["hand"] == "parallel_jaw"
    assert law_card["model"]["hparams"]["prior_body"]["friction"] == pytest.approx(m["closed_loop"]["friction"], rel=1e-5)
    assert net_card["model"]["hparams"]["prior_body"]["friction"] == pytest.approx(net["friction"], rel=1e-5)
    # the network was trained on the law at its selected friction (before the corrections) and rescaled from there
    assert m["prior"]["law"]["body"]["friction"] == pytest.approx(m["closed_loop"]["friction"], rel=1e-5)
    assert net["friction"] == pytest.approx(m["closed_loop"]["friction"] * net["scale"], rel=1e-5)
    rows = {r["row"]: r for r in m["ablation"]}
    ref_row = rows.pop("reference checkpoints/rig_default")  # the previous release, replayed on the same episodes
    assert set(rows) == {"law", "network without history"}
    for r in rows.values():  # both rows scored on the same validation episodes, by the twin and by the replays
        assert r["val_score"] > 0 and r["replay_score"] > 0 and r["val_hand"] == "kinematic"
    release = json.loads((RELEASE / "card.json").read_text())["model"]["hparams"]["prior_body"]["friction"]
    assert ref_row["pad_friction"] == pytest.approx(release, rel=1e-6)  # at its own friction, not re-selected
    ref = m["closed_loop"]["reference"]
    assert [r["id"] for r in ref["per_episode"]] == m["closed_loop"]["episodes"]
    # which weights the path held: a release replaced by the run's own export keeps its name, not its weights
    assert ref["weights_sha256"] == json.loads((RELEASE / "card.json").read_text())["weights_sha256"]
    diffs = [r["score"] - law["score"] for r, law in zip(ref["per_episode"], m["closed_loop"]["per_episode"])]
    assert ref_row["replay_paired_minus_law"]["mean"] == pytest.approx(sum(diffs) / len(diffs))
    assert ref_row["replay_score"] == pytest.approx(sum(r["score"] for r in ref["per_episode"]) / 2)
    assert rows["network without history"]["replay_paired_minus_law"]["n"] == len(m["closed_loop"]["episodes"]) == 2
    # the law's own row is its replays' mean at its selected friction
    law_cl = [c for c in m["closed_loop"]["candidates"] if c["scale"] == m["closed_loop"]["scale"]][0]
    assert rows["law"]["replay_score"] == pytest.approx(law_cl["score"])


def test_the_corrections_are_trained_on_the_law_that_select_law_returns(grasps, tmp_path):
    from surrogate.bench.law_selection import with_pad_friction_scale
    from surrogate.learn.fit import fit_law, score_summary
    from surrogate.training.closed_loop import ablation_rows

    cfg = _config(grasps, tmp_path / "run", "stages.corrections.epochs=1")
    seen = []

    def halve_pads(law, dm):
        seen.append(law.prior("body").friction)
        return with_pad_friction_scale(law, 0.5)

    res = fit_law(cfg, out=tmp_path / "run", select_law=halve_pads)
    fitted = seen[0]
    for model in (res["prior_model"], res["network_model"]):
        assert model.prior("body").friction == pytest.approx(0.5 * fitted, rel=1e-5)
    m = res["metrics"]
    assert m["prior"]["law"]["body"]["friction"] == pytest.approx(0.5 * fitted, rel=1e-5)
    # the law's validation rows are the halved law's: the paired rule compares the network with the law it corrects
    assert m["prior"]["selected"] == score_summary(res["prior_val_rows"], cfg["loss"]["rot_weight_val"])
    assert m["corrections"]["paired_minus_prior"]["score"]["n"] == len(res["prior_val_rows"])
    assert ablation_rows(m)[0]["val_score"] == m["prior"]["selected"]["score"]  # the law the network was compared with


@pytest.fixture(scope="module")
def decision_grasps(tmp_path_factory):
    """Grasps of objects the training never saw (the training families' unseen seeds), for the decision."""
    out = tmp_path_factory.mktemp("rig") / "decision"
    generate(None, objects="val", episodes=3, out=out, workers=0, seed=5, progress=False, duration=2.0)
    return out


def test_a_decision_dataset_decides_network_or_law_by_the_benchmarks_scorer(grasps, decision_grasps, tmp_path):
    from surrogate.bench.law_selection import benchmark_scores
    from surrogate.capture import read_dataset
    from surrogate.model.checkpoint import load_checkpoint

    cfg = _config(grasps, tmp_path / "run", "stages.corrections.epochs=1", "stages.corrections.lr=0.05",
                  "stages.closed_loop.episodes=1", "stages.closed_loop.friction_scales=[1.0]",
                  "stages.closed_loop.command_delay=0", f"stages.closed_loop.decision_data={decision_grasps}",
                  "stages.closed_loop.decision_horizon_s=0.5", f"stages.closed_loop.reference={RELEASE}",
                  f"export.prior_dir={tmp_path / 'law'}", f"export.network_dir={tmp_path / 'net'}")
    fit(cfg)
    card = json.loads((tmp_path / "run" / "export" / "card.json").read_text())
    net = card["training"]["metrics"]["closed_loop"]["network"]
    dec = net["decision"]
    assert dec["n"] == 3 and dec["horizon_s"] == 0.5 and dec["sha256"]
    at, whole, ref = (dec[k] for k in ("paired_minus_law_at_horizon", "paired_minus_law_episode",
                                       "paired_minus_reference_at_horizon"))
    assert at["n"] == whole["n"] == ref["n"] == 3  # the law, the network and the previous release on the same grasps
    # three objects are too few to decide: the law ships, and the card says why
    assert net["kept"] is dec["kept"] is False and "fewer than 10" in dec["reason"]
    assert card["model"]["hparams"]["corrections"] is net["kept"]  # what ships is what the decision data decided
    # the decision's figures are the benchmark scorer's on the exported law and network
    ds = read_dataset(decision_grasps)
    for name, folder in (("law", tmp_path / "law"), ("network", tmp_path / "net"), ("reference", RELEASE)):
        rows = benchmark_scores(load_checkpoint(folder)[0], ds.episodes, ds.meta, substeps=4, margin=0.005,
                                horizon_s=0.5, progress=False)
        assert dec[f"{name}_at_horizon"] == pytest.approx(sum(r["at_horizon"] for r in rows) / len(rows), rel=1e-6)


def test_with_decision_data_the_pad_friction_is_chosen_on_its_grasps_by_the_verdict(grasps, decision_grasps,
                                                                                      tmp_path):
    """Given decision data, the closed-loop grid scores each pad friction on its grasps by ``rig-grasp``'s verdict
    (position error at the decision horizon), not on the validation episodes: each candidate's score is the
    benchmark scorer's mean for the exported law at that friction, and the lowest is chosen."""
    from surrogate.bench.law_selection import benchmark_scores, with_pad_friction_scale
    from surrogate.capture import read_dataset
    from surrogate.model.checkpoint import load_checkpoint

    cfg = _config(grasps, tmp_path / "run", "model.corrections=false", "stages.closed_loop.episodes=1",
                  "stages.closed_loop.friction_scales=[1.0, 0.4]", "stages.closed_loop.command_delay=0",
                  f"stages.closed_loop.decision_data={decision_grasps}", "stages.closed_loop.decision_horizon_s=0.5")
    fit(cfg)
    card = json.loads((tmp_path / "run" / "export" / "card.json").read_text())
    cl = card["training"]["metrics"]["closed_loop"]
    ds = read_dataset(decision_grasps)
    assert cl["episodes"] == [str(e.episode_id) for e in ds.episodes] and "decision data" in cl["chosen_on"]
    law = load_checkpoint(tmp_path / "run" / "export")[0]
    assert law.prior("body").friction == pytest.approx(cl["friction"], rel=1e-6)
    scores = []
    for c in cl["candidates"]:
        m = with_pad_friction_scale(law, c["friction"] / cl["friction"])
        rows = benchmark_scores(m, ds.episodes, ds.meta, substeps=4, margin=0.005, horizon_s=0.5, progress=False)
        scores.append(sum(r["at_horizon"] for r in rows) / len(rows))
        assert c["score"] == pytest.approx(scores[-1], rel=1e-6)
    assert len(set(scores)) == 2 and cl["friction"] == cl["candidates"][scores.index(min(scores))]["friction"]


@pytest.mark.parametrize("network_gain, reference_gain, kept", [
    (3.0, 3.0, True),    # below the law and the previous release on every object
    (0.1, 3.0, False),   # within the noise: the interval crosses zero
    (3.0, -1.0, False),  # below the law but above the previous release
])
def test_the_decision_rule_on_a_dozen_objects(decision_grasps, monkeypatch, network_gain, reference_gain, kept):
    """``network_decision``'s rule on synthetic scores of 12 objects: the network ships only below the law at the
    horizon (paired interval below zero), not above it over the episode, and below the previous release."""
    import numpy as np

    import surrogate.bench.law_selection as ls
    from surrogate.training.closed_loop import network_decision

    noise = np.random.default_rng(0).normal(0.0, 1.0, 12)
    law = [{"id": f"e{i}", "object": f"o{i}", "at_horizon": 10.0 + 3 * noise[i], "pos_pct": 12.0} for i in range(12)]
    gain = {"law": 0.0, "network": network_gain, "reference": network_gain - reference_gain}
    calls = iter(enumerate(["law", "network", "reference"]))

    def scores(model, episodes, meta, **kw):  # each model's own per-object scatter around its gain
        k, name = next(calls)
        return [{**r, "at_horizon": r["at_horizon"] - gain[name] + 0.8 * noise[(5 * i + 3 * k) % 12]}
                for i, r in enumerate(law)]

    monkeypatch.setattr(ls, "benchmark_scores", scores)
    monkeypatch.setattr("surrogate.model.checkpoint.load_checkpoint", lambda path: (None, {}))
    st = {"decision_data": str(decision_grasps), "decision_horizon_s": 1.0, "reference": "previous-release"}
    dec = network_decision(st, None, None, {"substeps": 4, "margin": 0.005, "delay_s": 0.0})
    assert dec["kept"] is kept and "reason" not in dec
    assert dec["paired_minus_law_at_horizon"]["mean"] == pytest.approx(-network_gain, abs=0.6)


def test_the_network_ships_when_the_decision_data_keep_it(grasps, decision_grasps, tmp_path, monkeypatch):
    """The decision, not the validation episodes' rule, says what ships (a decision forced to keep the network)."""
    import surrogate.training.closed_loop as closed_loop

    decide = closed_loop.network_decision
    monkeypatch.setattr(closed_loop, "network_decision", lambda *a, **k: {**decide(*a, **k), "kept": True})
    cfg = _config(grasps, tmp_path / "run", "stages.corrections.epochs=1", "stages.closed_loop.episodes=1",
                  "stages.closed_loop.friction_scales=[1.0]", "stages.closed_loop.command_delay=0",
                  f"stages.closed_loop.decision_data={decision_grasps}", f"stages.closed_loop.reference={RELEASE}")
    fit(cfg)
    card = json.loads((tmp_path / "run" / "export" / "card.json").read_text())
    m = card["training"]["metrics"]
    # the reference's veto on the validation episodes does not apply: the decision data decided (against it too)
    assert "paired_minus_reference" in m["closed_loop"]["network"]
    assert m["closed_loop"]["network"]["kept"] and card["model"]["hparams"]["corrections"] is True
    assert m["release"]["structure"] == "law+corrections" and "decision data" in m["release"]["kept_by"]


def test_decision_data_that_decides_nothing_says_so(grasps, decision_grasps, tmp_path):
    cfg = _config(grasps, tmp_path / "run", "stages.corrections.epochs=0", "stages.closed_loop.episodes=0",
                  f"stages.closed_loop.decision_data={decision_grasps}")
    fit(cfg)
    card = json.loads((tmp_path / "run" / "export" / "card.json").read_text())
    assert "no closed-loop stage" in card["training"]["metrics"]["closed_loop"]["decision_unused"]


def test_a_closed_loop_reference_that_is_not_a_checkpoint_is_refused_before_training(grasps, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="stages.closed_loop.reference"):
        _config(grasps, tmp_path / "run", f"stages.closed_loop.reference={tmp_path / 'empty'}")
    with pytest.raises(ConfigError, match="stages.closed_loop.refit_episodes"):  # the refit was removed: an unknown key
        _config(grasps, tmp_path / "run", "stages.closed_loop.refit_episodes=1")
    with pytest.raises(ConfigError, match="stages.closed_loop.command_delay"):
        _config(grasps, tmp_path / "run", "stages.closed_loop.command_delay=soon")
    with pytest.raises(ConfigError, match="stages.closed_loop.decision_horizon_s"):
        _config(grasps, tmp_path / "run", "stages.closed_loop.decision_horizon_s=0")
    # the decision data as training starts, before any work (a recipe's config loads before its data is made)
    with pytest.raises(ConfigError, match="is not a capture dataset") as e:
        fit(_config(grasps, tmp_path / "run", f"stages.closed_loop.decision_data={tmp_path / 'empty'}"))
    assert e.value.location.field == "stages.closed_loop.decision_data"
    with pytest.raises(ConfigError, match=r"not found; create it with:\n  surrogate rig generate --objects val_wide"):
        fit(_config(grasps, tmp_path / "run", f"stages.closed_loop.decision_data={tmp_path / 'rig_val_wide'}"))
    with pytest.raises(ConfigError, match="objects are in the training data"):  # the training's own grasps
        fit(_config(grasps, tmp_path / "run", f"stages.closed_loop.decision_data={grasps}"))
    assert not (tmp_path / "run").exists()


def test_early_stopping_patience_is_checked(grasps, tmp_path):
    with pytest.raises(ConfigError, match="stages.prior.patience"):  # when the config is loaded (learn.fit's own rule)
        _config(grasps, tmp_path / "run", "stages.prior.patience=0", "stages.corrections.epochs=0")
    cfg = _config(grasps, tmp_path / "run", "stages.corrections.epochs=0")
    cfg["stages"]["prior"]["patience"] = 0  # past the config check (a config built in Python): the fit refuses it too
    with pytest.raises(ConfigError, match="stages.prior.patience"):
        fit(cfg)
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_prior_stage_stops_early_after_patience_epochs_without_improvement(grasps, tmp_path):
    # a learning rate this large makes the whole-episode score wander: the stage must stop on its plateau
    cfg = _config(grasps, tmp_path / "run", "stages.prior.epochs=6", "stages.prior.patience=1", "stages.prior.lr=0.5",
                  "stages.corrections.epochs=0")
    fit(cfg)
    card = json.loads((tmp_path / "run" / "export" / "card.json").read_text())
    history = card["training"]["metrics"]["prior"]["history"]
    _no_longer_plateau_than(history, 1, 6)
    assert len(history) < 6  # it did stop early here (seeded and deterministic: 4 epochs)
    # a resume continues from the last validated epoch, not from the best one (it would run the others again)
    best = min(range(len(history)), key=lambda i: history[i]["score"])
    assert best < len(history) - 1  # the last epoch did not improve: the case Lightning's save_last got wrong
    last = torch.load(tmp_path / "run" / "checkpoints" / "prior" / "last.ckpt", map_location="cpu", weights_only=True)
    assert last["epoch"] == len(history) - 1


def test_closed_loop_replays_delay_the_commands_by_the_hands_identified_latency(grasps, tmp_path):
    cfg = _config(grasps, tmp_path / "run", "stages.corrections.epochs=0", "stages.closed_loop.episodes=2",
                  "stages.closed_loop.friction_scales=[1.0]")
    fit(cfg)
    card = json.loads((tmp_path / "run" / "export" / "card.json").read_text())
    cl = card["training"]["metrics"]["closed_loop"]
    # its replays (the friction selection's) delay the commands by the hand's identified latency:
    # the shipped law replayed with that latency scores what the stage recorded, and not what it scores at once
    delay = cl["command_delay"]
    assert delay["how"].startswith("identified") and 0.0 < delay["delay_s"] <= 0.04
    assert set(map(str, delay["episode_ids"])) <= set(map(str, card["data"]["train_episodes"]))
    from surrogate.bench.law_selection import replay_scores
    from surrogate.capture import read_dataset
    from surrogate.model.checkpoint import load_checkpoint

    ds = read_dataset(grasps)
    ep = next(e for e in ds.episodes if str(e.episode_id) == cl["episodes"][0])
    shipped_law, _ = load_checkpoint(tmp_path / "run" / "export")
    kw = dict(substeps=4, margin=float(card["data"]["margin_m"]), rot_weight=0.25, progress=False)
    recorded = cl["per_episode"][0]["score"]
    late = replay_scores(shipped_law, [ep], ds.meta, **kw, delay_s=delay["delay_s"])[0]["score"]
    assert late == pytest.approx(recorded)
    assert replay_scores(shipped_law, [ep], ds.meta, **kw)[0]["score"] != pytest.approx(recorded)
    assert card["training"]["metrics"]["ablation"][0]["replay_score"] == pytest.approx(
        sum(r["score"] for r in cl["per_episode"]) / len(cl["per_episode"]))
