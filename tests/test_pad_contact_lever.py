"""``eval/pad_contact_lever.py``: the contact points MuJoCo gives each pad-object pair in a replayed grasp, and their
lever about their centroid (why a learned grip resists turning more than the rig's soft pads)."""

from __future__ import annotations

from surrogate.paths import REPO_ROOT
from surrogate.rig.generate import generate

from .conftest import eval_script


def test_a_held_box_touches_each_pad_at_its_four_corners(tmp_path, capsys):
    generate(None, objects="train", episodes=2, out=tmp_path / "grasps", workers=0, seed=6, progress=False, duration=2.5)
    study = eval_script("pad_contact_lever")
    rows = study.pad_levers(tmp_path / "grasps", REPO_ROOT / "checkpoints" / "rig_default", episodes=2)
    # the seeded grasps hold boxes: each pad's face is clipped against the box's side at the pad's four corners, 10 mm
    # from its centre along both axes, so the friction there resists a turn with a lever of 14.1 mm at any load
    assert set(rows) == {"box"} and len(rows["box"]) == 4
    for points, lever in rows["box"]:
        assert points == 4 and abs(lever - 0.01 * 2 ** 0.5) < 2e-4
    assert study.main([str(tmp_path / "grasps"), "--episodes", "2"]) == 0
    assert "(all)" in capsys.readouterr().out
