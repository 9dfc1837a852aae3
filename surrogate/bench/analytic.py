"""MuJoCo's analytic contact as a baseline: parameters, batched rollouts of free objects.

The parameters a user can tune in MuJoCo's contact model (per owned pair): sliding friction,
``solref`` (time constant, damping ratio), ``solimp`` (d0, d_width, width; midpoint and power
fixed at MuJoCo's defaults), the friction cone (pyramidal or elliptic), and the object's mass
(scaling its inertia with it). The same model the surrogate runs in is used, with the owned
pairs in ``analytic`` mode.

Rollouts of many episodes and many parameter sets go through the analytic backend of the one
rollout API (``surrogate.sim.rollout.rollout``: ``mujoco.rollout``, C, threaded), one ``MjModel``
per parameter set.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field

import mujoco
import numpy as np

from ..estimate import initial_free_state, initial_state  # noqa: F401  (the one first-state estimate; re-exported)
from ..scenes import CONES, set_contact_mode
from ..sim.rollout import STATE_SPEC, object_states, rollout  # noqa: F401  (STATE_SPEC re-exported)


@dataclass
class AnalyticParams:
    """Contact parameters of MuJoCo's analytic model (see module docstring).

    friction: sliding coefficient. solref: (time constant s, damping ratio).
    solimp: (d0, d_width, width m) with midpoint 0.5, power 2. cone: pyramidal | elliptic.
    mass_scale: true mass / nominal mass (inertia scales with it).
    delay_s: actuator command latency (s); only replays of commanded episodes use it.
    """

    friction: float = 0.8
    solref: tuple = (0.02, 1.0)
    solimp: tuple = (0.9, 0.95, 0.001)
    cone: str = "pyramidal"
    mass_scale: float = 1.0
    delay_s: float = 0.0

    def to_json(self) -> dict:
        d = asdict(self)
        d["solref"] = [float(x) for x in self.solref]
        d["solimp"] = [float(x) for x in self.solimp]
        return d

    @classmethod
    def from_json(cls, d: dict) -> AnalyticParams:
        return cls(friction=float(d["friction"]), solref=tuple(d["solref"]), solimp=tuple(d["solimp"]),
                   cone=d.get("cone", "pyramidal"), mass_scale=float(d.get("mass_scale", 1.0)),
                   delay_s=float(d.get("delay_s", 0.0)))


def nominal_params(ep, nom: dict) -> AnalyticParams:
    """The nominal analytic parameters of episode ``ep`` from a suite's ``baselines.nominal`` section:
    ``friction`` a number or ``object`` (the episode's object friction, 0.8 when it has none), ``solref``,
    ``solimp``, ``cone``. The one nominal baseline of every suite and of the videos."""
    mu = ep.object.friction if nom["friction"] == "object" else float(nom["friction"])
    return AnalyticParams(friction=float(mu if mu is not None else 0.8), solref=tuple(nom["solref"]),
                          solimp=tuple(nom["solimp"]), cone=nom["cone"])


def apply_params(model: mujoco.MjModel, scene, p: AnalyticParams, *, base_mass=None, base_inertia=None) -> mujoco.MjModel:
    """Write ``p`` into ``model`` (in place) for the scene's owned pairs and object; returns it."""
    set_contact_mode(model, scene, "analytic")
    ids = scene.owned_pair_ids
    model.pair_friction[ids, 0] = p.friction
    model.pair_friction[ids, 1] = p.friction
    model.pair_solref[ids] = np.asarray(p.solref, dtype=float)
    model.pair_solimp[ids, :3] = np.asarray(p.solimp, dtype=float)
    model.pair_solimp[ids, 3:] = (0.5, 2.0)
    model.opt.cone = CONES[p.cone]
    return set_mass_scale(model, scene, p.mass_scale, base_mass=base_mass, base_inertia=base_inertia)


def set_mass_scale(model: mujoco.MjModel, scene, scale: float, *, base_mass=None, base_inertia=None) -> mujoco.MjModel:
    """The object's mass and inertia (every link of an articulated one) ``scale`` x ``base_mass`` / ``base_inertia``
    (None: the model's own), in place; returns ``model``."""
    b = scene.meta.get("object_link_bodies") or scene.object_body_id  # every link of an articulated object
    m0 = model.body_mass[b] if base_mass is None else base_mass
    i0 = model.body_inertia[b].copy() if base_inertia is None else base_inertia
    model.body_mass[b] = m0 * scale
    model.body_inertia[b] = i0 * scale
    return model


def models_for(scene, params: list[AnalyticParams]) -> list[mujoco.MjModel]:
    """One model copy per parameter set (all the same size signature, as rollout needs)."""
    base = scene.model
    b = scene.meta.get("object_link_bodies")
    if b:  # an articulated object: every link's
        m0, i0 = base.body_mass[b].copy(), base.body_inertia[b].copy()
    else:
        m0, i0 = float(base.body_mass[scene.object_body_id]), base.body_inertia[scene.object_body_id].copy()
    out = []
    for p in params:
        m = copy.copy(base)
        apply_params(m, scene, p, base_mass=m0, base_inertia=i0)
        out.append(m)
    return out


@dataclass
class TossSet:
    """Recorded free-object episodes prepared for batched rollouts.

    Attributes: episodes; qpos0 [N, 7]; qvel0 [N, 6]; n_frames [N]; substeps.
    """

    episodes: list
    qpos0: np.ndarray
    qvel0: np.ndarray
    n_frames: np.ndarray
    substeps: int
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_episodes(cls, episodes, *, substeps: int = 4, k: int = 5) -> TossSet:
        """From ``estimate.initial_state``; an articulated object's (``object_joint_pos``): qpos0 [N, 7 + J], qvel0
        [N, 6 + J]."""
        states = [initial_state(e, k=k) for e in episodes]
        return cls(list(episodes), np.stack([s[0] for s in states]), np.stack([s[1] for s in states]),
                   np.array([e.num_frames for e in episodes]), substeps)


def simulate_tosses(scene, params: list[AnalyticParams], tosses: TossSet, *, threads: int = 2,
                    bucket: int = 16) -> np.ndarray:
    """Every parameter set on every toss.

    Tosses are rolled out in buckets of similar length (sorted by length, ``bucket`` per
    call and parameter set) so that short tosses do not pay for the longest one.

    Returns:
      [P, N, F_max, 7] predicted poses at the capture frames (rows past a toss's length are
      padding, filled with the last pose; use ``tosses.n_frames``); [P, N, F_max, 7 + J] for an articulated
      object (its joint coordinates after the base link's pose).
    """
    P, N = len(params), len(tosses.episodes)
    models = models_for(scene, params)
    F = int(tosses.n_frames.max())
    a = scene.object_qpos_adr
    cols = list(range(a, a + 7)) + list(scene.meta.get("object_joint_qpos_adr", []))[: tosses.qpos0.shape[1] - 7]
    out = np.zeros((P, N, F, len(cols)))
    order = np.argsort(tosses.n_frames, kind="stable")
    for start in range(0, N, bucket):
        idx = order[start:start + bucket]
        f = int(tosses.n_frames[idx].max())
        batch_models = [models[p] for p in range(P) for _ in idx]
        state0 = np.tile(object_states(scene, tosses.qpos0[idx], tosses.qvel0[idx]), (P, 1))
        traj = rollout(scene, state0, substeps=tosses.substeps, frames=f, models=batch_models, threads=threads)
        frames = traj.qpos[:, :, cols].reshape(P, len(idx), f, len(cols))
        out[:, idx, :f] = frames
        out[:, idx, f:] = frames[:, :, -1:]
    return out
