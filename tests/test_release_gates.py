"""``eval/release_gates.py``: the release gates of issue 24 as one command (the untouched-object gate here; soak,
policy and speed run minutes and are measured by the command itself, not by a timed test)."""

from __future__ import annotations

import json

import pytest

from surrogate.errors import OutputError
from surrogate.paths import REPO_ROOT

from .conftest import eval_script


def test_the_release_passes_the_untouched_gate_and_the_report_names_every_pair(tmp_path):
    gates = eval_script("release_gates")
    out = tmp_path / "gates"
    rc = gates.main([str(REPO_ROOT / "checkpoints" / "rig_default"), "--out", str(out),
                     "--skip", "soak", "--skip", "policy", "--skip", "speed"])
    report = json.loads((out / "gates.json").read_text())
    assert rc == 0 and report["ok"]
    rows = report["gates"]["untouched"]["rows"]
    assert {(r["env"], r["family"]) for r in rows} == {(e, f) for e in gates.ENVS for f in gates.FAMILIES}
    assert all(r["mm"] < gates.UNTOUCHED_MAX_MM and r["fallbacks"] == 0 for r in rows)
    assert all(report["gates"][g] == {"skipped": True} for g in ("soak", "policy", "speed"))


def test_a_folder_the_script_did_not_write_is_refused(tmp_path):
    gates = eval_script("release_gates")
    (tmp_path / "mine.txt").write_text("a user's file")
    with pytest.raises(OutputError, match="not this script's folder"):
        gates.main([str(REPO_ROOT / "checkpoints" / "rig_default"), "--out", str(tmp_path), "--skip", "untouched"])
    assert (tmp_path / "mine.txt").read_text() == "a user's file"
