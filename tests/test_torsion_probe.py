"""``eval/torsion_probe.py``: a checkpoint's law replayed with MuJoCo's multi-point collision on or off and the pads'
torsional friction set, scored by the decision rule's scorer and paired with a suite run's surrogate row."""

from __future__ import annotations

import json
import math

from surrogate.bench.law_selection import benchmark_scores
from surrogate.capture import read_dataset
from surrogate.model.checkpoint import load_checkpoint
from surrogate.paths import REPO_ROOT
from surrogate.rig.generate import generate

from .conftest import eval_script

RELEASE = REPO_ROOT / "checkpoints" / "rig_default"



def test_the_probe_as_shipped_is_the_suites_replay_and_pairs_with_its_ledger(tmp_path, capsys):
    generate(None, objects="heldout", episodes=2, out=tmp_path / "grasps", workers=0, seed=4, progress=False, duration=2.5)
    probe = eval_script("torsion_probe")
    ds = read_dataset(tmp_path / "grasps")
    same = probe.probe_rows(tmp_path / "grasps", RELEASE, spread=True, torsion=0.0, delay_s=0.0104)
    ref = benchmark_scores(load_checkpoint(RELEASE)[0], ds.episodes, ds.meta, substeps=4, margin=0.005, delay_s=0.0104,
                           progress=False)
    assert [{k: v for k, v in r.items() if k != "recorded"} for r in same] == ref
    assert [r["recorded"] for r in same] == [e.labels for e in ds.episodes]
    # a ledger whose surrogate row scored these grasps: the unchanged probe pairs with it at exactly zero
    ledger = {"models": {"surrogate": {"per_episode": [
        {"id": r["id"], "object": r["object"], "horizon_pos_pct_size": {"1": r["at_horizon"]}, "pos_pct_size": r["pos_pct"]}
        for r in ref]}}}
    (tmp_path / "ledger.json").write_text(json.dumps(ledger))
    for d in probe.paired_against(same, ledger).values():
        assert d["mean"] == 0.0
    # one point per mesh-pad pair and the pads' own torsion: another law, still finite, and the CLI prints the pairing
    changed = probe.probe_rows(tmp_path / "grasps", RELEASE, spread=False, torsion=0.004, delay_s=0.0104)
    assert all(math.isfinite(r["pos_pct"]) for r in changed) and [r["id"] for r in changed] == [r["id"] for r in ref]
    assert [r["pos_pct"] for r in changed] != [r["pos_pct"] for r in ref]  # the held-out capsules are meshes: it acts
    assert probe.main([str(tmp_path / "grasps"), "--torsion", "0.004", "--against", str(tmp_path / "ledger.json"),
                       "--out", str(tmp_path / "rows.json")]) == 0
    assert "minus the ledger's surrogate row, pos_pct" in capsys.readouterr().out
    assert json.loads((tmp_path / "rows.json").read_text()) == changed


def test_the_patch_turns_the_law(tmp_path, capsys):
    import pytest

    probe = eval_script("torsion_probe")
    generate(None, objects="heldout", episodes=2, out=tmp_path / "grasps", workers=0, seed=4, progress=False, duration=2.5)
    plain = probe.probe_rows(tmp_path / "grasps", RELEASE, spread=True, torsion=0.0, delay_s=0.0104)
    patched = probe.probe_rows(tmp_path / "grasps", RELEASE, spread=True, torsion=0.0024, delay_s=0.0104, patch=True)
    assert all(math.isfinite(r["pos_pct"]) for r in patched)
    assert [r["pos_pct"] for r in patched] != [r["pos_pct"] for r in plain]
    rates = probe.slip_rates(patched)
    assert rates["recording"][1] == sum(bool(r["recorded"]["lifted"]) for r in patched)
    with pytest.raises(SystemExit, match="--torsion > 0"):
        probe.probe_rows(tmp_path / "grasps", RELEASE, spread=True, torsion=0.0, delay_s=0.0104, patch=True)
    assert probe.main([str(tmp_path / "grasps"), "--patch", "--torsion", "0.0024"]) == 0
    assert "slip rate among lifted grasps: probe" in capsys.readouterr().out
