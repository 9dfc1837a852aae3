"""Rig generation: determinism across worker counts, resume after a kill, failures skipped and reported.

Episodes come from the rig's own ``simulate_episode`` with very short durations
(``REAL``). Scripted failures and worker deaths cannot be provoked in the real rig on
demand, so those tests pass ``analytic_simulate`` below through ``generate``'s
``simulate_fn`` parameter (an analytic test fixture, not the rig's physics).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import trimesh

from surrogate.capture import read_dataset
from surrogate.errors import ConfigError
from surrogate.rig.generate import episode_seed, generate, plan_episodes, read_shard, shard_path

from .test_rig_recorder import synthetic_trace

REPO = Path(__file__).resolve().parent.parent
SPLIT = "heldout"  # 24 small procedural objects
REAL = dict(config=None, simulate_fn=None, duration=0.25)  # default rig config, real physics


def analytic_simulate(cfg, obj, *, hand, seed, duration=None):
    """A seeded analytic grasp trace; fails or kills its process for the objects the config names."""
    test = cfg.get("test", {})
    if obj.name in test.get("fail_objects", []):
        raise RuntimeError(f"scripted failure for {obj.name}")
    if obj.name in test.get("crash_objects", []):
        os._exit(3)  # a worker dying without a Python exception (segfault, OOM kill)
    rng = np.random.default_rng(seed)
    frames = int(round((duration or 0.5) * 120))
    trace = synthetic_trace(obj, frames=frames, seed=seed, force=float(rng.uniform(2, 8)), hand=hand)
    trace.object_pose[:, :2] += rng.normal(0, 0.01, 2)  # seed-dependent placement
    return trace


def fake(**test) -> dict:
    return dict(config={"recorder": {}, "test": test}, simulate_fn=analytic_simulate, duration=0.4)


def gen(tmp_path, name, **kw):
    """``generate`` into ``tmp_path / name`` with small defaults (real rig unless ``kw`` says otherwise)."""
    args = dict(REAL, objects=SPLIT, episodes=4, out=Path(tmp_path) / name, seed=3, progress=False)
    args.update(kw)
    return generate(args.pop("config"), **args)


def assert_same_dataset(a: Path, b: Path):
    da, db = read_dataset(a, include_truth=True), read_dataset(b, include_truth=True)
    assert [e.episode_id for e in da.episodes] == [e.episode_id for e in db.episodes]
    for ea, eb in zip(da.episodes, db.episodes):
        for name in ("timestamps", "object_pose", "object_pose_valid", "joint_pos", "joint_vel", "wrench", "contact_regions"):
            np.testing.assert_array_equal(getattr(ea, name), getattr(eb, name))
        assert ea.truth.keys() == eb.truth.keys()
        for k in ea.truth:
            np.testing.assert_array_equal(ea.truth[k], eb.truth[k])
        assert ea.provenance == eb.provenance and ea.labels == eb.labels
    ca, cb = (json.loads((p / "meta/contact.json").read_text()) for p in (a, b))
    ca["name"] = cb["name"]
    assert ca == cb
    for fa in sorted((a / "data").rglob("*.parquet")):
        assert fa.read_bytes() == (b / fa.relative_to(a)).read_bytes()


def test_plan_is_deterministic_and_alternates_hands():
    names = ["a", "b", "c"]
    plans = plan_episodes(names, 7, seed=5, hand="both")
    assert [p.hand for p in plans[:4]] == ["parallel_jaw", "three_finger"] * 2
    assert [p.object_name for p in plans] == ["a", "a", "b", "b", "c", "c", "a"]
    assert plans[3].seed == episode_seed(5, 3) != episode_seed(6, 3)
    assert [p.object_name for p in plan_episodes(names, 4, seed=5, hand="parallel_jaw")] == ["a", "b", "c", "a"]


def test_same_datasets_for_one_and_two_workers(tmp_path):
    r1 = gen(tmp_path, "w1", workers=1, hand="both", episodes=3)
    r2 = gen(tmp_path, "w2", workers=2, hand="both", episodes=3)
    assert r1.written == r2.written == 3 and not r1.skipped and not r2.skipped, r1.summary()
    assert not Path(f"{tmp_path / 'w1'}.parts").exists()  # shards removed after assembly
    for hand in ("parallel_jaw", "three_finger"):  # one dataset per hand: joints are dataset-wide
        assert_same_dataset(tmp_path / "w1" / hand, tmp_path / "w2" / hand)
    ds = read_dataset(tmp_path / "w1" / "three_finger")
    ep = ds.episodes[0]
    assert [e.episode_id for e in ds.episodes] == ["rig_000001"] and len(ds.meta.joint_names) == 13
    assert ep.truth == {} and ep.provenance.real is False and "stands in for hardware" in ep.provenance.source
    assert ep.provenance.generator["rig_config_sha256"] == r1.config_sha256 and ep.grasp_type == 14
    assert set(ds.meta.contact_region_seeds) == {e.object.name for e in ds.episodes}
    assert r1.episodes_per_s > 0 and "episodes/s" in r1.rate_line()


def test_interrupted_run_resumes_without_duplicates_or_losses(tmp_path):
    # A real interruption: run generate in a child process, SIGKILL its process group
    # (the child and its worker) once a shard exists, then rerun with the same arguments.
    out = tmp_path / "ds"
    parts = Path(f"{out}.parts")
    code = f"from tests.test_rig_generate import gen; gen({str(tmp_path)!r}, 'ds', episodes=3, workers=1)"
    child = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, start_new_session=True)
    try:
        deadline = time.time() + 60
        while not list(parts.glob("episode_*.npz")) and time.time() < deadline and child.poll() is None:
            time.sleep(0.02)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    done = sorted(parts.glob("episode_*.npz"))
    assert 1 <= len(done) < 3 and not out.exists()

    with pytest.raises(ConfigError, match="seed"):  # different arguments: refuse to mix runs
        gen(tmp_path, "ds", episodes=3, seed=4)
    report = gen(tmp_path, "ds", episodes=3, workers=0)
    assert report.reused == len(done) and report.simulated == 3 - len(done) and report.written == 3
    ids = [e.episode_id for e in read_dataset(out).episodes]
    assert ids == [f"rig_{i:06d}" for i in range(3)]
    gen(tmp_path, "ref", episodes=3, workers=0)  # same arguments, never interrupted
    assert_same_dataset(out, tmp_path / "ref")


def test_a_parts_folder_no_run_wrote_is_refused_and_kept(tmp_path):
    """``<out>.parts`` holding a user's file and no run manifest was adopted as a run's, and removed with the file
    once the dataset was assembled."""
    parts = Path(f"{tmp_path / 'ds'}.parts")
    parts.mkdir()
    (parts / "mine.txt").write_text("keep")
    with pytest.raises(ConfigError, match="no `surrogate rig generate` wrote"):
        gen(tmp_path, "ds", episodes=1, workers=0)
    assert [p.name for p in parts.iterdir()] == ["mine.txt"] and not (tmp_path / "ds").exists()


def test_ungraspable_object_from_a_folder_is_skipped_and_reported(tmp_path):
    folder = tmp_path / "meshes"
    folder.mkdir()
    trimesh.creation.box(extents=[0.04, 0.04, 0.05]).export(folder / "small_box.stl")
    trimesh.creation.box(extents=[0.3, 0.3, 0.05]).export(folder / "wide_board.stl")
    trimesh.creation.box(extents=[0.04, 0.04, 0.001]).export(folder / "sheet.stl")  # no object: thinner than 2 mm
    with pytest.warns(UserWarning, match="skipped 1 file"):
        report = gen(tmp_path, "ds", objects=str(folder), episodes=2, workers=0, keep_parts=True)
    assert [(s["index"], s["object"], s["kind"]) for s in report.skipped] == [(1, "wide_board", "ungraspable")]
    assert "does not fit" in report.skipped[0]["reason"]
    ds = read_dataset(tmp_path / "ds")
    assert [e.object.name for e in ds.episodes] == ["small_box"]
    # the captures name both: the file that gave no object, the episode whose object did not fit the hand
    assert [(Path(s["file"]).name if s["file"] else None, s["episode"], s["field"]) for s in ds.meta.skipped] == \
        [("sheet.stl", None, "object"), (None, 1, "ungraspable")]
    ep, extra = read_shard(shard_path(Path(f"{tmp_path / 'ds'}.parts"), 0))
    assert ep.episode_id == "rig_000000" and extra["region_seeds"].shape == (16, 3)


def test_failing_episode_is_skipped_and_reported(tmp_path):
    from surrogate.objects import load_split

    names = [o.name for o in load_split(SPLIT)]
    report = gen(tmp_path, "ds", **fake(fail_objects=[names[1]]), episodes=4, workers=0)
    assert [(s["index"], s["object"], s["kind"]) for s in report.skipped] == [(1, names[1], "error")]
    assert "scripted failure" in report.skipped[0]["reason"]
    assert [e.episode_id for e in read_dataset(tmp_path / "ds").episodes] == ["rig_000000", "rig_000002", "rig_000003"]


def test_worker_crash_loses_only_its_episode(tmp_path):
    from surrogate.objects import load_split

    names = [o.name for o in load_split(SPLIT)]
    # One worker, two episodes queued: the crash breaks the pool under its neighbour too.
    report = gen(tmp_path, "ds", **fake(crash_objects=[names[2]]), workers=1)
    assert [(s["index"], s["kind"]) for s in report.skipped] == [(2, "crash")]
    assert report.written == 3


def test_ray_backend_matches_process_backend(tmp_path):
    pytest.importorskip("ray", reason="ray is not installed (pip install 'contact-surrogate[ray]')")
    gen(tmp_path, "proc", **fake(), workers=0, episodes=2)
    gen(tmp_path, "ray", **fake(), workers=2, episodes=2, backend="ray")
    assert_same_dataset(tmp_path / "proc", tmp_path / "ray")
