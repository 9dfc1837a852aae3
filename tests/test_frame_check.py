"""``eval/frame_check.py``: a toss suite's rows scored again on their test tosses turned about the vertical."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from .conftest import eval_script


@dataclasses.dataclass
class Toss:
    """The fields of a capture episode that a turn touches."""

    episode_id: str
    object_pose: np.ndarray
    object_twist: np.ndarray


def test_a_turned_toss_is_the_same_toss_in_another_frame():
    fc = eval_script("frame_check")
    rng = np.random.default_rng(0)
    rot = Rotation.random(5, random_state=1)
    pose = np.c_[rng.normal(size=(5, 3)), rot.as_quat(scalar_first=True)]
    twist = rng.normal(size=(5, 6))
    ep = Toss(episode_id="7", object_pose=pose, object_twist=twist)
    t = fc.yawed(ep, 30.0, "_y30")
    assert t.episode_id == "7_y30"
    np.testing.assert_allclose(t.object_pose[:, 2], pose[:, 2])  # heights, and so the floor, unchanged
    np.testing.assert_allclose(np.linalg.norm(t.object_pose[:, :2], axis=1), np.linalg.norm(pose[:, :2], axis=1))
    np.testing.assert_allclose(t.object_twist[:, 3:], twist[:, 3:])  # body-frame rates unchanged
    turned = Rotation.from_quat(t.object_pose[:, 3:7], scalar_first=True) * rot.inv()
    np.testing.assert_allclose(turned.as_rotvec(), np.tile([0, 0, np.radians(30.0)], (5, 1)), atol=1e-12)
    back = fc.yawed(t, -30.0, "")
    np.testing.assert_allclose(back.object_pose[:, :3], pose[:, :3], atol=1e-12)
    np.testing.assert_allclose(back.object_twist, twist, atol=1e-12)


def test_only_toss_suites_ledgers_are_checked(tmp_path, capsys):
    fc = eval_script("frame_check")
    (tmp_path / "ledger.json").write_text('{"suite": "rig-grasp", "models": {}}')
    with pytest.raises(SystemExit):
        fc.main([str(tmp_path / "ledger.json")])
    assert "a toss suite's ledger is needed" in capsys.readouterr().err
