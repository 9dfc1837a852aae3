"""``eval/toss_pairs.py``: rows of toss-suite ledgers paired per test toss, across two runs of a suite."""

from __future__ import annotations

import json

import pytest

from .conftest import eval_script


def ledger(tmp_path, name: str, rows: dict) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"models": {k: {"per_episode": v} for k, v in rows.items()}}))
    return str(path)


def tosses(values, joint=True):
    return [{"id": str(i), "pos_pct_size": v, "rot_deg": 2 * v, **({"joint_deg": v} if joint else {})}
            for i, v in enumerate(values)]


def test_a_row_of_one_run_is_paired_with_a_row_of_another_over_the_same_tosses(tmp_path, capsys):
    pairs = eval_script("toss_pairs")
    a = ledger(tmp_path, "a", {"identified": tosses([10.0, 20.0, 30.0, 40.0])})
    b = ledger(tmp_path, "b", {"identified": tosses([8.0, 17.0, 29.0, 36.0], joint=False)})
    assert pairs.main([f"{a}:identified", f"{b}:identified"]) == 0
    out = capsys.readouterr().out
    assert "position, % of size" in out and "-2.50" in out and "rotation, deg" in out and "-5.00" in out
    assert "joint" not in out  # only where both rows have it
    d = pairs.pair(*(pairs.load_row(s, {})[1] for s in (f"{a}:identified", f"{b}:identified")))
    assert d["pos_pct_size"]["means"] == [25.0, 22.5] and d["pos_pct_size"]["mean"] == pytest.approx(-2.5)


def test_rows_of_other_tosses_or_missing_rows_are_refused(tmp_path):
    pairs = eval_script("toss_pairs")
    a = ledger(tmp_path, "a", {"identified": tosses([10.0, 20.0])})
    b = ledger(tmp_path, "b", {"identified": tosses([10.0, 20.0, 30.0])})
    with pytest.raises(SystemExit, match="different test tosses"):
        pairs.main([f"{a}:identified", f"{b}:identified"])
    with pytest.raises(SystemExit, match="no row 'surrogate'"):
        pairs.main([f"{a}:identified", f"{a}:surrogate"])
    with pytest.raises(SystemExit, match="LEDGER:ROW"):
        pairs.main(["identified", f"{a}:identified"])
