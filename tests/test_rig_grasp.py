"""The rig-grasp and policy suites: outcome labels, verdicts, attribution and small runs end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest

from surrogate.bench.grasp_outcome import agreement, counts, pooled_gap, predicted_labels, rates
from surrogate.bench.ledger import horizon_ratio_verdict, validate_ledger
from surrogate.bench.replay import delayed_control, prepare_replay
from surrogate.bench.report_tables import confusion_lines
from surrogate.bench.rig_scoring import recorded_qpos
from surrogate.capture import read_dataset
from surrogate.rig.generate import generate
from surrogate.rig.generate import load_config as load_rig

CKPT = "checkpoints/rig_default"


@pytest.fixture(scope="module")
def rig_set(tmp_path_factory):
    out = tmp_path_factory.mktemp("rig") / "ds"
    generate(None, objects="heldout", episodes=3, out=out, workers=0, seed=5, progress=False, duration=2.5)
    return read_dataset(out)


def _thr():
    s = load_rig(None)["script"]
    return {k: float(s[k]) for k in ("lift_threshold", "slip_threshold", "slip_angle_threshold")}


def test_labels_of_the_recorded_trajectory_match_the_rigs(rig_set):
    # The rig labels its exact trajectory; the same function on the measured one (noisy poses,
    # measured joints) must agree on lifted/dropped: predictions are labelled like recordings.
    for ep in rig_set.episodes:
        r = prepare_replay(ep, rig_set.meta)
        lab = predicted_labels(r.scene, recorded_qpos(r), ep, _thr())
        assert lab["lifted"] == ep.labels["lifted"], ep.episode_id
        assert lab["dropped"] == ep.labels["dropped"], ep.episode_id


def test_outcome_counts_pool_over_objects_into_a_gap_with_an_interval():
    L = lambda lifted, slipped=False, dropped=False: {"lifted": lifted, "slipped": slipped, "dropped": dropped}  # noqa: E731
    c = counts([L(True), L(True, slipped=True), L(True, dropped=True), L(False), None])
    assert c == {"episodes": 4, "successes": 2, "lifted": 3, "slipped": 1}
    per_obj = {"a": {"sim": counts([L(True), L(True)]), "rig": counts([L(True, slipped=True), L(True)])},
               "b": {"sim": counts([L(True)]), "rig": counts([L(True, slipped=True)])}}
    g = pooled_gap(per_obj, "slip", seed=0, n_boot=200)
    assert g["gap"] == pytest.approx(0 - 2 / 3) and g["ci95"][0] <= g["gap"] <= g["ci95"][1]


def test_rates_and_agreement_hand_computed():
    L = lambda lifted, slipped=False, dropped=False: {"lifted": lifted, "slipped": slipped, "dropped": dropped}  # noqa: E731
    pred = [L(True), L(True, slipped=True), L(False), None]
    true = [L(True), L(True), L(True), L(True)]
    r = rates(pred)
    assert r["episodes"] == 3 and r["success_rate"] == pytest.approx(2 / 3) and r["slip_rate"] == pytest.approx(0.5)
    a = agreement(pred, true)
    assert a["episodes"] == 3 and a["success"] == pytest.approx(2 / 3) and a["slip"] == pytest.approx(2 / 3)
    # which way: the recorded holds were predicted held, slipped and not lifted; nothing else was recorded
    assert a["confusion"]["hold"] == {"no_lift": 1, "hold": 1, "slip": 1, "drop": 0}
    assert sum(sum(a["confusion"][t].values()) for t in ("no_lift", "slip", "drop")) == 0
    b = agreement([L(True, slipped=True, dropped=True), L(True)], [L(True, slipped=True), L(True, dropped=True)])
    assert b["confusion"]["slip"]["drop"] == 1 and b["confusion"]["drop"]["hold"] == 1
    lines = confusion_lines([("m", {"outcome_agreement": b}), ("old", {"outcome_agreement": {"slip": 1.0}}),
                             ("none", {"outcome_agreement": agreement([None], [None])})])
    # (recorded holds, slips, drops, not lifted: predicted hold / slip / drop / not lifted); old ledgers, no episodes: no row
    assert lines[-2:] == ["|---|---|---|---|---|", "| m | 0 / 0 / 0 / 0 of 0 | 0 / 0 / 1 / 0 of 1 | 1 / 0 / 0 / 0 of 1 | "
                                                    "0 / 0 / 0 / 0 of 0 |"]
    assert confusion_lines([("x", {"outcome_agreement": a})])[-1].startswith("| x | 1 / 1 / 0 / 1 of 3 |")  # a no-lift shows


def test_delayed_control_shifts_and_holds_the_first_command():
    c = np.arange(10, dtype=float)[:, None]
    d = delayed_control(c, 3)
    assert d[:, 0].tolist() == [0, 0, 0, 0, 1, 2, 3, 4, 5, 6]
    assert delayed_control(c, 0) is c


def _model(at1):
    s = {"n": 4, "mean": at1, "median": at1, "mean_ci95": [at1 - 1, at1 + 1], "median_ci95": None}
    return {"overall": {"horizons": {"pos_pct_size": {"1": s}}}}


def test_horizon_ratio_verdict_hand_computed():
    models = {"analytic_nominal": _model(20.0), "analytic_identified": _model(10.0), "surrogate": _model(4.0)}
    v = horizon_ratio_verdict(models, horizon_s=1.0, max_ratio=0.5)
    assert v["verdict"] == "supported" and v["targets"][0]["baseline"] == "analytic_identified"
    assert v["targets"][0]["ratio"] == pytest.approx(0.4)
    models["surrogate"] = _model(8.0)
    v = horizon_ratio_verdict(models, horizon_s=1.0, max_ratio=0.5)
    assert v["verdict"] == "falsified" and "0.80" in v["detail"] and "38 %" in v["detail"]  # 1 - 0.5/0.8
    assert horizon_ratio_verdict({"analytic_nominal": _model(1.0), "surrogate": {"status": "not evaluated"}},
                                 horizon_s=1.0, max_ratio=0.5)["verdict"] == "not tested"


def test_the_verdict_places_the_target_against_the_floor_by_the_paired_rule():
    """Hand-computed: the target is 0.5 x the best analytic model's mean; the floor row (the central redraw where there
    is one) minus 0.5 x that model, per episode, decides: interval above zero, the target lies below the floor; a tie
    stays a tie; the surrogate's own verdict is unchanged by the floor rows."""
    def row(values):
        eps = [{"id": f"h/{i}", "set": "h", "horizon_pos_pct_size": {"1": v}} for i, v in enumerate(values)]
        return {**_model(sum(values) / len(values)), "per_episode": eps}

    ident = [10.0, 12.0, 8.0, 10.0, 11.0, 9.0]  # target: 0.5 x 10 = 5
    models = {"analytic_identified": row(ident), "surrogate": row([9.0, 9.5, 8.5, 9.0, 9.5, 8.5]),
              "rig_redrawn": row([9.0, 8.0, 7.0, 9.0, 8.5, 7.5]), "rig_redrawn_medoid": row([7.0, 7.5, 6.0, 7.0, 8.0, 6.5]),
              "rig_exact": row([2.0] * 6)}
    base = horizon_ratio_verdict({k: models[k] for k in ("analytic_identified", "surrogate")}, horizon_s=1.0,
                                 max_ratio=0.5, sets=["h"])
    v = horizon_ratio_verdict(models, horizon_s=1.0, max_ratio=0.5, sets=["h"])
    f = v["floor"]
    assert v["verdict"] == base["verdict"] and v["targets"] == base["targets"]
    assert f["floor_row"] == "rig_redrawn_medoid" and f["target"] == pytest.approx(5.0)
    # medoid - 0.5 x identified per episode: 2, 1.5, 2, 2, 2.5, 2: all above zero
    assert f["floor_minus_target"]["mean"] == pytest.approx(2.0) and f["floor_minus_target"]["ci95"][0] > 0
    assert f["target_vs_floor"] == "below" and "is below the floor estimate rig_redrawn_medoid 7.00" in v["detail"]
    assert f["rig_exact"]["mean"] == 2.0 and f["rig_exact"]["surrogate_minus_row"]["mean"] == pytest.approx(7.0)
    models["rig_redrawn_medoid"] = row([3.0, 7.0, 4.0, 6.0, 5.5, 4.5])  # floor - target: -2, 1, 0, 1, 0, -0.5
    assert horizon_ratio_verdict(models, horizon_s=1.0, max_ratio=0.5, sets=["h"])["floor"]["target_vs_floor"] == "tie"
    models["rig_redrawn_medoid"] = row([1.0, 1.5, 2.0, 1.0, 1.5, 2.0])
    assert horizon_ratio_verdict(models, horizon_s=1.0, max_ratio=0.5, sets=["h"])["floor"]["target_vs_floor"] == "above"
    del models["rig_redrawn_medoid"], models["rig_redrawn"]
    assert "floor" not in horizon_ratio_verdict(models, horizon_s=1.0, max_ratio=0.5, sets=["h"])


def test_horizon_ratio_verdict_pairs_the_acceptance_episodes():
    """Hand-computed: the paired difference is over the episodes of the acceptance sets that both models
    scored; an episode of another set, or one a model has no value for, is left out."""
    def episodes(values):
        return [{"id": f"{s}/{i}", "set": s, "horizon_pos_pct_size": {"1": v}} for i, (s, v) in enumerate(values)]

    base = [("heldout", 10.0), ("heldout", 20.0), ("meshes", 30.0), ("train", 5.0), ("heldout", 7.0)]
    surr = [("heldout", 12.0), ("heldout", 16.0), ("meshes", 33.0), ("train", 90.0), ("heldout", None)]
    models = {"analytic_identified": {**_model(10.0), "per_episode": episodes(base)},
              "surrogate": {**_model(12.0), "per_episode": episodes(surr)}}
    v = horizon_ratio_verdict(models, horizon_s=1.0, max_ratio=0.5, sets=["heldout", "meshes"])
    p = v["targets"][0]["paired"]
    assert p["n"] == 3 and p["mean"] == pytest.approx((2.0 - 4.0 + 3.0) / 3)
    assert p["ci95"][0] <= p["mean"] <= p["ci95"][1] and "paired +0.33" in v["detail"]
    # without per-episode rows there is nothing to pair, and the verdict says nothing about it
    v = horizon_ratio_verdict({k: {"overall": m["overall"]} for k, m in models.items()}, horizon_s=1.0, max_ratio=0.5)
    assert v["targets"][0]["paired"]["n"] == 0 and "paired" not in v["detail"]


def test_learned_rows_are_paired_with_the_surrogate_on_the_acceptance_sets():
    """``paired_minus_surrogate``: a further learned row minus the surrogate, per episode of the acceptance sets only
    (the verdict's horizon, the whole episode, the pad force); analytic rows and the surrogate itself get none."""
    from surrogate.bench.paired_rows import paired_minus_surrogate

    def eps(at, whole):
        return [{"id": i, "set": s, "horizon_pos_pct_size": {"1": a}, "pos_pct_size": w, "pad_force_weights": w / 10}
                for i, s, a, w in zip(("h/0", "h/1", "t/0"), ("held", "held", "train"), at, whole)]

    models = {"surrogate": {"checkpoint": "a", "per_episode": eps([2.0, 4.0, 9.0], [3.0, 5.0, 9.0])},
              "network": {"checkpoint": "b", "per_episode": eps([1.0, 1.0, 0.0], [4.0, 8.0, 0.0])},
              "analytic_nominal": {"per_episode": eps([0.0, 0.0, 0.0], [0.0, 0.0, 0.0])}}
    out = paired_minus_surrogate(models, sets=["held"], horizon_s=1.0)
    assert set(out) == {"network"}
    p = out["network"]
    assert p["pos_pct_at_horizon"]["n"] == 2 and p["pos_pct_at_horizon"]["mean"] == pytest.approx(-2.0)
    assert p["pos_pct_at_horizon"]["ci95"] == pytest.approx([-3.0, -1.0])
    assert p["pos_pct_size"]["mean"] == pytest.approx(2.0) and p["pad_force_weights"]["mean"] == pytest.approx(0.2)
    # the suite's unit (metrics.paired_by): two held-out objects with two grasps each; the interval resamples objects
    def grasps(at):
        return [{"id": f"h/{k}", "set": "held", "object": f"obj{k // 2}", "horizon_pos_pct_size": {"1": a},
                 "pos_pct_size": a, "pad_force_weights": 0.0} for k, a in enumerate(at)]

    models = {"surrogate": {"checkpoint": "a", "per_episode": grasps([2.0, 4.0, 6.0, 8.0])},
              "network": {"checkpoint": "b", "per_episode": grasps([1.0, 3.0, 6.0, 8.0])}}
    by_object = paired_minus_surrogate(models, sets=["held"], horizon_s=1.0, by="object")["network"]
    p = by_object["pos_pct_at_horizon"]
    assert p["units"] == 2 and p["by"] == "object" and p["mean"] == pytest.approx(-0.5)
    assert p["ci95"] == pytest.approx([-1.0, 0.0]) and len(p["ci95_episodes"]) == 2  # an object: -1 or 0


def test_rig_grasp_suite_end_to_end(tmp_path, rig_set):
    from surrogate.bench.run import run_suite

    train = tmp_path / "train"
    generate(None, objects="train", episodes=2, out=train, workers=0, seed=6, progress=False, duration=2.5)
    sets = {"heldout_families": {"objects": "heldout", "episodes": 2, "seed": 11},
            "train_objects": {"objects": "val", "episodes": 1, "seed": 12}}
    over = [f"data.train={train}", f"data.test_sets={json.dumps(sets)}", "data.duration=2.5", "workers=0",
            "baselines.identified.episodes=2", "baselines.identified.maxiter=1", "baselines.identified.popsize=3",
            "baselines.identified.cones=[pyramidal]", "baselines.randomized.n=2", "acceptance.sets=[heldout_families]",
            "attribution.enabled=true", "attribution.effects=[friction_map]", "attribution.train_episodes=1",
            "attribution.test_episodes=1", "attribution.duration=2.0",
            "attribution.identified={episodes: 1, maxiter: 1, popsize: 3, cones: [pyramidal]}",
            "video.width=64", "video.height=48", "video.fps=6", f'surrogate.rows={{"same_checkpoint": "{CKPT}"}}',
            "floor.redraws=1", "floor.by_source=true"]
    ledger = run_suite("rig-grasp", out=tmp_path / "report", checkpoint=CKPT, overrides=over, progress=False,
                       cache_dir=tmp_path / "cache")
    validate_ledger(ledger)
    ms = ledger["models"]
    for name in ("analytic_nominal", "analytic_identified", "analytic_randomized", "surrogate"):
        o = ms[name]["overall"]
        assert o["episodes"] == 2, name  # the acceptance set only
        assert set(ms[name]["per_set"]) == {"heldout_families", "train_objects"}
        assert o["horizons"]["pos_pct_size"]["1"]["n"] == 2
        assert o["success_rate"] is not None
        # the success and slip gaps to the recording, over the same episodes
        rec = ledger["recorded_outcomes"]["overall"]
        assert o["success_gap"] == pytest.approx(o["success_rate"] - rec["success_rate"]), name
        # ... with an interval resampling objects, except for the ensemble (its rate is already a mean)
        ci = o["success_gap_ci95"]
        assert (ci is None) if name == "analytic_randomized" else (ci[0] <= o["success_gap"] + 1e-12 <= ci[1] + 2e-12)
    # a further learned row is scored on the same replays: the same checkpoint gives the same errors
    assert [e["pos_pct_size"] for e in ms["same_checkpoint"]["per_episode"]] == \
        [e["pos_pct_size"] for e in ms["surrogate"]["per_episode"]]
    # ... and its paired differences against the surrogate row are zero, on the acceptance set's episodes
    same = ms["same_checkpoint"]["paired_minus_surrogate"]
    assert same["horizon_s"] == 1.0 and "paired_minus_surrogate" not in ms["surrogate"]
    for key in ("pos_pct_at_horizon", "pos_pct_size", "pad_force_weights"):
        assert same[key]["n"] == 2 and same[key]["mean"] == 0.0 and same[key]["ci95"] == [0.0, 0.0], key
    # ... so it cannot replace the release by the paired rule (`surrogate release`); the ledger names its weights
    from surrogate.bench.promote import promote
    from surrogate.errors import ConfigError
    assert ms["same_checkpoint"]["card"]["weights_sha256"] == ms["surrogate"]["card"]["weights_sha256"]
    with pytest.raises(ConfigError, match=r"not released: at the horizon \+0.00 \[\+0.00, \+0.00\] does not lie below zero"):
        promote(CKPT, tmp_path / "report" / "ledger.json", row="same_checkpoint", out=tmp_path / "release")
    assert not (tmp_path / "release").exists()
    # the randomized ensemble records the ranges it drew from (the defaults where the suite gives none)
    from surrogate.bench.identify import DEFAULT_RANGES
    assert ms["analytic_randomized"]["ensemble"]["ranges"]["friction"] == list(DEFAULT_RANGES["friction"])
    assert ms["analytic_identified"]["params"]["delay_s"] >= 0
    # the learned rows replay with the hand's latency, identified from the hand joints of the same training grasps
    delay = ledger["command_delay"]
    assert delay["how"].startswith("identified") and 0.0 <= delay["delay_s"] <= 0.04 and delay["episodes"] == 2
    assert delay["episode_ids"] == ms["analytic_identified"]["identification"]["episode_ids"]
    assert ledger["result"]["verdict"] in ("supported", "falsified", "tie")
    # the floor: the rig itself with the hidden draws redrawn, scored as a model on the same episodes
    fl = ms["rig_redrawn"]
    assert fl["redraws"] == 1 and fl["overall"]["episodes"] == 2 and len(fl["member_unstable_rate"]) == 1
    assert 0.0 <= fl["truth_within_spread"] <= 1.0 and "paired_minus_surrogate" not in fl
    floor = ledger["result"]["floor"]
    assert floor["rig_redrawn"]["mean"] == fl["overall"]["horizons"]["pos_pct_size"]["1"]["mean"]
    assert "rig_redrawn_medoid" not in floor and "rig_redrawn_medoid" not in ms  # a medoid needs 3 redraws
    # the rig with the episode's own values: only the recording's noise is left (the tracker's few mm)
    ex_ = ms["rig_exact"]["overall"]
    assert ex_["episodes"] == 2 and ex_["pos_pct_size"]["mean"] < 3.0 and ex_["unstable_rate"] == 0.0
    from surrogate.bench.rig_floor import SOURCES
    for source in SOURCES:  # each hidden source redrawn alone, scored on the same episodes
        assert ms[f"rig_redrawn_only_{source}"]["overall"]["episodes"] == 2, source
    assert floor["floor_row"] == "rig_redrawn" and floor["floor_minus_target"]["n"] == 2
    assert floor["target_vs_floor"] in ("below", "tie", "above")
    assert floor["rig_redrawn"]["surrogate_minus_row"]["n"] == 2 and "rig_redrawn" in ledger["result"]["detail"]
    rows = ledger["attribution"]["rows"]
    assert [r["variant"] for r in rows] == ["all_on", "without_friction_map"]
    # the learned models on the same held-out grasps of each variant; the same checkpoint twice gives the same errors
    assert set(rows[1]["learned"]) == {"surrogate", "same_checkpoint"}
    assert rows[1]["learned"]["surrogate"] == rows[1]["learned"]["same_checkpoint"]
    base = rows[0]["learned"]["surrogate"]["pos_pct_size"]
    # paired per grasp with the all-on variant (one grasp here: the difference itself), for every model
    assert set(rows[1]["paired"]) == {"nominal", "identified", "surrogate", "same_checkpoint"} and "paired" not in rows[0]
    for m, key in (("nominal", "nominal_pos_pct_size"), ("surrogate", None)):
        now, then = (rows[1][key], rows[0][key]) if key else (rows[1]["learned"][m]["pos_pct_size"], base)
        assert rows[1]["paired"][m]["episode"]["n"] == 1
        assert rows[1]["paired"][m]["episode"]["mean"] == pytest.approx(now - then), m
    # the same checkpoint twice gains nothing over the surrogate, with or without the effect
    gain = rows[1]["gain_off_minus_on"]["same_checkpoint"]["episode"]
    assert set(rows[1]["gain_off_minus_on"]) == {"same_checkpoint"} and gain["mean"] == 0.0 and gain["ci95"] == [0.0, 0.0]
    assert rows[1]["effect_size"]["pos_pct_size"] >= 0.0
    assert rows[0]["learned"]["surrogate"]["residual_removed_pct"] is None
    assert rows[1]["learned"]["surrogate"]["residual_removed_pct"] == pytest.approx(
        100.0 * (base - rows[1]["learned"]["surrogate"]["pos_pct_size"]) / base)
    assert ledger["recorded_outcomes"]["overall"]["episodes"] == 2
    report = (tmp_path / "report" / "report.md").read_text()
    assert "Gap attribution" in report and "Grasp outcomes" in report and "Per test set" in report
    assert "| without_friction_map |" in report and "gain of same_checkpoint" in report
    assert (tmp_path / "report" / "attribution.png").exists()
    assert "Which way the models err" in report
    assert f"The learned rows' hand latency: {1000 * delay['delay_s']:.1f} ms (identified" in report
    assert "| same_checkpoint |" in report and "| variant | surrogate | same_checkpoint |" in report
    assert "## Learned rows against the surrogate" in report and "| same_checkpoint | +0.00 [+0.00, +0.00] (2) |" in report
    # videos of the median and worst acceptance-set episode, with the hand, replayed as the suite did
    vids = ledger["videos"]["videos"]
    assert [v["which"] for v in vids] == ["median", "worst"] and all(v["episode"].startswith("heldout_families/") for v in vids)
    for v in vids:
        assert (tmp_path / "report" / v["video"]).stat().st_size > 0 and f"]({v['video']})" in report
        assert v["panels"]["surrogate"] == pytest.approx(v["ledger_pos_pct_size"], rel=1e-9)
        ident = next(r for r in ms["analytic_identified"]["per_episode"] if r["id"] == v["episode"])
        if not ident["unstable"]:  # the ledger clips a blown-up rollout's error; the video shows it as it is
            assert v["panels"]["analytic (identified)"] == pytest.approx(ident["pos_pct_size"], rel=1e-9)
    assert "identified on 2 training episodes" in ledger["hypothesis"]
    # the force signal: every model's pad force error against the fingertip sensors, pad_force among the
    # first-divergence signals, and the recorded-vs-predicted force plot of the median and worst episode
    for name in ("analytic_nominal", "analytic_identified", "analytic_randomized", "surrogate"):
        f = ms[name]["overall"]["pad_force_weights"]
        assert f["n"] == 2 and 0 <= f["mean"] < 50, name
    assert set(ledger["pad_force_traces"]) == {"median", "worst"}
    tr = ledger["pad_force_traces"]["worst"]
    assert len(tr["t"]) == len(tr["recorded"]) == len(tr["models"]["surrogate"]) and len(tr["sensors"]) == 2
    assert "## Pad forces" in report and "## First divergence" in report and "pad_forces.png" in report
    assert (tmp_path / "report" / "pad_forces.png").stat().st_size > 0
    # generated test sets are cached by content: a second run reuses them
    cached = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert any(n.startswith("rig-heldout_families-") for n in cached)


def test_policy_suite_end_to_end(tmp_path):
    from surrogate.bench.run import run_suite

    ledger = run_suite("policy-small", out=tmp_path, checkpoint=CKPT, progress=False,
                       overrides=["data.max_objects=1", "data.poses=1", "data.duration=2.0", "video.width=64",
                                  "video.height=48", "video.fps=5"])
    validate_ledger(ledger)
    for name in ("analytic_nominal", "surrogate"):
        o = ledger["models"][name]["overall"]
        assert o["episodes"] == 1 and 0.0 <= o["success_rate"] <= 1.0
    assert ledger["models"]["analytic_identified"]["status"] == "not evaluated"
    # one object: the rates' intervals cannot show equivalence (fewer than 10 objects: a tie at best, never supported)
    assert ledger["result"]["verdict"] in ("tie", "falsified", "not tested")
    report = (tmp_path / "report.md").read_text()
    assert "Policy rollouts" in report
    vids = ledger["videos"]["videos"]  # one object: it is both the median and the worst
    assert [v["which"] for v in vids] == ["median", "worst"] and all(set(v["outcomes"]) == {"analytic", "surrogate"} for v in vids)
    assert all((tmp_path / v["video"]).stat().st_size > 0 and f"]({v['video']})" in report for v in vids)


def test_a_rollout_that_blows_up_counts_a_bounded_error_and_is_flagged():
    from surrogate.bench.evaluate import aggregate, score_episode
    from surrogate.capture import Episode, ObjectSpec, Provenance

    T = 50
    true = np.tile([0.0, 0.0, 0.1, 1.0, 0.0, 0.0, 0.0], (T, 1))
    spec = ObjectSpec("box", 0.1, np.eye(3).tolist(), 0.1, {"kind": "box", "half_extents": [0.05] * 3}, 0.5)
    ep = Episode("e", np.arange(T) / 100.0, true, spec, Provenance("test", False, 100.0))
    pred = true.copy()
    pred[30:, 0] = 1e6          # flung a thousand kilometres
    pred[40:, 3:] = np.nan      # then non-finite
    kw = dict(size=0.1, horizons=[0.2, 0.45], divergence={"pos_frac": 0.1, "rot_deg": 15.0})
    s = score_episode(pred, ep, max_error_m=1.0, **kw)
    assert s["unstable"] and s["pos_m"] == pytest.approx(20 / 50 * 1.0)     # 20 frames at the 1 m cap
    assert s["horizon_pos_pct_size"]["0.45"] == pytest.approx(1000.0)      # 1 m = 1000 % of 0.1 m
    assert s["divergence_step"] == 30 and s["divergence_which"] == "pose_position"
    ok = score_episode(true, ep, max_error_m=1.0, **kw)
    assert not ok["unstable"] and ok["pos_m"] == 0.0
    assert aggregate([s, ok], horizons=[0.2])["unstable_rate"] == 0.5


def test_pad_force_loss_pulls_the_pad_stiffness_toward_the_sensors(rig_set):
    """On a recorded grasp (hand kinematic at its recorded joints), the measured fingertip forces tell
    the pad law's stiffness which way to go: down from 10x too stiff, up from 10x too soft."""
    import torch

    from surrogate.learn.objective import force_loss, stack_forces, stack_windows
    from surrogate.learn.windows import episode_windows, group_episodes
    from surrogate.model.contact_law import ContactLawGNN
    from surrogate.sim.twin import Twin, rollout

    ep = max(rig_set.episodes, key=lambda e: bool(e.labels["lifted"]))
    (g,) = group_episodes([ep], rig_set.meta, margin=0.005, substeps=4)
    wins = [w for w in episode_windows(ep, rig_set.meta, g.scene, frames=24, stride=60, substeps=4, with_force=True)
            if w.pad_force is not None and np.linalg.norm(w.pad_force[-1], axis=-1).min() > 0.5]  # pads gripping
    assert wins, "no window of the grasp has both pads loaded"
    twin = Twin(g.scene)
    state0, target, _, _, qpos, qvel = stack_windows(wins[:1], 4)
    bodies, meas, valid = stack_forces(wins[:1], target.shape[1])
    signs = []
    for k in (1e7, 1e3):
        model = ContactLawGNN(prior=dict(stiffness=1e6, damping=5.0, friction=0.8, slip_eps=1e-4, units="si"),
                              prior_body=dict(stiffness=k, damping=5.0, friction=0.8, slip_eps=1e-4, units="si"),
                              corrections=False)
        _, _, f = rollout(model, [twin], state0, target.shape[1], substeps=4, qpos=qpos, qvel=qvel, force_bodies=bodies)
        force_loss(f, meas, valid, torch.tensor([twin.mass * 9.81], dtype=torch.float64)).backward()
        signs.append(float(torch.sign(model.log_stiffness.grad[1])))  # [surface, body]: the pads' group
    assert signs == [1.0, -1.0]  # gradient descent lowers the too-stiff pad and stiffens the too-soft one


def test_pad_force_error_is_in_object_weights_and_analytic_forces_read_like_the_sensors(rig_set):
    """The scorer's force signal: zero for the recording itself, one per object weight of offset; MuJoCo's
    analytic pad forces of a held grasp point the way the sensors read them (squeezing, normal along -x of
    the left pad's sensor, +x of the right's) with the grip force within a factor of three."""
    from surrogate.bench.analytic import AnalyticParams
    from surrogate.bench.replay import analytic_pad_forces, simulate_replay_states
    from surrogate.bench.rig_data import thresholds
    from surrogate.bench.rig_scoring import EpisodeScorer
    from surrogate.suites import load_suite

    ep = next(e for e in rig_set.episodes if e.labels["lifted"])
    r = prepare_replay(ep, rig_set.meta)
    assert len(r.sensors) == 2
    sc = EpisodeScorer(r, load_suite("rig-grasp"),
                       thresholds({"config": None, "overrides": [], "hand": "parallel_jaw"}))
    rec = ep.wrench[:, [c for c, _, _ in r.sensors], :3]
    weight = ep.object.mass * 9.81
    assert np.allclose(sc.force_error(rec), 0.0)
    assert np.allclose(sc.force_error(rec + np.array([weight, 0, 0])), 1.0)
    params = AnalyticParams(friction=0.8, solref=(0.02, 1.0), solimp=(0.9, 0.95, 0.001), cone="elliptic")
    models, states = simulate_replay_states(r, [params])
    f = analytic_pad_forces(r, models[0], states[0], params)
    held = np.linalg.norm(rec, axis=-1).min(axis=1) > 0.5
    assert held.sum() > 20
    ratio = np.median(f[held, :, 0] / rec[held, :, 0], axis=0)
    assert np.all((ratio > 1 / 3) & (ratio < 3)), ratio


def test_closed_loop_selection_keeps_a_friction_that_holds_the_grasp(rig_set):
    """Pad friction chosen by actuated replays: on a recorded lift, 1.0 holds the object and 0.05 lets it
    slip out, so the selection keeps 1.0, reports both candidates and the paired comparison, and the
    selected copy carries the chosen friction (the input model is untouched)."""
    from surrogate.bench.law_selection import select_pad_friction
    from surrogate.model.contact_law import ContactLawGNN

    lifted = [e for e in rig_set.episodes if e.labels["lifted"]][:1]
    assert lifted
    model = ContactLawGNN(prior=dict(stiffness=1e6, damping=5.0, friction=0.8, slip_eps=1e-4, units="si"),
                          prior_body=dict(stiffness=1e5, damping=5.0, friction=1.0, slip_eps=1e-4, units="si"),
                          corrections=False)
    sel = select_pad_friction(model, lifted, rig_set.meta, scales=[0.05], substeps=4, margin=0.005, rot_weight=0.25,
                              progress=False)
    by_scale = {c["scale"]: c for c in sel["candidates"]}
    assert set(by_scale) == {1.0, 0.05}  # the fitted value is always a candidate
    assert by_scale[0.05]["pos_pct_mean"] > by_scale[1.0]["pos_pct_mean"] + 20.0  # the object slipped out
    assert sel["scale"] == 1.0 and sel["friction"] == pytest.approx(1.0)
    assert sel["paired_minus_fitted"]["n"] == 1 and sel["paired_minus_fitted"]["mean"] == pytest.approx(0.0)
    assert model.prior("body").friction == pytest.approx(1.0) and sel["model"] is not model


def test_attribution_switches_off_only_the_effects_the_rig_has_on():
    from surrogate.bench.rig_attribution import attribution_effects
    from surrogate.paths import config_dir

    rig = {"config": str(config_dir() / "rig" / "v1.yaml"), "overrides": []}
    on = attribution_effects("all", rig)
    assert "friction_map" in on and "presliding_friction" not in on  # rig v2's effects are off in v1.yaml
    v3 = attribution_effects("all", {"config": None, "overrides": []})  # the default
    assert {"presliding_friction", "soft_finger_torsion", "pad_relaxation", "load_dependent_friction",
            "pulp_stiffening", "impact_damping"} <= set(v3)
    assert attribution_effects(["friction_map"], rig) == ["friction_map"]


def test_an_effects_size_is_zero_against_the_same_recording_and_refuses_grasps_that_do_not_pair(rig_set):
    # the variant's recordings scored against the all-on recordings of the same grasps: a recording against itself
    # is no effect at all, and a variant whose grasps are other objects' is named, not scored
    from surrogate.bench.rig_attribution import _effect_size
    from surrogate.bench.rig_scoring import EpisodeScorer
    from surrogate.suites import load_suite

    cfg = load_suite("rig-grasp")
    sim = cfg["simulation"]
    base = [EpisodeScorer(prepare_replay(ep, rig_set.meta, substeps=sim["substeps"], margin=sim["margin"]), cfg, _thr())
            for ep in rig_set.episodes]
    size = _effect_size(base, base, "1")
    assert len(size) == 3 and all(r["episode"] == 0.0 and r["at"] in (0.0, None) for r in size)
    assert {r["object"] for r in size} == {e.object.name for e in rig_set.episodes}
    shuffled = base[::-1]
    assert rig_set.episodes[0].object.name != rig_set.episodes[-1].object.name
    with pytest.raises(ValueError, match="seeds no longer pair"):
        _effect_size(base, shuffled, "1")


def test_attribution_without_identification_scores_nominal_mujoco_alone(tmp_path):
    # attribution.identified: false skips MuJoCo's re-identification per variant; nominal MuJoCo is still paired
    from surrogate.bench.rig_attribution import attribution
    from surrogate.suites import load_suite

    cfg = load_suite("rig-grasp", ["attribution.identified=false", "attribution.effects=[friction_map]",
                                   "attribution.train_episodes=1", "attribution.test_episodes=2",
                                   "attribution.duration=2.0"])
    out = attribution(cfg, rig={"config": None, "overrides": [], "hand": "parallel_jaw", "duration": None},
                      cache_dir=tmp_path, workers=0, progress=False)
    on, off = out["rows"]
    assert on["identified"] is None and off["identified_pos_pct_size"] is None and off["residual_removed_pct"] is None
    assert set(off["paired"]) == {"nominal"} and off["paired"]["nominal"]["episode"]["n"] == 2
    assert off["paired"]["nominal"]["episode"]["mean"] == pytest.approx(off["nominal_pos_pct_size"] - on["nominal_pos_pct_size"])
    assert off["gain_off_minus_on"] == {} and off["effect_size"]["pos_pct_size"] >= 0.0
