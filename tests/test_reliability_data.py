"""Issue #29 E, F, G: data of the wrong kind, unreadable inputs and inconsistent metadata.

Each test is named after the behaviour it guards; the defect it reproduces is in its docstring.
"""

from __future__ import annotations

import pytest

from surrogate.errors import ConfigError

from .test_reliability import _cube_dataset
from .test_rig_generate import fake, gen


@pytest.fixture(scope="module")
def tosses_and_grasps(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kinds")
    gen(tmp, "grasps", episodes=2, **fake())
    return _cube_dataset(tmp, "tosses"), tmp / "grasps"


def test_a_toss_suite_refuses_grasp_captures_before_any_baseline(tosses_and_grasps, tmp_path):
    """Defect G: ``cube-real-small --test-data <grasp captures>`` scored them (about 100 % error) and gave a verdict."""
    from surrogate.bench.cube_real import suite_test_episodes

    tosses, grasps = tosses_and_grasps
    with pytest.raises(ConfigError) as e:
        suite_test_episodes({"suite": "cube-real", "data": {}}, {"test": []}, {}, grasps, tmp_path / "cache")
    msg = str(e.value)
    assert str(grasps) in msg and "holds grasps, not tosses" in msg and "joint positions in 2 of 2" in msg, msg
    assert e.value.location.field == "test_data"
    cfg = {"suite": "cube-real", "data": {}}
    assert len(suite_test_episodes(cfg, {"test": []}, {}, tosses, tmp_path / "cache")[0]) == 3


def test_a_grasp_suite_refuses_tosses_before_any_baseline(tosses_and_grasps):
    """Defect G: ``rig-grasp-small --test-data <cube tosses>`` scored them (268 % error) and gave a verdict."""
    from surrogate.bench.rig_data import load_sets

    tosses, grasps = tosses_and_grasps
    with pytest.raises(ConfigError) as e:
        load_sets({"suite": "rig-grasp"}, test_data=tosses, rig=None, cache_dir=None, workers=1, progress=False)
    msg = str(e.value)
    assert str(tosses) in msg and "holds no grasps: 3 of 3 episodes have no hand joint positions" in msg, msg
    sets, _ = load_sets({"suite": "rig-grasp"}, test_data=grasps, rig=None, cache_dir=None, workers=1, progress=False)
    assert len(sets["test_data"].episodes) == 2


# ----------------------------------------------------------------------------- E: imports skip and name what they cannot read


def _import_poses(tmp_path, src, cfg):
    from surrogate.importers.poses import import_poses

    report = import_poses(src, tmp_path / "out", config=cfg, progress=False)
    return report, {s["episode"]: s for s in report.skipped}


def test_poses_import_skips_a_csv_with_a_huge_field_and_keeps_the_rest(tmp_path):
    """Defect E: a CSV with a 200 KB field raised ``_csv.Error`` and aborted the whole import."""
    src, cfg = _poses(tmp_path)
    good = (src / "good.csv").read_text().splitlines()
    (src / "huge.csv").write_text("\n".join([good[0], '"' + "1" * 200_000 + '"' + good[1][good[1].index(","):]]
                                            + good[2:]) + "\n")
    report, skips = _import_poses(tmp_path, src, cfg)
    assert report.kept == 1 and set(skips) == {"huge"}, skips
    assert skips["huge"]["field"] == "rows" and "field larger than field limit" in skips["huge"]["reason"]


def test_poses_import_streams_a_huge_sparse_file_with_bounded_memory(tmp_path):
    """Defect E: a 2 GB sparse file was read whole (12.9 GB resident for 48 s); now refused after one long line."""
    import tracemalloc

    src, cfg = _poses(tmp_path)
    with open(src / "sparse.csv", "wb") as f:
        f.truncate(2 << 30)  # 2 GB of NUL bytes, no disk used
    tracemalloc.start()
    try:
        report, skips = _import_poses(tmp_path, src, cfg)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.kept == 1 and set(skips) == {"sparse"} and "longer than" in skips["sparse"]["reason"], skips
    assert peak < 200e6, f"peak {peak / 1e6:.0f} MB"


def test_poses_import_names_looping_and_dangling_symlinks(tmp_path):
    """Defect E: looping or dangling ``*.csv`` links were silently ignored ("skipped 0 inputs")."""
    src, cfg = _poses(tmp_path)
    (src / "loop.csv").symlink_to(src / "loop.csv")
    (src / "gone.csv").symlink_to(tmp_path / "nowhere.csv")
    report, skips = _import_poses(tmp_path, src, cfg)
    assert report.kept == 1 and set(skips) == {"loop", "gone"}, skips
    assert "symbolic link loop" in skips["loop"]["reason"] and "dangling symbolic link" in skips["gone"]["reason"]


def _poses(tmp_path):
    import trimesh

    from .test_import_poses import _config, _trajectory, _write_csv

    mesh = tmp_path / "box.stl"
    trimesh.creation.box(extents=[40, 60, 80]).export(mesh)
    src = tmp_path / "tracks"
    src.mkdir()
    t, pos, rot = _trajectory()
    _write_csv(src / "good.csv", t, pos, rot)
    return src, _config(tmp_path, mesh)


# ----------------------------------------------------------------------------- E, F: LeRobot files and metadata


def _foreign_two_files(root):
    """A foreign LeRobot dataset (``test_lerobot_import.write_foreign``) of 3 episodes, episode 2 alone in a second data
    file, with LeRobot's episode index (meta/episodes) saying which file holds each episode."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .test_lerobot_import import true_episode, write_foreign

    write_foreign(root, [true_episode(T, seed) for seed, T in enumerate((20, 31, 17))])
    t = pq.read_table(root / "data/chunk-000/file-000.parquet")
    pq.write_table(t.slice(0, 51), root / "data/chunk-000/file-000.parquet")
    pq.write_table(t.slice(51), root / "data/chunk-000/file-001.parquet")
    (root / "meta/episodes/chunk-000").mkdir(parents=True)
    pq.write_table(pa.table({"episode_index": [0, 1, 2], "length": [20, 31, 17], "data/chunk_index": [0, 0, 0],
                             "data/file_index": [0, 0, 1]}), root / "meta/episodes/chunk-000/file-000.parquet")
    return root


def test_lerobot_import_skips_the_episodes_of_a_truncated_data_file_and_keeps_the_rest(tmp_path):
    """Defect E: with one of two data files truncated, ``surrogate import lerobot`` aborted the whole import."""
    from surrogate.capture.lerobot_import import read_lerobot

    from .test_lerobot_import import mapping

    root = _foreign_two_files(tmp_path / "f")
    assert [e.num_frames for e in read_lerobot(root, mapping())[0]] == [20, 31, 17]
    bad = root / "data/chunk-000/file-001.parquet"
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])
    eps, _, skipped = read_lerobot(root, mapping())
    assert [e.num_frames for e in eps] == [20, 31]
    assert [(s["file"], s["episode"], s["field"]) for s in skipped] == [(str(bad), "episode_000002", "file")], skipped
    assert "unreadable parquet" in skipped[0]["reason"]
    with pytest.raises(Exception, match="unreadable parquet"):
        read_lerobot(root, mapping(), on_error="raise")


def test_lerobot_reader_checks_total_frames_and_episode_lengths_against_the_data(tmp_path):
    """Defect F: an info.json ``total_frames`` of 5 against 68, or an index ``length`` that disagrees, was accepted."""
    from surrogate.capture.lerobot_import import read_lerobot
    from surrogate.errors import CaptureError

    from .test_lerobot_import import mapping
    from .test_reliability import _edit_json

    root = _foreign_two_files(tmp_path / "f")
    _edit_json(root / "meta/info.json", lambda d: d.update(total_frames=5))
    eps, _, skipped = read_lerobot(root, mapping())
    assert len(eps) == 3 and [(s["field"], s["reason"]) for s in skipped] == [
        ("total_frames", "info.json says 5 frames, the data files hold 68")], skipped
    with pytest.raises(CaptureError, match="info.json says 5 frames") as e:
        read_lerobot(root, mapping(), on_error="raise")
    assert e.value.field == "total_frames"
    _edit_json(root / "meta/info.json", lambda d: d.update(total_frames=68))
    _index_lengths(root, [20, 30, 17])
    eps, _, skipped = read_lerobot(root, mapping())
    assert [e.num_frames for e in eps] == [20, 17] and skipped[0]["episode"] == "episode_000001"
    assert skipped[0]["field"] == "length" and "meta/episodes says 30 frames, the data files hold 31" in skipped[0]["reason"]


def _index_lengths(root, lengths):
    import pyarrow.parquet as pq

    path = next((root / "meta/episodes").glob("chunk-*/file-*.parquet"))
    t = pq.read_table(path)
    pq.write_table(t.set_column(t.column_names.index("length"), "length", [lengths]), path)


def test_capture_reader_and_inspect_check_total_frames_and_episode_lengths(tmp_path):
    """Defect F: ``read_dataset`` and ``surrogate inspect`` accepted a wrong ``total_frames`` and wrong lengths."""
    from surrogate.capture import read_dataset
    from surrogate.errors import CaptureError
    from surrogate.inspect import summarize

    from .test_reliability import _edit_json

    ds = _cube_dataset(tmp_path)
    frames = summarize(ds)["frames"]
    _edit_json(ds / "meta/info.json", lambda d: d.update(total_frames=5))
    with pytest.raises(CaptureError, match=f"info.json says 5 frames, the data files hold {frames}") as e:
        read_dataset(ds)
    assert e.value.field == "total_frames" and str(e.value.file).endswith("meta/info.json")
    assert [s["field"] for s in summarize(ds)["skipped"]] == ["total_frames"]
    _edit_json(ds / "meta/info.json", lambda d: d.update(total_frames=frames))
    import pyarrow.parquet as pq

    path = next((ds / "meta/episodes").glob("chunk-*/file-*.parquet"))
    lengths = pq.read_table(path)["length"].to_pylist()
    _index_lengths(ds, [lengths[0] + 1, *lengths[1:]])
    with pytest.raises(CaptureError, match=f"meta/episodes says {lengths[0] + 1} frames") as e:
        read_dataset(ds)
    assert e.value.field == "length" and e.value.episode == 0
    s = summarize(ds)
    assert s["episodes"] == len(lengths) - 1 and s["skipped"][0]["field"] == "length"
