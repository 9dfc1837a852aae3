"""The command line: scene export and the main job end to end."""

from __future__ import annotations

import json

import mujoco

from surrogate.cli import main


def test_scene_command_writes_loadable_mjcf(tmp_path, capsys):
    xml = tmp_path / "scene.xml"
    assert main(["scene", "--family", "dumbbell", "--seed", "3", "--hand", "three_finger", "--xml", str(xml)]) == 0
    out = capsys.readouterr().out
    assert "owned pairs" in out and "own:pad_f0" in out
    m = mujoco.MjModel.from_xml_path(str(xml))
    assert m.nu == 13 and m.npair > 0


def test_unknown_family_is_a_clear_error(capsys):
    assert main(["scene", "--family", "teapot"]) == 2
    assert "teapot" in capsys.readouterr().err


def test_quickstart_runs_every_stage(tmp_path):
    assert main(["quickstart", "--out", str(tmp_path / "qs")]) == 0
    s = json.loads((tmp_path / "qs" / "summary.json").read_text())
    assert {"contactnets", "objects", "scenes"} <= set(s)
    assert s["scenes"] and all(r["settled"] for r in s["scenes"])
    assert {"train", "heldout"} <= set(s["objects"])
