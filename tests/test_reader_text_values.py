"""The capture reader refuses text where numbers belong (meta/info.json, meta/episodes, data files) naming the file, the
episode where there is one, and the field, as the LeRobot importer does (``test_lerobot_import_errors``): parquet and
numpy had read the text "3" as 3, and a text total_frames had turned its check off.

The datasets are written here with the project's writer: 3 full episodes (20, 25, 30 frames), one per data file.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from surrogate.capture import CaptureWriter, read_dataset
from surrogate.capture.reader import metadata_problems
from surrogate.capture.schema import CONTACT_META
from surrogate.errors import CaptureError

from .test_capture import full_meta, make_episode

INFO = "meta/info.json"
INDEX = "meta/episodes/chunk-000/file-000.parquet"
DATA = "data/chunk-000/file-{:03d}.parquet"  # episode i is in file i
TEXT = "holds text (dtype object, str values), expected numbers"  # lerobot_columns.not_numbers


@pytest.fixture
def root(tmp_path):
    root = tmp_path / "ds"
    with CaptureWriter(root, full_meta(), data_file_mb=0) as w:  # data_file_mb=0: one data file per episode
        for i in range(3):
            w.add(make_episode(f"ep{i}", seed=i, T=20 + 5 * i))
    assert [p.name for p in sorted((root / "data/chunk-000").iterdir())] == [f"file-00{i}.parquet" for i in range(3)]
    return root


def _as_text(path, name):
    """Column ``name`` of the parquet file ``path`` rewritten as text of the same numbers (what a CSV round trip
    leaves); a fixed-size list column stays one, of text."""
    table = pq.read_table(path)
    column = table[name]
    rows = column.to_pylist()
    if pa.types.is_fixed_size_list(column.type):
        values = pa.array([[str(v) for v in row] for row in rows], pa.list_(pa.string(), column.type.list_size))
    else:
        values = pa.array([str(v) for v in rows])
    pq.write_table(table.set_column(table.schema.get_field_index(name), name, values), path)


def _edit_json(path, key, value):
    path.write_text(json.dumps({**json.loads(path.read_text()), key: value}))


def _refused(root, on_error="raise") -> CaptureError:
    with pytest.raises(CaptureError) as ei:
        read_dataset(root, on_error=on_error)
    return ei.value


# ----------------------------------------------------------------------------- meta/info.json, meta/contact.json
@pytest.mark.parametrize("key", ["fps", "total_frames", "total_episodes", "total_tasks", "chunks_size"])
@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_a_number_of_info_json_held_as_text_is_refused(root, key, on_error):
    """fps "100" had been refused as a rate out of range; total_frames "75" had turned its check off; total_episodes "3"
    had been said to differ from the 3 episodes; total_tasks and chunks_size had not been looked at."""
    value = str(json.loads((root / INFO).read_text())[key])
    _edit_json(root / INFO, key, value)
    err = _refused(root, on_error)
    assert (err.file, err.episode, err.field) == (root / INFO, None, key)
    assert err.reason == f"holds text {value!r}, expected a number"


def test_a_capture_rate_held_as_text_is_refused_as_text(root):
    """It had been refused as a rate out of range ("must be a rate in (0, 100000) Hz, got '100.0'")."""
    _edit_json(root / CONTACT_META, "capture_rate_hz", "100.0")
    err = _refused(root)
    assert (err.file, err.field, err.reason) == (root / CONTACT_META, "capture_rate_hz",
                                                 "holds text '100.0', expected a number")


def test_metadata_problems_reports_a_total_frames_held_as_text():
    """Its check of the total had been turned off: ([], {}) came back."""
    whole, per = metadata_problems({"total_frames": "68"}, {0: 20, 1: 48}, {})
    assert whole == [("total_frames", "holds text '68', expected a number")] and per == {}


# ----------------------------------------------------------------------------- meta/episodes
@pytest.mark.parametrize("column", ["episode_index", "length", "data/chunk_index", "data/file_index"])
@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_meta_episodes_held_as_text_is_refused_naming_its_file_and_column(root, column, on_error):
    """episode_index "0" had been read as 0 by int(), the file indices not looked at; a length of "20" had been said
    to differ from the 20 frames of every episode, naming meta/episodes but not the file."""
    _as_text(root / INDEX, column)
    err = _refused(root, on_error)
    assert (err.file, err.episode, err.field, err.reason) == (root / INDEX, None, column, TEXT)


# ----------------------------------------------------------------------------- data files
COLUMNS = {  # column held as text: what the reader had done with it
    "timestamp": "read as numbers",
    "frame_index": "sorted as text (10 before 2): refused as timestamps not increasing",
    "observation.object_pose": "refused as 'expected numbers, got dtype object' naming object_pose, not the column",
    "observation.object_pose_valid": "read as flags: the text '0.0' was a tracked frame",
    "index": "not looked at",
    "task_index": "not looked at",
}


@pytest.mark.parametrize("column", COLUMNS)
def test_a_data_column_held_as_text_skips_that_episode_naming_file_episode_and_column(root, column):
    """What the reader had done instead is in ``COLUMNS``."""
    data = root / DATA.format(1)
    _as_text(data, column)
    ds = read_dataset(root, on_error="skip")
    assert [e.episode_id for e in ds.episodes] == ["ep0", "ep2"]
    assert ds.skipped == [{"file": str(data), "episode": "ep1", "field": column, "reason": TEXT}]
    err = _refused(root)  # raised, it names what the skip record names
    assert (err.file, err.episode, err.field, err.reason) == (data, "ep1", column, TEXT)
    assert str(err) == f"{data}: episode ep1: field '{column}': {TEXT}"


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_a_data_file_whose_episode_index_is_text_is_refused(root, on_error):
    """The text "1" had been read as episode 1. The file cannot be cut into episodes: refused, as an unreadable one."""
    data = root / DATA.format(1)
    _as_text(data, "episode_index")
    err = _refused(root, on_error)
    assert (err.file, err.episode, err.field, err.reason) == (data, None, "episode_index", TEXT)


def test_a_feature_declared_as_text_is_read_and_a_float_index_of_whole_numbers_too(root):
    """Text is refused where numbers belong only: a feature that info.json declares as a string (a language
    instruction) is text by right, and meta/episodes' indices written as floats of whole numbers (3.0) are read."""
    for i in range(3):
        path = root / DATA.format(i)
        table = pq.read_table(path)
        pq.write_table(table.append_column("observation.language", pa.array(["pick it up"] * table.num_rows)), path)
    info = json.loads((root / INFO).read_text())
    info["features"]["observation.language"] = {"dtype": "string", "shape": [1], "names": None}
    (root / INFO).write_text(json.dumps(info))
    contact = json.loads((root / CONTACT_META).read_text())
    contact["features"]["observation.language"] = {"quantity": "task instruction", "units": None, "frame": None}
    (root / CONTACT_META).write_text(json.dumps(contact))
    index = pq.read_table(root / INDEX)
    for name in ("episode_index", "data/chunk_index", "data/file_index"):
        index = index.set_column(index.schema.get_field_index(name), name, index[name].cast(pa.float64()))
    pq.write_table(index, root / INDEX)
    ds = read_dataset(root)
    assert [e.episode_id for e in ds.episodes] == ["ep0", "ep1", "ep2"] and not ds.skipped
    index = pq.read_table(root / INDEX)  # a float that is no whole number is still refused
    column = index.schema.get_field_index("episode_index")
    pq.write_table(index.set_column(column, "episode_index", pa.array([0.0, 1.5, 2.0])), root / INDEX)
    assert _refused(root).field == "episode_index"
