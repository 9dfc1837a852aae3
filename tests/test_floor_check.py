"""The URDF importer warns when the URDF does not describe the tossed object: its links sink into the floor."""

from __future__ import annotations

import shutil

import torch

from surrogate.cli import main

from .conftest import SHARED, eval_script, needs_shared

ELBOW = SHARED / "contactnets_elbow"
URDF = ELBOW / "contactnets_elbow.urdf"


def _import(src, urdf, out, capsys) -> str:
    assert main(["import", "contactnets", str(src), "--urdf", str(urdf), "--out", str(out), "--quiet"]) == 0
    return capsys.readouterr().out


@needs_shared("contactnets_elbow")
def test_a_urdf_that_does_not_match_the_tosses_is_warned_about(tmp_path, capsys):
    assert "warning" not in _import(ELBOW, URDF, tmp_path / "good", capsys)
    flipped = tmp_path / "flipped.urdf"  # the hinge turns the other way: link 2 is placed where it never was
    text = URDF.read_text()
    assert '<axis xyz="0 1 0" />' in text
    flipped.write_text(text.replace('<axis xyz="0 1 0" />', '<axis xyz="0 -1 0" />'))
    out = _import(ELBOW, flipped, tmp_path / "flipped", capsys)
    assert "warning: link 'elbow_2' sinks more than 20 mm below the floor" in out and "do not match" in out
    assert (tmp_path / "flipped" / "meta").is_dir()  # warned, not refused: the recording is imported as it is


@needs_shared("contactnets_elbow")
def test_a_toss_whose_link_goes_through_the_floor_is_named(tmp_path, capsys):
    src = tmp_path / "tosses"
    src.mkdir()
    for n in ("0", "9", "18", "27", "36", "45"):
        shutil.copy(ELBOW / f"{n}.pt", src / f"{n}.pt")
    a = torch.load(ELBOW / "27.pt", weights_only=True).clone()
    a[30, 6] -= 0.1  # link 1 (and link 2 with it) tracked 10 cm too low on one frame
    torch.save(a, src / "27.pt")
    out = _import(src, URDF, tmp_path / "ds", capsys)
    warnings = [line for line in out.splitlines() if line.startswith("warning")]
    assert len(warnings) == 1 and "toss 27: link 'elbow_" in warnings[0] and "frame 30" in warnings[0]


@needs_shared("contactnets_elbow")
def test_the_study_warns_on_every_wrong_hinge_and_not_on_the_shared_urdfs(capsys):
    assert eval_script("urdf_floor_check").main([str(ELBOW)]) == 0
    rows = {line.split(" | ")[0].strip("| "): line for line in capsys.readouterr().out.splitlines()
            if line.startswith("| contactnets")}
    assert len(rows) == 6
    for name, line in rows.items():
        wrong = "," in name  # a variant of the shared URDF
        assert line.endswith("| yes |" if wrong else "| no |"), line


@needs_shared("contactnets_elbow")
def test_inspect_and_the_elbow_report_carry_the_warning(tmp_path, capsys):
    from surrogate.bench.report_tables import articulated_lines
    from surrogate.capture import read_dataset
    from surrogate.importers.floor_check import episode_warnings

    flipped = tmp_path / "flipped.urdf"
    flipped.write_text(URDF.read_text().replace('<axis xyz="0 1 0" />', '<axis xyz="0 -1 0" />'))
    _import(ELBOW, URDF, tmp_path / "good", capsys)
    _import(ELBOW, flipped, tmp_path / "flipped", capsys)
    assert episode_warnings(read_dataset(tmp_path / "good").episodes) == []
    warned = episode_warnings(read_dataset(tmp_path / "flipped").episodes)
    assert len(warned) == 1 and warned[0].startswith("[flipped] link 'elbow_2' sinks more than 20 mm")
    assert main(["inspect", str(tmp_path / "flipped")]) == 0 and f"warning: {warned[0]}" in capsys.readouterr().out
    assert main(["inspect", str(tmp_path / "good")]) == 0 and "warning" not in capsys.readouterr().out
    summary = {"mean": 1.0, "mean_ci95": [0.5, 1.5], "median": 1.0, "n": 2}
    row = {"overall": {"pos_pct_size": summary, "joint_deg": summary, "horizons_joint_deg": {},
                       "links": {"elbow_1": {"pos_pct_size": summary, "rot_deg": summary}}}}
    ledger = {"models": {"surrogate": row}, "data": {"floor_warnings": warned}}
    text = "\n".join(articulated_lines(ledger))
    assert "links sink into the floor" in text and warned[0] in text
    assert "floor" not in "\n".join(articulated_lines({"models": {"surrogate": row}, "data": {}}))
