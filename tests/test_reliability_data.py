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


def test_a_toss_suite_refuses_grasp_captures_before_any_baseline(tosses_and_grasps):
    """Defect G: ``cube-real-small --test-data <grasp captures>`` scored them (about 100 % error) and gave a verdict."""
    from surrogate.bench.cube_real import _test_episodes

    tosses, grasps = tosses_and_grasps
    with pytest.raises(ConfigError) as e:
        _test_episodes({"suite": "cube-real", "data": {}}, {"test": []}, {}, grasps)
    msg = str(e.value)
    assert str(grasps) in msg and "holds grasps, not tosses" in msg and "joint positions in 2 of 2" in msg, msg
    assert e.value.location.field == "test_data"
    assert len(_test_episodes({"suite": "cube-real", "data": {}}, {"test": []}, {}, tosses)[0]) == 3  # tosses pass


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
