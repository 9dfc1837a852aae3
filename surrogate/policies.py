"""Policies for the grasp environments: a scripted grasp and a CEM planner over its parameters.

``ScriptedGraspPolicy`` drives N copies of a ``GraspTask`` (``GraspEnv.task`` or
``GraspVectorEnv.task``) through approach, close, settle, lift and hold, in the environment's
own normalized action space. It plans from privileged state at ``reset`` (the object's pose,
as a capture rig's operator would see it): the yaw and grasp centre come from
``surrogate.rig.scripts.plan_grasp`` with no randomness, then the grasp parameters shift them.

Grasp parameters (``GraspParams``): xy offset of the grasp centre (m), yaw offset (rad),
``grip`` (closing command 0..1: the jaw's target is blended from open to past-closed, so with
the servo's stiffness it sets the squeeze up to the hand's force bound), lift speed (m/s).

``rollout`` runs one episode per copy and measures success (lifted above ``lift_threshold``
and still held at the end) and slip (the object's largest displacement relative to the hand
base during the hold, > 5 mm, or rotation > 10 deg, as the capture rig labels it).
``cem_grasp`` searches the parameters with the cross-entropy method, one candidate per copy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np

from .rig.scripts import plan_grasp

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
    def from_vector(cls, v) -> "GraspParams":
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


def _rel_pose(task, d):
    R = d.xmat[task.base_id].reshape(3, 3)
    pos = R.T @ (d.xipos[task.ob] - d.xpos[task.base_id])
    qb, q = np.zeros(4), np.zeros(4)
    mujoco.mju_negQuat(qb, d.xquat[task.base_id])
    mujoco.mju_mulQuat(q, qb, d.xquat[task.ob])
    return pos, q


def rollout(venv, policy: ScriptedGraspPolicy, *, seed: int = 0, duration: float = 3.0, record: list | None = None) -> dict:
    """One episode per copy of a ``GraspVectorEnv`` under ``policy``.

    ``record``: a list that receives the [N, nq] ``qpos`` of every copy after the reset and after
    each control step (for videos: ``surrogate.bench.video``); None records nothing.

    Returns:
      {"success": [N] bool, "lifted", "dropped", "slipped": [N] bool, "slip_m", "slip_deg",
       "final_rise_m", "return": [N] float, "stepper": the stepper's stats}.
    """
    venv.reset(seed=seed)
    task = venv.task
    task.stepper.reset_stats()
    policy.reset()
    n = task.num_envs
    steps = int(round(duration / task.control_dt))
    hold = policy.hold_start
    ret = np.zeros(n)
    done = np.zeros(n, dtype=bool)
    dropped = np.zeros(n, dtype=bool)
    ref = [None] * n
    slip_m, slip_deg = np.zeros(n), np.zeros(n)
    rise = np.zeros(n)
    if record is not None:
        record.append(np.stack([d.qpos.copy() for d in task.datas]))
    for k in range(steps):
        t = k * task.control_dt
        a = policy(t)
        live = np.flatnonzero(~done)
        task.apply_action(a[live], live)
        task.simulate(live)
        r, term, info = task.evaluate(live)
        ret[live] += r
        rise[live] = info["rise"]
        dropped[live] |= term
        done[live] |= term
        for j, i in enumerate(live):
            if t + task.control_dt >= hold[i] and not term[j]:
                pos, q = _rel_pose(task, task.datas[i])
                if ref[i] is None:
                    ref[i] = (pos, q)
                slip_m[i] = max(slip_m[i], float(np.linalg.norm(pos - ref[i][0])))
                ang = 2 * math.degrees(math.acos(min(1.0, abs(float(np.dot(q, ref[i][1]))))))
                slip_deg[i] = max(slip_deg[i], ang)
        if record is not None:
            record.append(np.stack([d.qpos.copy() for d in task.datas]))
    lifted = task.lifted.copy()
    held = lifted & ~dropped & (rise > task.lift_threshold)
    slipped = lifted & ((slip_m > SLIP_M) | (slip_deg > SLIP_DEG))
    return {"success": held, "lifted": lifted, "dropped": dropped | (lifted & ~held), "slipped": slipped,
            "slip_m": slip_m, "slip_deg": slip_deg, "final_rise_m": rise, "return": ret,
            "stepper": task.stepper.stats()}


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
