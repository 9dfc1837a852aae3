"""``eval/start_state.py``: rig grasps replayed from the recorded first frame, as the suites do, and from the exact
first state the rig stored, both scored against the same recording."""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from surrogate.bench.law_selection import benchmark_scores
from surrogate.capture import read_dataset
from surrogate.model.checkpoint import load_checkpoint
from surrogate.paths import REPO_ROOT
from surrogate.rig.generate import generate

from .conftest import eval_script

RELEASE = REPO_ROOT / "checkpoints" / "rig_default"


def test_the_recorded_start_is_the_suites_replay_and_the_exact_start_moves_only_the_first_state(tmp_path, capsys):
    generate(None, objects="heldout", episodes=2, out=tmp_path / "grasps", workers=0, seed=4, progress=False,
             duration=2.5)
    study = eval_script("start_state")
    ds = read_dataset(tmp_path / "grasps", include_truth=True)
    ep = ds.episodes[0]
    exact = study.exact_start(ep, ds.meta)
    first = int(np.argmax(ep.object_pose_valid)) if ep.object_pose_valid is not None else 0
    np.testing.assert_array_equal(exact.object_pose[first], ep.truth["object_pose"][first])
    np.testing.assert_array_equal(exact.joint_pos[0], ep.truth["joint_pos"][0])
    rest = np.ones(ep.num_frames, dtype=bool)
    rest[first] = False
    np.testing.assert_array_equal(exact.object_pose[rest], ep.object_pose[rest])  # only the start moved
    np.testing.assert_array_equal(exact.joint_pos[1:], ep.joint_pos[1:])
    assert not np.array_equal(exact.object_pose[first], ep.object_pose[first])  # the tracker's bias and jitter
    assert study.exact_start(dataclasses.replace(ep, truth={}), ds.meta) is None  # another source: no exact state
    named = study._scores({"checkpoint": str(RELEASE), "delay_s": 0.0104}, ("x", dataclasses.replace(ep, truth={}),
                                                                           ds.meta))
    assert named == {"id": f"x/{ep.episode_id}", "object": ep.object.name,
                     "skipped": "no exact state in the dataset's columns"}

    rows = study.study([str(tmp_path / "grasps")], str(RELEASE), delay_s=0.0104, workers=1)
    ref = benchmark_scores(load_checkpoint(RELEASE)[0], read_dataset(tmp_path / "grasps").episodes, ds.meta, substeps=4,
                           margin=0.005, delay_s=0.0104, progress=False)
    assert [r["recorded"]["checkpoint"] for r in rows] == [{"at_horizon": x["at_horizon"], "pos_pct": x["pos_pct"]}
                                                          for x in ref]
    assert all(r["exact"]["nominal"]["pos_pct"] > 0 for r in rows)
    assert study.main([str(tmp_path / "grasps"), "--workers", "1", "--out", str(tmp_path / "rows.json")]) == 0
    out = capsys.readouterr().out
    assert "2 grasps (0 without an exact state)" in out and "exact - recorded" in out
    assert json.loads((tmp_path / "rows.json").read_text()) == rows
