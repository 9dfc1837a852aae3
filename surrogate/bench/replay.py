"""Replaying recorded hand episodes in MuJoCo: same scene, same commands, other contact.

A recorded grasp episode gives the commands as sent (``action``), the hand's measured joint
positions and the object's measured pose at the first frame, and the controller settings
(the grip force bound) in its provenance. Replaying those commands open loop in MuJoCo's
scene of the episode, with a given contact model, predicts the object trajectory; the
prediction is scored against the recorded poses.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
from mujoco import rollout as mj_rollout

from ..scenes import set_grip_force
from ..scenes.from_capture import scene_for_episode
from .analytic import STATE_SPEC, AnalyticParams, models_for


@dataclass
class Replay:
    """One episode prepared for replay.

    Attributes:
      episode: the recorded Episode.
      scene: its MuJoCo scene (owned pairs analytic).
      init_state: [nstate] MuJoCo full-physics state at the first frame.
      control: [(F - 1) * substeps, nu] actuator commands per physics step (zero-order hold).
      substeps: physics steps per frame.
      grip_force: N or None, the fingertip force bound the episode was recorded with.
      joint_names: the dataset's hand joint names (columns of the recorded joint arrays).
    """

    episode: object
    scene: object
    init_state: np.ndarray
    control: np.ndarray
    substeps: int
    grip_force: float | None
    joint_names: tuple = ()

    @property
    def n_frames(self) -> int:
        return self.episode.num_frames


def joint_qpos_columns(model, joint_names) -> list[tuple[int, int]]:
    """(column in the recorded joint arrays, ``qpos`` address) of each recorded joint the model has."""
    out = []
    for c, name in enumerate(joint_names):
        try:
            j = model.joint(name).id
        except KeyError:
            continue
        out.append((c, int(model.jnt_qposadr[j])))
    return out


def _actuated_columns(model, joint_names) -> list[tuple[int, int]]:
    """(actuator id, column of the joint it drives in the recorded arrays)."""
    cols = {n: i for i, n in enumerate(joint_names)}
    out = []
    for a in range(model.nu):
        if model.actuator_trntype[a] != mujoco.mjtTrn.mjTRN_JOINT:
            continue
        jname = model.joint(int(model.actuator_trnid[a, 0])).name
        if jname in cols:
            out.append((a, cols[jname]))
    return out


def prepare_replay(ep, meta, *, substeps: int = 4, margin: float = 0.005, mode: str = "analytic") -> Replay:
    """Scene, initial state and command sequence of a recorded hand episode."""
    scene = scene_for_episode(ep, meta, margin=margin, substeps=substeps, contact_mode=mode)
    m = scene.model
    grip = ((ep.provenance.generator or {}).get("script") or {}).get("grip_force")
    if grip is not None and scene.hand is not None:
        set_grip_force(m, scene.hand, float(grip))
    d = mujoco.MjData(m)
    names = list(meta.joint_names or [])
    if ep.joint_pos is not None:
        for c, adr in joint_qpos_columns(m, names):
            d.qpos[adr] = ep.joint_pos[0, c]
    first = 0 if ep.object_pose_valid is None else int(np.argmax(ep.object_pose_valid))
    a = scene.object_qpos_adr
    d.qpos[a:a + 7] = ep.object_pose[first]
    mujoco.mj_forward(m, d)
    init = np.zeros(mujoco.mj_stateSize(m, STATE_SPEC))
    mujoco.mj_getState(m, d, init, STATE_SPEC)
    F = ep.num_frames
    ctrl = np.zeros((max(F - 1, 1) * substeps, m.nu))
    if ep.joint_cmd is not None:
        hold = np.repeat(np.arange(F - 1), substeps)
        for act, col in _actuated_columns(m, names):
            ctrl[:, act] = ep.joint_cmd[hold, col]
    else:
        ctrl[:] = d.ctrl
    return Replay(ep, scene, init, ctrl, substeps, None if grip is None else float(grip), tuple(names))


def delayed_control(control: np.ndarray, steps: int) -> np.ndarray:
    """[S, nu] commands acting ``steps`` physics steps late (the first command held meanwhile)."""
    steps = int(max(0, min(steps, len(control))))
    if steps == 0:
        return control
    return np.concatenate([np.repeat(control[:1], steps, axis=0), control[:-steps]], axis=0)


def simulate_replay_qpos(replay: Replay, params: list[AnalyticParams], *, threads: int = 2) -> np.ndarray:
    """[P, F, nq] the whole scene's ``qpos`` at the episode's frames for each parameter set
    (analytic contact; each set's ``delay_s`` delays the recorded commands)."""
    models = models_for(replay.scene, params)
    if replay.grip_force is not None and replay.scene.hand is not None:
        for m in models:
            set_grip_force(m, replay.scene.hand, replay.grip_force)
    P = len(models)
    nq = models[0].nq
    dt = models[0].opt.timestep
    datas = [mujoco.MjData(models[0]) for _ in range(max(1, threads))]
    init = np.tile(replay.init_state, (P, 1))
    control = np.stack([delayed_control(replay.control, round(p.delay_s / dt)) for p in params])
    state, _ = mj_rollout.rollout(models, datas, init, control,
                                  initial_warmstart=np.zeros((P, models[0].nv)))  # see analytic.rollout_free
    idx = np.arange(1, replay.n_frames) * replay.substeps - 1
    return np.concatenate([init[:, None, 1:1 + nq], state[:, idx, 1:1 + nq]], axis=1)


def simulate_replay(replay: Replay, params: list[AnalyticParams], *, threads: int = 2) -> np.ndarray:
    """[P, F, 7] object poses at the episode's frames for each parameter set."""
    a = replay.scene.object_qpos_adr
    return simulate_replay_qpos(replay, params, threads=threads)[:, :, a:a + 7]


def surrogate_replay_qpos(replay: Replay, stepper) -> np.ndarray:
    """[F, nq] ``qpos`` at the episode's frames with the stepper's contact model owning the pairs.

    ``replay`` must be prepared with ``mode="external"`` and ``stepper`` built on its scene
    (``Stepper(replay.scene, contact_model)``); the recorded commands act at once, as in the
    nominal analytic replay.
    """
    from ..sim import step

    m = replay.scene.model
    d = mujoco.MjData(m)
    mujoco.mj_setState(m, d, replay.init_state, STATE_SPEC)
    mujoco.mj_forward(m, d)
    out = np.zeros((replay.n_frames, m.nq))
    out[0] = d.qpos
    for f in range(1, replay.n_frames):
        d.ctrl[:] = replay.control[(f - 1) * replay.substeps]  # constant over a frame (zero-order hold)
        step(m, d, stepper, nstep=replay.substeps)
        out[f] = d.qpos
    return out


def replay_errors(pred: np.ndarray, ep) -> tuple[np.ndarray, np.ndarray]:
    """Mean position error (fraction of the object size) and rotation error (deg) per parameter set.

    Args:
      pred: [P, F, 7] from ``simulate_replay``.
    Returns:
      ([P], [P]) over the episode's tracked frames.
    """
    from .metrics import geodesic_deg

    n = min(pred.shape[1], ep.num_frames)
    v = np.ones(n, bool) if ep.object_pose_valid is None else ep.object_pose_valid[:n].astype(bool)
    true = ep.object_pose[:n]
    pos = np.linalg.norm(pred[:, :n, :3] - true[None, :, :3], axis=-1)[:, v].mean(axis=1) / ep.object.size
    rot = geodesic_deg(pred[:, :n, 3:7], true[None, :, 3:7])[:, v].mean(axis=1)
    return pos, rot


def identify_replays(replays: list[Replay], *, threads: int = 2, **kw):
    """Fit analytic contact parameters (and the mass, if ``fit_mass``) to recorded hand episodes.

    Same optimizer, loss and search space as the toss identification (``identify.fit_params``).
    """
    from .identify import fit_params, loss_of

    def evaluate(params):
        pos = np.zeros((len(params), len(replays)))
        rot = np.zeros_like(pos)
        for i, r in enumerate(replays):
            pos[:, i], rot[:, i] = replay_errors(simulate_replay(r, params, threads=threads), r.episode)
        return loss_of(pos, rot)

    params, info = fit_params(evaluate, **kw)
    info["episodes"] = len(replays)
    return params, info
