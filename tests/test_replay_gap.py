"""Replay of recorded hand episodes (MuJoCo as the oracle) and the rig gap study."""

from __future__ import annotations

import mujoco
import numpy as np

from surrogate.bench.analytic import AnalyticParams
from surrogate.bench.gap import study
from surrogate.bench.replay import prepare_replay, replay_errors, simulate_replay
from surrogate.capture import DatasetMeta, Environment, Episode, ObjectSpec, Provenance
from surrogate.objects import make_object
from surrogate.scenes import build_scene, hand_ctrl


def _mujoco_episode(substeps=4, rate=120.0, seconds=1.5, family="box", object_quat=None):
    """A grasp-and-lift recorded from MuJoCo's own analytic contact (the oracle)."""
    obj = make_object(family, 0 if family == "box" else 100)
    scene = build_scene(obj, hand="parallel_jaw", setting="table", timestep=1.0 / rate / substeps, object_quat=object_quat)
    m, hand = scene.model, scene.hand
    d = scene.make_data()
    z = scene.meta["grasp_base_z"]
    F = int(seconds * rate)
    poses, qj, cmds = [], [], []
    jadr = [m.jnt_qposadr[m.joint(n).id] for n in hand.joint_names]
    a = scene.object_qpos_adr
    for f in range(F):
        t = f / rate
        grip = min(1.0, max(0.0, (t - 0.3) / 0.3))
        lift = 0.08 * min(1.0, max(0.0, (t - 0.8) / 0.5))
        cmd = hand_ctrl(hand, base=(0.0, 0.0, z + lift, 0.0), grip=grip)
        poses.append(d.qpos[a:a + 7].copy())
        qj.append(d.qpos[jadr].copy())
        cmds.append(cmd)
        d.ctrl[scene.hand_actuator_ids] = cmd
        for _ in range(substeps):
            mujoco.mj_step(m, d)
    spec = ObjectSpec(obj.name, obj.mass, np.asarray(obj.inertia).tolist(), obj.size,
                      {"kind": "procedural", "family": family, "seed": 0 if family == "box" else 100, "params": dict(obj.params)}, obj.friction)
    ep = Episode("oracle", np.arange(F) / rate, np.array(poses), spec, Provenance("mujoco oracle", False, rate),
                 environment=Environment("table", scene.surface_z, [0, 0, -9.81]),
                 joint_pos=np.array(qj), joint_cmd=np.array(cmds))
    meta = DatasetMeta(hand={"name": "parallel_jaw", "model": "surrogate.scenes.hands"}, joint_names=list(hand.joint_names))
    return ep, meta


def test_replay_reproduces_mujoco_with_its_own_parameters():
    ep, meta = _mujoco_episode()
    assert ep.object_pose[-1, 2] - ep.object_pose[0, 2] > 0.05  # the oracle really lifted it
    r = prepare_replay(ep, meta, substeps=4)
    pred = simulate_replay(r, [AnalyticParams(friction=0.8), AnalyticParams(friction=0.01)])
    pos, rot = replay_errors(pred, ep)
    assert pos[0] * ep.object.size < 1e-6 and rot[0] < 1e-3  # same contact model: the same trajectory
    # slippery pads leave it on the table: the replay really depends on the contact
    assert np.linalg.norm(pred[1, -1, :3] - ep.object_pose[-1, :3]) > 0.03


def test_replay_puts_the_hand_where_it_was_for_an_object_lying_on_its_side():
    # A capsule lies on its side: the hand's base sits lower than over an upright capsule. The
    # rebuilt scene must take the recorded orientation, or the replayed pads close centimetres
    # above the object and never touch it (a bug that once corrupted every lying object's replay).
    ep, meta = _mujoco_episode(family="capsule", object_quat="stable")
    assert ep.object_pose[-1, 2] - ep.object_pose[0, 2] > 0.05
    r = prepare_replay(ep, meta, substeps=4)
    pos, rot = replay_errors(simulate_replay(r, [AnalyticParams(friction=0.8)]), ep)
    assert pos[0] * ep.object.size < 1e-6 and rot[0] < 1e-3


def test_delayed_replay_lags_the_commands():
    ep, meta = _mujoco_episode()
    r = prepare_replay(ep, meta, substeps=4)
    now, late = simulate_replay(r, [AnalyticParams(friction=0.8), AnalyticParams(friction=0.8, delay_s=0.05)])
    rise = lambda p: np.flatnonzero(p[:, 2] - p[0, 2] > 0.01)[0]  # noqa: E731
    # 50 ms = 6 frames at 120 Hz: the lift starts (about) that much later
    assert 4 <= rise(late) - rise(now) <= 8


def test_gap_study_reports_residual_and_repeatability(tmp_path):
    result = study(None, episodes=1, duration=1.0, only=["all_on"], maxiter=1, popsize=3, workers=0,
                   work_dir=tmp_path, progress=False)
    (row,) = result["rows"]
    assert row["variant"] == "all_on" and row["episodes"] == 2  # one held-out grasp per hand (both hands)
    assert row["repeat_pos_mm"] > 0 and row["residual_pos_mm"] > 0
    assert row["fitted"]["cone"] in ("pyramidal", "elliptic") and 0.6 <= row["fitted"]["mass_scale"] <= 1.6
