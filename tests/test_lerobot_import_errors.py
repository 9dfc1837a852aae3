"""The LeRobot importer's errors: raised (``on_error="raise"``) they name what the skip report names (file, episode,
field, reason); numbers stored as text (timestamps, index columns, meta/episodes, info.json) are refused, not parsed.

The datasets are built here (``test_lerobot_import.write_foreign``: 3 episodes of 20, 31 and 17 frames; with
``two_files``, episode 2 alone in a second data file and LeRobot's meta/episodes index saying so).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from surrogate.capture.lerobot_import import read_lerobot
from surrogate.errors import CaptureError

from .test_lerobot_import import mapping, true_episode, write_foreign
from .test_reliability_data import _foreign_two_files, _index_lengths

FILE0, FILE1 = "data/chunk-000/file-000.parquet", "data/chunk-000/file-001.parquet"


def _set_column(path, name, values, type_=None):
    """Replace column ``name`` of the parquet file ``path`` with ``values``."""
    table = pq.read_table(path)
    i = table.schema.get_field_index(name)
    pq.write_table(table.set_column(i, name, pa.array(values, type=type_)), path)


def _as_text(path, name):
    """Column ``name`` of ``path`` rewritten as text of the same numbers (what a CSV round trip leaves)."""
    _set_column(path, name, [None if v is None else str(v) for v in pq.read_table(path)[name].to_pylist()])


def _one_file(root):
    write_foreign(root, [true_episode(T, seed) for seed, T in enumerate((20, 31, 17))])
    return root


# ----------------------------------------------------------------------------- raised errors name what skips name
def _wrench_text(root):
    _set_column(root / FILE0, "observation.wrench",
                [[str(v) for v in row] for row in pq.read_table(root / FILE0)["observation.wrench"].to_pylist()],
                pa.list_(pa.string(), 6))


def _nan_quaternion(root):
    poses = pq.read_table(root / FILE0)["observation.object_pose"].to_pylist()
    poses[3][4] = float("nan")
    _set_column(root / FILE0, "observation.object_pose", poses, pa.list_(pa.float32(), 7))


def _truncated(root):
    data = (root / FILE1).read_bytes()
    (root / FILE1).write_bytes(data[: len(data) // 2])


CASES = {  # name: (build, damage, the skip record's (file, episode, field) and a word of its reason)
    "wrench as text": (_one_file, _wrench_text, (FILE0, "episode_000000", "observation.wrench", "holds text")),
    "timestamp as text": (_one_file, lambda r: _as_text(r / FILE0, "timestamp"),
                          (FILE0, "episode_000000", "timestamp", "holds text")),
    "NaN quaternion": (_one_file, _nan_quaternion, (FILE0, "episode_000000", "object_pose", "NaN")),
    "wrong index length": (_foreign_two_files, lambda r: _index_lengths(r, [20, 30, 17]),
                           ("meta/episodes", "episode_000001", "length", "says 30 frames")),
    "truncated file": (_foreign_two_files, _truncated, (FILE1, "episode_000002", "file", "unreadable parquet")),
}


@pytest.mark.parametrize("case", CASES)
def test_a_raised_error_names_the_file_episode_and_field_as_the_skip_report_does(tmp_path, case):
    """The raised error had lacked the file (a column of text) or the episode (a wrong length, an unreadable file)."""
    build, damage, (file, episode, field, word) = CASES[case]
    root = build(tmp_path / "f")
    damage(root)
    _, _, skipped = read_lerobot(root, mapping())
    assert skipped, "nothing skipped: the damage was not seen"
    first = skipped[0]
    assert (first["file"], first["episode"], first["field"]) == (str(root / file), episode, field)
    assert word in first["reason"]
    with pytest.raises(CaptureError) as ei:
        read_lerobot(root, mapping(), on_error="raise")
    err = ei.value
    assert {"file": str(err.file), "episode": err.episode, "field": err.field, "reason": err.reason} == first
    assert str(err) == f"{root / file}: episode {episode}: field '{field}': {first['reason']}"


# ----------------------------------------------------------------------------- timestamps stored as text
def test_timestamps_stored_as_text_skip_that_files_episodes_and_keep_the_rest(tmp_path):
    """Timestamps of text ("0.02") had been parsed as numbers and imported without a word."""
    root = _foreign_two_files(tmp_path / "f")
    _as_text(root / FILE1, "timestamp")
    assert pq.read_table(root / FILE1)["timestamp"].type == pa.string()
    eps, _, skipped = read_lerobot(root, mapping())
    assert [e.episode_id for e in eps] == ["episode_000000", "episode_000001"]
    assert [(s["file"], s["episode"], s["field"]) for s in skipped] == [
        (str(root / FILE1), "episode_000002", "timestamp")]
    assert skipped[0]["reason"] == "holds text (dtype object, str values), expected numbers"
    with pytest.raises(CaptureError, match="holds text") as ei:
        read_lerobot(root, mapping(), on_error="raise")
    assert (ei.value.file, ei.value.episode, ei.value.field) == (root / FILE1, "episode_000002", "timestamp")


def test_an_episode_with_text_timestamps_in_one_of_its_files_is_skipped_whole(tmp_path):
    root = tmp_path / "f"
    write_foreign(root, [true_episode(T, seed) for seed, T in enumerate((20, 30))], split_last=True)
    _as_text(root / FILE1, "timestamp")  # the second half of episode 1
    eps, _, skipped = read_lerobot(root, mapping())
    assert [e.num_frames for e in eps] == [20]
    assert [(s["episode"], s["field"]) for s in skipped] == [("episode_000001", "timestamp")]


# ----------------------------------------------------------------------------- other numbers stored as text
@pytest.mark.parametrize("column", ["frame_index", "episode_index", "task_index"])
def test_an_index_column_of_text_skips_its_files_episodes_naming_the_column(tmp_path, column):
    """frame_index of text had been sorted as text ("10" before "9"); task_index "0" had found no task."""
    root = _foreign_two_files(tmp_path / "f")
    _as_text(root / FILE0, column)
    eps, _, skipped = read_lerobot(root, mapping())
    assert [e.episode_id for e in eps] == ["episode_000002"]
    # episode_index of text: the episodes are those meta/episodes places in the file
    assert [(s["file"], s["episode"], s["field"]) for s in skipped] == [
        (str(root / FILE0), f"episode_00000{e}", column) for e in (0, 1)]
    assert skipped[0]["reason"].startswith("holds text")
    with pytest.raises(CaptureError) as ei:
        read_lerobot(root, mapping(), on_error="raise")
    assert (ei.value.file, ei.value.episode, ei.value.field) == (root / FILE0, "episode_000000", column)


def test_a_list_column_of_the_wrong_width_skips_its_files_episodes(tmp_path):
    """A list column that cannot be cut into frames aborted the import even in skip mode, naming no column."""
    root = _foreign_two_files(tmp_path / "f")
    rows = pq.read_table(root / FILE1)["observation.wrench"].to_pylist()
    rows[2] = rows[2][:5]
    _set_column(root / FILE1, "observation.wrench", rows, pa.list_(pa.float32()))
    eps, _, skipped = read_lerobot(root, mapping())
    assert [e.episode_id for e in eps] == ["episode_000000", "episode_000001"]
    assert [(s["file"], s["episode"], s["field"]) for s in skipped] == [
        (str(root / FILE1), "episode_000002", "observation.wrench")]
    assert "expected 6 per frame" in skipped[0]["reason"]


def test_an_episode_split_over_files_one_of_them_skipped_is_not_imported_in_part(tmp_path):
    """The frames of its good file had been imported as the whole episode."""
    root = tmp_path / "f"
    write_foreign(root, [true_episode(T, seed) for seed, T in enumerate((20, 30))], split_last=True)
    rows = pq.read_table(root / FILE1)["observation.wrench"].to_pylist()  # the second half of episode 1
    _set_column(root / FILE1, "observation.wrench", [rows[0][:5]] + rows[1:], pa.list_(pa.float32()))
    eps, _, skipped = read_lerobot(root, mapping())
    assert [e.num_frames for e in eps] == [20]
    assert [(s["file"], s["episode"], s["field"]) for s in skipped] == [
        (str(root / FILE1), "episode_000001", "observation.wrench")]


@pytest.mark.parametrize("column", ["episode_index", "length", "data/chunk_index", "data/file_index"])
def test_meta_episodes_of_text_is_refused_naming_its_file_and_column(tmp_path, column):
    root = _foreign_two_files(tmp_path / "f")
    index = next((root / "meta/episodes").glob("chunk-*/file-*.parquet"))
    _as_text(index, column)
    for on_error in ("skip", "raise"):  # the index says where every episode is: nothing can be read without it
        with pytest.raises(CaptureError) as ei:
            read_lerobot(root, mapping(), on_error=on_error)
        assert (ei.value.file, ei.value.field) == (index, column)
        assert ei.value.reason == "holds text (type string), expected integers"


def test_a_task_index_of_text_in_meta_tasks_is_refused(tmp_path):
    """Every episode's task had silently become "" (no frame's task_index matched the text "0")."""
    root = _one_file(tmp_path / "f")
    _as_text(root / "meta/tasks.parquet", "task_index")
    with pytest.raises(CaptureError, match="holds text") as ei:
        read_lerobot(root, mapping())
    assert (ei.value.file, ei.value.field) == (root / "meta/tasks.parquet", "task_index")


@pytest.mark.parametrize("key, value", [("fps", "50"), ("total_frames", "68"), ("fps", None)])
def test_numbers_of_info_json_stored_as_text_are_refused(tmp_path, key, value):
    """An fps of "50" had been read as 50 Hz; a total_frames of "68" turned its check off."""
    root = _one_file(tmp_path / "f")
    info = json.loads((root / "meta/info.json").read_text())
    (root / "meta/info.json").write_text(json.dumps({**info, key: value}))
    with pytest.raises(CaptureError, match="expected a number") as ei:
        read_lerobot(root, mapping())
    assert (ei.value.file, ei.value.field) == (root / "meta/info.json", key)
    assert ("text '" in ei.value.reason) == isinstance(value, str)


def test_numbers_are_still_read(tmp_path):
    """The checks refuse text only: int, float and bool columns read as before."""
    root = _foreign_two_files(tmp_path / "f")
    _set_column(root / FILE0, "timestamp", np.asarray(pq.read_table(root / FILE0)["timestamp"]).astype(np.float64))
    _set_column(root / FILE0, "task_index", np.zeros(51, np.int32))
    eps, _, skipped = read_lerobot(root, mapping())
    assert skipped == [] and [e.num_frames for e in eps] == [20, 31, 17] and eps[1].task == "push"


def test_meta_episodes_of_whole_floats_are_read_and_other_floats_refused(tmp_path):
    """A tool that writes meta/episodes' indices as floats (3.0) gives whole numbers: read as the integers they
    are; 1.5 indexes nothing and is refused, naming the file and column."""
    root = _foreign_two_files(tmp_path / "f")
    index = next((root / "meta/episodes").glob("chunk-*/file-*.parquet"))
    table = pq.read_table(index)
    for name in ("episode_index", "length", "data/chunk_index", "data/file_index"):
        _set_column(index, name, [float(v) for v in table[name].to_pylist()], pa.float64())
    eps, _, skipped = read_lerobot(root, mapping())
    assert skipped == [] and [e.num_frames for e in eps] == [20, 31, 17]
    _set_column(index, "episode_index", [0.0, 1.5, 2.0], pa.float64())
    with pytest.raises(CaptureError, match="not whole numbers") as ei:
        read_lerobot(root, mapping())
    assert (ei.value.file, ei.value.field) == (index, "episode_index")
