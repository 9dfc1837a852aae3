"""``eval/hand_or_contact.py``: one checkpoint scored with the hand on its servos (the benchmark's replay) and with the
hand on the recorded joints (the twin), both by ``rig-grasp``'s own scorer."""

from __future__ import annotations

import json
import math

from surrogate.bench.law_selection import benchmark_scores
from surrogate.capture import read_dataset
from surrogate.model.checkpoint import load_checkpoint
from surrogate.paths import REPO_ROOT
from surrogate.rig.generate import generate

from .conftest import eval_script

RELEASE = REPO_ROOT / "checkpoints" / "rig_default"


def test_the_actuated_rows_are_the_suites_replays_and_the_kinematic_rows_are_the_twins(tmp_path, capsys):
    generate(None, objects="heldout", episodes=2, out=tmp_path / "grasps", workers=0, seed=4, progress=False, duration=2.5)
    study = eval_script("hand_or_contact")
    out = study.score(tmp_path / "grasps", [RELEASE], episodes=2, delay_s=0.0104, horizon_s=1.0, replayed=True)
    rows = out["rows"][str(RELEASE)]
    ds = read_dataset(tmp_path / "grasps")
    ref = benchmark_scores(load_checkpoint(RELEASE)[0], ds.episodes, ds.meta, substeps=4, margin=0.005, delay_s=0.0104,
                           progress=False)
    assert [r["id"] for r in rows] == [r["id"] for r in ref]
    assert [(r["actuated_h"], r["actuated_ep"]) for r in rows] == [(r["at_horizon"], r["pos_pct"]) for r in ref]
    assert all(math.isfinite(r["kinematic_h"]) and math.isfinite(r["kinematic_ep"]) for r in rows)
    assert [r["kinematic_ep"] for r in rows] != [r["actuated_ep"] for r in rows]  # another hand, another trajectory
    assert all(r["finger_err_h"] >= 0.0 for r in rows)
    assert all(math.isfinite(r["replayed_h"]) and math.isfinite(r["replayed_ep"]) for r in rows)
    # the replayed fingers are the replay's own joints, column by column; a joint the scene lacks keeps the recording
    from surrogate.bench.replay import joint_qpos_columns, replay_with_model
    from surrogate.bench.rig_scoring import hand_joints

    ep = ds.episodes[0]
    r, q, _, _ = replay_with_model(ep, ds.meta, load_checkpoint(RELEASE)[0], substeps=4, margin=0.005, delay_s=0.0104)
    moved = hand_joints(r, q)
    cols = joint_qpos_columns(r.scene.model, list(r.joint_names))
    assert cols and all((moved[:, c] == q[:len(moved), a]).all() for c, a in cols)
    assert not (moved == ep.joint_pos[:len(moved)]).all()
    assert study.main([str(tmp_path / "grasps"), str(RELEASE), "--episodes", "2", "--delay-s", "0.0104",
                       "--replayed", "--out", str(tmp_path / "rows.json")]) == 0
    printed = capsys.readouterr().out
    assert "kinematic - actuated (h)" in printed and "Spearman" in printed
    assert "replayed - actuated (h)" in printed
    assert json.loads((tmp_path / "rows.json").read_text()) == json.loads(json.dumps(out))
