"""Replaying recorded hand episodes in MuJoCo: same scene, same commands, other contact.

A recorded grasp episode gives the commands as sent (``action``), the hand's measured joint
positions and the object's measured pose at the first frame, and the controller settings
(the grip force bound) in its provenance. Replaying those commands open loop in MuJoCo's
scene of the episode, with a given contact model, predicts the object trajectory; the
prediction is scored against the recorded poses.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import mujoco
import numpy as np

from ..scenes import set_grip_force
from ..scenes.from_capture import (
    recorded_commands,
    recorded_grip_force,
    recorded_joint_columns,
    scene_for_episode,
    sensor_pads,
)
from ..sim.rollout import STATE_SPEC, rollout
from .analytic import AnalyticParams, models_for


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
      sensors: the episode's fingertip force/torque sensors matched to the scene's pads
        (``scenes.from_capture.sensor_pads``); empty without recorded wrenches.
    """

    episode: object
    scene: object
    init_state: np.ndarray
    control: np.ndarray
    substeps: int
    grip_force: float | None
    joint_names: tuple = ()
    sensors: tuple = ()  # ((wrench column, pad site id, pad body id), ...) of the episode's fingertip sensors

    @property
    def n_frames(self) -> int:
        return self.episode.num_frames


def joint_qpos_columns(model, joint_names) -> list[tuple[int, int]]:
    """(column in the recorded joint arrays, ``qpos`` address) of each recorded joint the model has
    (``scenes.from_capture.recorded_joint_columns``)."""
    return [(c, adr) for c, adr, _ in recorded_joint_columns(model, joint_names)]


def prepare_replay(ep, meta, *, substeps: int = 4, margin: float = 0.005, mode: str = "analytic") -> Replay:
    """Scene, initial state and command sequence of a recorded hand episode."""
    scene = scene_for_episode(ep, meta, margin=margin, substeps=substeps, contact_mode=mode)
    m = scene.model
    grip = recorded_grip_force(ep)
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
    ctrl = recorded_commands(ep, m, names, np.arange(max(F, 2)), substeps)
    if ctrl is None:
        ctrl = np.repeat(d.ctrl[None], max(F - 1, 1) * substeps, axis=0)
    sensors = tuple(sensor_pads(scene, meta)) if ep.wrench is not None else ()
    return Replay(ep, scene, init, ctrl, substeps, None if grip is None else float(grip), tuple(names), sensors)


def delayed_control(control: np.ndarray, steps: int) -> np.ndarray:
    """[S, nu] commands acting ``steps`` physics steps late (the first command held meanwhile)."""
    steps = int(max(0, min(steps, len(control))))
    if steps == 0:
        return control
    return np.concatenate([np.repeat(control[:1], steps, axis=0), control[:-steps]], axis=0)


def simulate_replay_states(replay: Replay, params: list[AnalyticParams], *, threads: int = 2):
    """(models [P], states [P, F, nstate]): each parameter set's ``MjModel`` and the full physics state
    (``STATE_SPEC``) at the episode's frames (analytic contact; each set's ``delay_s`` delays the
    recorded commands)."""
    models = models_for(replay.scene, params)
    if replay.grip_force is not None and replay.scene.hand is not None:
        for m in models:
            set_grip_force(m, replay.scene.hand, replay.grip_force)
    dt = models[0].opt.timestep
    control = np.stack([delayed_control(replay.control, round(p.delay_s / dt)) for p in params])
    traj = rollout(replay.scene, np.tile(replay.init_state, (len(models), 1)), control, substeps=replay.substeps,
                   frames=replay.n_frames, models=models, threads=threads)
    return models, traj.state


def simulate_replay_qpos(replay: Replay, params: list[AnalyticParams], *, threads: int = 2) -> np.ndarray:
    """[P, F, nq] the whole scene's ``qpos`` at the episode's frames for each parameter set
    (analytic contact; each set's ``delay_s`` delays the recorded commands)."""
    models, states = simulate_replay_states(replay, params, threads=threads)
    return states[:, :, 1:1 + models[0].nq]


def analytic_pad_forces(replay: Replay, model: mujoco.MjModel, states: np.ndarray, params: AnalyticParams) -> np.ndarray:
    """[F, S, 3] the force the object exerts on each sensed pad (N, in the sensor's site frame, as the
    recording's ``wrench[..., :3]``) under MuJoCo's analytic contact, from the states [F, nstate]
    (``simulate_replay_states`` with ``params``; the constraint forces are re-solved at each frame's
    state with the command acting at its last step)."""
    S = len(replay.sensors)
    out = np.zeros((len(states), S, 3))
    if not S:
        return out
    control = delayed_control(replay.control, round(params.delay_s / model.opt.timestep))
    d = mujoco.MjData(model)
    ob = replay.scene.object_body_id
    slot = {body: j for j, (_, _, body) in enumerate(replay.sensors)}
    f6 = np.zeros(6)
    for t, st in enumerate(states):
        mujoco.mj_setState(model, d, st, STATE_SPEC)
        d.ctrl[:] = control[max(t * replay.substeps - 1, 0)]
        mujoco.mj_forward(model, d)
        world = np.zeros((S, 3))
        for i in range(d.ncon):
            c = d.contact[i]
            b1, b2 = int(model.geom_bodyid[c.geom1]), int(model.geom_bodyid[c.geom2])
            if {b1, b2} & {ob} and (b1 in slot or b2 in slot) and b1 != b2:
                mujoco.mj_contactForce(model, d, i, f6)
                f = c.frame.reshape(3, 3).T @ f6[:3]  # on geom2, from geom1 (the frame's normal points 1 -> 2)
                if b2 in slot:
                    world[slot[b2]] += f
                else:
                    world[slot[b1]] -= f
        for j, (_, site, _) in enumerate(replay.sensors):
            out[t, j] = d.site_xmat[site].reshape(3, 3).T @ world[j]
    return out


def simulate_replay(replay: Replay, params: list[AnalyticParams], *, threads: int = 2) -> np.ndarray:
    """[P, F, 7] object poses at the episode's frames for each parameter set."""
    a = replay.scene.object_qpos_adr
    return simulate_replay_qpos(replay, params, threads=threads)[:, :, a:a + 7]


def surrogate_replay_qpos(replay: Replay, stepper, *, forces: bool = False):
    """[F, nq] ``qpos`` at the episode's frames with the stepper's contact model owning the pairs; with
    ``forces`` also [F, S, 3] the force the object exerts on each sensed pad (N, sensor site frame, the
    contact model's force of the frame's last physics step).

    ``replay`` must be prepared with ``mode="external"`` and ``stepper`` built on its scene
    (``Stepper(replay.scene, contact_model)``); the commands act as ``replay.control`` holds them
    (``replay_with_model`` delays them by the hand's latency).
    """
    sites = [site for _, site, _ in replay.sensors] if forces else None
    traj = rollout(replay.scene, replay.init_state[None], replay.control, contact=stepper, substeps=replay.substeps,
                   frames=replay.n_frames, pad_sites=sites)
    return (traj.qpos[0], traj.pad_force[0]) if forces else traj.qpos[0]


def replay_with_model(ep, meta, model, *, substeps: int, margin: float, forces: bool = False,
                      delay_s: float = 0.0):
    """(replay, qpos [F, nq], pad forces [F, S, 3] or None, the stepper's stats): the recorded commands
    replayed through the hybrid stepper with ``model`` owning the contacts (a bad force falls back to
    analytic contact for that step; ``surrogate_replay_qpos``), each acting ``delay_s`` late (the hand's
    latency, ``command_delay``; 0: at once). The one surrogate replay of the suites, the videos and the
    closed-loop selection of a law."""
    from ..sim import Stepper

    r = prepare_replay(ep, meta, substeps=substeps, margin=margin, mode="external")
    if delay_s:
        r = dataclasses.replace(r, control=delayed_control(r.control, round(delay_s / r.scene.model.opt.timestep)))
    stepper = Stepper(r.scene, model, on_bad_force="fallback")
    try:
        out = surrogate_replay_qpos(r, stepper, forces=forces)
    finally:
        stats = stepper.stats()
        stepper.close()
    q, f = out if forces else (out, None)
    return r, q, f, stats


def replay_errors(pred: np.ndarray, ep) -> tuple[np.ndarray, np.ndarray]:
    """Mean position error (fraction of the object size) and rotation error (deg) per parameter set.

    Args:
      pred: [P, F, 7] from ``simulate_replay``.
    Returns:
      ([P], [P]) over the episode's tracked frames.
    """
    from ..metrics import geodesic_deg

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
