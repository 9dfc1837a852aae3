"""Tests of reading foreign LeRobot v3 datasets with a key mapping.

The shared sample (written by LeRobot itself) is found via ``SURROGATE_DATA`` or
``<repo>/../shared/data``; tests that need it skip with a plain reason where it is absent.
The other tests build a small foreign dataset here with pyarrow.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from surrogate.capture import read_dataset, write_dataset
from surrogate.capture.lerobot_import import box_inertia, check_mapping, load_mapping, read_lerobot
from surrogate.errors import CaptureError, ConfigError

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SURROGATE_DATA", REPO.parent / "shared" / "data"))
SAMPLE = DATA / "lerobot_v3_sample"
SAMPLE_MAPPING = REPO / "configs/capture/lerobot_sample_mapping.yaml"
needs_sample = pytest.mark.skipif(not (SAMPLE / "meta/info.json").is_file(),
                                  reason=f"LeRobot sample not found at {SAMPLE} (set SURROGATE_DATA); not run here")

RATE = 50


# --------------------------------------------------------------------------- a foreign dataset
def true_episode(T: int, seed: int) -> dict:
    """SI ground truth of one episode: pose [T, 7] (w-first unit quaternions), joints [T, 2] rad, wrench [T, 6]."""
    rng = np.random.default_rng(seed)
    t = np.arange(T) / RATE
    yaw = 0.8 * t
    pose = np.stack([0.1 * t, 0.02 * np.ones(T), 0.03 + 0.05 * t, np.cos(yaw / 2), 0 * t, 0 * t, np.sin(yaw / 2)], 1)
    return {"pose": pose, "joints": 0.3 * rng.standard_normal((T, 2)), "wrench": rng.standard_normal((T, 6))}


def write_foreign(root: Path, episodes: list[dict], *, split_last=False) -> None:
    """A LeRobot-v3-shaped dataset whose pose is x y z qx qy qz qw in millimetres and joints in degrees.

    With ``split_last`` the last episode is spread over two data files (and there is no
    meta/episodes index, so the reader must find the files itself).
    """
    rows = {k: [] for k in ("observation.object_pose", "observation.state", "observation.wrench", "timestamp",
                            "frame_index", "episode_index", "index", "task_index")}
    index = 0
    for e, ep in enumerate(episodes):
        T = len(ep["pose"])
        p = ep["pose"]
        rows["observation.object_pose"] += np.c_[p[:, :3] * 1000.0, p[:, 4:7], p[:, 3:4]].tolist()
        rows["observation.state"] += np.degrees(ep["joints"]).tolist()
        rows["observation.wrench"] += ep["wrench"].tolist()
        rows["timestamp"] += (np.arange(T) / RATE).tolist()
        rows["frame_index"] += list(range(T))
        rows["episode_index"] += [e] * T
        rows["index"] += list(range(index, index + T))
        rows["task_index"] += [e % 2] * T
        index += T
    schema = pa.schema([
        ("observation.object_pose", pa.list_(pa.float32(), 7)), ("observation.state", pa.list_(pa.float32(), 2)),
        ("observation.wrench", pa.list_(pa.float32(), 6)), ("timestamp", pa.float32()),
        ("frame_index", pa.int64()), ("episode_index", pa.int64()), ("index", pa.int64()), ("task_index", pa.int64()),
    ])
    table = pa.Table.from_pydict(rows, schema=schema)
    (root / "data/chunk-000").mkdir(parents=True)
    (root / "meta").mkdir()
    if split_last:
        cut = index - len(episodes[-1]["pose"]) // 2  # half of the last episode goes to a second file
        pq.write_table(table.slice(0, cut), root / "data/chunk-000/file-000.parquet")
        pq.write_table(table.slice(cut), root / "data/chunk-000/file-001.parquet")
    else:
        pq.write_table(table, root / "data/chunk-000/file-000.parquet")
    # Newer-style tasks table: the text as a plain "task" column.
    pq.write_table(pa.table({"task_index": [0, 1], "task": ["push", "lift"]}), root / "meta/tasks.parquet")
    info = {
        "codebase_version": "v3.0", "robot_type": "so100", "total_episodes": len(episodes), "total_frames": index,
        "fps": RATE, "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        "features": {
            "observation.object_pose": {"dtype": "float32", "shape": [7], "names": ["x", "y", "z", "qx", "qy", "qz", "qw"]},
            "observation.state": {"dtype": "float32", "shape": [2], "names": ["shoulder.pos", "elbow.pos"]},
            "observation.wrench": {"dtype": "float32", "shape": [6], "names": None},
            **{k: {"dtype": "float32" if k == "timestamp" else "int64", "shape": [1], "names": None}
               for k in ("timestamp", "frame_index", "episode_index", "index", "task_index")},
        },
    }
    (root / "meta/info.json").write_text(json.dumps(info))


FOREIGN_MAPPING = {
    "fields": {
        "object_pose": {"key": "observation.object_pose", "layout": ["x", "y", "z", "qx", "qy", "qz", "qw"], "length_unit": "mm"},
        "joint_pos": {"key": "observation.state", "unit": "deg"},
        "wrench": {"key": "observation.wrench", "sensors": ["wrist"]},
    },
    "object": {"name": "block", "mass": 0.3, "geometry": {"kind": "box", "half_extents": [0.04, 0.02, 0.01]}},
    "environment": {"kind": "table", "height": 0.0},
    "provenance": {"source": "unit test", "real": False},
}


def mapping(**changes) -> dict:
    """A deep copy of FOREIGN_MAPPING with dotted-path ``changes`` (value None deletes)."""
    m = copy.deepcopy(FOREIGN_MAPPING)
    for path, value in changes.items():
        *parents, last = path.split("__")
        d = m
        for p in parents:
            d = d[p]
        if value is None:
            d.pop(last, None)
        else:
            d[last] = value
    return m


@pytest.fixture
def foreign(tmp_path):
    truth = [true_episode(T, seed) for seed, T in enumerate((20, 31, 17))]
    write_foreign(tmp_path / "foreign", truth)
    return tmp_path / "foreign", truth


# --------------------------------------------------------------------------- the shared sample
@needs_sample
def test_sample_reads_three_episodes():
    eps, meta, skipped = read_lerobot(SAMPLE, load_mapping(SAMPLE_MAPPING))
    assert skipped == []
    assert [e.num_frames for e in eps] == [40, 55, 33] and sum(e.num_frames for e in eps) == 128
    assert [e.episode_id for e in eps] == ["episode_000000", "episode_000001", "episode_000002"]
    for e in eps:
        T = e.num_frames
        assert e.object_pose.shape == (T, 7) and e.joint_pos.shape == (T, 2) and e.joint_cmd.shape == (T, 2)
        assert e.wrench.shape == (T, 1, 6) and e.joint_vel is None and e.object_twist is None
        np.testing.assert_allclose(np.linalg.norm(e.object_pose[:, 3:], axis=1), 1.0, atol=1e-9)
        np.testing.assert_allclose(np.diff(e.timestamps), 0.01, atol=1e-6)
        assert e.task == "grasp and lift the box"
        assert e.provenance.real is False and e.provenance.capture_rate_hz == 100.0
    assert meta.joint_names == ["finger_left", "finger_right"] and meta.wrench_sensors == ["wrist"]
    assert meta.robot_type == "parallel_gripper"
    np.testing.assert_allclose(eps[0].object.inertia, box_inertia(0.2, [0.03] * 3))
    # Values are the parquet's, untouched apart from the quaternion's renormalization.
    raw = pq.read_table(SAMPLE / "data/chunk-000/file-000.parquet")
    first = np.array(raw["observation.object_pose"].to_pylist()[:40])
    np.testing.assert_allclose(eps[0].object_pose[:, :3], first[:, :3], rtol=0, atol=1e-9)
    np.testing.assert_allclose(eps[0].object_pose[:, 3:], first[:, 3:] / np.linalg.norm(first[:, 3:], axis=1, keepdims=True))
    state = np.array(raw["observation.state"].to_pylist()[40:95])
    np.testing.assert_allclose(eps[1].joint_pos, state, atol=1e-9)


@needs_sample
def test_sample_written_back_and_read_again(tmp_path):
    eps, meta, _ = read_lerobot(SAMPLE, SAMPLE_MAPPING)  # a path works as well as a dict
    write_dataset(tmp_path / "ds", eps, meta)
    ds = read_dataset(tmp_path / "ds")
    assert len(ds) == 3 and ds.info["total_frames"] == 128 and ds.info["fps"] == 100
    for got, want in zip(ds.episodes, eps):
        assert got.episode_id == want.episode_id and got.task == want.task
        for name in ("object_pose", "joint_pos", "joint_cmd", "wrench", "timestamps"):
            np.testing.assert_allclose(getattr(got, name), getattr(want, name), atol=1e-6, err_msg=name)
    # What we write uses the same column types as LeRobot's own output.
    ours = pq.read_schema(tmp_path / "ds/data/chunk-000/file-000.parquet")
    theirs = pq.read_schema(SAMPLE / "data/chunk-000/file-000.parquet")
    for name in theirs.names:
        assert ours.field(name).type == theirs.field(name).type, name


# --------------------------------------------------------------------------- a foreign dataset built here
def test_foreign_units_and_quaternion_order(foreign):
    root, truth = foreign
    eps, meta, skipped = read_lerobot(root, mapping())
    assert skipped == [] and len(eps) == 3
    for ep, want in zip(eps, truth):
        # mm -> m, xyzw -> wxyz, deg -> rad (float32 storage in the foreign file)
        np.testing.assert_allclose(ep.object_pose, want["pose"], atol=1e-6)
        np.testing.assert_allclose(ep.joint_pos, want["joints"], atol=1e-5)
        np.testing.assert_allclose(ep.wrench[:, 0], want["wrench"], atol=1e-6)
    assert [e.task for e in eps] == ["push", "lift", "push"]
    assert meta.joint_names == ["shoulder", "elbow"] and meta.robot_type == "so100"
    assert eps[0].provenance.capture_rate_hz == RATE


def test_foreign_episode_split_over_files(tmp_path):
    truth = [true_episode(T, seed) for seed, T in enumerate((12, 25))]
    write_foreign(tmp_path / "f", truth, split_last=True)
    eps, _, skipped = read_lerobot(tmp_path / "f", mapping())
    assert skipped == [] and [e.num_frames for e in eps] == [12, 25]
    np.testing.assert_allclose(eps[1].object_pose, truth[1]["pose"], atol=1e-6)


def test_bad_episode_is_skipped_with_reason(foreign):
    root, truth = foreign
    path = root / "data/chunk-000/file-000.parquet"
    table = pq.read_table(path)
    poses = table["observation.object_pose"].to_pylist()
    poses[20 + 4][3] = float("nan")  # episode 1, frame 4: a quaternion component
    table = table.set_column(0, "observation.object_pose", pa.array(poses, type=pa.list_(pa.float32(), 7)))
    pq.write_table(table, path)
    eps, meta, skipped = read_lerobot(root, mapping())
    assert [e.episode_id for e in eps] == ["episode_000000", "episode_000002"]
    assert len(skipped) == 1
    s = skipped[0]
    assert (s["file"], s["episode"], s["field"]) == (str(path), "episode_000001", "object_pose")
    assert "NaN value at frame 4" in s["reason"]
    assert meta.skipped == skipped
    with pytest.raises(CaptureError) as ei:
        read_lerobot(root, mapping(), on_error="raise")
    assert ei.value.episode == "episode_000001"


def test_a_wrench_stored_as_text_is_refused_naming_episode_column_and_dtype(foreign):
    """Numbers stored as text (even of digits) had been parsed as numbers and imported."""
    root, _ = foreign
    path = root / "data/chunk-000/file-000.parquet"
    table = pq.read_table(path)
    text = [[f"{v:.6f}" for v in row] for row in table["observation.wrench"].to_pylist()]
    i = table.schema.get_field_index("observation.wrench")
    pq.write_table(table.set_column(i, "observation.wrench", pa.array(text, type=pa.list_(pa.string(), 6))), path)
    eps, _, skipped = read_lerobot(root, mapping())
    assert eps == [] and [(s["file"], s["episode"], s["field"], s["reason"]) for s in skipped] == [
        (str(path), f"episode_00000{e}", "observation.wrench", "holds text (dtype object, str values), expected numbers")
        for e in range(3)]
    with pytest.raises(CaptureError) as ei:
        read_lerobot(root, mapping(), on_error="raise")
    assert (ei.value.file, ei.value.episode, ei.value.field) == (path, "episode_000000", "observation.wrench")


def test_untracked_frames_hold_last_pose(foreign, tmp_path):
    root, truth = foreign
    path = root / "data/chunk-000/file-000.parquet"
    table = pq.read_table(path)
    poses = table["observation.object_pose"].to_pylist()
    valid = [True] * len(poses)
    for i in (5, 6):  # a tracker that writes NaN when it loses the object
        poses[i] = [float("nan")] * 7
        valid[i] = False
    table = table.set_column(0, "observation.object_pose", pa.array(poses, type=pa.list_(pa.float32(), 7)))
    pq.write_table(table.append_column("observation.tracked", pa.array(valid)), path)
    info = json.loads((root / "meta/info.json").read_text())
    info["features"]["observation.tracked"] = {"dtype": "bool", "shape": [1], "names": None}
    (root / "meta/info.json").write_text(json.dumps(info))
    eps, _, skipped = read_lerobot(root, mapping(fields__object_pose_valid={"key": "observation.tracked"}))
    assert skipped == []
    ep = eps[0]
    assert ep.object_pose_valid.tolist() == valid[:20]
    np.testing.assert_allclose(ep.object_pose[5], ep.object_pose[4])
    np.testing.assert_allclose(ep.object_pose[6], ep.object_pose[4])


# --------------------------------------------------------------------------- clear errors
@pytest.mark.parametrize("option, unit", [("fields__joint_pos__unit", "furlong"), ("fields__object_pose__length_unit", "parsec")])
def test_unknown_unit(foreign, option, unit):
    root, _ = foreign
    with pytest.raises(CaptureError) as ei:
        read_lerobot(root, mapping(**{option: unit}))
    assert ei.value.field == option.replace("__", ".")
    assert f"unknown unit {unit!r}" in ei.value.reason and "known units" in ei.value.reason and "'mm'" in ei.value.reason


def test_unit_of_the_wrong_kind(foreign):
    root, _ = foreign
    with pytest.raises(CaptureError) as ei:
        read_lerobot(root, mapping(fields__object_pose__length_unit="deg"))
    assert ei.value.field == "fields.object_pose.length_unit" and "expected a unit of m" in ei.value.reason


def test_key_missing_from_dataset(foreign):
    root, _ = foreign
    with pytest.raises(CaptureError) as ei:
        read_lerobot(root, mapping(fields__wrench={"key": "observation.force"}))
    err = ei.value
    assert err.field == "fields.wrench.key" and Path(err.file).name == "info.json"
    assert "'observation.force' is not a feature of this dataset" in err.reason and "observation.wrench" in err.reason


def test_a_mapped_column_missing_from_a_data_file_is_named(foreign):
    """A data file without a column info.json declares skipped its episodes with Arrow's message, which prints the
    whole schema; the record now names the column and lists the file's columns."""
    root, _ = foreign
    path = root / "data/chunk-000/file-000.parquet"
    pq.write_table(pq.read_table(path).drop_columns(["observation.wrench"]), path)
    eps, _, skipped = read_lerobot(root, mapping())
    assert not eps and skipped and {s["field"] for s in skipped} == {"observation.wrench"}
    assert skipped[0]["reason"].startswith("no column 'observation.wrench'; the file has ['")


def test_width_mismatch(foreign):
    root, _ = foreign
    with pytest.raises(CaptureError) as ei:
        read_lerobot(root, mapping(fields__wrench={"key": "observation.wrench", "sensors": ["a", "b"]}))
    assert ei.value.field == "fields.wrench" and "needs 12" in ei.value.reason


def test_layout_contradicting_info_names(foreign):
    root, _ = foreign
    with pytest.raises(CaptureError) as ei:
        read_lerobot(root, mapping(fields__object_pose__layout=["x", "y", "z", "qw", "qx", "qy", "qz"]))
    assert ei.value.field == "fields.object_pose.layout" and "contradicts" in ei.value.reason


@pytest.mark.parametrize("changes, key", [
    ({"fields__object_pose": None}, "fields.object_pose"),
    ({"fields__joint_pos__unit": None}, "fields.joint_pos.unit"),
    ({"fields__object_pose__layout": ["x", "y", "z", "qw", "qx", "qy"]}, "fields.object_pose.layout"),
    ({"fields__object_pose__units": "mm"}, "fields.object_pose.units"),
    ({"fields__gripper": {"key": "action"}}, "fields.gripper"),
    ({"provenance__real": None}, "provenance.real"),
    ({"object__colour": "red"}, "object.colour"),
    ({"object__geometry": {"kind": "mesh", "path": "a.stl"}}, "object.inertia"),
    ({"objects": {}}, "objects"),
    ({"angular_frame": "sensor"}, "angular_frame"),
])
def test_malformed_mapping_names_the_key(changes, key):
    with pytest.raises(ConfigError) as ei:
        check_mapping(mapping(**changes))
    assert ei.value.location.field == key
    assert f"field '{key}'" in str(ei.value)


def test_not_a_lerobot_v3_dataset(foreign):
    root, _ = foreign
    info = json.loads((root / "meta/info.json").read_text())
    info["codebase_version"] = "v2.1"
    (root / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(CaptureError) as ei:
        read_lerobot(root, mapping())
    assert ei.value.field == "codebase_version" and "v2.1" in ei.value.reason


def test_load_mapping_yaml(tmp_path):
    good = load_mapping(SAMPLE_MAPPING)
    assert good["fields"]["object_pose"]["key"] == "observation.object_pose"
    bad = tmp_path / "bad.yaml"
    bad.write_text("fields: {object_pose: [unclosed\n")
    with pytest.raises(ConfigError) as ei:
        load_mapping(bad)
    assert Path(ei.value.location.file) == bad and "not valid YAML" in str(ei.value)
    typo = tmp_path / "typo.yaml"
    typo.write_text(SAMPLE_MAPPING.read_text().replace("length_unit: m", "length_units: m"))
    with pytest.raises(ConfigError) as ei:
        load_mapping(typo)
    assert ei.value.location.field == "fields.object_pose.length_units" and str(typo) in str(ei.value)
    with pytest.raises(ConfigError, match="cannot read"):
        load_mapping(tmp_path / "absent.yaml")


def test_an_fps_that_disagrees_with_the_timestamps_skips_each_episode_and_the_cli_lists_why(foreign, tmp_path, capsys):
    # the episodes were imported at info.json's fps while their timestamps said another rate; and when every episode
    # was bad, the command printed only "no valid episodes to write", without the reasons the other importers list
    import yaml

    from surrogate.cli import main

    root, _ = foreign
    (tmp_path / "map.yaml").write_text(yaml.safe_dump(mapping()))
    args = ["import", "lerobot", str(root), "--mapping", str(tmp_path / "map.yaml"), "--out", str(tmp_path / "out")]
    info = json.loads((root / "meta/info.json").read_text())
    (root / "meta/info.json").write_text(json.dumps({**info, "fps": 30}))
    eps, _, skipped = read_lerobot(root, mapping())
    assert eps == [] and [s["field"] for s in skipped] == ["timestamps"] * 3
    assert "are 50 Hz, but provenance.capture_rate_hz says 30 Hz" in skipped[0]["reason"]
    assert main(args + ["--quiet"]) == 2
    err = capsys.readouterr().err
    assert "no valid episodes to write: all 3 inputs were skipped" in err
    for e in range(3):
        assert f"file-000.parquet: episode episode_00000{e}: field 'timestamps': steps of 0.02 s (median)" in err
    assert not (tmp_path / "out").exists()
    # the mapping may give the rate the timestamps say (LeRobot's fps is an integer): then they are kept
    (tmp_path / "map.yaml").write_text(yaml.safe_dump(mapping(provenance__capture_rate_hz=50.0)))
    assert main(args + ["--quiet"]) == 0
    assert "kept 3 episodes (68 frames)" in capsys.readouterr().out
    assert read_dataset(tmp_path / "out").info["fps"] == 50
