"""Tests of the capture format: round trip, truth isolation, LeRobot layout, validation,
atomic writes, corrupt inputs and data-file rollover.

All data is generated here with numpy (a few frames per episode) so the file runs in
seconds without the shared data.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import surrogate.capture.reader as reader_mod
import surrogate.capture.writer as writer_mod
from surrogate.capture import (
    CaptureWriter,
    DatasetMeta,
    Environment,
    Episode,
    ObjectSpec,
    Provenance,
    read_dataset,
    validate_episode,
    write_dataset,
)
from surrogate.capture.episode import OPTIONAL_ARRAYS
from surrogate.capture.schema import CONTACT_META, FEATURE_KEYS
from surrogate.errors import CaptureError

RATE_HZ = 100.0
J, S, K, R = 3, 2, 5, 4  # joints, wrench sensors, taxels, contact regions


# --------------------------------------------------------------------------- helpers
def box_object(name="box", half=(0.03, 0.02, 0.01), mass=0.2) -> ObjectSpec:
    """A solid box: inertia about the centre of mass, kg m^2."""
    hx, hy, hz = half
    inertia = mass / 3.0 * np.diag([hy**2 + hz**2, hx**2 + hz**2, hx**2 + hy**2])
    return ObjectSpec(name=name, mass=mass, inertia=inertia.tolist(), size=2 * max(half),
                      geometry={"kind": "box", "half_extents": list(half)}, friction=0.8)


def pose_track(T: int, rng, speed=0.3) -> np.ndarray:
    """[T, 7] pose: the object slides along x at ``speed`` m/s while yawing; unit quaternions."""
    t = np.arange(T) / RATE_HZ
    yaw = 0.5 * t + 0.01 * rng.standard_normal(T)
    pose = np.zeros((T, 7))
    pose[:, 0] = speed * t
    pose[:, 1] = 0.01 * rng.standard_normal(T)
    pose[:, 2] = 0.01
    pose[:, 3] = np.cos(yaw / 2)
    pose[:, 6] = np.sin(yaw / 2)
    return pose


def make_episode(ep_id: str, *, seed=0, T=30, full=True, obj=None, t_start=0.0, t0=0.0) -> Episode:
    """An episode with every optional array (``full``) or only the pose."""
    rng = np.random.default_rng(seed)
    ts = t_start + np.arange(T) / RATE_HZ
    pose = pose_track(T, rng)
    ep = Episode(
        episode_id=ep_id, timestamps=ts, object_pose=pose, object=obj or box_object(),
        provenance=Provenance(source="unit test", real=False, capture_rate_hz=RATE_HZ, generator={"seed": seed}),
        environment=Environment(kind="table", height=0.0), t0=t0,
    )
    if not full:
        return ep
    valid = rng.random(T) > 0.2
    valid[0] = True
    ep.object_pose_valid = valid
    ep.object_twist = rng.standard_normal((T, 6))
    ep.joint_pos = rng.standard_normal((T, J))
    ep.joint_vel = rng.standard_normal((T, J))
    ep.joint_cmd = rng.standard_normal((T, J))
    ep.wrench = rng.standard_normal((T, S, 6))
    ep.tactile = rng.random((T, K))
    ep.contact_regions = (rng.random((T, R)) > 0.5).astype(np.float64)
    ep.grasp_type = 11
    ep.task = f"lift the {ep.object.name}"
    ep.labels = {"success": True, "slip_frames": [3, 4]}
    ep.truth = {"object_pose": pose.copy(), "contact_force": rng.standard_normal((T, 2, 3)), "slip": rng.random(T)}
    return ep


def full_meta(objects=("box",)) -> DatasetMeta:
    rng = np.random.default_rng(123)
    return DatasetMeta(
        name="test/full", robot_type="test_hand", hand={"name": "test_hand", "model": None},
        joint_names=[f"j{i}" for i in range(J)], wrench_sensors=["thumb", "index"], tactile_unit="N",
        angular_frame="body", contact_region_seeds={o: (0.01 * rng.standard_normal((R, 3))).tolist() for o in objects},
    )


def assert_episode_close(got: Episode, want: Episode, *, truth: bool):
    """Compare an episode read back with the one written (float32 storage)."""
    assert got.episode_id == want.episode_id
    assert got.num_frames == want.num_frames
    # Timestamps are stored relative to the first frame; t0 keeps the absolute offset.
    assert got.timestamps[0] == 0.0
    np.testing.assert_allclose(got.t0 + got.timestamps, want.t0 + want.timestamps, rtol=0, atol=1e-6)
    np.testing.assert_allclose(got.object_pose, want.object_pose, rtol=1e-6, atol=1e-6)
    for name in OPTIONAL_ARRAYS:
        g, w = getattr(got, name), getattr(want, name)
        assert (g is None) == (w is None), name
        if w is not None:
            assert g.shape == np.asarray(w).shape, name
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=name)
    if want.object_pose_valid is not None:
        assert got.object_pose_valid.dtype == bool
    assert got.object == want.object
    assert got.environment == want.environment
    assert got.provenance == want.provenance
    assert got.grasp_type == want.grasp_type
    assert got.labels == want.labels
    assert got.task == (want.task or "capture")
    if truth:
        assert set(got.truth) == set(want.truth)
        for k, v in want.truth.items():
            assert got.truth[k].shape == np.asarray(v).shape, k
            np.testing.assert_allclose(got.truth[k], v, rtol=1e-6, atol=1e-6, err_msg=k)
    else:
        assert got.truth == {}


def full_dataset(root: Path, n=3) -> list[Episode]:
    """Write ``n`` full episodes over two objects to ``root``; return them."""
    objs = [box_object("box"), box_object("flat", half=(0.05, 0.05, 0.005), mass=0.1)]
    eps = [make_episode(f"ep{i}", seed=i, obj=objs[i % 2], T=20 + 5 * i, t_start=1000.0 + i) for i in range(n)]
    write_dataset(root, eps, full_meta(("box", "flat")))
    return eps


def leftovers(parent: Path) -> list[str]:
    """Hidden temporary trees the atomic writer may have left next to its target."""
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


# --------------------------------------------------------------------------- round trip
def test_round_trip_every_optional_array(tmp_path):
    root = tmp_path / "ds"
    eps = full_dataset(root, n=3)
    ds = read_dataset(root, include_truth=True)
    assert [e.episode_id for e in ds.episodes] == ["ep0", "ep1", "ep2"]
    for got, want in zip(ds.episodes, eps):
        assert_episode_close(got, want, truth=True)
    # Different objects per episode come back with their own description.
    assert [e.object.name for e in ds.episodes] == ["box", "flat", "box"]
    meta = full_meta(("box", "flat"))
    assert ds.meta.joint_names == meta.joint_names
    assert ds.meta.wrench_sensors == meta.wrench_sensors
    assert ds.meta.tactile_unit == "N" and ds.meta.angular_frame == "body"
    assert ds.meta.hand == meta.hand and ds.meta.robot_type == "test_hand" and ds.meta.name == "test/full"
    for o in ("box", "flat"):
        np.testing.assert_allclose(ds.meta.contact_region_seeds[o], meta.contact_region_seeds[o])
    assert ds.capture_rate_hz == RATE_HZ


def test_round_trip_pose_only_and_offsets(tmp_path):
    # One episode with absolute timestamps, one with timestamps from 0 and a t0 offset.
    eps = [make_episode("a", full=False, t_start=1.7e3 + 0.25),
           make_episode("b", full=False, seed=1, t0=42.5, T=12)]
    write_dataset(tmp_path / "ds", eps, DatasetMeta())
    ds = read_dataset(tmp_path / "ds")
    for got, want in zip(ds.episodes, eps):
        assert_episode_close(got, want, truth=False)
    assert ds.episodes[0].t0 == pytest.approx(1700.25)
    assert ds.episodes[1].t0 == pytest.approx(42.5)
    # No optional feature is declared when no episode has it.
    info = json.loads((tmp_path / "ds/meta/info.json").read_text())
    assert FEATURE_KEYS["object_pose"] in info["features"]
    assert not any(FEATURE_KEYS[n] in info["features"] for n in OPTIONAL_ARRAYS)


def test_quaternions_stored_normalized(tmp_path):
    ep = make_episode("q", full=False)
    ep.object_pose[:, 3:] *= 1.005  # within the validator's tolerance: stored as unit quaternions
    write_dataset(tmp_path / "ds", [ep], DatasetMeta())
    q = read_dataset(tmp_path / "ds").episodes[0].object_pose[:, 3:]
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-6)


def test_numpy_values_in_labels_and_geometry_are_stored_as_json(tmp_path):
    obj = box_object()
    obj.geometry["half_extents"] = np.array(obj.geometry["half_extents"])
    ep = make_episode("n", full=False, obj=obj)
    ep.labels = {"score": np.float32(0.5), "frames": np.arange(3)}
    write_dataset(tmp_path / "ds", [ep], DatasetMeta())
    got = read_dataset(tmp_path / "ds").episodes[0]
    assert got.labels == {"score": 0.5, "frames": [0, 1, 2]}
    assert got.object.geometry["half_extents"] == pytest.approx([0.03, 0.02, 0.01])


def test_unserializable_label_is_rejected_naming_the_episode(tmp_path):
    ep = make_episode("bad", full=False)
    ep.labels = {"when": object()}
    with pytest.raises(CaptureError) as ei:
        write_dataset(tmp_path / "ds", [ep], DatasetMeta())
    assert (ei.value.episode, ei.value.field) == ("bad", "labels")
    assert "JSON" in str(ei.value)
    assert not (tmp_path / "ds").exists() and leftovers(tmp_path) == []


# --------------------------------------------------------------------------- truth isolation
def test_truth_is_loaded_only_when_asked(tmp_path, monkeypatch):
    full_dataset(tmp_path / "ds", n=2)
    asked = []
    real = reader_mod.pq.read_table

    def spy(path, columns=None, **kw):
        asked.append(list(columns or []))
        return real(path, columns=columns, **kw)

    monkeypatch.setattr(reader_mod.pq, "read_table", spy)
    ds = read_dataset(tmp_path / "ds")
    assert all(e.truth == {} for e in ds.episodes)
    # Not only dropped afterwards: the truth columns are never read from disk.
    assert asked and not any(c.startswith("truth.") for cols in asked for c in cols)
    ds = read_dataset(tmp_path / "ds", include_truth=True)
    assert set(ds.episodes[0].truth) == {"object_pose", "contact_force", "slip"}
    contact = json.loads((tmp_path / "ds" / CONTACT_META).read_text())
    assert contact["features"]["truth.slip"]["evaluation_only"] is True
    assert contact["features"][FEATURE_KEYS["object_pose"]]["evaluation_only"] is False


# --------------------------------------------------------------------------- LeRobot layout
PYARROW_ONLY_READER = r"""
import json, sys
from pathlib import Path
import pyarrow.parquet as pq
root = Path(sys.argv[1]); want = int(sys.argv[2])
info = json.loads((root / "meta/info.json").read_text())
eps = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
row = [r for r in eps if r["episode_index"] == want][0]
path = root / info["data_path"].format(chunk_index=row["data/chunk_index"], file_index=row["data/file_index"])
data = pq.read_table(path).to_pylist()
frames = [r for r in data if row["dataset_from_index"] <= r["index"] < row["dataset_to_index"]]
assert all(r["episode_index"] == want for r in frames)
contact = json.loads((root / "meta/contact.json").read_text())
t0 = [e for e in contact["episodes"] if e["episode_index"] == want][0]["t0"]
print(json.dumps({"pose": [r["observation.object_pose"] for r in frames],
                  "time": [t0 + r["timestamp"] for r in frames],
                  "project_code_loaded": any(m.startswith("surrogate") for m in sys.modules)}))
"""


def test_readable_with_pyarrow_alone(tmp_path):
    eps = full_dataset(tmp_path / "ds", n=3)
    out = subprocess.run([sys.executable, "-c", PYARROW_ONLY_READER, str(tmp_path / "ds"), "1"],
                         capture_output=True, text=True, timeout=60, check=True)
    got = json.loads(out.stdout)
    assert got["project_code_loaded"] is False
    np.testing.assert_allclose(got["pose"], eps[1].object_pose, atol=1e-6)
    np.testing.assert_allclose(got["time"], eps[1].timestamps, atol=1e-5)


def test_lerobot_v3_metadata(tmp_path):
    eps = full_dataset(tmp_path / "ds", n=3)
    root = tmp_path / "ds"
    info = json.loads((root / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0"
    assert info["fps"] == 100 and isinstance(info["fps"], int)
    assert info["total_episodes"] == 3 and info["total_frames"] == sum(e.num_frames for e in eps)
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    feats = info["features"]
    for key in ("timestamp", "frame_index", "episode_index", "index", "task_index"):
        assert feats[key]["shape"] == [1] and feats[key]["names"] is None
    assert feats["observation.object_pose"] == {"dtype": "float32", "shape": [7],
                                                "names": ["x", "y", "z", "qw", "qx", "qy", "qz"]}
    assert feats["observation.state"]["names"] == ["j0.pos", "j1.pos", "j2.pos"]
    assert feats["action"]["names"] == ["j0.cmd", "j1.cmd", "j2.cmd"]
    assert feats["observation.wrench"]["shape"] == [12] and feats["observation.wrench"]["names"][6] == "index.fx"
    # float32 0/1 (schema 1.1): LeRobot's normalizer cannot take a bool feature
    assert feats["observation.object_pose_valid"] == {"dtype": "float32", "shape": [1], "names": None}
    assert feats["observation.environment_state"] == feats["observation.object_pose"]
    for key, f in feats.items():
        assert set(f) == {"dtype", "shape", "names"}, key
        if f["names"] is not None:
            assert len(f["names"]) == f["shape"][0], key
    # Parquet columns match the declared features (types LeRobot writes).
    schema = pq.read_schema(root / "data/chunk-000/file-000.parquet")
    assert set(schema.names) == set(feats)
    assert schema.field("observation.object_pose").type == pa.list_(pa.float32(), 7)
    assert schema.field("timestamp").type == pa.float32()
    assert b"huggingface" in schema.metadata

    rows = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [r["episode_index"] for r in rows] == [0, 1, 2]
    assert [r["length"] for r in rows] == [e.num_frames for e in eps]
    start = 0
    for r, e in zip(rows, eps):
        assert (r["dataset_from_index"], r["dataset_to_index"]) == (start, start + e.num_frames)
        assert (r["data/chunk_index"], r["data/file_index"]) == (0, 0)
        assert r["tasks"] == [e.task]
        assert r["stats/observation.object_pose/count"] == [e.num_frames]
        start += e.num_frames

    stats = json.loads((root / "meta/stats.json").read_text())
    assert stats["observation.object_pose"]["count"] == [info["total_frames"]]
    all_pose = np.concatenate([e.object_pose for e in eps])
    np.testing.assert_allclose(stats["observation.object_pose"]["mean"], all_pose.mean(0), atol=1e-5)
    np.testing.assert_allclose(stats["observation.object_pose"]["std"], all_pose.std(0), atol=1e-5)


def test_tasks_parquet_has_pandas_index(tmp_path):
    eps = full_dataset(tmp_path / "ds", n=3)
    table = pq.read_table(tmp_path / "ds/meta/tasks.parquet")
    pandas_meta = json.loads(table.schema.metadata[b"pandas"])
    assert pandas_meta["index_columns"] == ["__index_level_0__"]
    tasks = dict(zip(table["__index_level_0__"].to_pylist(), table["task_index"].to_pylist()))
    assert tasks == {"lift the box": 0, "lift the flat": 1}
    data = pq.read_table(tmp_path / "ds/data/chunk-000/file-000.parquet", columns=["episode_index", "task_index"])
    by_ep = dict(zip(data["episode_index"].to_pylist(), data["task_index"].to_pylist()))
    assert [by_ep[i] for i in range(3)] == [tasks[e.task] for e in eps]


# --------------------------------------------------------------------------- width-1 features, schema 1.0
def width_one_episode(ep_id="w0", seed=0, T=12) -> Episode:
    """A 1-joint hand with one wrench sensor, one taxel, one contact region and width-1 truth."""
    rng = np.random.default_rng(seed)
    ep = make_episode(ep_id, seed=seed, T=T, full=False)
    ep.object_pose_valid = np.r_[True, rng.random(T - 1) > 0.3]
    ep.joint_pos, ep.joint_vel, ep.joint_cmd = (rng.standard_normal((T, 1)) for _ in range(3))
    ep.wrench = rng.standard_normal((T, 1, 6))
    ep.tactile = rng.random((T, 1))
    ep.contact_regions = (rng.random((T, 1)) > 0.5).astype(float)
    ep.truth = {"mass": np.full(T, 0.2), "count": rng.random((T, 1)), "com": rng.random((T, 3))}
    return ep


def width_one_meta() -> DatasetMeta:
    return DatasetMeta(name="test/width1", joint_names=["j0"], wrench_sensors=["tip"], tactile_unit="N",
                       contact_region_seeds={"box": [[0.0, 0.0, 0.01]]})


def test_width_one_features_are_scalar_columns(tmp_path):
    # LeRobot maps every shape-(1,) feature to a scalar Value, whatever its names.
    eps = [width_one_episode("w0", 0), width_one_episode("w1", 1)]
    write_dataset(tmp_path / "ds", eps, width_one_meta())
    feats = json.loads((tmp_path / "ds/meta/info.json").read_text())["features"]
    schema = pq.read_schema(tmp_path / "ds/data/chunk-000/file-000.parquet")
    hf = json.loads(schema.metadata[b"huggingface"])["info"]["features"]
    for key in ("observation.state", "observation.joint_velocity", "action", "observation.tactile",
                "annotation.contact_regions", "truth.mass", "truth.count", "observation.object_pose_valid"):
        assert feats[key]["shape"] == [1], key
        assert schema.field(key).type == pa.float32(), key
        assert hf[key] == {"dtype": "float32", "_type": "Value"}, key
    assert feats["observation.state"]["names"] == ["j0.pos"]
    assert schema.field("truth.com").type == pa.list_(pa.float32(), 3)
    assert schema.field("observation.wrench").type == pa.list_(pa.float32(), 6)
    for got, want in zip(read_dataset(tmp_path / "ds", include_truth=True).episodes, eps):
        assert_episode_close(got, want, truth=True)


def as_schema_1_0(root: Path) -> None:
    """Rewrite a dataset in place into the layout schema 1.0 wrote: valid flag as bool, every other
    width-1 feature (not the LeRobot index keys) as a fixed-size list of 1, no environment state."""
    info_path = root / "meta/info.json"
    info = json.loads(info_path.read_text())
    feats = info["features"]
    feats.pop("observation.environment_state", None)
    path = root / "data/chunk-000/file-000.parquet"
    table = pq.read_table(path).drop_columns(["observation.environment_state"])
    fields, cols = [], []
    for name in table.column_names:
        col = table[name].combine_chunks()
        if name == "observation.object_pose_valid":
            col, feats[name]["dtype"] = col.cast(pa.bool_()), "bool"
        elif feats[name]["shape"] == [1] and name not in ("timestamp", "frame_index", "episode_index", "index", "task_index"):
            col = pa.FixedSizeListArray.from_arrays(col, 1)
        fields.append(pa.field(name, col.type))
        cols.append(col)
    hf = {t.name: {"dtype": feats[t.name]["dtype"], "_type": "Value"} if pa.types.is_primitive(t.type) else
          {"feature": {"dtype": feats[t.name]["dtype"], "_type": "Value"}, "length": t.type.list_size, "_type": "List"}
          for t in fields}
    schema = pa.schema(fields, metadata={b"huggingface": json.dumps({"info": {"features": hf}}).encode()})
    pq.write_table(pa.Table.from_arrays(cols, schema=schema), path)
    info_path.write_text(json.dumps(info))
    _edit_contact(root, lambda c: (c.__setitem__("schema_version", "1.0"), c["features"].pop("observation.environment_state")))


@pytest.mark.parametrize("kind", ["full", "width_one"])
def test_reads_schema_1_0_layout(tmp_path, kind):
    if kind == "full":
        eps, meta = [make_episode(f"ep{i}", seed=i) for i in range(2)], full_meta()
    else:
        eps, meta = [width_one_episode("w0", 0), width_one_episode("w1", 1)], width_one_meta()
    write_dataset(tmp_path / "ds", eps, meta)
    as_schema_1_0(tmp_path / "ds")
    schema = pq.read_schema(tmp_path / "ds/data/chunk-000/file-000.parquet")
    assert schema.field("observation.object_pose_valid").type == pa.bool_()
    assert "observation.environment_state" not in schema.names
    ds = read_dataset(tmp_path / "ds", include_truth=True)
    assert ds.contact["schema_version"] == "1.0"
    for got, want in zip(ds.episodes, eps):
        assert_episode_close(got, want, truth=True)


def test_written_schema_version_and_environment_state(tmp_path):
    eps = full_dataset(tmp_path / "ds", n=2)
    contact = json.loads((tmp_path / "ds" / CONTACT_META).read_text())
    assert contact["schema_version"] == "1.1"
    assert "observation.environment_state" in contact["features"]
    table = pq.read_table(tmp_path / "ds/data/chunk-000/file-000.parquet")
    env = np.array(table["observation.environment_state"].to_pylist())
    pose = np.array(table["observation.object_pose"].to_pylist())
    np.testing.assert_array_equal(env, pose)
    valid = table["observation.object_pose_valid"].to_numpy()
    assert valid.dtype == np.float32 and set(np.unique(valid)) <= {0.0, 1.0}
    np.testing.assert_array_equal(valid[:eps[0].num_frames], eps[0].object_pose_valid)


def test_valid_flag_other_than_0_or_1_is_rejected(tmp_path):
    full_dataset(tmp_path / "ds", n=1)
    path = tmp_path / "ds/data/chunk-000/file-000.parquet"
    table = pq.read_table(path)
    i = table.column_names.index("observation.object_pose_valid")
    v = table["observation.object_pose_valid"].to_numpy().copy()
    v[4] = 0.5
    pq.write_table(table.set_column(i, "observation.object_pose_valid", pa.array(v)), path)
    with pytest.raises(CaptureError) as ei:
        read_dataset(tmp_path / "ds")
    assert (ei.value.episode, ei.value.field) == ("ep0", "observation.object_pose_valid")
    assert "must be 0 or 1, got 0.5 at frame 4" in ei.value.reason


# --------------------------------------------------------------------------- validator
def _mutate(name):
    """(mutation of a full episode, field, message fragment) for one kind of bad input."""
    def set_(attr, fn):
        return lambda ep: setattr(ep, attr, fn(ep))

    def pose(fn):
        def f(ep):
            p = ep.object_pose.copy()
            fn(p)
            ep.object_pose = p
        return f

    def obj(**kw):
        def f(ep):
            for k, v in kw.items():
                setattr(ep.object, k, v)
        return f

    cases = {
        "nan": (pose(lambda p: p.__setitem__((5, 1), np.nan)), "object_pose", "NaN value at frame 5"),
        "inf": (set_("joint_vel", lambda ep: np.where(np.arange(ep.num_frames)[:, None] == 7, np.inf, ep.joint_vel)),
                "joint_vel", "infinite value at frame 7"),
        "quat_norm": (pose(lambda p: p.__setitem__((4, slice(3, 7)), p[4, 3:] * 1.5)), "object_pose",
                      "quaternion at frame 4 has norm 1.5"),
        "non_monotonic": (set_("timestamps", lambda ep: ep.timestamps[[0, 1, 3, 2] + list(range(4, ep.num_frames))]),
                          "timestamps", "not strictly increasing: frame 3"),
        "duplicate_time": (set_("timestamps", lambda ep: np.r_[ep.timestamps[:6], ep.timestamps[5:-1]]),
                           "timestamps", "not strictly increasing: frame 6"),
        "too_short": (lambda ep: setattr(ep, "timestamps", ep.timestamps[:1]), "timestamps", "at least 2 frames"),
        "length": (set_("joint_pos", lambda ep: ep.joint_pos[:-1]), "joint_pos", "mismatched lengths"),
        "pose_width": (set_("object_pose", lambda ep: ep.object_pose[:, :6]), "object_pose", "expected shape [T, 7]"),
        "wrench_rank": (set_("wrench", lambda ep: ep.wrench.reshape(ep.num_frames, -1)), "wrench", "expected shape [T, n, 6], got [30, 12]"),
        "wrench_width": (set_("wrench", lambda ep: ep.wrench[:, :, :3]), "wrench", "expected shape [T, n, 6], got [30, 2, 3]"),
        "joint_count": (set_("joint_cmd", lambda ep: ep.joint_cmd[:, :2]), "joint_cmd", "other joint arrays have 3"),
        "millimetres": (pose(lambda p: p.__setitem__((slice(None), slice(0, 3)), p[:, :3] * 1000)), "object_pose",
                        "positions must be in metres"),
        # timestamps in seconds read as milliseconds: the speed is as absurd, the message had named only metres
        "seconds_as_ms": (set_("timestamps", lambda ep: ep.timestamps / 1000), "object_pose", "timestamps in seconds"),
        "mass": (obj(mass=-0.2), "object.mass", "(0, 1e4) kg"),
        "mass_grams": (obj(mass=2e4), "object.mass", "(0, 1e4) kg"),
        "inertia_shape": (obj(inertia=[1e-4, 1e-4, 1e-4]), "object.inertia", "3x3"),
        "inertia_asym": (obj(inertia=[[1e-4, 1e-5, 0], [0, 1e-4, 0], [0, 0, 1e-4]]), "object.inertia", "symmetric"),
        "inertia_not_psd": (obj(inertia=np.diag([1e-4, 1e-4, -1e-4]).tolist()), "object.inertia", "positive definite"),
        "inertia_triangle": (obj(inertia=np.diag([1e-4, 1e-4, 5e-4]).tolist()), "object.inertia", "triangle inequality"),
        "size_mm": (obj(size=60.0), "object.size", "units must be metres"),
        "geometry": (obj(geometry={"kind": "sphere"}), "object.geometry", "box, mesh or procedural"),
        "environment": (lambda ep: setattr(ep.environment, "kind", "moon"), "environment.kind", "unknown kind 'moon'"),
        "gravity": (lambda ep: setattr(ep.environment, "gravity", [0, -9.81]), "environment.gravity", "3 finite numbers"),
        "rate": (lambda ep: setattr(ep.provenance, "capture_rate_hz", 0.0), "provenance.capture_rate_hz", "(0, 1e5) Hz"),
        "grasp_34": (lambda ep: setattr(ep, "grasp_type", 34), "grasp_type", "Feix GRASP taxonomy id 1..33, got 34"),
        "grasp_0": (lambda ep: setattr(ep, "grasp_type", 0), "grasp_type", "got 0"),
        "grasp_float": (lambda ep: setattr(ep, "grasp_type", 3.5), "grasp_type", "got 3.5"),
        "grasp_str": (lambda ep: setattr(ep, "grasp_type", "power"), "grasp_type", "got 'power'"),
        "regions": (set_("contact_regions", lambda ep: ep.contact_regions * 0.5), "contact_regions", "0 or 1"),
        "regions_width": (set_("contact_regions", lambda ep: ep.contact_regions[:, :2]), "contact_regions",
                          "the object's seeds define 4"),
        "no_seeds": (lambda ep: setattr(ep.object, "name", "other"), "contact_regions", "no region seeds for object 'other'"),
        "all_invalid": (set_("object_pose_valid", lambda ep: np.zeros(ep.num_frames, bool)), "object_pose_valid",
                        "never tracked"),
        "truth_len": (lambda ep: ep.truth.__setitem__("slip", ep.truth["slip"][:-2]), "truth.slip", "expected 30"),
        # what the reader refuses, the writer refuses first: a 0.5 flag had been written as True, a NaN t0 as null
        "half_valid": (set_("object_pose_valid", lambda ep: np.full(ep.num_frames, 0.5)), "object_pose_valid",
                       "must be 0 or 1 (or bool), got 0.5 at frame 0"),
        "t0_nan": (lambda ep: setattr(ep, "t0", float("nan")), "t0", "must be a finite number of seconds"),
    }
    return cases[name]


@pytest.mark.parametrize("case", [
    "nan", "inf", "quat_norm", "non_monotonic", "duplicate_time", "too_short", "length", "pose_width", "wrench_rank",
    "wrench_width", "joint_count", "millimetres", "seconds_as_ms", "mass", "mass_grams", "inertia_shape", "inertia_asym",
    "inertia_not_psd", "inertia_triangle", "size_mm", "geometry", "environment", "gravity", "rate", "grasp_34",
    "grasp_0", "grasp_float", "grasp_str", "regions", "regions_width", "no_seeds", "all_invalid", "truth_len",
    "half_valid", "t0_nan",
])
def test_validator_rejects_bad_input(case):
    ep = make_episode("bad-ep", seed=3, T=30)
    meta = full_meta()
    validate_episode(ep, meta, file="x.parquet")  # the unmodified episode is valid
    mutate, field, fragment = _mutate(case)
    mutate(ep)
    with pytest.raises(CaptureError) as ei:
        validate_episode(ep, meta, file="x.parquet")
    err = ei.value
    assert (err.episode, err.field, err.file) == ("bad-ep", field, "x.parquet")
    assert fragment in err.reason
    assert str(err).startswith(f"x.parquet: episode bad-ep: field '{field}': ")


def test_pose_speed_ignores_untracked_frames():
    # A jump while the tracker lost the object is not a unit error: those frames are masked.
    ep = make_episode("jump", full=False)
    ep.object_pose[10:15, 0] += 50.0
    with pytest.raises(CaptureError, match="metres"):
        validate_episode(ep)
    valid = np.ones(ep.num_frames, bool)
    valid[10:15] = False
    ep.object_pose_valid = valid
    validate_episode(ep)


def test_joint_count_must_match_meta_names():
    ep = make_episode("j", seed=1)
    meta = full_meta()
    meta.joint_names = ["a", "b"]
    with pytest.raises(CaptureError) as ei:
        validate_episode(ep, meta)
    assert (ei.value.episode, ei.value.field) == ("j", "joint_pos")
    assert "dataset names 2" in ei.value.reason


def _write_two(tmp_path, first, second, meta):
    with pytest.raises(CaptureError) as ei:
        with CaptureWriter(tmp_path / "ds", meta) as w:
            w.add(first)
            w.add(second)
    assert not (tmp_path / "ds").exists() and leftovers(tmp_path) == []
    return ei.value


def test_writer_rejects_mixed_feature_sets(tmp_path):
    second = make_episode("e1", seed=1)
    second.wrench = None
    err = _write_two(tmp_path, make_episode("e0"), second, full_meta())
    assert (err.episode, err.field) == ("e1", "observation.wrench")
    assert "differently from the dataset's first episode" in err.reason


def test_writer_rejects_changed_width(tmp_path):
    meta = DatasetMeta()  # no joint names: only the writer can see the width change
    first, second = make_episode("e0", full=False), make_episode("e1", full=False, seed=1)
    first.joint_pos = np.zeros((first.num_frames, 2))
    second.joint_pos = np.zeros((second.num_frames, 3))
    err = _write_two(tmp_path, first, second, meta)
    assert (err.episode, err.field) == ("e1", "observation.state")
    assert "width 3 differs from the dataset's 2" in err.reason


def test_writer_rejects_changed_truth_shape(tmp_path):
    first, second = make_episode("e0", seed=0), make_episode("e1", seed=1)
    second.truth["contact_force"] = second.truth["contact_force"].reshape(second.num_frames, 3, 2)
    err = _write_two(tmp_path, first, second, full_meta())
    assert (err.episode, err.field) == ("e1", "truth")


def test_writer_rejects_duplicate_episode_id(tmp_path):
    err = _write_two(tmp_path, make_episode("same"), make_episode("same", seed=1), full_meta())
    assert (err.episode, err.field, err.reason) == ("same", "episode_id", "duplicate episode id")


def test_writer_rejects_different_objects_with_one_name(tmp_path):
    heavier = box_object(mass=0.3)
    err = _write_two(tmp_path, make_episode("e0"), make_episode("e1", obj=heavier), full_meta())
    assert (err.episode, err.field) == ("e1", "object")
    assert "object 'box' differs" in err.reason


def test_rejected_episode_leaves_writer_usable(tmp_path):
    # A caller may catch a bad episode and go on; the rejected one must leave no trace.
    with CaptureWriter(tmp_path / "ds", full_meta()) as w:
        w.add(make_episode("e0"))
        bad = make_episode("e1", seed=1)
        bad.labels = {"x": object()}
        with pytest.raises(CaptureError):
            w.add(bad)
        w.add(make_episode("e1", seed=2))
    ds = read_dataset(tmp_path / "ds")
    assert [e.episode_id for e in ds.episodes] == ["e0", "e1"]
    assert ds.info["total_frames"] == 60


def test_writer_validates_meta(tmp_path):
    with pytest.raises(CaptureError) as ei:
        CaptureWriter(tmp_path / "ds", DatasetMeta(angular_frame="sensor"))
    assert ei.value.field == "angular_frame"
    with pytest.raises(CaptureError) as ei:
        CaptureWriter(tmp_path / "ds", DatasetMeta(tactile_unit="kPa"))
    assert ei.value.field == "tactile_unit"
    assert not (tmp_path / "ds").exists() and leftovers(tmp_path) == []


# --------------------------------------------------------------------------- atomicity
def test_exception_inside_writer_publishes_nothing(tmp_path):
    with pytest.raises(RuntimeError, match="boom"):
        with CaptureWriter(tmp_path / "ds", full_meta()) as w:
            w.add(make_episode("e0"))
            assert leftovers(tmp_path) != []  # work happens in a hidden temporary tree...
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []  # ...which is gone, and nothing was published


def test_failure_while_publishing_leaves_no_temp_tree(tmp_path, monkeypatch):
    def fail(path, obj):
        raise OSError("disk full")

    monkeypatch.setattr(writer_mod, "write_json_atomic", fail)
    w = CaptureWriter(tmp_path / "ds", full_meta())
    with pytest.raises(OSError, match="disk full"):
        with w:
            w.add(make_episode("e0"))
    # ``w`` is still referenced: cleanup must not depend on garbage collection.
    assert list(tmp_path.iterdir()) == []


def test_empty_writer_publishes_nothing(tmp_path):
    with pytest.raises(CaptureError, match="no valid episodes"):
        with CaptureWriter(tmp_path / "ds", DatasetMeta()):
            pass
    assert list(tmp_path.iterdir()) == []


def test_overwrite(tmp_path):
    root = tmp_path / "ds"
    full_dataset(root, n=3)
    before = (root / CONTACT_META).read_bytes()
    with pytest.raises(FileExistsError, match="overwrite"):
        write_dataset(root, [make_episode("new", full=False)], DatasetMeta())
    assert (root / CONTACT_META).read_bytes() == before and leftovers(tmp_path) == []
    write_dataset(root, [make_episode("new", full=False)], DatasetMeta(), overwrite=True)
    ds = read_dataset(root)
    assert [e.episode_id for e in ds.episodes] == ["new"]
    assert leftovers(tmp_path) == []  # the old tree moved aside is deleted


# --------------------------------------------------------------------------- corrupt inputs
def test_truncated_data_file(tmp_path):
    full_dataset(tmp_path / "ds", n=2)
    path = tmp_path / "ds/data/chunk-000/file-000.parquet"
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(CaptureError) as ei:
        read_dataset(tmp_path / "ds")
    assert Path(ei.value.file) == path
    assert "file-000.parquet" in str(ei.value) and "unreadable parquet" in str(ei.value)


def test_corrupt_contact_json(tmp_path):
    full_dataset(tmp_path / "ds", n=1)
    path = tmp_path / "ds" / CONTACT_META
    path.write_text(path.read_text()[:100])
    with pytest.raises(CaptureError) as ei:
        read_dataset(tmp_path / "ds")
    assert Path(ei.value.file) == path and "corrupt JSON" in ei.value.reason


def test_missing_contact_json(tmp_path):
    full_dataset(tmp_path / "ds", n=1)
    (tmp_path / "ds" / CONTACT_META).unlink()
    # our captures are LeRobot datasets: without the contact metadata, one is named as such, with the import command
    with pytest.raises(CaptureError, match="missing meta/contact.json: a LeRobot dataset .*surrogate import lerobot"):
        read_dataset(tmp_path / "ds")
    info = tmp_path / "ds" / "meta" / "info.json"
    info.write_text(json.dumps({k: v for k, v in json.loads(info.read_text()).items() if k != "codebase_version"}))
    with pytest.raises(CaptureError, match="missing meta/contact.json; is this a capture dataset"):
        read_dataset(tmp_path / "ds")


@pytest.mark.parametrize("where, reason", [("nope", "no such folder"), ("file.txt", "a file, not a capture dataset")])
def test_a_path_that_is_no_dataset_folder_is_named_as_such(tmp_path, where, reason):
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(CaptureError, match=reason) as ei:
        read_dataset(tmp_path / where)
    assert Path(ei.value.file) == tmp_path / where


def _edit_contact(root: Path, edit):
    path = root / CONTACT_META
    contact = json.loads(path.read_text())
    edit(contact)
    path.write_text(json.dumps(contact))


@pytest.mark.parametrize("version", ["2.0", "0.9", ""])
def test_unreadable_schema_version(tmp_path, version):
    full_dataset(tmp_path / "ds", n=1)
    _edit_contact(tmp_path / "ds", lambda c: c.__setitem__("schema_version", version))
    with pytest.raises(CaptureError) as ei:
        read_dataset(tmp_path / "ds")
    assert ei.value.field == "schema_version"
    assert f"schema version {version!r} is not readable by this version (reads 1.x)" in ei.value.reason


def test_minor_schema_version_is_readable(tmp_path):
    full_dataset(tmp_path / "ds", n=1)
    _edit_contact(tmp_path / "ds", lambda c: c.__setitem__("schema_version", "1.7"))
    assert len(read_dataset(tmp_path / "ds")) == 1


def test_foreign_schema_name(tmp_path):
    full_dataset(tmp_path / "ds", n=1)
    _edit_contact(tmp_path / "ds", lambda c: c.__setitem__("schema", "someone-else/format"))
    with pytest.raises(CaptureError) as ei:
        read_dataset(tmp_path / "ds")
    assert ei.value.field == "schema" and "someone-else/format" in ei.value.reason


def test_skip_episode_with_bad_scene(tmp_path):
    full_dataset(tmp_path / "ds", n=3)
    _edit_contact(tmp_path / "ds", lambda c: c["episodes"][1]["environment"].__setitem__("kind", "moon"))
    with pytest.raises(CaptureError) as ei:
        read_dataset(tmp_path / "ds")
    assert (ei.value.episode, ei.value.field) == ("ep1", "environment.kind")
    ds = read_dataset(tmp_path / "ds", on_error="skip")
    assert [e.episode_id for e in ds.episodes] == ["ep0", "ep2"]
    assert len(ds.skipped) == 1
    s = ds.skipped[0]
    assert (s["episode"], s["field"]) == ("ep1", "environment.kind") and "moon" in s["reason"]
    assert s["file"].endswith("meta/contact.json")  # the scene is described there, not in the data parquet


def test_skip_episode_with_malformed_entry(tmp_path):
    full_dataset(tmp_path / "ds", n=3)
    _edit_contact(tmp_path / "ds", lambda c: c["episodes"][0].pop("provenance"))
    with pytest.raises(CaptureError) as ei:
        read_dataset(tmp_path / "ds")
    assert (ei.value.episode, ei.value.field) == ("ep0", "episodes") and "provenance" in ei.value.reason
    ds = read_dataset(tmp_path / "ds", on_error="skip")
    assert [e.episode_id for e in ds.episodes] == ["ep1", "ep2"]
    assert ds.skipped[0]["episode"] == "ep0" and ds.skipped[0]["file"].endswith("contact.json")


def test_a_duplicate_episode_index_is_named_as_a_duplicate(tmp_path):
    full_dataset(tmp_path / "ds", n=3)
    _edit_contact(tmp_path / "ds", lambda c: c["episodes"][1].__setitem__("episode_index", 0))  # 0 twice, 1 never
    with pytest.raises(CaptureError) as ei:
        read_dataset(tmp_path / "ds")
    assert (ei.value.file, ei.value.episode, ei.value.field) == (tmp_path / "ds" / CONTACT_META, 0, "episodes")
    assert ei.value.reason == "duplicate episode_index 0: more than one entry has it"  # was "episode_index 1 has no entry"
    ds = read_dataset(tmp_path / "ds", on_error="skip")
    assert [e.episode_id for e in ds.episodes] == ["ep2"]  # episode 0's frames had been read as ep1 (the last entry)
    assert [(s["episode"], s["reason"]) for s in ds.skipped] == [
        (0, "duplicate episode_index 0: more than one entry has it"), (1, f"episode_index 1 has no entry in {CONTACT_META}")]


def test_skip_episode_with_bad_data(tmp_path):
    full_dataset(tmp_path / "ds", n=3)
    path = tmp_path / "ds/data/chunk-000/file-000.parquet"
    table = pq.read_table(path)
    pose = table["observation.object_pose"].combine_chunks()
    values = pose.flatten().to_numpy().reshape(-1, 7).copy()
    ep_idx = table["episode_index"].to_numpy()
    values[np.flatnonzero(ep_idx == 2)[3], 0] = np.nan  # frame 3 of episode 2
    new = pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), 7)
    table = table.set_column(table.schema.get_field_index("observation.object_pose"), "observation.object_pose", new)
    pq.write_table(table, path)
    ds = read_dataset(tmp_path / "ds", on_error="skip")
    assert [e.episode_id for e in ds.episodes] == ["ep0", "ep1"]
    assert ds.skipped == [{"file": str(path), "episode": "ep2", "field": "object_pose",
                           "reason": "NaN value at frame 3 (1 non-finite values in all)"}]


def test_importer_skips_are_kept(tmp_path):
    meta = DatasetMeta(skipped=[{"file": "7.pt", "episode": "7", "field": "tensor", "reason": "truncated"}])
    write_dataset(tmp_path / "ds", [make_episode("a", full=False)], meta)
    ds = read_dataset(tmp_path / "ds")
    assert ds.skipped == meta.skipped and ds.meta.skipped == meta.skipped


def test_bad_on_error_value(tmp_path):
    with pytest.raises(ValueError, match="on_error"):
        read_dataset(tmp_path, on_error="ignore")


# --------------------------------------------------------------------------- rollover
def test_data_file_rollover(tmp_path):
    root = tmp_path / "ds"
    eps = [make_episode(f"e{i}", seed=i, T=10 + i, full=True) for i in range(5)]
    # data_file_mb=0: every episode after the first starts a new file; chunks_size=2: two files per chunk.
    with CaptureWriter(root, full_meta(), data_file_mb=0, chunks_size=2) as w:
        for ep in eps:
            w.add(ep)
    files = sorted(p.relative_to(root).as_posix() for p in (root / "data").rglob("*.parquet"))
    assert files == ["data/chunk-000/file-000.parquet", "data/chunk-000/file-001.parquet",
                     "data/chunk-001/file-000.parquet", "data/chunk-001/file-001.parquet",
                     "data/chunk-002/file-000.parquet"]
    rows = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [(r["data/chunk_index"], r["data/file_index"]) for r in rows] == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)]
    ds = read_dataset(root, include_truth=True)
    assert [e.episode_id for e in ds.episodes] == [e.episode_id for e in eps]
    for got, want in zip(ds.episodes, eps):
        assert_episode_close(got, want, truth=True)
    # Global frame index stays contiguous across files.
    index = np.concatenate([pq.read_table(root / f, columns=["index"])["index"].to_numpy() for f in files])
    np.testing.assert_array_equal(index, np.arange(sum(e.num_frames for e in eps)))


def test_no_rollover_by_default(tmp_path):
    full_dataset(tmp_path / "ds", n=4)
    assert len(list((tmp_path / "ds/data").rglob("*.parquet"))) == 1
