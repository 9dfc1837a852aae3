"""Captures of another robot (issue #26): the rig grasps with the Kinova Jaco hand (dm_control's assets), the capture
carries the hand's MJCF and description (``scenes.hand_model``), scenes are rebuilt from the capture alone, and
``surrogate train`` and ``surrogate bench rig-grasp --test-data`` run on those captures end to end.

The Jaco tests need the assets (``pip install --no-deps dm-control``, which the README's test command installs);
without them they are skipped, saying so."""

from __future__ import annotations

import json

import numpy as np
import pytest

from surrogate.capture import read_dataset
from surrogate.capture.episode import DatasetMeta
from surrogate.capture.validate import validate_meta
from surrogate.cli import main
from surrogate.errors import CaptureError, ConfigError
from surrogate.objects import load_split
from surrogate.scenes import build_scene
from surrogate.scenes.hand_model import capture_entry, hand_model, load_hand_model
from surrogate.scenes.jaco import ASSETS_ENV, jaco_assets

try:
    jaco_assets()
    HAVE_ASSETS = True
except ConfigError:  # pragma: no cover - the README's test command installs them
    HAVE_ASSETS = False
needs_assets = pytest.mark.skipif(not HAVE_ASSETS, reason="no Jaco assets (pip install --no-deps dm-control)")


def _same_model(a, b) -> None:
    """Two compiled models hold the same bodies, geoms, joints and actuators by name, with the same values (to the 6
    digits an MJCF keeps)."""
    for kind, attrs in (("body", ("body_pos", "body_quat", "body_mass", "body_inertia", "body_ipos")),
                        ("geom", ("geom_size", "geom_pos", "geom_quat", "geom_friction", "geom_contype",
                                  "geom_conaffinity")),
                        ("jnt", ("jnt_range", "jnt_axis")),
                        ("actuator", ("actuator_forcerange", "actuator_gainprm", "actuator_biasprm",
                                      "actuator_ctrlrange"))):
        assert getattr(a, f"n{kind}") == getattr(b, f"n{kind}"), kind
        for i in range(getattr(a, f"n{kind}")):
            j = getattr(b, kind)(getattr(a, kind)(i).name).id
            for at in attrs:
                np.testing.assert_allclose(getattr(a, at)[i], getattr(b, at)[j], rtol=1e-5, atol=1e-6,
                                           err_msg=f"{kind} {getattr(a, kind)(i).name} {at}")
    assert a.npair == b.npair and a.nsensor == b.nsensor and a.nq == b.nq


@pytest.mark.parametrize("hand", ["parallel_jaw", "three_finger", pytest.param("jaco", marks=needs_assets)])
def test_a_scene_from_a_hands_mjcf_is_the_scene_its_builder_makes(hand):
    """The hand as data (its MJCF, meshes and description, as a capture stores them) builds the scene its builder
    builds, with the grip force bound applied to its servos."""
    described, files = capture_entry(hand_model(hand))
    assert set(files) >= {described["mjcf"]} and all(p.startswith("meta/robot/") for p in files)
    model = load_hand_model(json.loads(json.dumps(described)), files)  # through JSON, as contact.json holds it
    obj = load_split("heldout")[3]
    built, loaded = build_scene(obj, hand=hand, grip_force=3.0), build_scene(obj, hand=model, grip_force=3.0)
    _same_model(built.model, loaded.model)
    assert loaded.hand.grip_force == 3.0 and loaded.hand.pad_geom_names == built.hand.pad_geom_names
    assert sorted(loaded.owned_pairs) == sorted(built.owned_pairs)
    assert sorted(loaded.analytic_pairs) == sorted(built.analytic_pairs)


def test_a_capture_names_what_is_wrong_with_its_robot_description():
    described, files = capture_entry(hand_model("parallel_jaw"))
    with pytest.raises(ConfigError, match="holds no MJCF") as e:
        load_hand_model(described, {})
    assert e.value.location.field == "hand.mjcf"
    bad = {**described, "description": {**described["description"], "pad_geom_names": ["pad_left", "pad_thumb"]}}
    with pytest.raises(ConfigError, match="geom 'pad_thumb'"):
        load_hand_model(bad, files)
    with pytest.raises(ConfigError, match="missing fields \\['base_body'\\]"):
        load_hand_model({**described, "description": {k: v for k, v in described["description"].items()
                                                        if k != "base_body"}}, files)
    broken = {described["mjcf"]: b"<mujoco><worldbody><body name='x'></worldbody></mujoco>"}
    with pytest.raises(ConfigError, match="MuJoCo cannot build"):
        load_hand_model(described, broken)
    with pytest.raises(CaptureError, match="under meta/robot/"):
        validate_meta(DatasetMeta(hand=described, robot_files={"../robot.xml": b""}))
    with pytest.raises(CaptureError, match="does not hold") as e:
        validate_meta(DatasetMeta(hand=described, robot_files={}))
    assert e.value.field == "hand.mjcf"


@needs_assets
def test_jaco_rig_captures_train_and_score_end_to_end(tmp_path, monkeypatch, capsys):
    """The rig records grasps with the Jaco hand; the capture carries its robot, so its scenes build without the
    assets; ``surrogate train`` fits a law on them and ``surrogate bench rig-grasp --test-data`` scores it on
    held-out objects against MuJoCo identified on the same Jaco captures."""
    from surrogate.bench.replay import prepare_replay
    from surrogate.scenes.from_capture import capture_hand
    from surrogate.scenes.hand_model import HandModel

    work = tmp_path / "run"
    train, test = work / "captures", tmp_path / "test"
    assert main(["rig", "generate", "--objects", "train", "--episodes", "3", "--out", str(train), "--workers", "0",
                 "--seed", "5", "--hand", "jaco", "--duration", "3.0", "--quiet"]) == 0
    assert main(["rig", "generate", "--objects", "heldout", "--episodes", "2", "--out", str(test), "--workers", "0",
                 "--seed", "7", "--hand", "jaco", "--duration", "3.0", "--quiet"]) == 0
    ds = read_dataset(train)
    assert ds.meta.hand["name"] == "jaco" and (train / ds.meta.hand["mjcf"]).is_file()
    assert ds.meta.joint_names[-3:] == ["jaco/finger_1", "jaco/finger_2", "jaco/finger_3"]
    assert sum(e.labels["lifted"] for e in ds.episodes) >= 2  # the hand grasps and lifts
    assert {e.grasp_type for e in ds.episodes} == {8}  # Feix "prismatic 2 finger"

    monkeypatch.setenv(ASSETS_ENV, str(tmp_path))  # no assets here: the capture alone builds its scene
    assert isinstance(capture_hand(ds.meta), HandModel)
    r = prepare_replay(ds.episodes[0], ds.meta, substeps=4)
    assert r.scene.hand.name == "jaco" and len(r.sensors) == 3 and r.grip_force is not None
    cols = [r.scene.model.joint(n).id for n in ds.meta.joint_names]
    assert len(cols) == 7  # every recorded joint is the scene's

    assert main(["train", "-c", "rig_default", "--set", f"data.root={train}", "--set", f"out_dir={work}",
                 "--set", "stages.prior.epochs=1", "--set", "model.corrections=false", "--set", "data.val_min=1",
                 "--set", "stages.closed_loop.episodes=1", "--set", "data.window_frames=16"]) == 0
    card = json.loads((work / "export" / "card.json").read_text())
    assert card["data"]["contact_groups"]["body"]["hand"] == "jaco"
    capsys.readouterr()
    assert main(["bench", "rig-grasp-small", "--checkpoint", str(work / "export"), "--test-data", str(test),
                 "--out", str(tmp_path / "bench"), "--no-video", "--set", "workers=0",
                 "--set", "baselines.identified.episodes=2", "--set", "baselines.identified.maxiter=1",
                 "--set", "baselines.identified.popsize=3", "--set", "baselines.identified.cones=[pyramidal]",
                 "--set", "baselines.randomized.n=2", "--set", "floor.redraws=0"]) == 0
    ledger = json.loads((tmp_path / "bench" / "ledger.json").read_text())
    assert ledger["data"]["path"] == str(train.resolve())  # MuJoCo identified on the Jaco captures
    assert ledger["data"]["hand"] == "jaco" and ledger["data"]["test_data"]["test_data"]["hand"] == "jaco"
    for name in ("analytic_nominal", "analytic_identified", "analytic_randomized", "surrogate"):
        o = ledger["models"][name]["overall"]
        assert o["episodes"] == 2 and np.isfinite(o["pos_pct_size"]["mean"]), name
    assert ledger["result"]["verdict"] in ("supported", "falsified", "tie")


def test_lerobot_import_of_another_robot_carries_its_mjcf_and_builds_its_scenes(tmp_path, capsys):
    """A foreign LeRobot dataset (a rig capture without contact.json) of a robot this package does not know by name
    ("lab_gripper": an MJCF file with its description) imports with ``surrogate import lerobot``; the capture holds
    the robot's files, and its episodes replay in scenes built from them."""
    import shutil

    import yaml

    from surrogate.bench.analytic import AnalyticParams
    from surrogate.bench.replay import prepare_replay, simulate_replay
    from surrogate.rig.generate import generate
    from surrogate.scenes.from_capture import capture_hand
    from surrogate.scenes.hand_model import HandModel, info_json

    src = tmp_path / "rig"
    generate(None, objects="train", episodes=1, out=src, workers=0, seed=4, progress=False, duration=2.0)
    rig = read_dataset(src)
    foreign = tmp_path / "foreign"
    shutil.copytree(src, foreign)
    (foreign / "meta" / "contact.json").unlink()
    shutil.rmtree(foreign / "meta" / "robot")
    robot = tmp_path / "robot"
    robot.mkdir()
    model = hand_model("parallel_jaw")
    (robot / "gripper.xml").write_text(model.xml)
    description = {**info_json(model.info), "name": "lab_gripper"}
    ep = rig.episodes[0]
    mapping = {"fields": {"object_pose": {"key": "observation.object_pose"},
                          "object_pose_valid": {"key": "observation.object_pose_valid"},
                          "joint_pos": {"key": "observation.state", "unit": "rad"},
                          "joint_cmd": {"key": "action", "unit": "rad"}},
               "object": ep.object.to_json(), "environment": {"kind": "table", "height": ep.environment.height},
               "provenance": {"source": "a lab's gripper", "real": False,
                              "generator": {"script": {"grip_force": ep.provenance.generator["script"]["grip_force"]}}},
               "joint_names": rig.meta.joint_names,
               "hand": {"name": "lab_gripper", "mjcf": "robot/gripper.xml", "description": description}}
    (tmp_path / "mapping.yaml").write_text(yaml.safe_dump(mapping))
    out = tmp_path / "imported"
    assert main(["import", "lerobot", str(foreign), "--mapping", str(tmp_path / "mapping.yaml"), "--out", str(out)]) == 0
    ds = read_dataset(out)
    assert ds.meta.hand["mjcf"] == "meta/robot/lab_gripper.xml" and (out / "meta/robot/lab_gripper.xml").is_file()
    hand = capture_hand(ds.meta)
    assert isinstance(hand, HandModel) and hand.info.name == "lab_gripper"
    r = prepare_replay(ds.episodes[0], ds.meta, substeps=4)
    assert r.scene.hand.name == "lab_gripper" and r.grip_force == pytest.approx(mapping["provenance"]["generator"]
                                                                                 ["script"]["grip_force"])
    pred = simulate_replay(r, [AnalyticParams(friction=0.8)])[0]
    assert np.isfinite(pred).all() and pred.shape == (ds.episodes[0].num_frames, 7)
    # a description naming a pad its MJCF lacks is refused before anything is written
    mapping["hand"]["description"] = {**description, "pad_geom_names": ["pad_left", "pad_thumb"]}
    (tmp_path / "mapping.yaml").write_text(yaml.safe_dump(mapping))
    capsys.readouterr()
    assert main(["import", "lerobot", str(foreign), "--mapping", str(tmp_path / "mapping.yaml"),
                 "--out", str(tmp_path / "x")]) != 0
    err = capsys.readouterr().err
    assert "field 'hand.description'" in err and "geom 'pad_thumb'" in err
    assert not (tmp_path / "x").exists()
