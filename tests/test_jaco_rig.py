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
from surrogate.scenes.jaco import ASSETS_ENV

from .conftest import needs_jaco as needs_assets  # skipped, saying so, without dm_control's assets


def _same_model(a, b) -> None:
    """Two compiled models hold the same bodies, geoms, joints and actuators by name, with the same values (to the 6
    digits an MJCF keeps)."""
    for kind, attrs in (("body", ("body_pos", "body_quat", "body_mass", "body_inertia", "body_ipos")),
                        ("geom", ("geom_size", "geom_pos", "geom_quat", "geom_friction", "geom_contype",
                                  "geom_conaffinity")),
                        ("jnt", ("jnt_range", "jnt_axis", "jnt_stiffness")),
                        ("actuator", ("actuator_forcerange", "actuator_gainprm", "actuator_biasprm",
                                      "actuator_ctrlrange", "actuator_gear"))):
        assert getattr(a, f"n{kind}") == getattr(b, f"n{kind}"), kind
        for i in range(getattr(a, f"n{kind}")):
            j = getattr(b, kind)(getattr(a, kind)(i).name).id
            for at in attrs:
                np.testing.assert_allclose(getattr(a, at)[i], getattr(b, at)[j], rtol=1e-5, atol=1e-6,
                                           err_msg=f"{kind} {getattr(a, kind)(i).name} {at}")
    assert a.npair == b.npair and a.nsensor == b.nsensor and a.nq == b.nq and a.nexclude == b.nexclude
    for name in ("dof_armature", "dof_damping", "dof_frictionloss", "body_gravcomp"):  # by value: dofs follow joints
        np.testing.assert_allclose(np.sort(getattr(a, name)), np.sort(getattr(b, name)), rtol=1e-5, err_msg=name)
    ga, gb = ({a.geom(i).name: m.geom_solref[m.geom(a.geom(i).name).id] for i in range(a.ngeom)} for m in (a, b))
    assert all(np.allclose(ga[k], gb[k]) for k in ga)


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


def test_a_capture_of_a_code_hand_builds_by_name_and_another_robot_of_that_name_from_its_mjcf():
    """The rig's captures of the two code hands rebuild exactly, by their builders, though they carry the MJCF; a
    robot imported under one of those names with its own MJCF (not the package's hand) is built from its MJCF."""
    from surrogate.scenes.from_capture import HANDS_MODULE, capture_hand
    from surrogate.scenes.hand_model import HandModel

    described, files = capture_entry(hand_model("three_finger"))
    assert capture_hand(DatasetMeta(hand={**described, "model": HANDS_MODULE}, robot_files=files)) == "three_finger"
    theirs = {**described, "name": "parallel_jaw"}  # someone's three-finger robot, named like the package's jaw
    got = capture_hand(DatasetMeta(hand=theirs, robot_files=files))
    assert isinstance(got, HandModel) and got.info.name == "parallel_jaw" and len(got.info.pad_geom_names) == 3
    assert capture_hand(DatasetMeta(hand={"name": "three_finger"})) == "three_finger"  # older captures: no MJCF
    with pytest.raises(ConfigError, match="no MJCF of it"):
        capture_hand(DatasetMeta(hand={"name": "lab_gripper"}))


def test_robot_files_bundle_an_mjcf_with_its_meshes_and_say_what_is_missing(tmp_path):
    """``capture.robot.robot_entry`` on an MJCF with meshes in two folders of one base name (renamed apart), its
    includes inlined; a missing mesh, an unreadable MJCF and an asset taking the MJCF's name are refused."""
    import trimesh

    from surrogate.capture.robot import entry, robot_entry

    for side, size in (("left", 0.01), ("right", 0.02)):
        (tmp_path / side).mkdir()
        trimesh.creation.box(extents=[size] * 3).export(tmp_path / side / "finger.stl")
    (tmp_path / "parts.xml").write_text("<mujoco><asset><mesh name='r' file='right/finger.stl'/></asset></mujoco>")
    (tmp_path / "robot.xml").write_text(
        "<mujoco><include file='parts.xml'/><asset><mesh name='l' file='left/finger.stl'/></asset><worldbody>"
        "<body name='base'><geom type='mesh' mesh='l'/><geom type='mesh' mesh='r'/></body></worldbody></mujoco>")
    hand, files = robot_entry("my robot/v2", tmp_path / "robot.xml", {"x": 1})
    assert hand["mjcf"] == "meta/robot/my_robot_v2.xml" and hand["name"] == "my robot/v2"
    assert set(files) == {"meta/robot/my_robot_v2.xml", "meta/robot/finger.stl", "meta/robot/finger-2.stl"}
    import mujoco

    m = mujoco.MjSpec.from_string(files[hand["mjcf"]].decode(), assets={
        "finger.stl": files["meta/robot/finger.stl"], "finger-2.stl": files["meta/robot/finger-2.stl"]}).compile()
    sizes = sorted(float(np.ptp(m.mesh_vert[m.mesh_vertadr[i]:m.mesh_vertadr[i] + m.mesh_vertnum[i]], axis=0).max())
                   for i in range(m.nmesh))
    np.testing.assert_allclose(sizes, [0.01, 0.02], rtol=1e-6)  # both meshes, each its own file
    (tmp_path / "left" / "finger.stl").unlink()
    with pytest.raises(CaptureError, match="not a file"):
        robot_entry("r", tmp_path / "robot.xml", {})
    (tmp_path / "bad.xml").write_text("<mujoco><worldbody><body></mujoco>")
    with pytest.raises(CaptureError, match="cannot read"):
        robot_entry("r", tmp_path / "bad.xml", {})
    with pytest.raises(CaptureError, match="name of its MJCF"):
        entry("r", "<mujoco/>", {"r.xml": b""}, {})


def test_a_robot_mjcf_that_changes_the_world_or_misfits_its_description_is_refused():
    """A robot MJCF is the root of its scenes: one that sets gravity, a total mass or the main default class's contact
    parameters would change the table and the object, and is refused naming them; per-finger lists of the wrong
    length (one grip lever for two servos) are refused naming the field."""
    described, files = capture_entry(hand_model("parallel_jaw"))
    xml = files[described["mjcf"]].decode()
    for setting, said in (("<option gravity='0 0 -1'/>", "option gravity"),
                          ("<compiler settotalmass='2'/>", "compiler settotalmass"),
                          ("<default><geom solref='0.05 1'/></default>", "default geom solref")):
        bad = {described["mjcf"]: xml.replace("<worldbody>", setting + "<worldbody>", 1).encode()}
        with pytest.raises(ConfigError, match=said):
            load_hand_model(described, bad)
    for key, value, said in (("grip_levers", [1.0], "1 values for 2 finger actuators"),
                             ("closes_across", "false", "true or false"),
                             ("sensor_names", ["ft_left_force", "ft_thumb"], "sensor 'ft_thumb'")):
        with pytest.raises(ConfigError, match=said):
            load_hand_model({**described, "description": {**described["description"], key: value}}, files)
    renamed = load_hand_model({**described, "name": "lab_gripper"}, files)  # the hand's name wins
    assert renamed.info.name == "lab_gripper"


def test_robot_files_survive_a_read_and_rewrite_of_the_dataset(tmp_path):
    from surrogate.capture import write_dataset
    from surrogate.rig.generate import generate

    generate(None, objects="train", episodes=1, out=tmp_path / "a", workers=0, seed=2, progress=False, duration=1.0)
    ds = read_dataset(tmp_path / "a")
    assert ds.meta.hand["mjcf"] == "meta/robot/parallel_jaw.xml" and set(ds.meta.robot_files) == {ds.meta.hand["mjcf"]}
    write_dataset(tmp_path / "b", ds.episodes, ds.meta)
    again = read_dataset(tmp_path / "b")
    assert again.meta.robot_files == ds.meta.robot_files and again.meta.hand == ds.meta.hand


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
    capsys.readouterr()
    assert main(["inspect", str(train)]) == 0
    assert "robot: jaco, 7 recorded joints; MJCF meta/robot/jaco.xml with 4 asset files" in capsys.readouterr().out

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
    body = card["data"]["contact_groups"]["body"]
    assert body["hand"] == "jaco" and body["units"] == "si"  # what the pad law assumes: the hand, its pads, units
    assert body["pad_material"].startswith("the capture rig's elastomer fingertip pad") and "pulp_stiffening" in \
        body["pad_material"]
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
    assert "field 'hand.description.pad_geom_names'" in err and "geom 'pad_thumb'" in err
    assert not (tmp_path / "x").exists()
