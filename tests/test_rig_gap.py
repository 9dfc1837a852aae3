"""The rig gap study's statistics against hand-computed cases, and one tiny end-to-end study
(1 grasp per hand and split, 1.2 s, one DE generation: ~20 s on one core)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from surrogate.bench import gap_stats
from surrogate.bench.gap import study, variants
from surrogate.bench.gap_report import write_study
from surrogate.paths import CONFIG_DIR
from surrogate.rig.config import load_rig_config


def test_paired_share_hand_computed():
    on, off = [4.0, 6.0, 8.0], [2.0, 3.0, 4.0]  # every pair halves: the effect is half the residual
    p = gap_stats.paired_share(on, off, seed=0)
    assert p["n"] == 3 and p["diff_mean"] == pytest.approx(3.0) and p["share"] == pytest.approx(0.5)
    assert p["share_ci95"] == pytest.approx([0.5, 0.5])  # a constant ratio resamples to itself
    q = gap_stats.paired_share([1.0, 3.0], [1.0, 1.0], seed=0)  # shares 0 and 2/3 of a mean of 2 -> 1/2
    assert q["share"] == pytest.approx(0.5) and q["share_ci95"][0] == pytest.approx(0.0)
    assert q["share_ci95"][1] == pytest.approx(2 / 3)
    assert gap_stats.paired_share([], [])["share"] is None


def test_wilson_interval_hand_computed():
    lo, hi = gap_stats.wilson(8, 10)
    # p = 0.8, z = 1.96: centre (0.8 + 0.19208) / 1.38416, half 1.96 sqrt(0.016 + 0.009604) / 1.38416
    assert lo == pytest.approx((0.99208 - 1.96 * math.sqrt(0.025604)) / 1.38416, abs=1e-9)
    assert hi == pytest.approx((0.99208 + 1.96 * math.sqrt(0.025604)) / 1.38416, abs=1e-9)
    assert gap_stats.wilson(0, 0) is None and gap_stats.wilson(5, 5)[1] == 1.0


def test_unstable_episodes_are_counted_not_averaged_or_paired():
    def sc(i, pos, unstable=False):
        return {"id": f"e{i}", "hand": "h", "pos_mm": pos, "rot_deg": pos, "unstable": unstable,
                "outcome": {"lifted": True, "slipped": False, "dropped": False},
                "recorded": {"lifted": True, "slipped": i == 1, "dropped": False}}
    on = [sc(0, 2.0), sc(1, 4.0), sc(2, 1e3, unstable=True)]
    off = [sc(0, 1.0), sc(1, 1.0, unstable=True), sc(2, 1.0)]
    r = gap_stats.residual(on)
    assert r["unstable"] == 1 and r["pos_mm"]["mean"] == pytest.approx(3.0)
    assert gap_stats.pairs(on, off, "pos_mm") == ([2.0], [1.0])
    o = gap_stats.outcome_agreement(on)
    assert (o["agree"], o["episodes"]) == (2, 3) and o["ci95"] == pytest.approx(gap_stats.wilson(2, 3))
    shares = {"a": {"share": 0.5, "share_ci95": [0.3, 0.7]}, "b": {"share": 0.2, "share_ci95": [0.1, 0.35]},
              "c": {"share": 0.0, "share_ci95": [-0.1, 0.05]}}
    assert gap_stats.overlapping(shares) == [("a", "b")]


def test_variants_switch_off_each_enabled_effect():
    v = variants(load_rig_config(CONFIG_DIR / "rig" / "v2.yaml"))
    assert list(v)[0] == "all_on" and len(v) == 10 and v["without_presliding_friction"] == "presliding_friction"
    assert "without_pulp_stiffening" not in v  # off in v2: nothing to switch
    assert len(variants(load_rig_config())) == 12  # the default (v3): all 11 effects on
    assert "without_pad_relaxation" not in variants(load_rig_config(CONFIG_DIR / "rig" / "v1.yaml"))


def test_tiny_gap_study_end_to_end(tmp_path):
    cfg = CONFIG_DIR / "rig" / "default.yaml"
    result = study(cfg, episodes=1, train_episodes=1, duration=1.2, maxiter=1, popsize=2, workers=0,
                   only=["all_on", "without_soft_finger_torsion"], work_dir=tmp_path / "work", progress=False)
    sm = result["summary"]
    assert [r["variant"] for r in result["rows"]] == ["all_on", "without_soft_finger_torsion"]
    both = sm["residual"]["test"]["both"]
    assert both["episodes"] == 2 and both["pos_mm"]["mean"] > 0 and both["outcome"]["episodes"] == 2
    assert sm["repeatability"]["episodes"] == 2 and sm["repeatability"]["pos_mm"] > 0
    a = sm["attribution"]["test"]["soft_finger_torsion"]
    assert a["pos"]["n"] + a["unstable_off"] + both["unstable"] >= 2 and "acceptance" in sm
    path = write_study(result, tmp_path / "out")
    text = path.read_text()
    assert "soft_finger_torsion" in text and "Acceptance" in text
    assert (tmp_path / "out" / "gap.png").read_bytes()[:4] == b"\x89PNG"
    saved = json.loads((tmp_path / "out" / "gap.json").read_text())
    assert saved["summary"]["rows"][0]["fitted"]["cone"] in ("pyramidal", "elliptic")
    assert np.isfinite(saved["summary"]["repeatability"]["rot_deg"])
