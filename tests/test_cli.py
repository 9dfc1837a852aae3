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
    tiny = ["data.n_test=4", "data.train_sizes=[8]", "baselines.identified.sizes=[8]", "baselines.identified.maxiter=1",
            "baselines.identified.popsize=3", "baselines.identified.cones=[elliptic]", "baselines.randomized.n=2"]
    sets = '{heldout_families: {objects: heldout, episodes: 1, seed: 1}, meshes: {objects: "${SURROGATE_DATA}/ycb_sample/ycb", episodes: 1, seed: 2}}'
    rig_tiny = [f"data.test_sets={sets}", "data.duration=2.0", "workers=0", "baselines.identified.episodes=1",
                "baselines.identified.maxiter=1", "baselines.identified.popsize=3", "baselines.identified.cones=[pyramidal]",
                "baselines.randomized.n=2"]
    args = ["quickstart", "--out", str(tmp_path / "qs"), "--rig-episodes", "5", "--epochs", "1", "--workers", "0"]
    assert main(args + [f"--set={o}" for o in tiny] + [f"--rig-set={o}" for o in rig_tiny]) == 0
    s = json.loads((tmp_path / "qs" / "summary.json").read_text())
    assert {"contactnets", "objects", "scenes", "rig", "train", "bench_rig_grasp", "bench_cube_real"} <= set(s)
    assert s["rig"]["episodes"] == 5 and s["train"]["epochs"] == 1
    assert s["bench_rig_grasp"]["verdict"] in ("supported", "falsified")
    led = json.loads((tmp_path / "qs" / "bench_rig_grasp" / "ledger.json").read_text())
    assert led["models"]["surrogate"]["checkpoint"] == s["train"]["checkpoint"]  # the surrogate the job just trained
    if "skipped" not in s["bench_cube_real"]:
        assert s["bench_cube_real"]["verdict"] in ("supported", "falsified")
        assert (tmp_path / "qs" / "bench_cube_real" / "ledger.json").exists()
    assert s["scenes"] and all(r["settled"] for r in s["scenes"])
    assert {"train", "heldout"} <= set(s["objects"])
