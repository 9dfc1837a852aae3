"""The capture's rates and timestamps say the same: LeRobot's ``fps``, ``capture_rate_hz``, each episode's
``provenance.capture_rate_hz`` and its timestamps (code downstream steps at 1/capture_rate_hz, other code reads the
timestamps). Each test failed before the check (the reader, ``surrogate inspect`` and the importers took them all).
Data is generated here (a few frames per episode): the file runs in seconds."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from surrogate.capture import DatasetMeta, read_dataset, validate_episode, write_dataset
from surrogate.cli import main
from surrogate.errors import CaptureError
from surrogate.importers.report import ImportReport
from surrogate.inspect import summarize

from .test_capture import RATE_HZ, make_episode

DATA = "data/chunk-000/file-000.parquet"


def _edit_json(path, change):
    d = json.loads(path.read_text())
    change(d)
    path.write_text(json.dumps(d))


def _set_timestamps(root, change):
    """Rewrite the data file's timestamps: ``change(t, episode_index, frame_index)`` returns the new ones."""
    table = pq.read_table(root / DATA)
    t = table["timestamp"].to_numpy().astype(np.float64)
    t = change(t, table["episode_index"].to_numpy(), table["frame_index"].to_numpy())
    i = table.schema.get_field_index("timestamp")
    pq.write_table(table.set_column(i, "timestamp", pa.array(t.astype(np.float32))), root / DATA)


@pytest.fixture
def dataset(tmp_path):
    root = tmp_path / "ds"
    write_dataset(root, [make_episode(str(i), seed=i, T=40, full=False) for i in range(3)], DatasetMeta())
    return root


def test_timestamps_at_another_rate_or_with_a_jump_are_refused_naming_the_field():
    ep = make_episode("a", T=40, full=False)
    validate_episode(ep)  # 100 Hz timestamps under a declared 100 Hz
    slow = dataclasses.replace(ep, timestamps=np.arange(40) / 50.0)
    with pytest.raises(CaptureError, match=r"\(median\) are 50 Hz, but provenance.capture_rate_hz says 100 Hz") as e:
        validate_episode(slow, file="x.parquet")
    assert (e.value.field, e.value.episode, str(e.value.file)) == ("timestamps", "a", "x.parquet")
    jump = dataclasses.replace(ep, timestamps=ep.timestamps + (np.arange(40) >= 25) * 1.0)
    with pytest.raises(CaptureError, match=r"from frame 24 to 25 is 101x the 100 Hz step.*jump in time") as e:
        validate_episode(jump)
    assert e.value.field == "timestamps"
    dropped = dataclasses.replace(ep, timestamps=np.r_[ep.timestamps[:20], ep.timestamps[20:] + 20 / RATE_HZ])
    with pytest.raises(CaptureError, match="21x the 100 Hz step.*dropped frames"):
        validate_episode(dropped)
    # a rate within 1 % of the timestamps' (float32 storage, a rate written with few digits) is the same rate
    validate_episode(dataclasses.replace(ep, provenance=dataclasses.replace(ep.provenance, capture_rate_hz=100.5)))


def test_the_reader_and_inspect_refuse_an_fps_that_disagrees_with_capture_rate_hz(dataset):
    _edit_json(dataset / "meta/info.json", lambda d: d.update(fps=30))
    with pytest.raises(CaptureError, match=r"30 disagrees with meta/contact.json's capture_rate_hz 100 Hz") as e:
        read_dataset(dataset)
    assert e.value.field == "fps" and str(e.value.file).endswith("meta/info.json")
    assert main(["inspect", str(dataset)]) == 2
    _edit_json(dataset / "meta/info.json", lambda d: d.update(fps=100))
    _edit_json(dataset / "meta/contact.json", lambda d: d.update(capture_rate_hz=30.0))
    with pytest.raises(CaptureError, match="fps"):
        read_dataset(dataset)


def test_an_episode_rate_that_disagrees_with_the_dataset_is_skipped_naming_contact_json(dataset):
    _edit_json(dataset / "meta/contact.json", lambda d: d["episodes"][1]["provenance"].update(capture_rate_hz=30.0))
    with pytest.raises(CaptureError, match="30 Hz disagrees with the dataset's capture_rate_hz 100 Hz") as e:
        read_dataset(dataset)
    assert (e.value.field, e.value.episode) == ("provenance.capture_rate_hz", "1")
    assert str(e.value.file).endswith("meta/contact.json")
    s = summarize(dataset)
    assert s["episodes"] == 2 and [x["field"] for x in s["skipped"]] == ["provenance.capture_rate_hz"]


def test_declared_rates_all_30_with_timestamps_at_100_hz_are_refused(dataset):
    _edit_json(dataset / "meta/info.json", lambda d: d.update(fps=30))

    def to_30(d):
        d["capture_rate_hz"] = 30.0
        for e in d["episodes"]:
            e["provenance"]["capture_rate_hz"] = 30.0

    _edit_json(dataset / "meta/contact.json", to_30)
    with pytest.raises(CaptureError, match=r"are 100 Hz, but provenance.capture_rate_hz says 30 Hz") as e:
        read_dataset(dataset)
    assert e.value.field == "timestamps" and str(e.value.file).endswith(DATA)
    s = summarize(dataset)
    assert s["episodes"] == 0 and {x["field"] for x in s["skipped"]} == {"timestamps"}


@pytest.mark.parametrize("change, match", [
    (lambda t, e, f: f / 50.0, r"\(median\) are 50 Hz"),
    (lambda t, e, f: t + ((e == 1) & (f >= 20)) * 1.0, "from frame 19 to 20 is 101x"),
], ids=["timestamps_at_50_hz", "a_1_s_jump"])
def test_the_reader_and_inspect_refuse_timestamps_that_contradict_the_rate(dataset, change, match):
    _set_timestamps(dataset, change)
    with pytest.raises(CaptureError, match=match) as e:
        read_dataset(dataset)
    assert e.value.field == "timestamps" and str(e.value.file).endswith(DATA)
    assert all(x["field"] == "timestamps" for x in summarize(dataset)["skipped"])


def test_the_writer_keeps_one_rate_per_dataset(tmp_path):
    eps = [make_episode("a", T=20, full=False), make_episode("b", T=20, full=False)]
    eps[1] = dataclasses.replace(eps[1], timestamps=np.arange(20) / 50.0,
                                 provenance=dataclasses.replace(eps[1].provenance, capture_rate_hz=50.0))
    report = ImportReport(out=tmp_path / "ds").write(eps, DatasetMeta())
    assert report.kept == 1
    (s,) = report.skipped
    assert (s["episode"], s["field"]) == ("b", "provenance.capture_rate_hz") and "50 Hz disagrees" in s["reason"]
    ds = read_dataset(tmp_path / "ds")
    assert ds.info["fps"] == 100 and ds.capture_rate_hz == RATE_HZ and ds.meta.capture_rate_hz == RATE_HZ
    write_dataset(tmp_path / "again", ds.episodes, ds.meta)  # the reader's meta carries the rate back


def test_poses_import_skips_a_track_with_dropped_frames_naming_it(tmp_path):
    import trimesh

    from .test_import_poses import _config, _trajectory, _write_csv

    mesh = tmp_path / "box.stl"
    trimesh.creation.box(extents=[40, 60, 80]).export(mesh)
    src = tmp_path / "tracks"
    src.mkdir()
    t, pos, rot = _trajectory(T=80)
    _write_csv(src / "good.csv", t, pos, rot)
    keep = np.r_[0:30, 50:80]  # 20 frames the tracker dropped
    _write_csv(src / "dropped.csv", t[keep], pos[keep], rot[keep])
    from surrogate.importers.poses import import_poses

    report = import_poses(src, tmp_path / "out", config=_config(tmp_path, mesh), progress=False)
    assert report.kept == 1
    (s,) = report.skipped
    assert (s["episode"], s["field"]) == ("dropped", "timestamps") and s["file"].endswith("dropped.csv")
    assert "from frame 29 to 30 is 21x the 120 Hz step" in s["reason"] and "dropped frames" in s["reason"]
