"""The hand's command latency, identified from the recorded hand joints of training captures.

A replay drives the scene's hand with the episode's recorded commands. A real hand (and the capture rig, whose
``actuator_delay_backlash`` effect delays them 8-14 ms) executes a command late, so a replay whose commands act at
once lifts the object a few milliseconds early: at the lift's speed, 1-3 mm, several percent of a small object's
size. MuJoCo's identified baseline fits a latency jointly with its contact parameters (``identify.DELAY_BOUND``);
the learned rows need the same hand, and their contact model has no say in it.

So the latency is identified here without the checkpoint's contact model: each candidate (whole physics steps from 0 to
``identify.DELAY_BOUND``'s upper bound) replays a training episode's commands in MuJoCo with nominal analytic
contact, and the candidate whose hand joints track the recorded ones best (``joint_tracking_loss``), summed over
episodes, is kept. The object's recorded pose is not used, so the latency of a checkpoint's replays never depends
on how well that checkpoint predicts the object.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from ..errors import ConfigError
from ..parallel import Executor
from .analytic import AnalyticParams, nominal_params
from .identify import DELAY_BOUND
from .replay import joint_qpos_columns, prepare_replay, simulate_replay_qpos

logger = logging.getLogger(__name__)

# MuJoCo's own contact (``AnalyticParams``' defaults) for the latency's replays where a suite gives no
# ``baselines.nominal`` (training)
_MUJOCO = AnalyticParams()
NOMINAL = {"friction": "object", "solref": list(_MUJOCO.solref), "solimp": list(_MUJOCO.solimp), "cone": _MUJOCO.cone}


def joint_tracking_loss(replay, candidates_s, nominal: dict, *, threads: int = 1) -> tuple[np.ndarray, int]:
    """([K] loss, joints used): how far the hand's simulated joints are from the recorded ones with each candidate
    latency, the sum over recorded joints of the log of the mean squared error over the episode's frames. That is
    the negative profile log-likelihood of the latency (up to a factor, each episode weighed alike) with each
    joint's noise unknown: unit-free, so slides in m and hinges in rad weigh alike, and a joint that barely moves,
    whose error is its noise and backlash whatever the latency, cannot outweigh the joints that do move (its error
    relative to its range would). A joint that does not move is left out; a candidate whose replay blows up (a
    non-finite joint) scores +inf. ``replay``: ``replay.prepare_replay`` (analytic contact); ``nominal``: a suite's
    ``baselines.nominal``."""
    ep = replay.episode
    base = nominal_params(ep, nominal)
    q = simulate_replay_qpos(replay, [dataclasses.replace(base, delay_s=float(d)) for d in candidates_s],
                             threads=threads)
    n = min(q.shape[1], ep.num_frames)
    loss, used = np.zeros(len(candidates_s)), 0
    for col, adr in joint_qpos_columns(replay.scene.model, list(replay.joint_names)):
        recorded = np.asarray(ep.joint_pos[:n, col], dtype=float)
        span = float(np.ptp(recorded))
        if not np.isfinite(span) or span < 1e-6:
            continue
        loss += np.log(np.mean((q[:, :n, adr] - recorded[None]) ** 2, axis=1) + (1e-6 * span) ** 2)
        used += 1
    return np.where(np.isfinite(loss), loss, np.inf), used


def _loss_task(common: dict, item) -> tuple[np.ndarray, int]:
    ep, meta = item  # one task per episode, every candidate in it: nothing to cache
    r = prepare_replay(ep, meta, substeps=common["substeps"], margin=common["margin"])
    return joint_tracking_loss(r, common["candidates_s"], common["nominal"], threads=common["threads"])


def identify_command_delay(ex: Executor, episodes, meta, *, substeps: int, margin: float, nominal: dict = NOMINAL,
                           max_delay_s: float = DELAY_BOUND[2]) -> dict:
    """The latency (s) whose replays track the recorded hand joints of ``episodes`` best (module docstring):
    ``{"delay_s", "at_bound", "episodes", "episode_ids", "skipped", "candidates_s", "loss", "per_episode_best_s"}``.
    An episode with no moving hand joint the scene has, or whose every candidate blows up, says nothing about the
    latency: it is skipped and listed in ``skipped`` with why. Episodes without recorded hand joints or commands,
    or none left to fit on, are refused (``ConfigError``, naming the dataset). A kept latency at the largest
    candidate may lie beyond it: ``at_bound`` says so, and a warning."""
    episodes = list(episodes)
    where = f"dataset {getattr(meta, 'name', '?')!r}"
    if not episodes:
        raise ConfigError(f"{where}: no training episodes to identify the hand's command latency on",
                          key="simulation.command_delay")
    missing = [e.episode_id for e in episodes if e.joint_pos is None or e.joint_cmd is None]
    if missing:
        raise ConfigError(f"{where}, episodes {missing[:5]}: no recorded hand joints (joint_pos) or commands "
                          "(joint_cmd), so the command latency cannot be identified on them (set a number of "
                          "seconds instead)", key="simulation.command_delay")
    probe = prepare_replay(episodes[0], meta, substeps=substeps, margin=margin)
    dt = float(probe.scene.model.opt.timestep)  # candidates in s; each replay rounds them to its own steps
    candidates = np.arange(int(np.floor(max_delay_s / dt + 1e-9)) + 1) * dt
    common = {"substeps": substeps, "margin": margin, "nominal": nominal,
              "candidates_s": candidates, "threads": ex.threads}
    runs = ex.map(_loss_task, [(e, meta) for e in episodes], common=common, desc="hand latency", unit="episode")
    skipped = [{"episode": e.episode_id, "reason": "no moving hand joint the scene has" if not used else
                "every candidate's replay blew up"} for e, (loss, used) in zip(episodes, runs)
               if not used or not np.isfinite(loss).any()]
    kept = [(e, loss) for e, (loss, used) in zip(episodes, runs) if used and np.isfinite(loss).any()]
    if skipped:
        logger.warning("%s: %d episodes say nothing about the hand's latency and are skipped: %s", where,
                       len(skipped), skipped[:3])
    if not kept:
        raise ConfigError(f"{where}: no episode to identify the hand's command latency on ({skipped[:3]})",
                          key="simulation.command_delay")
    per = np.stack([loss for _, loss in kept])
    total = per.sum(axis=0)
    best = int(np.argmin(total))  # inf, never NaN: a blown-up candidate cannot win
    if best == len(candidates) - 1:
        logger.warning("%s: the hand's latency is at the largest candidate, %.1f ms; it may be larger", where,
                       1000 * candidates[best])
    return {"delay_s": float(candidates[best]), "at_bound": best == len(candidates) - 1, "episodes": len(kept),
            "episode_ids": [e.episode_id for e, _ in kept], "skipped": skipped, "candidates_s": candidates.tolist(),
            "loss": [float(v) if np.isfinite(v) else None for v in total / len(kept)],  # None: a replay blew up
            "per_episode_best_s": candidates[per.argmin(axis=1)].tolist()}


def check_setting(setting, *, key: str = "simulation.command_delay", file=None):
    """``setting`` itself when it is ``identify``, a latency in s in [0, 1], or null; else a ``ConfigError``, raised
    before any work (a suite checks it before generating test sets or identifying MuJoCo)."""
    if setting is None or setting == "identify":
        return setting
    if isinstance(setting, bool) or not isinstance(setting, (int, float)) or not 0.0 <= setting <= 1.0:
        raise ConfigError(f"must be 'identify', a latency in s in [0, 1], or null; got {setting!r}", key=key,
                          file=file)
    return setting


def checked_simulation(sim: dict) -> dict:
    """A copy of a suite's ``simulation`` section with its ``command_delay`` checked (``check_setting``)."""
    check_setting(sim.get("command_delay"))
    return dict(sim)


def command_delay(ex: Executor, cfg: dict, train_ds, episode_ids, *, sim: dict) -> dict:
    """The suite's ``simulation.command_delay`` for the learned rows' replays: ``identify`` (on those of the
    training episodes ``episode_ids``, e.g. MuJoCo's identification's, with recorded hand joints and commands;
    none: 0, said in ``how``), a latency in s (applied rounded to whole physics steps), or 0 / null (commands act
    at once). The ledger's record: ``{"delay_s", "how", ...}``."""
    setting = check_setting(sim.get("command_delay"))
    if not setting:
        return {"delay_s": 0.0, "how": "none"}
    if setting != "identify":
        return {"delay_s": float(setting), "how": "given"}
    wanted = set(episode_ids)
    eps = [e for e in train_ds.episodes if e.episode_id in wanted and e.joint_pos is not None
           and e.joint_cmd is not None]
    if not eps:  # nothing to identify on: say so in the ledger rather than fail a run that has done its work
        logger.warning("the hand's command latency is not identified: no training episode of %s has recorded "
                       "hand joints and commands; the learned rows' commands act at once", train_ds.meta.name)
        return {"delay_s": 0.0, "how": "none: no training episode has recorded hand joints and commands"}
    try:
        found = identify_command_delay(ex, eps, train_ds.meta, substeps=int(sim["substeps"]),
                                       margin=float(sim["margin"]),
                                       nominal=(cfg.get("baselines") or {}).get("nominal") or NOMINAL)
    except ConfigError as e:  # every episode skipped (no moving joint, every replay blown up): as above
        logger.warning("the hand's command latency is not identified (%s); the learned rows' commands act at once", e)
        return {"delay_s": 0.0, "how": f"none: {e}"}
    return {**found, "how": "identified from the hand joints"}
