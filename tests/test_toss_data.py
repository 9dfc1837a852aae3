"""The toss suites' data (``bench.toss_data.load_tosses``): raw DAIR tosses imported once into a cache entry named
by their content, so another folder of the same name (hidden tosses scored where the shared ones were) is never
served the tosses of the first; capture datasets read as they are."""

from __future__ import annotations

import shutil

from surrogate.bench.toss_data import load_tosses
from surrogate.importers.contactnets import import_contactnets

from .conftest import SHARED, needs_shared

CUBE = SHARED / "contactnets_cube"
ELBOW = SHARED / "contactnets_elbow"


def _copy(src, dst, names):
    dst.mkdir(parents=True)
    for n in names:
        shutil.copy(src / f"{n}.pt", dst / f"{n}.pt")
    return dst


@needs_shared("contactnets_cube")
def test_same_folder_name_other_tosses_get_their_own_import(tmp_path):
    cache = tmp_path / "cache"
    a = _copy(CUBE, tmp_path / "a" / "contactnets_cube", ["0", "1", "2"])
    b = _copy(CUBE, tmp_path / "b" / "contactnets_cube", ["3", "4"])
    ids_a = [e.episode_id for e in load_tosses(a, cache_dir=cache, progress=False).episodes]
    ids_b = [e.episode_id for e in load_tosses(b, cache_dir=cache, progress=False).episodes]
    assert ids_a == ["0", "1", "2"] and ids_b == ["3", "4"]
    # the first is read from its cache entry again, not imported anew; a toss added to it makes a new entry
    entries = sorted(p.name for p in cache.iterdir())
    assert len(entries) == 2 and all(p.startswith("contactnets_cube-") for p in entries)
    assert [e.episode_id for e in load_tosses(a, cache_dir=cache, progress=False).episodes] == ids_a
    assert len(list(cache.iterdir())) == 2
    shutil.copy(CUBE / "5.pt", a / "5.pt")
    assert [e.episode_id for e in load_tosses(a, cache_dir=cache, progress=False).episodes] == ["0", "1", "2", "5"]
    assert len(list(cache.iterdir())) == 3


@needs_shared("contactnets_cube")
def test_a_capture_dataset_is_read_where_it_is(tmp_path):
    src = _copy(CUBE, tmp_path / "raw", ["0", "1"])
    import_contactnets(src, tmp_path / "ds", progress=False)
    ds = load_tosses(tmp_path / "ds", cache_dir=tmp_path / "cache", progress=False)
    assert ds.root.resolve() == (tmp_path / "ds").resolve() and not (tmp_path / "cache").exists()


@needs_shared("contactnets_elbow")
def test_the_urdf_is_part_of_the_cache_entry(tmp_path):
    src = _copy(ELBOW, tmp_path / "contactnets_elbow", ["0", "9"])
    urdf = tmp_path / "elbow.urdf"
    shutil.copy(ELBOW / "contactnets_elbow.urdf", urdf)
    ds = load_tosses(src, cache_dir=tmp_path / "cache", urdf=urdf, progress=False)
    assert [e.episode_id for e in ds.episodes] == ["0", "9"] and ds.episodes[0].object_joint_pos is not None
    urdf.write_text(urdf.read_text().replace('value="0.3"', 'value="0.25"'))  # another object description
    load_tosses(src, cache_dir=tmp_path / "cache", urdf=urdf, progress=False)
    assert len(list((tmp_path / "cache").iterdir())) == 2


def test_the_importers_version_is_part_of_the_cache_entry(tmp_path, monkeypatch):
    """A cached import made by an earlier importer is not read as this one's (three elbow tosses it had skipped)."""
    import surrogate.importers.contactnets as cn
    from surrogate.bench.toss_data import cache_entry

    src = tmp_path / "tosses"
    src.mkdir()
    (src / "0.pt").write_bytes(b"x")
    before = cache_entry(src, tmp_path / "cache")
    monkeypatch.setattr(cn, "IMPORT_VERSION", cn.IMPORT_VERSION + 1)
    assert cache_entry(src, tmp_path / "cache") != before


@needs_shared("contactnets_cube")
def test_render_finds_episodes_of_raw_test_tosses(tmp_path):
    """``surrogate render --suite cube-real --test-data RAW``: the episode is looked up in the raw tosses' import."""
    from surrogate.bench.video_select import suite_ledger
    from surrogate.capture import read_dataset

    src = _copy(CUBE, tmp_path / "hidden", ["10", "11"])
    led = suite_ledger("cube-real-small", test_data=src, cache_dir=tmp_path / "cache")
    assert [e.episode_id for e in read_dataset(led["data"]["path"]).episodes] == ["10", "11"]


@needs_shared("contactnets_cube")
def test_what_a_suites_data_lost_is_named_in_its_ledger_block(tmp_path, caplog):
    import warnings

    import torch

    from surrogate.bench.testsets import data_block

    src = _copy(CUBE, tmp_path / "raw", ["0", "1", "2"])
    good = torch.load(CUBE / "3.pt", weights_only=True)
    torch.save(good[:, :, :10].clone(), src / "7.pt")  # a wrong shape: skipped at import
    bad = good.clone()
    bad[0, 20, 0] = float("inf")
    torch.save(bad, src / "8.pt")  # a non-finite position: skipped at import
    torch.save(good[:, :4].clone(), src / "9.pt")  # too short to score: imported, left out by the suite
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the import's checks see the inf without numpy's warning
        ds = load_tosses(src, cache_dir=tmp_path / "cache", progress=False)
    with caplog.at_level("WARNING", logger="surrogate.bench.testsets"):
        block = data_block(ds, min_frames=20)
    assert block["episodes"] == 3 and block["real"] == [True]
    assert [(s["episode"], s["field"]) for s in block["skipped"]] == [("7", "tensor"), ("8", "position")]
    assert block["left_out"] == [{"episode": "9", "reason": "4 frames, fewer than data.min_frames=20"}]
    assert "2 file(s) or episode(s) skipped at import or reading, 1 episode(s) left out; 3 kept" in caplog.text
    clean = data_block(load_tosses(_copy(CUBE, tmp_path / "clean", ["0", "1"]), cache_dir=tmp_path / "cache",
                                   progress=False), min_frames=20)
    assert "skipped" not in clean and "left_out" not in clean and clean["episodes"] == 2


@needs_shared("contactnets_cube")
def test_a_toss_exported_again_in_another_frame_is_the_same_recording(tmp_path):
    """dair_pll's copies of the ContactNets cube tosses are turned about the vertical, moved, in another body frame
    and a few frames shorter, and numbered otherwise: such a copy is still a toss the rows saw (``drop_seen``), and a
    checkpoint's training ids are matched to ``--test-data`` by recording, not by id."""
    import dataclasses

    import numpy as np
    from scipy.spatial.transform import Rotation

    from surrogate.bench.cube_real import _seen_by
    from surrogate.bench.toss_data import drop_seen, height_key, seen_recordings

    eps = load_tosses(_copy(CUBE, tmp_path / "src", ["0", "1", "2"]), cache_dir=tmp_path / "c", progress=False).episodes
    turn, body = Rotation.from_euler("z", 1.1), Rotation.from_euler("xy", [0.4, -1.3])
    pose = eps[0].object_pose[:-4]
    quat = (turn * Rotation.from_quat(pose[:, 3:], scalar_first=True) * body).as_quat(scalar_first=True)
    moved = np.concatenate([turn.apply(pose[:, :3]) + [0.3, -0.2, 0.0], quat], axis=1)
    copy = dataclasses.replace(eps[0], episode_id="1", object_pose=moved, object_twist=eps[0].object_twist[:-4],
                               timestamps=eps[0].timestamps[:-4])
    assert height_key(copy) == height_key(eps[0]) != height_key(eps[1])
    assert seen_recordings([copy, eps[1]], [eps[0]]) == [True, False]
    assert drop_seen([copy, eps[2]], [eps[0]], why="seen") == ([eps[2]], [{"episode": "1", "reason": "seen"}])
    by_id = {e.episode_id: e for e in eps}
    # test toss "1" is the recording of source toss "0": trained on {"0"} it was seen, trained on {"1"} it was not
    assert _seen_by([copy], by_id)({"0"}) == ["1"] and _seen_by([copy], by_id)({"1"}) == []
    assert _seen_by(eps, by_id)({"1"}) == ["1"]
