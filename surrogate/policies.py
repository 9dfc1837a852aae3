"""Policies for the grasp environments: a scripted grasp and a CEM planner over its parameters.

``ScriptedGraspPolicy`` drives N copies of a ``GraspTask`` (``GraspEnv.task`` or
``GraspVectorEnv.task``) through approach, close, settle, lift and hold, in the environment's
own normalized action space. It plans from privileged state at ``reset`` (the object's pose,
as a capture rig's operator would see it): the yaw and grasp centre come from
``surrogate.rig.scripts.plan_grasp`` with no randomness, then the grasp parameters shift them.

Grasp parameters (``GraspParams``): xy offset of the grasp centre (m), yaw offset (rad),
``grip`` (closing command 0..1: the jaw's target is blended from open to past-closed, so with
the servo's stiffness it sets the squeeze up to the hand's force bound), lift speed (m/s).

``rollout`` runs one episode per copy and labels it with the one outcome definition, the capture
rig's (``rig.scripts.episode_labels``): lifted (rose above ``lift_threshold``), dropped (lifted, then
below it or more than 2 cm from the hand at the end), slipped (during the hold, the object moved more
than 5 mm relative to a pad or turned more than 10 deg relative to the hand); success is lifted and
not dropped.
``cem_grasp`` searches the parameters with the cross-entropy method, one candidate per copy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .rig.outcomes import hand_object_distance, relative_pose
from .rig.scripts import episode_labels, plan_grasp

PARAM_NAMES = ("offset_x", "offset_y", "yaw", "grip", "lift_speed")
PARAM_LOW = np.array([-0.02, -0.02, -0.6, 0.1, 0.02])
PARAM_HIGH = np.array([0.02, 0.02, 0.6, 1.0, 0.3])
_PLAN = {"grasp_offset_max": 0.0, "clearance": 0.004, "grasp_yaw_noise": 0.0}
SLIP_M, SLIP_DEG = 0.005, 10.0


@dataclass
class GraspParams:
    """offset (m, [2]), yaw (rad, added to the planned yaw), grip (0..1), lift_speed (m/s), lift_height (m)."""

    offset_x: float = 0.0
    offset_y: float = 0.0
    yaw: float = 0.0
    grip: float = 1.0
    lift_speed: float = 0.1
    lift_height: float = 0.08

    @classmethod
    def from_vector(cls, v) -> GraspParams:
        v = np.clip(np.asarray(v, float), PARAM_LOW, PARAM_HIGH)
        return cls(*map(float, v))

    def vector(self) -> np.ndarray:
        return np.array([self.offset_x, self.offset_y, self.yaw, self.grip, self.lift_speed])


def _ramp(s: float) -> float:
    s = min(max(s, 0.0), 1.0)
    return s * s * s * (10.0 - 15.0 * s + 6.0 * s * s)


class ScriptedGraspPolicy:
    """Approach, close, settle, lift, hold, for every copy of ``task``.

    Args:
      task: a ``GraspTask``.
      params: one ``GraspParams`` for all copies, or a list with one per copy.
      times: phase durations (s): approach, close, settle.
    """

    def __init__(self, task, params=None, *, approach: float = 0.6, close: float = 0.4, settle: float = 0.2):
        self.task = task
        n = task.num_envs
        params = GraspParams() if params is None else params
        self.params = list(params) if isinstance(params, (list, tuple)) else [params] * n
        if len(self.params) != n:
            raise ValueError(f"{len(self.params)} parameter sets for {n} environments")
        self.t_approach, self.t_close, self.t_settle = approach, close, settle
        self.plans: list[dict] = []

    @property
    def hold_start(self) -> np.ndarray:
        """[N] s: when each copy's lift ends (the hold starts)."""
        t0 = self.t_approach + self.t_close + self.t_settle
        return np.array([t0 + p.lift_height / p.lift_speed for p in self.params])

    def reset(self) -> None:
        """Plan each copy's grasp from its current state (call after the env's reset)."""
        t, s, h = self.task, self.task.scene, self.task.hand
        base0 = np.asarray(s.meta["hand_base_pos"])
        verts = np.concatenate([np.asarray(p.vertices) for p in s.obj.pieces])
        self.plans = []
        for i, d in enumerate(t.datas):
            R = d.xmat[t.ob].reshape(3, 3)
            pts = verts @ R.T + d.xpos[t.ob]
            plan = plan_grasp(h, pts[:, :2] - base0[:2], _PLAN, np.random.default_rng(0), object_name=s.obj.name)
            centre = d.xipos[t.ob][:2] - base0[:2]
            p = self.params[i]
            # Three-finger grasps are symmetric every 120 deg; the jaw every 180 deg.
            self.plans.append({"xy": centre + [p.offset_x, p.offset_y], "yaw": plan["yaw"] + p.yaw,
                               "z": float(s.meta["grasp_base_z"])})

    def targets(self, time_s: float) -> np.ndarray:
        """[N, nu] actuator targets at ``time_s`` s into the episode."""
        h = self.task.hand
        out = np.zeros((self.task.num_envs, 4 + len(h.open_command)))
        ta, tc, ts = self.t_approach, self.t_close, self.t_settle
        for i, (plan, p) in enumerate(zip(self.plans, self.params)):
            s_xy = _ramp(time_s / (0.4 * ta))
            s_z = _ramp((time_s - 0.3 * ta) / (0.7 * ta))
            lift = min(max(time_s - ta - tc - ts, 0.0) * p.lift_speed, p.lift_height)
            grip = p.grip * _ramp((time_s - ta) / tc)
            out[i, :4] = [plan["xy"][0] * s_xy, plan["xy"][1] * s_xy, plan["z"] * s_z + lift, plan["yaw"] * s_xy]
            out[i, 4:] = (1.0 - grip) * h.open_command + grip * h.closed_command
        return out

    def __call__(self, time_s: float) -> np.ndarray:
        """[N, nu] normalized actions at ``time_s``."""
        return self.task.action_from_targets(self.targets(time_s))


def _outcome_frame(task, series: dict, k: int) -> None:
    """Write frame ``k`` of every copy's outcome series (``rig.outcomes``) from its current state."""
    for i, d in enumerate(task.datas):
        series["object_pos"][i, k] = d.xpos[task.ob]
        series["rel_pad"][i, k], series["rel_pos"][i, k], series["rel_quat"][i, k] = relative_pose(
            d, task.ob, task.base_id, task.pad_sites)


def rollout(venv, policy: ScriptedGraspPolicy, *, seed: int = 0, duration: float = 3.0, record: list | None = None) -> dict:
    """One episode per copy of a ``GraspVectorEnv`` under ``policy``, labelled by the one outcome definition.

    ``record``: a list that receives the [N, nq] ``qpos`` of every copy after the reset and after
    each control step (for videos: ``surrogate.bench.video``); None records nothing. A copy the
    environment terminates (dropped, off the table) is not stepped further; its frames repeat.

    Returns:
      {"success": [N] bool (lifted and not dropped), "lifted", "dropped", "slipped": [N] bool (the
       rig's ``episode_labels`` over the control steps, hold window from the policy's hold start,
       thresholds ``lift_threshold`` of the task, ``SLIP_M``, ``SLIP_DEG``), "slip_m", "slip_deg" (the
       labels' ``max_slip_m`` / ``max_slip_deg``), "final_rise_m", "return": [N] float, "stepper": the
       stepper's stats}.
    """
    venv.reset(seed=seed)
    task = venv.task
    task.stepper.reset_stats()
    policy.reset()
    n = task.num_envs
    steps = int(round(duration / task.control_dt))
    ret = np.zeros(n)
    done = np.zeros(n, dtype=bool)
    rise = np.zeros(n)
    S = len(task.pad_sites)
    series = {"object_pos": np.zeros((n, steps + 1, 3)), "rel_pad": np.zeros((n, steps + 1, S, 3)),
              "rel_pos": np.zeros((n, steps + 1, 3)), "rel_quat": np.zeros((n, steps + 1, 4))}
    _outcome_frame(task, series, 0)
    if record is not None:
        record.append(np.stack([d.qpos.copy() for d in task.datas]))
    for k in range(steps):
        a = policy(k * task.control_dt)
        live = np.flatnonzero(~done)
        if live.size:  # every copy terminated (all dropped): nothing to step, the frames repeat
            task.apply_action(a[live], live)
            task.simulate(live)
            r, term, info = task.evaluate(live)
            ret[live] += r
            rise[live] = info["rise"]
            done[live] |= term
        _outcome_frame(task, series, k + 1)
        if record is not None:
            record.append(np.stack([d.qpos.copy() for d in task.datas]))
    times = np.arange(steps + 1) * task.control_dt
    thresholds = {"lift_threshold": task.lift_threshold, "slip_threshold": SLIP_M,
                  "slip_angle_threshold": math.radians(SLIP_DEG)}
    hand_geoms = [task.model.geom(g).id for g in task.scene.hand.hand_geom_names]
    labels = []
    for i in range(n):
        hod = hand_object_distance(task.model, task.datas[i], hand_geoms, task.scene.object_geom_ids)
        labels.append(episode_labels(times, series["object_pos"][i], series["rel_pad"][i], series["rel_pos"][i],
                                     series["rel_quat"][i], np.full(steps + 1, hod),
                                     {"hold": [float(policy.hold_start[i]), math.inf]}, thresholds))
    col = lambda key, dtype=bool: np.array([lab[key] for lab in labels], dtype=dtype)  # noqa: E731
    lifted, dropped = col("lifted"), col("dropped")
    return {"success": lifted & ~dropped, "lifted": lifted, "dropped": dropped, "slipped": col("slipped"),
            "slip_m": col("max_slip_m", float), "slip_deg": col("max_slip_deg", float), "final_rise_m": rise,
            "return": ret, "stepper": task.stepper.stats()}


def cem_grasp(venv, *, iterations: int = 3, elites: int = 4, seed: int = 0, duration: float = 2.5,
              init: GraspParams | None = None) -> dict:
    """Cross-entropy search over ``GraspParams`` (one candidate per copy of ``venv``), scored by episode return.

    Every candidate starts from the same reset (``seed``), so they differ only by their parameters.

    Returns:
      {"best": GraspParams, "best_return": float, "history": [{"iteration", "mean_return", "best_return", "mean"}]}.
    """
    rng = np.random.default_rng(seed)
    n = venv.task.num_envs
    mean = (init or GraspParams()).vector()
    std = 0.25 * (PARAM_HIGH - PARAM_LOW)
    best, best_ret, hist = GraspParams.from_vector(mean), -np.inf, []
    for it in range(iterations):
        cand = np.clip(mean + std * rng.standard_normal((n, len(mean))), PARAM_LOW, PARAM_HIGH)
        cand[0] = mean  # keep the current mean in the population
        params = [GraspParams.from_vector(c) for c in cand]
        res = rollout(venv, ScriptedGraspPolicy(venv.task, params), seed=seed, duration=duration)
        ret = res["return"]
        order = np.argsort(-ret)
        el = cand[order[:elites]]
        mean, std = el.mean(0), el.std(0) + 1e-3 * (PARAM_HIGH - PARAM_LOW)
        if ret[order[0]] > best_ret:
            best_ret, best = float(ret[order[0]]), params[order[0]]
        hist.append({"iteration": it, "mean_return": float(ret.mean()), "best_return": float(ret[order[0]]),
                     "mean": mean.tolist()})
    return {"best": best, "best_return": best_ret, "history": hist}
