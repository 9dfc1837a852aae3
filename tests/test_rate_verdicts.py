"""The `policy` and `transfer` verdicts decided on intervals over objects (forty-third session): a rate target is met
only when its whole 95 % interval says so, a tie is never supported, and a target that cannot be evaluated is named,
not dropped. Synthetic per-object rows: no simulation."""

from __future__ import annotations

import numpy as np
import pytest

from surrogate.bench.grasp_outcome import pooled_gap, pooled_rate, pooled_rate_gap
from surrogate.bench.ledger import outcome
from surrogate.bench.policy import by_object_summary, rollout_rates, verdict
from surrogate.bench.transfer import abs_gap_difference, compare
from surrogate.metrics import paired_difference


def _model(per_obj: dict, poses: int = 4) -> dict:
    """A policy ledger model from {object: (successes, lifted, slipped)} of ``poses`` rollouts each."""
    po = {o: {"episodes": poses, "success_rate": s / poses, "lifted": n, "slip_rate": sl / n if n else None}
          for o, (s, n, sl) in per_obj.items()}
    tot = [sum(v[i] for v in per_obj.values()) for i in range(3)]
    n = poses * len(po)
    return {"overall": {"episodes": n, "success_rate": tot[0] / n, "lifted": tot[1],
                        "slip_rate": tot[2] / tot[1] if tot[1] else None}, "per_object": po}


def test_policy_equal_rates_from_different_objects_are_a_tie_not_supported():
    """4 rollouts each, both at success 0.5, but each model succeeds on the other object: the gap's interval over
    objects spans [-1, +1], a tie (the point rule called it supported)."""
    s, a = _model({"a": (2, 2, 0), "b": (0, 2, 0)}, poses=2), _model({"a": (0, 2, 0), "b": (2, 2, 0)}, poses=2)
    v = verdict({"surrogate": s, "analytic_nominal": a}, max_gap=0.1)
    assert v["verdict"] == "tie"
    t = {x["metric"]: x for x in v["targets"]}
    assert t["success_rate"]["gap"] == 0.0 and t["success_rate"]["outcome"] == "tie"
    assert t["success_rate"]["gap_ci95"][0] < -0.1 < 0.1 < t["success_rate"]["gap_ci95"][1]
    # no slip under either, on every object: the interval is [0, 0], but 2 objects are too few to call agreement
    assert t["slip_rate"]["gap_ci95"] == [0.0, 0.0] and t["slip_rate"]["outcome"] == "tie"
    assert t["slip_rate"]["too_few_objects"] == 10


def test_policy_small_suite_with_identical_outcomes_is_not_supported():
    """policy-small: 2 objects x 2 poses, every rollout succeeds under both models. Paired by object the bootstrap
    sees no variation ([0, 0]); fewer than metrics.MIN_PAIRED_UNITS objects never call agreement: a tie."""
    m = _model({"a": (2, 2, 0), "b": (2, 2, 0)}, poses=2)
    v = verdict({"surrogate": m, "analytic_nominal": m}, max_gap=0.1)
    assert v["verdict"] == "tie" and all(t["outcome"] == "tie" and not t["met"] for t in v["targets"])
    assert "2 objects are too few to call agreement" in v["detail"]
    # a miss still falsifies at any size
    s = _model({"a": (2, 2, 0), "b": (2, 2, 0)}, poses=2)
    a = _model({"a": (0, 0, 0), "b": (0, 0, 0)}, poses=2)
    assert verdict({"surrogate": s, "analytic_nominal": a}, max_gap=0.1)["verdict"] == "falsified"


def test_policy_slip_target_that_cannot_be_evaluated_is_named_and_never_supported():
    """The surrogate never lifts; analytic lifts one grasp in 96 and it slips. Success agrees within 0.1 on its
    interval, the slip rate has no value for the surrogate: named in ``not_evaluable``, the verdict not supported
    (the point rule dropped the slip target and said supported)."""
    s = _model({f"o{i}": (0, 0, 0) for i in range(24)})
    a = _model({f"o{i}": ((1, 1, 1) if i == 0 else (0, 0, 0)) for i in range(24)})
    v = verdict({"surrogate": s, "analytic_nominal": a}, max_gap=0.1)
    assert [t["metric"] for t in v["targets"]] == ["success_rate"] and v["targets"][0]["outcome"] == "met"
    assert v["not_evaluable"] == [{"metric": "slip_rate", "baseline": "analytic_nominal", "objects": 24,
                                   "episodes": 96, "outcome": "not evaluable", "why": "the surrogate lifted nothing"}]
    assert v["verdict"] == "not tested" and "slip_rate against analytic_nominal not evaluable" in v["detail"]


def test_policy_targets_are_equivalence_decisions_against_the_nominal_baseline():
    same = _model({f"o{i}": (4, 4, 0) for i in range(24)})
    half = _model({f"o{i}": ((4, 4, 0) if i % 2 else (0, 0, 0)) for i in range(24)})
    v = verdict({"surrogate": same, "analytic_nominal": same}, max_gap=0.1)
    assert v["verdict"] == "supported" and all(t["outcome"] == "met" for t in v["targets"])
    assert "analytic_identified" not in v["detail"]
    # the interval wholly outside +-0.1: missed; against the identified row: reported in the detail, not deciding
    v = verdict({"surrogate": same, "analytic_nominal": half, "analytic_identified": same}, max_gap=0.1)
    t = {x["metric"]: x for x in v["targets"]}
    assert v["verdict"] == "falsified" and t["success_rate"]["outcome"] == "missed"
    assert t["success_rate"]["gap_ci95"][0] > 0.1
    assert all(x["baseline"] == "analytic_nominal" for x in v["targets"])
    assert "Reported, not deciding, against analytic_identified: success_rate 1.00 vs 1.00" in v["detail"]
    v = verdict({"surrogate": same, "analytic_nominal": same, "analytic_identified": half}, max_gap=0.1)
    assert v["verdict"] == "supported"


def test_policy_success_interval_resamples_objects():
    """6 objects x 4 poses, 3 objects always succeed, 3 always fail: the poses of one object share its outcome, so
    the interval is the one over objects (the reviewer's [0.17, 0.83]), not over rollouts ([0.29, 0.71])."""
    res = [{"success": np.full(4, o < 3), "lifted": np.full(4, True), "slipped": np.zeros(4, bool),
            "final_rise_m": np.full(4, 0.05 * (o < 3))} for o in range(6)]
    r = rollout_rates(res, 0, [f"o{o}" for o in range(6)])
    a = [{"id": f"{o}/{k}", "v": 0.0} for o in range(6) for k in range(4)]
    b = [{"id": f"{o}/{k}", "v": float(o < 3), "object": o} for o in range(6) for k in range(4)]
    assert r["success"]["mean_ci95"] == paired_difference(a, b, "v", by="object")["ci95"]
    assert r["success"]["mean_ci95"][0] < 0.2 and r["success"]["mean_ci95"][1] > 0.8
    assert r["success"]["mean"] == 0.5 and r["success"]["median_ci95"] is None
    assert r["final_rise_m"]["mean_ci95"][0] < 0.01 and r["final_rise_m"]["mean_ci95"][1] > 0.04
    one = rollout_rates(res[:1], 0, ["o0"])  # one object: a claim about its poses, the interval over rollouts
    assert one["success"]["mean_ci95"] == [1.0, 1.0] and one["success"]["median_ci95"] == [1.0, 1.0]
    assert by_object_summary({"x": [0.0, 1.0]})["median_ci95"] is not None


def _c(n, s, lifted, slipped):
    return {"episodes": n, "successes": s, "lifted": lifted, "slipped": slipped}


def _row(source: str, po: dict) -> dict:
    g = {k: pooled_gap(po, k, seed=0, n_boot=500) for k in ("success", "slip")}
    return {"source": source, "success_gap": g["success"]["gap"], "success_gap_ci95": g["success"]["ci95"],
            "slip_gap": g["slip"]["gap"], "slip_gap_ci95": g["slip"]["ci95"], "objects": len(po),
            "episodes": sum(v["rig"]["episodes"] for v in po.values()), "per_object": po}


def test_transfer_smaller_point_gaps_with_overlapping_intervals_are_a_tie():
    """|success_gap| 0.04 against 0.12 and |slip_gap| 0.00 against 0.04 (the point rule: supported), with gaps that
    swing by object: the interval of |gap| - randomized |gap| over objects contains zero, a tie."""
    s = {f"o{i}": {"sim": _c(4, k, 4, 0), "rig": _c(4, 2, 4, 0)} for i, k in enumerate((0, 4, 1, 4, 1, 3))}
    r = {f"o{i}": {"sim": _c(4, k, 4, int(i == 0)), "rig": _c(4, 2, 4, 0)} for i, k in enumerate((1, 4, 1, 4, 2, 3))}
    rows = [_row("surrogate", s), _row("analytic_randomized", r)]
    assert abs(rows[0]["success_gap"]) < abs(rows[1]["success_gap"]) and abs(rows[0]["slip_gap"]) < rows[1]["slip_gap"]
    v = compare(rows, "surrogate", n_boot=500)
    assert v["verdict"] == "tie" and "tie" in {t["outcome"] for t in v["targets"]}
    for t in v["targets"]:
        assert t["paired"]["by"] == "object" and t["paired"]["units"] == 6
        assert t["outcome"] == outcome(t["paired"], False)
        assert t["paired"]["mean"] == pytest.approx(t["surrogate"] - t["baseline_value"])


def test_transfer_decided_on_the_paired_interval_met_missed_and_not_evaluable():
    exact = {f"o{i}": {"sim": _c(4, 3, 4, 0), "rig": _c(4, 3, 4, 0)} for i in range(8)}
    off = {f"o{i}": {"sim": _c(4, 4, 4, 2), "rig": _c(4, 2, 4, 0)} for i in range(8)}
    v = compare([_row("surrogate", exact), _row("analytic_randomized", off)], "surrogate", n_boot=300)
    assert v["verdict"] == "supported" and [t["outcome"] for t in v["targets"]] == ["met", "met"]
    v = compare([_row("surrogate", off), _row("analytic_randomized", exact)], "surrogate", n_boot=300)
    assert v["verdict"] == "falsified"
    # the surrogate-tuned policy lifts nothing on the rig: its slip gap is undefined, named, never supported
    none = {f"o{i}": {"sim": _c(4, 0, 0, 0), "rig": _c(4, 0, 0, 0)} for i in range(8)}
    v = compare([_row("surrogate", none), _row("analytic_randomized", off)], "surrogate", n_boot=300)
    assert [t["metric"] for t in v["targets"]] == ["success_gap"] and v["targets"][0]["outcome"] == "met"
    assert v["not_evaluable"][0]["metric"] == "slip_gap" and v["verdict"] == "not tested"


def test_abs_gap_difference_pairs_rows_by_object():
    """The same per-object gaps under both rows: paired, every resample's difference is zero; with no object in
    common each row is resampled apart and the interval is wide."""
    po = {f"o{i}": {"sim": _c(4, 4 if i % 2 else 0, 4, 0), "rig": _c(4, 2, 4, 0)} for i in range(6)}
    assert abs_gap_difference(po, po, "success", n_boot=300)["ci95"] == [0.0, 0.0]
    other = {f"x{k}": v for k, v in po.items()}
    p = abs_gap_difference(po, other, "success", n_boot=300)
    assert "by" not in p and p["ci95"][0] < -0.2 and p["ci95"][1] > 0.2
    assert abs_gap_difference({}, po, "success")["ci95"] is None


def test_abs_gap_difference_interval_by_hand():
    """Two shared objects, a (3 episodes) and b (5): a resample is {a, a}, {b, b} or {a, b}, and its statistic is
    |sim - rig| of the surrogate row's pooled success rates minus the same of the randomized row's, both rows over
    the same resampled objects. {a, a}: |3/3 - 1/3| - |0/3 - 1/3| = 1/3; {b, b}: |1/5 - 1/5| - |2/5 - 1/5| = -1/5;
    {a, b} (the point value): |4/8 - 2/8| - |2/8 - 2/8| = 1/4. With 1000 resamples each of {a, a} and {b, b} comes
    far more than 25 times, so the interval is [-1/5, 1/3] exactly. A mean of per-object rates in place of the pooled
    rate gives 4/15 at the point; signed gaps in place of |gap| 1 at {a, a}; the rows resampled apart (unpaired)
    [-1/3, 2/3]."""
    s = {"a": {"sim": _c(3, 3, 3, 0), "rig": _c(3, 1, 3, 0)}, "b": {"sim": _c(5, 1, 5, 0), "rig": _c(5, 1, 5, 0)}}
    r = {"a": {"sim": _c(3, 0, 3, 0), "rig": _c(3, 1, 3, 0)}, "b": {"sim": _c(5, 2, 5, 0), "rig": _c(5, 1, 5, 0)}}
    p = abs_gap_difference(s, r, "success", seed=0, n_boot=1000)
    assert p["mean"] == pytest.approx(1 / 4) and p["ci95"] == pytest.approx([-1 / 5, 1 / 3])
    assert (p["n"], p["units"], p["by"]) == (2, 2, "object")
    assert abs_gap_difference(r, s, "success", seed=0, n_boot=1000)["ci95"] == pytest.approx([-1 / 3, 1 / 5])


def _pinned_rows():
    s = {"a": {"sim": _c(3, 3, 3, 1), "rig": _c(3, 1, 2, 0)}, "b": {"sim": _c(5, 1, 2, 1), "rig": _c(5, 1, 0, 0)},
         "c": {"sim": _c(4, 2, 4, 2), "rig": _c(4, 4, 4, 0)}, "d": {"sim": _c(2, 0, 1, 1), "rig": _c(2, 1, 1, 0)}}
    r = {"a": {"sim": _c(3, 1, 1, 0), "rig": _c(3, 1, 1, 0)}, "b": {"sim": _c(5, 0, 1, 1), "rig": _c(5, 3, 3, 1)},
         "c": {"sim": _c(4, 4, 4, 0), "rig": _c(4, 3, 3, 2)}, "d": {"sim": _c(2, 2, 2, 1), "rig": _c(2, 0, 0, 0)}}
    return s, r


def test_pooled_gap_intervals_pinned_to_the_digit():
    """The transfer ledger's intervals on a fixed input, seed 0, 400 resamples, to the last digit (the numbers the
    bootstrap loops gave before they became ``resample.unit_bootstrap``): a change of the statistic, of what is
    resampled or of the random stream shows here. Slip resamples without a lifted rig episode are left out."""
    s, r = _pinned_rows()
    x = {f"x{k}": v for k, v in r.items()}
    assert abs_gap_difference(s, r, "success", seed=0, n_boot=400) == {
        "n": 4, "mean": 0.07142857142857145, "ci95": [-0.3888888888888889, 0.27272727272727276], "units": 4,
        "by": "object"}
    assert abs_gap_difference(s, x, "success", seed=0, n_boot=400) == {
        "n": 4, "mean": 0.07142857142857145, "ci95": [-0.46944444444444433, 0.4285714285714286]}
    assert abs_gap_difference(s, r, "slip", seed=0, n_boot=400) == {
        "n": 4, "mean": 0.32142857142857145, "ci95": [-0.07142857142857145, 0.48809523809523814], "units": 4,
        "by": "object"}
    assert abs_gap_difference(s, x, "slip", seed=0, n_boot=400) == {
        "n": 4, "mean": 0.32142857142857145, "ci95": [-0.06206016206016206, 0.5267567155067155]}
    assert pooled_gap(s, "success", seed=0, n_boot=400) == {
        "gap": -0.07142857142857145, "ci95": [-0.5, 0.310714285714283], "boot_n": 400}
    assert pooled_gap(s, "slip", seed=0, n_boot=400) == {
        "gap": 0.5, "ci95": [0.38461538461538464, 0.6714285714285698], "boot_n": 397}


def test_pooled_rate_sums_counts_over_objects():
    """Successes over episodes, slipped over lifted, summed over objects (repeats count twice), None without a
    denominator; an unknown rate is an error, not a slip rate."""
    s, _ = _pinned_rows()
    vals = list(s.values())
    assert pooled_rate(vals, "sim", "success") == 6 / 14 and pooled_rate(vals, "rig", "slip") == 0 / 7
    assert pooled_rate(vals[:1] * 2 + vals[1:2], "sim", "slip") == 3 / 8
    assert pooled_rate([s["b"]], "rig", "slip") is None and pooled_rate([], "sim", "success") is None
    assert pooled_rate_gap(vals, "success") == 6 / 14 - 7 / 14 and pooled_rate_gap([s["b"]], "slip") is None
    with pytest.raises(KeyError):
        pooled_rate(vals, "sim", "drop")
