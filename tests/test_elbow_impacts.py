"""``eval/elbow_impacts.py``: the real elbow's first impact measured on the recording and on each model's rollout."""

from __future__ import annotations

import types

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from .conftest import eval_script, needs_shared

HINGED_BOXES = """<?xml version="1.0"?>
<robot name="pair">
  <link name="a"><inertial><mass value="0.37"/><inertia ixx="1e-4" ixy="0" ixz="0" iyy="1e-4" iyz="0" izz="1e-4"/>
    </inertial><collision><geometry><box size="0.1 0.05 0.05"/></geometry></collision></link>
  <link name="b"><inertial><origin xyz="0.035 0 0"/><mass value="0.37"/>
    <inertia ixx="1e-4" ixy="0" ixz="0" iyy="1e-4" iyz="0" izz="1e-4"/></inertial>
    <collision><origin xyz="0.035 0 0"/><geometry><box size="0.1 0.05 0.05"/></geometry></collision></link>
  <joint name="hinge" type="continuous"><parent link="a"/><child link="b"/><origin xyz="-0.035 0.06 0"/>
    <axis xyz="0 1 0"/></joint>
</robot>
"""


@pytest.fixture
def pair(tmp_path):
    from surrogate.objects.articulated import load_articulation

    path = tmp_path / "pair.urdf"
    path.write_text(HINGED_BOXES)
    return load_articulation(path)


def resting(art, tilt: Rotation, frames: int = 12, hinge: float = 0.0):
    """The pair lying flat (hinge 0: side by side) on a floor tilted by ``tilt`` in the tracker's frame."""
    pose = np.tile(np.r_[0, 0, 0.025, 1.0, 0, 0, 0], (frames, 1))
    pose[:, :3] = tilt.apply(pose[:, :3])
    pose[:, 3:7] = (tilt * Rotation.from_quat(pose[:, 3:7], scalar_first=True)).as_quat(scalar_first=True)
    return types.SimpleNamespace(object_pose=pose, object_joint_pos=np.full((frames, 1), hinge))


def test_the_floor_a_toss_rests_on_gives_the_tilt_of_the_trackers_frame(pair):
    imp = eval_script("elbow_impacts")
    tilt = Rotation.from_rotvec(np.radians(2.0) * np.array([0.6, 0.8, 0.0]))
    assert imp.floor_tilt(pair, resting(pair, tilt)) == pytest.approx(2.0, abs=1e-6)
    assert imp.floor_tilt(pair, resting(pair, Rotation.identity())) == pytest.approx(0.0, abs=1e-6)
    sliding = resting(pair, Rotation.identity())
    sliding.object_pose[:, 0] = np.linspace(0.0, 0.02, len(sliding.object_pose))
    assert imp.floor_tilt(pair, sliding) is None  # not at rest: says nothing of the floor
    propped = resting(pair, Rotation.from_rotvec([0.0, np.radians(20.0), 0.0]))
    assert imp.floor_tilt(pair, propped) is None  # a face 20 deg off is not the floor


def test_the_first_impact_the_bounce_and_the_hinge_swing_are_read_from_a_trajectory():
    imp = eval_script("elbow_impacts")
    lowest = np.array([0.2, 0.1, 0.03, 0.012, 0.004, 0.006, 0.02, 0.03])
    assert imp.first_impact(lowest) == 4  # the lowest frame after it first comes within 2 cm
    assert imp.first_impact(lowest + 1.0) is None
    z = np.array([0.1, 0.05, 0.03, 0.04, 0.046, 0.044, 0.03])
    assert imp.rise(z, 2, 3) == pytest.approx(0.016)
    assert imp.rise(np.array([0.05, 0.04, 0.03, 0.02]), 0, 3) == 0.0  # still falling: no bounce
    q = np.radians([170.0, 179.0, -172.0, -160.0])  # through the wrap at 180 deg: 30 deg, not 330
    assert imp.swing(q, 0, 3) == pytest.approx(30.0)


@needs_shared("contactnets_elbow")
def test_the_study_scores_every_row_from_the_start_and_from_just_before_the_impact(capsys):
    imp = eval_script("elbow_impacts")
    assert imp.main(["--max-tosses", "4", "--damping", "16"]) == 0
    out = capsys.readouterr().out
    rows = {ln.split("|")[1].strip(): ln.split("|")[2:-1] for ln in out.splitlines() if ln.startswith("| ")}
    assert set(rows) >= {"the recording", "nominal MuJoCo", "the release", "the release, damping / 16"}
    start, restart = rows["the release"][2].split("(")[0].split("/")
    assert 0.0 < float(start) < 200.0 and 0.0 < float(restart) < 200.0
    assert float(rows["the release, damping / 16"][0]) >= float(rows["the release"][0])  # a bouncier law rises more
    assert "tracker frame:" in out
