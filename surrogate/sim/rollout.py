"""The one rollout API: B trajectories of a scene from given states, with analytic or surrogate contact.

    traj = rollout(scene, state0, controls, contact="analytic", substeps=4, frames=F)
    traj.qpos        # [B, F, nq] at the frames (frame 0: the initial state)
    traj.state       # [B, F, nstate] MuJoCo's full-physics state (``STATE_SPEC``) at the frames

Two backends, the same inputs and outputs:

* ``contact="analytic"``: MuJoCo's own contact through ``mujoco.rollout`` (C, threaded: the fastest
  path), optionally with one ``MjModel`` per member (``models``: e.g. one per identified parameter set);
* ``contact=<contact model>`` or a ``Stepper``: the hybrid stepper (``stepper.step``) with that model
  owning the scene's contact pairs, all B members stepped as one batch (one network call per
  physics step): as B copies of the scene in one ``MjData`` (``copies.Copies``: one MuJoCo call per physics
  step, the same trajectories) when B > 1, else one ``MjData``; ``pad_sites`` also returns the model's force on
  chosen sensor sites at each frame (then B ``MjData``).

Given MuJoCo's own contact as the surrogate (``contact.MuJoCoContact``) the two agree
(``tests/test_rollout_parity.py`` states the tolerance on a toss and on a hand replay).

Shapes: B members, S = (F - 1) * substeps physics steps, F frames, nu actuators.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import mujoco
import numpy as np
import torch
from mujoco import rollout as mj_rollout

from ..errors import ConfigError
from ..scenes import set_contact_mode
from .link_graph import LinkGraphBuilder

STATE_SPEC = mujoco.mjtState.mjSTATE_FULLPHYSICS  # time, qpos, qvel, act, mocap, userdata, plugin state


@dataclass
class Trajectory:
    """What ``rollout`` returns.

    Attributes:
      state: [B, F, nstate] full-physics state (``STATE_SPEC``) at the frames.
      nq: the model's ``nq`` (for ``qpos``).
      pad_force: [B, F, K, 3] the contact model's force on the body of each of ``pad_sites`` (N, in
        the site's frame, as a force/torque sensor there reads it; torques are left out), of the last
        physics step of each frame (zeros at frame 0), or None.
      stats: the stepper's ``stats()`` (surrogate backend), or None.
    """

    state: np.ndarray
    nq: int
    pad_force: np.ndarray | None = None
    stats: dict | None = None

    @property
    def qpos(self) -> np.ndarray:
        """[B, F, nq] (``STATE_SPEC`` starts with the time, then ``qpos``)."""
        return self.state[:, :, 1:1 + self.nq]


def states_from_qpos(model: mujoco.MjModel, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    """[B, nstate] full-physics states of a reset ``MjData`` with ``qpos`` [B, nq] and ``qvel`` [B, nv]."""
    qpos, qvel = np.atleast_2d(qpos), np.atleast_2d(qvel)
    d = mujoco.MjData(model)
    out = np.zeros((len(qpos), mujoco.mj_stateSize(model, STATE_SPEC)))
    for b in range(len(qpos)):
        mujoco.mj_resetData(model, d)
        d.qpos[:], d.qvel[:] = qpos[b], qvel[b]
        mujoco.mj_getState(model, d, out[b], STATE_SPEC)
    return out


def object_states(scene, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
    """[B, nstate] the scene's initial state with the object's free joint at ``qpos`` [B, 7] (m; w x y z)
    and ``qvel`` [B, 6] (m/s world; rad/s body); every other joint at the model's ``qpos0``. An articulated object:
    ``qpos`` [B, 7 + J] and ``qvel`` [B, 6 + J], its joints' coordinates and rates after the free joint's."""
    m = scene.model
    qpos, qvel = np.atleast_2d(qpos), np.atleast_2d(qvel)
    qa, da = scene.object_qpos_adr, scene.object_dof_adr
    full_q = np.tile(m.qpos0, (len(qpos), 1))
    full_v = np.zeros((len(qpos), m.nv))
    full_q[:, qa:qa + 7], full_v[:, da:da + 6] = qpos[:, :7], qvel[:, :6]
    if qpos.shape[1] > 7:  # an articulated object: its joint coordinates and rates follow (scene meta's addresses)
        full_q[:, scene.meta["object_joint_qpos_adr"]] = qpos[:, 7:]
        full_v[:, scene.meta["object_joint_dof_adr"]] = qvel[:, 6:]
    return states_from_qpos(m, full_q, full_v)


def _check_inputs(m, state0, controls, substeps, frames):
    """(state0 [B, nstate], controls [B, S, nu] or None, frames F) checked and broadcast."""
    state0 = np.asarray(state0, dtype=np.float64)
    nstate = mujoco.mj_stateSize(m, STATE_SPEC)
    if state0.ndim != 2 or state0.shape[1] != nstate:
        raise ConfigError(f"state0 must be [B, {nstate}] (mjSTATE_FULLPHYSICS of this model), got {state0.shape}",
                          key="state0")
    if int(substeps) != substeps or substeps < 1:
        raise ConfigError(f"substeps must be a positive integer, got {substeps!r}", key="substeps")
    B = len(state0)
    if controls is not None:
        controls = np.asarray(controls, dtype=np.float64)
        if controls.ndim == 2:
            controls = controls[None]
        if controls.ndim != 3 or controls.shape[2] != m.nu or controls.shape[0] not in (1, B):
            raise ConfigError(f"controls must be [B={B} or 1, steps, nu={m.nu}], got {controls.shape}", key="controls")
        controls = np.broadcast_to(controls, (B,) + controls.shape[1:])
        if frames is None:
            frames = controls.shape[1] // substeps + 1
    if frames is None or int(frames) != frames or frames < 1:
        raise ConfigError(f"frames must be a positive integer (or given by the controls), got {frames!r}", key="frames")
    nstep = (int(frames) - 1) * int(substeps)
    if controls is not None:
        if controls.shape[1] < nstep:
            raise ConfigError(f"controls cover {controls.shape[1]} physics steps; {frames} frames of {substeps} "
                              f"substeps need {nstep}", key="controls")
        controls = controls[:, :nstep]
    return state0, controls, int(frames)


def rollout(scene, state0, controls=None, *, contact="analytic", substeps: int = 1, frames: int | None = None,
            models=None, threads: int = 2, pad_sites=None) -> Trajectory:
    """Roll out B members of ``scene`` from ``state0``; the state at each frame.

    Args:
      scene: the ``Scene`` (its model, owned pairs and object).
      state0: [B, nstate] ``STATE_SPEC`` states (``object_states`` / ``states_from_qpos`` make them).
      controls: [B or 1, >= S, nu] actuator commands per physics step, or None (zero ``ctrl``).
      contact: ``"analytic"`` (MuJoCo's contact, ``mujoco.rollout``), a contact model (a
        ``ContactLawGNN``, ``MuJoCoContact``, ...: a ``Stepper`` is built on ``scene`` and closed after),
        or a ``Stepper`` of ``scene`` (its options and statistics stay the caller's).
      substeps: physics steps per frame.
      frames: F frames to return, frame 0 the initial state; default: what ``controls`` cover.
      models: analytic only: [B] ``MjModel`` of the scene (same size signature), one per member;
        default the scene's model with its owned pairs analytic (a copy; the scene is untouched).
      threads: analytic only: ``mujoco.rollout`` threads.
      pad_sites: surrogate only: site ids whose contact-model force to return per frame (``pad_force``).
    Returns:
      a ``Trajectory`` ([B, F] states; pad forces and stepper statistics of the surrogate backend).
    Raises:
      ConfigError: inputs of the wrong shape, or an option the backend does not take.
    """
    state0, controls, F = _check_inputs(scene.model, state0, controls, substeps, frames)
    if isinstance(contact, str):
        if contact != "analytic":
            raise ConfigError(f"contact must be 'analytic', a contact model or a Stepper, got {contact!r}",
                              key="contact")
        if pad_sites is not None:
            raise ConfigError("pad_sites needs a contact model; MuJoCo's analytic pad forces are re-solved from the "
                              "states (bench.replay.analytic_pad_forces)", key="pad_sites")
        return _rollout_analytic(scene, state0, controls, substeps, F, models, threads)
    if models is not None:
        raise ConfigError("models (one MjModel per member) is for the analytic backend; the stepper steps the "
                          "scene's model", key="models")
    return _rollout_stepper(scene, state0, controls, contact, substeps, F, pad_sites)


def _rollout_analytic(scene, state0, controls, substeps, F, models, threads) -> Trajectory:
    B = len(state0)
    if models is None:
        m = copy.copy(scene.model)
        set_contact_mode(m, scene, "analytic")
        models = [m] * B
    models = list(models)
    if len(models) != B:
        raise ConfigError(f"models has {len(models)} entries for {B} states", key="models")
    m0 = models[0]
    if F == 1:
        return Trajectory(state0[:, None].copy(), m0.nq)
    datas = [mujoco.MjData(m0) for _ in range(max(1, threads))]
    ctrl = None if controls is None else np.ascontiguousarray(controls)
    # A zero warm start for every trajectory: otherwise each thread's MjData carries the solver's
    # warm start from whichever trajectory it ran before, and results depend on thread scheduling
    # (chaotic tosses amplify the difference).
    state, _ = mj_rollout.rollout(models, datas, state0, ctrl, nstep=(F - 1) * substeps,
                                  initial_warmstart=np.zeros((B, m0.nv)))
    idx = np.arange(1, F) * substeps - 1  # rollout's state k is after physics step k + 1
    return Trajectory(np.concatenate([state0[:, None], state[:, idx]], axis=1), m0.nq)


def _control_runs(block: np.ndarray) -> list[tuple[int, int]]:
    """(start, length) of the runs of physics steps with the same command for every member; block [B, s, nu]."""
    change = np.flatnonzero(np.any(block[:, 1:] != block[:, :-1], axis=(0, 2))) + 1
    edges = np.concatenate([[0], change, [block.shape[1]]])
    return [(int(a), int(b - a)) for a, b in zip(edges[:-1], edges[1:])]


def _rollout_stepper(scene, state0, controls, contact, substeps, F, pad_sites) -> Trajectory:
    from .stepper import Stepper

    own = not isinstance(contact, Stepper)
    stepper = Stepper(scene, contact) if own else contact
    m = scene.model
    out = np.zeros((len(state0), F, state0.shape[1]))
    out[:, 0] = state0
    pads = None if pad_sites is None else np.zeros((len(state0), F, len(pad_sites), 3))
    batch = _copies_for(scene, stepper, len(state0), pad_sites)
    copies = batch is not None
    datas = [] if copies else [mujoco.MjData(m) for _ in range(len(state0))]
    for d, s in zip(datas, state0):
        mujoco.mj_setState(m, d, s, STATE_SPEC)
        mujoco.mj_forward(m, d)
    try:
        with torch.no_grad():
            if copies:
                _step_frames_copies(batch, stepper, state0, controls, substeps, out)
            else:
                _step_frames(m, datas, stepper, controls, substeps, out, pad_sites, pads)
        stats = stepper.stats()
    finally:
        if own:
            stepper.close()
    return Trajectory(out, m.nq, pads, stats)


def _copies_for(scene, stepper, B: int, pad_sites):
    """The ``copies.Copies`` the batch steps as, or None for separate ``MjData``: copies of this very Scene, of a
    single-body object (an articulated one steps a list of MjData), whose model was not edited since it was
    compiled (``set_grip_force``: the copies, compiled from the spec, would not see the edit)."""
    if not (_use_copies(scene.model, B, pad_sites) and stepper.scene is scene
            and not isinstance(stepper.builder, LinkGraphBuilder)):
        return None
    from .copies import Copies
    from .copies_model import ModelEditedError

    try:
        return Copies(scene, B)
    except ModelEditedError:
        return None


def _use_copies(m, B: int, pad_sites) -> bool:
    """Whether the batch is stepped as copies in one ``MjData`` (``copies.Copies``, the same physics, one MuJoCo call
    per physics step): for more than one member, without pad forces, when the full-physics state is (time, qpos,
    qvel, act) (no mocap bodies, user data or plugin state); the caller also needs the stepper to be of this very
    ``Scene`` (``copies_step.step_copies`` checks it)."""
    plain = mujoco.mj_stateSize(m, STATE_SPEC) == 1 + m.nq + m.nv + m.na
    return B > 1 and pad_sites is None and plain


def _step_frames_copies(batch, stepper, state0, controls, substeps, out) -> None:
    """``_step_frames`` on B copies of the scene in one ``MjData`` (``batch``: ``copies.Copies``)."""
    from .stepper import step

    m = batch.scene.model
    d = mujoco.MjData(m)
    for b, s in enumerate(state0):
        mujoco.mj_resetData(m, d)
        mujoco.mj_setState(m, d, s, STATE_SPEC)
        batch.set_state(b, d, forward=False)
    mujoco.mj_forward(batch.model, batch.data)
    nq, nv = m.nq, m.nv
    for f in range(1, out.shape[1]):
        block = None if controls is None else controls[:, (f - 1) * substeps:f * substeps]
        for start, n in ([(0, substeps)] if block is None else _control_runs(block)):
            if block is not None:
                batch.ctrl[:] = block[:, start]
            step(batch.model, batch, stepper, nstep=n)
        o = out[:, f]
        o[:, 0], o[:, 1:1 + nq], o[:, 1 + nq:1 + nq + nv], o[:, 1 + nq + nv:] = batch.time, batch.qpos, batch.qvel, batch.act


def _step_frames(m, datas, stepper, controls, substeps, out, pad_sites, pads) -> None:
    """Step the batch frame by frame: each frame's states into ``out`` [B, F, nstate], the pad forces
    into ``pads`` [B, F, K, 3] (when not None)."""
    from .stepper import step

    bodies = [] if pad_sites is None else [int(m.site_bodyid[s]) for s in pad_sites]
    for f in range(1, out.shape[1]):
        block = None if controls is None else controls[:, (f - 1) * substeps:f * substeps]
        # A command held over several physics steps is one stepper call.
        for start, n in ([(0, substeps)] if block is None else _control_runs(block)):
            if block is not None:
                for d, c in zip(datas, block[:, start]):
                    d.ctrl[:] = c
            step(m, datas, stepper, nstep=n)
        for b, d in enumerate(datas):
            mujoco.mj_getState(m, d, out[b, f], STATE_SPEC)
        if bodies and stepper.last_wrench is not None:
            w = stepper.pad_wrenches(bodies)
            for b, d in enumerate(datas):  # site_xmat: the kinematics the last step's forces were built on
                for j, site in enumerate(pad_sites):
                    pads[b, f, j] = d.site_xmat[site].reshape(3, 3).T @ w[b, j, :3]


def rollout_mujoco(model, scene, states, n_frames: int, *, substeps: int, models=None) -> np.ndarray:
    """[B, n_frames, 7] object poses of free objects from B (pos, quat, vel world, omega body) states.

    A thin caller of ``rollout``: ``model`` a ``ContactLawGNN`` (surrogate contact, through the
    stepper) or None (MuJoCo's analytic contact); ``models`` as in ``rollout`` (analytic only).
    """
    qpos = np.array([np.concatenate([p, q]) for p, q, _, _ in states])
    qvel = np.array([np.concatenate([v, w]) for _, _, v, w in states])
    traj = rollout(scene, object_states(scene, qpos, qvel), contact="analytic" if model is None else model,
                   substeps=substeps, frames=n_frames, models=models)
    qa = scene.object_qpos_adr
    return traj.qpos[:, :, qa:qa + 7]
