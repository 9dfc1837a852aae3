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



def test_turned_copies_are_the_toss_in_another_frame_in_both_upstream_layouts(tmp_path, capsys):
    import torch

    tt = eval_script("turned_tosses")
    rng = np.random.default_rng(3)
    q = Rotation.random(6, random_state=2).as_quat(scalar_first=True)
    elbow = np.c_[q, rng.normal(size=(6, 11))]  # [T, 13 + 2J], J = 1: quat, position, hinge, rates, velocity, rate
    cube = np.c_[rng.normal(size=(6, 3)), q, rng.normal(size=(6, 12))][None]  # [1, T, 19], half-widths
    e, c = tt.turn(elbow, 90.0, np.array([0.1, 0.0])), tt.turn(cube, 90.0, np.array([0.1, 0.0]))
    np.testing.assert_allclose(e[:, 4:7], np.c_[-elbow[:, 5] + 0.1, elbow[:, 4], elbow[:, 6]], atol=1e-12)
    np.testing.assert_allclose(e[:, 11:14], np.c_[-elbow[:, 12], elbow[:, 11], elbow[:, 13]], atol=1e-12)
    np.testing.assert_allclose(e[:, 7:11], elbow[:, 7:11])  # the hinge and the body rates
    np.testing.assert_allclose(e[:, 14], elbow[:, 14])
    np.testing.assert_allclose(c[0, :, :3], np.c_[-cube[0, :, 1] + 0.1 / 0.0524, cube[0, :, 0], cube[0, :, 2]],
                               atol=1e-12)
    np.testing.assert_allclose(c[0, :, 7:10], np.c_[-cube[0, :, 8], cube[0, :, 7], cube[0, :, 9]], atol=1e-12)
    np.testing.assert_allclose(c[0, :, 10:], cube[0, :, 10:])
    for turned, orig, qs in ((e, elbow, slice(0, 4)), (c[0], cube[0], slice(3, 7))):
        rel = (Rotation.from_quat(turned[:, qs], scalar_first=True)
               * Rotation.from_quat(orig[:, qs], scalar_first=True).inv())
        np.testing.assert_allclose(rel.as_rotvec(), np.tile([0, 0, np.pi / 2], (6, 1)), atol=1e-12)
    src = tmp_path / "src"
    src.mkdir()
    for n in (0, 9):
        torch.save(torch.from_numpy(elbow), src / f"{n}.pt")
    assert tt.main([str(src), str(tmp_path / "out"), "--copies", "3"]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "100000.pt", "100001.pt", "100002.pt", "100090.pt", "100091.pt", "100092.pt"]
    copy = torch.load(tmp_path / "out" / "100091.pt", weights_only=True).numpy()
    np.testing.assert_allclose(copy[:, 6:11], elbow[:, 6:11])  # height, hinge, body rates: the toss itself
    with pytest.raises(SystemExit):
        tt.main([str(src), str(tmp_path / "out")])  # never over what exists
    assert "exists" in capsys.readouterr().err


def test_the_spread_over_turned_copies_is_read_from_a_ledger():
    fc = eval_script("frame_check")
    eps = [{"id": "100090", "pos_pct_size": 10.0}, {"id": "100091", "pos_pct_size": 14.0},
           {"id": "100120", "pos_pct_size": 7.0}, {"id": "100121", "pos_pct_size": 7.5}, {"id": "12", "pos_pct_size": 1.0}]
    ledger = {"models": {"pyr": {"params": {"cone": "pyramidal"}, "per_episode": eps},
                         "same": {"per_episode": [{**e, "pos_pct_size": 3.0} for e in eps]}}}
    rows = {r["name"]: r for r in fc.copy_spread(ledger)}
    assert rows["pyr"]["tosses"] == 2 and rows["pyr"]["range_max"] == 4.0 and rows["pyr"]["range_median"] == 2.25
    assert rows["pyr"]["cone"] == "pyramidal" and rows["same"]["range_max"] == 0.0
