"""Capture episodes -> rollout windows for training a contact law through the twin.

A window is W + 1 frames of one episode: the initial state at its first frame, the recorded
poses of the following W frames (the loss compares the twin's rollout with them, frames with
tracking dropouts excluded), and, for episodes with a hand, the recorded joint configuration
per physics step (the hand is kinematic in the twin) and, where the episode has fingertip
force/torque sensors, their measured forces in world axes (the force signal a law is also
trained on: poses alone identify only ``mu x f_n`` of a held object, not the grip force).

Initial states are never the recorded velocities (backward differences of noisy tracked
poses): a window starting at frame 0 uses the benchmarks' first-state estimate
(``surrogate.estimate.initial_free_state``), later windows the Savitzky-Golay smoothed state
(``surrogate.estimate.smooth_pose``).

Windows of episodes that share a scene (object, hand, rate, gravity) are batched together:
the twin steps one scene for many windows at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mujoco
import numpy as np

from ..estimate import DEFAULT_ORDER, DEFAULT_WINDOW, initial_state, smooth_pose
from ..scenes.from_capture import (
    recorded_commands,
    recorded_joint_columns,
    scene_for_episode,
    scene_key,
    sensor_pads,
)


@dataclass
class Window:
    """One training window (shapes: W + 1 frames, S = W * substeps physics steps).

    Attributes:
      episode_id, start: where it comes from.  size: object size L (m).
      state0: [13] pos, quat (w x y z), vel (world), omega (body); an articulated object's [13 + 2J], the base
        link's 13 then its J joint angles and J joint rates (``sim.twin_links``).
      target: [W + 1, 7] recorded poses.  valid: [W + 1] bool (tracked frames).
      qpos, qvel: [S + 1, nq] / [S + 1, nv] the scene's configuration per step with the recorded hand
        joints (object entries unused), or None without a hand.
      group: index of the episode's ``SceneGroup`` (its twin).
      pad_body: [P] MuJoCo body ids of the pads with a force sensor, or None.
      pad_force: [W + 1, P, 3] measured force on each pad (N, world axes; the sensors read the force
        the object exerts on the pad), or None.
      ctrl: [S, nu] the recorded joint commands per physics step (``scenes.from_capture.recorded_commands``), which
        drive the hand where it is actuated (``learn.actuated``), or None without recorded commands.
    """

    episode_id: str
    start: int
    size: float
    state0: np.ndarray
    target: np.ndarray
    valid: np.ndarray
    qpos: np.ndarray | None = None
    qvel: np.ndarray | None = None
    group: int = 0
    pad_body: np.ndarray | None = None
    pad_force: np.ndarray | None = None
    ctrl: np.ndarray | None = None


@dataclass
class SceneGroup:
    """Episodes that share one scene, and the scene (owned pairs external)."""

    key: tuple
    scene: object
    episodes: list = field(default_factory=list)


def group_episodes(episodes, meta, *, margin: float, substeps: int) -> list[SceneGroup]:
    """Episodes grouped by scene, one scene built per group (``scene_for_episode``)."""
    groups: dict[tuple, SceneGroup] = {}
    for e in episodes:
        k = scene_key(e)
        if k not in groups:
            groups[k] = SceneGroup(k, scene_for_episode(e, meta, margin=margin, substeps=substeps, contact_mode="external"))
        groups[k].episodes.append(e)
    return list(groups.values())


def hand_trajectory(ep, meta, scene, frames: np.ndarray, substeps: int):
    """([S + 1, nq], [S + 1, nv]) the scene's qpos0 with the recorded hand joints, linearly
    interpolated to the physics steps between ``frames[0]`` and ``frames[-1]``; velocities from the
    interpolation (per-frame differences). None, None without recorded joints."""
    if ep.joint_pos is None or not meta.joint_names:
        return None, None
    m = scene.model
    cols = recorded_joint_columns(m, meta.joint_names)
    f0, f1 = int(frames[0]), int(frames[-1])
    t = ep.timestamps
    steps = (f1 - f0) * substeps
    ts = np.interp(np.arange(steps + 1) / substeps + f0, np.arange(len(t)), t)
    qpos = np.repeat(np.asarray(m.qpos0)[None], steps + 1, axis=0)
    qvel = np.zeros((steps + 1, m.nv))
    for c, adr, dadr in cols:
        x = ep.joint_pos[:, c]
        qpos[:, adr] = np.interp(ts, t, x)
        qvel[:, dadr] = np.interp(ts, t, np.gradient(x, t))
    return qpos, qvel


def pad_forces(ep, meta, scene, frames: np.ndarray, qpos: np.ndarray | None, substeps: int):
    """(pad bodies [P], measured pad forces [len(frames), P, 3] in world axes): each sensor's force
    (in its site frame) rotated by the site's orientation with the hand at its recorded joints.
    (None, None) without wrench sensors that match the scene's pads."""
    if ep.wrench is None or qpos is None:
        return None, None
    sensors = sensor_pads(scene, meta)
    if not sensors:
        return None, None
    m = scene.model
    d = mujoco.MjData(m)
    out = np.zeros((len(frames), len(sensors), 3))
    for i, k in enumerate(frames):
        d.qpos[:] = qpos[(int(k) - int(frames[0])) * substeps]
        mujoco.mj_kinematics(m, d)
        for j, (col, site, _) in enumerate(sensors):
            out[i, j] = d.site_xmat[site].reshape(3, 3) @ np.asarray(ep.wrench[k, col, :3], float)
    return np.array([b for _, _, b in sensors], dtype=np.int64), out


def state_at(ep, frame: int, *, init_frames: int, smooth: dict | None) -> np.ndarray:
    """[13] the window's initial state (see the module docstring); an articulated object's [13 + 2J], its joint angles
    and rates after the base link's 13 (``sim.twin_links``), at frame 0 only."""
    if frame == 0:
        q, v = initial_state(ep, k=init_frames)
        return np.concatenate([q[:7], v[:6], q[7:], v[6:]])
    sm = smooth
    return np.concatenate([sm["pos"][frame], sm["quat"][frame], sm["vel"][frame], sm["omega_b"][frame]])


def episode_windows(ep, meta, scene, *, frames: int, stride: int, substeps: int, init_frames: int = 5,
                    window: int = DEFAULT_WINDOW, order: int = DEFAULT_ORDER, group: int = 0,
                    with_force: bool = False) -> list[Window]:
    """The windows of one episode: starts every ``stride`` frames, ``frames`` frames long (an episode
    shorter than that gives one window of its whole length). ``frames <= 0``: the whole episode;
    ``stride <= 0``: only the window at frame 0 (it starts from the benchmarks' first-state estimate,
    where later windows start from smoothed states, which smear an impact's velocity change).
    ``with_force``: also read the measured pad forces (``pad_forces``) where the episode has sensors."""
    n = ep.num_frames
    W = n - 1 if frames <= 0 else min(int(frames), n - 1)
    starts = list(range(0, n - W, int(stride))) if stride > 0 else []
    if ep.object_joint_pos is not None:  # later windows would need a smoothed joint state: the first-state estimate's
        starts = []
    starts = starts or [0]
    sm = smooth_pose(ep.timestamps, ep.object_pose, ep.object_pose_valid, window=window, order=order)
    valid = np.asarray(ep.object_pose_valid, bool) if ep.object_pose_valid is not None else np.ones(n, bool)
    out = []
    for s in starts:
        if s > 0 and not sm["ok"][s]:
            continue
        sl = slice(s, s + W + 1)
        qpos, qvel = hand_trajectory(ep, meta, scene, np.arange(s, s + W + 1), substeps)
        pad_body, pad_force = (pad_forces(ep, meta, scene, np.arange(s, s + W + 1), qpos, substeps) if with_force
                               else (None, None))
        ctrl = recorded_commands(ep, scene.model, meta.joint_names, np.arange(s, s + W + 1), substeps)
        out.append(Window(str(ep.episode_id), s, float(ep.object.size), state_at(ep, s, init_frames=init_frames, smooth=sm),
                          np.asarray(ep.object_pose[sl], float), valid[sl].copy(), qpos, qvel, group, pad_body, pad_force,
                          ctrl))
    return out


def batches(windows: list[Window], batch_size: int, *, rng: np.random.Generator | None = None) -> list[list[Window]]:
    """Batches of windows of similar length (sorted by length, ``batch_size`` at a time; the twin steps a
    batch together to its longest window, scenes mixed, ``objective.stack_windows`` pads the shorter
    ones), each sorted by scene so that a scene's windows are contiguous; shuffled with ``rng``."""
    jitter = rng.random(len(windows)) if rng is not None else np.zeros(len(windows))
    order = sorted(range(len(windows)), key=lambda i: (len(windows[i].target), jitter[i]))
    out = [sorted((windows[i] for i in order[k:k + batch_size]), key=lambda w: w.group)
           for k in range(0, len(order), batch_size)]
    if rng is not None:
        out = [out[i] for i in rng.permutation(len(out))]
    return out


def episode_batches(windows: list[Window], batch_size: int, *, rng: np.random.Generator) -> list[list[Window]]:
    """Batches of whole episodes' windows (``learn.actuated`` steps each episode's scene as one batch): episodes
    shuffled with ``rng``, then packed in order until the next would pass ``batch_size`` windows."""
    by_ep: dict[str, list[Window]] = {}
    for w in windows:
        by_ep.setdefault(w.episode_id, []).append(w)
    out, cur = [], []
    for i in rng.permutation(len(by_ep)):
        ws = list(by_ep.values())[i]
        if cur and len(cur) + len(ws) > batch_size:
            out.append(cur)
            cur = []
        cur = cur + ws
    return out + ([cur] if cur else [])
