"""``eval/replayed_hand_dataset.py``: a capture dataset whose hand joints are a checkpoint's own replay, the rest the
recording's."""

from __future__ import annotations

import numpy as np
import pytest

from surrogate.bench.replay import joint_qpos_columns, replay_with_model
from surrogate.capture import read_dataset
from surrogate.model.checkpoint import load_checkpoint
from surrogate.paths import REPO_ROOT
from surrogate.rig.generate import generate

from .conftest import eval_script

RELEASE = REPO_ROOT / "checkpoints" / "rig_default"


def test_the_copy_carries_the_replays_joints_and_the_recordings_rest(tmp_path, capsys):
    generate(None, objects="heldout", episodes=2, out=tmp_path / "grasps", workers=0, seed=4, progress=False, duration=2.5)
    make = eval_script("replayed_hand_dataset")
    assert make.main([str(tmp_path / "grasps"), str(RELEASE), str(tmp_path / "copy"), "--delay-s", "0.0104"]) == 0
    src, out = read_dataset(tmp_path / "grasps"), read_dataset(tmp_path / "copy")
    assert out.meta == src.meta and [e.episode_id for e in out.episodes] == [e.episode_id for e in src.episodes]
    model = load_checkpoint(RELEASE)[0]
    for a, b in zip(src.episodes, out.episodes):
        assert np.array_equal(a.object_pose, b.object_pose) and np.array_equal(a.joint_cmd, b.joint_cmd)
        assert np.array_equal(a.wrench, b.wrench) and a.labels == b.labels
        r, q, _, _ = replay_with_model(a, src.meta, model, substeps=4, margin=0.005, delay_s=0.0104)
        cols = joint_qpos_columns(r.scene.model, list(r.joint_names))
        assert cols and all(np.allclose(b.joint_pos[:, c], q[:len(b.joint_pos), adr], atol=1e-6) for c, adr in cols)
        assert not np.allclose(a.joint_pos, b.joint_pos, atol=1e-4)  # the replay's fingers are not the rig's
    with pytest.raises(SystemExit, match="exists"):  # never over a dataset
        make.main([str(tmp_path / "grasps"), str(RELEASE), str(tmp_path / "copy")])
