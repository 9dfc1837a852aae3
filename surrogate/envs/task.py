"""The physics of N grasp-and-lift copies (``GraspTask``): one ``MjModel``, N ``MjData``, one ``Stepper``.

Observations, rewards, held / lifted / dropped and terminations of all copies are computed with
numpy; spaces, reward and termination are described in ``surrogate.envs.grasp``, whose Gymnasium
environments are thin shells around this task.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import mujoco
import numpy as np
from gymnasium import spaces

from ..errors import ConfigError
from ..objects import ObjectAsset, load_mesh_object, load_split, make_object
from ..scenes import TABLE_HEIGHT, build_scene
from ..scenes.builder import TABLE_HALF
from ..sim.stepper import CONTACT_MODES, Stepper, step


HANDS = ("parallel_jaw", "three_finger")

_DROP_BAND = 0.005  # m: a lifted object back within this of its rest height is dropped

MIN_FINGERTIPS = 2  # fingertips touching the object for it to count as held


def resolve_object(object=None, *, object_seed: int = 0, split: str | None = None, split_index: int = 0,
                   mesh: str | Path | None = None, mass: float = 0.1) -> ObjectAsset:
    """The object of an environment.

    Args:
      object: an ``ObjectAsset``, or a procedural family name (default ``box``).
      object_seed: seed of the procedural family.
      split: a named split (``surrogate.objects.load_split``); ``split_index`` picks the object.
      mesh: a mesh file (``load_mesh_object``) of mass ``mass`` kg.
    """
    if isinstance(object, ObjectAsset):
        return object
    given = [x is not None for x in (object, split, mesh)]
    if sum(given) > 1:
        raise ConfigError("give one of object (family), split or mesh", key="object")
    if mesh is not None:
        return load_mesh_object(mesh, mass=mass)
    if split is not None:
        objs = load_split(split)
        if not 0 <= split_index < len(objs):
            raise ConfigError(f"split_index must be in [0, {len(objs)}) for split {split!r}", key="split_index")
        return objs[split_index]
    return make_object(object or "box", int(object_seed))


class GraspTask:
    """N copies of the grasp task sharing one model and one stepper.

    Args:
      num_envs: N.
      hand: ``parallel_jaw`` or ``three_finger``.
      obj: the object (``resolve_object``).
      contact: ``analytic`` or ``surrogate``.
      checkpoint: surrogate checkpoint folder (or pass ``contact_model``).
      contact_model: a ``ContactModel`` (e.g. a ``ContactGNN``) for ``contact="surrogate"``.
      control_dt: s per environment step (a multiple of ``timestep``).
      timestep: s, physics step.
      grip_force: N, fingertip force bound (hand default if None).
      lift_target: m, rise that earns the full reward.  lift_threshold: m, rise that counts as lifted.
      drop_penalty: reward on a terminating step.
      randomize: draw object yaw (uniform) and xy offset (+-``xy_noise`` m) at reset.
      rate_limit: limit how fast the actuator targets move (module docstring); ``max_base_speed``
        m/s, ``max_yaw_rate`` rad/s, ``finger_travel_time`` s for a finger's whole ctrlrange.
      contact_tol: m, largest contact distance that counts as touching for ``held``.
      stepper_options: keyword options of ``Stepper`` (on_bad_force, max_force, ...); default
        ``on_bad_force="fallback"`` so a rollout continues and reports fallbacks in ``stats``.
    """

    def __init__(self, num_envs: int = 1, *, hand: str = "parallel_jaw", obj: ObjectAsset | None = None,
                 contact: str = "analytic", checkpoint: str | Path | None = None, contact_model=None,
                 control_dt: float = 0.02, timestep: float = 0.002, grip_force: float | None = None,
                 lift_target: float = 0.05, lift_threshold: float = 0.02, drop_penalty: float = 5.0,
                 randomize: bool = True, xy_noise: float = 0.01, rate_limit: bool = True,
                 max_base_speed: float = 0.5, max_yaw_rate: float = 25.0, finger_travel_time: float = 0.16,
                 contact_tol: float = 1e-3, stepper_options: dict | None = None):
        if hand not in HANDS:
            raise ConfigError(f"hand must be one of {HANDS}, got {hand!r}", key="hand")
        if contact not in CONTACT_MODES:
            raise ConfigError(f"contact must be one of {CONTACT_MODES}, got {contact!r}", key="contact")
        if int(num_envs) < 1:
            raise ConfigError(f"num_envs must be >= 1, got {num_envs!r}", key="num_envs")
        nsub = round(control_dt / timestep)
        if nsub < 1 or abs(nsub * timestep - control_dt) > 1e-9:
            raise ConfigError(f"control_dt {control_dt} s must be a multiple of timestep {timestep} s", key="control_dt")
        if contact == "surrogate" and contact_model is None:
            if checkpoint is None:
                raise ConfigError("contact='surrogate' needs checkpoint= (a checkpoint folder) or contact_model=",
                                  key="checkpoint")
            from ..model.checkpoint import load_checkpoint

            contact_model = load_checkpoint(checkpoint)[0]
        self.num_envs = int(num_envs)
        self.obj = obj if obj is not None else make_object("box", 0)
        self.scene = build_scene(self.obj, hand=hand, setting="table", timestep=timestep, object_quat="stable",
                                 grip_force=grip_force)
        self.model = self.scene.model
        self.hand = self.scene.hand
        self.contact = contact
        self.nsub = nsub
        self.control_dt = float(control_dt)
        self.lift_target, self.lift_threshold, self.drop_penalty = float(lift_target), float(lift_threshold), float(drop_penalty)
        self.randomize, self.xy_noise = bool(randomize), float(xy_noise)
        opts = {"on_bad_force": "fallback", **(stepper_options or {})}
        self.stepper = Stepper(self.scene, contact_model, contact=contact, **opts)
        m, s, h = self.model, self.scene, self.hand
        self.datas = [s.make_data() for _ in range(self.num_envs)]
        self.act_ids = s.hand_actuator_ids
        rng_ = m.actuator_ctrlrange[self.act_ids]
        self.ctrl_lo, self.ctrl_hi = rng_[:, 0].copy(), rng_[:, 1].copy()
        jids = [m.joint(n).id for n in h.joint_names]
        self.qadr = np.array([m.jnt_qposadr[j] for j in jids])
        self.vadr = np.array([m.jnt_dofadr[j] for j in jids])
        self.base_id = m.body(h.base_body).id
        self.ob = s.object_body_id
        self.pad_bodies = np.array([m.geom_bodyid[m.geom(g).id] for g in h.pad_geom_names])
        self.pad_sites = np.array([m.site(n).id for n in h.pad_site_names])
        sens = [m.sensor(n) for n in h.sensor_names]
        self.sensor_adr = np.concatenate([np.arange(x.adr[0], x.adr[0] + x.dim[0]) for x in sens])
        self.rest_z = float(s.meta["object_rest_pos"][2])
        self.rest_quat = np.asarray(s.meta["object_rest_quat"], float)
        self.obs_dim = 2 * len(jids) + 13 + 6 * len(self.pad_bodies) + 1
        self.action_space = spaces.Box(-1.0, 1.0, shape=(len(self.act_ids),), dtype=np.float32)
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(self.obs_dim,), dtype=np.float32)
        self.max_delta = _max_target_step(self.ctrl_lo, self.ctrl_hi, self.control_dt, rate_limit=rate_limit,
                                          base_speed=max_base_speed, yaw_rate=max_yaw_rate,
                                          finger_time=finger_travel_time)
        self.contact_tol = float(contact_tol)
        self.geom_finger = _fingertip_of_geom(m, self.pad_bodies)
        self.lifted = np.zeros(self.num_envs, dtype=bool)
        # per-copy counts of the last ``simulate``: analytic fallbacks, out-of-range contacts
        self.last_fallbacks = np.zeros(self.num_envs, dtype=np.int64)
        self.last_ood = np.zeros(self.num_envs, dtype=np.int64)
        self._live = np.arange(self.num_envs)
        _count_ood_per_env(self)
        # the contact model's wrench on each pad at the last physics step (world force, torque about the pad COM)
        self._pad_wrench = np.zeros((self.num_envs, len(self.pad_bodies), 6))
        self.steps = np.zeros(self.num_envs, dtype=np.int64)

    # -- actions ---------------------------------------------------------------------------
    def action_from_targets(self, targets: np.ndarray) -> np.ndarray:
        """[..., nu] actuator targets (ctrl units) -> normalized actions in [-1, 1] (clipped)."""
        a = 2.0 * (np.asarray(targets, float) - self.ctrl_lo) / (self.ctrl_hi - self.ctrl_lo) - 1.0
        return np.clip(a, -1.0, 1.0).astype(np.float32)

    def targets_from_action(self, action: np.ndarray) -> np.ndarray:
        a = np.clip(np.asarray(action, float), -1.0, 1.0)
        return self.ctrl_lo + 0.5 * (a + 1.0) * (self.ctrl_hi - self.ctrl_lo)

    # -- reset / step ----------------------------------------------------------------------
    def reset_one(self, i: int, rng: np.random.Generator) -> None:
        """Fresh state of copy ``i``: object at rest (random yaw and xy offset if ``randomize``), hand open above."""
        s, m = self.scene, self.model
        d = self.datas[i]
        mujoco.mj_resetData(m, d)
        fresh = s.make_data()
        mujoco.mj_copyData(d, m, fresh)
        if self.randomize:
            qa = s.object_qpos_adr
            yaw = rng.uniform(-np.pi, np.pi)
            qz = np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])
            q = np.zeros(4)
            mujoco.mju_mulQuat(q, qz, d.qpos[qa + 3:qa + 7].copy())
            d.qpos[qa + 3:qa + 7] = q
            d.qpos[qa:qa + 2] += rng.uniform(-self.xy_noise, self.xy_noise, size=2)
        mujoco.mj_forward(m, d)
        self.lifted[i] = False
        self.steps[i] = 0
        self._pad_wrench[i] = 0.0

    def apply_action(self, actions: np.ndarray, envs: Sequence[int] | None = None) -> None:
        """Set the actuator targets of the given copies (all by default) from [n, nu] actions in [-1, 1].

        Targets move toward the commanded ones by at most ``max_delta`` per step (the rate limit).
        Raises ValueError for a wrong shape or a non-finite action, before any copy changes.
        """
        envs = list(range(self.num_envs)) if envs is None else [int(i) for i in envs]
        acts = _checked_actions(actions, len(envs), len(self.act_ids), envs)
        for a, i in zip(acts, envs):
            d = self.datas[i]
            prev = d.ctrl[self.act_ids]
            d.ctrl[self.act_ids] = prev + np.clip(self.targets_from_action(a) - prev, -self.max_delta, self.max_delta)

    def simulate(self, envs: Sequence[int] | None = None) -> None:
        """``control_dt`` of physics for the given copies (all by default), one network call per physics step."""
        envs = np.arange(self.num_envs) if envs is None else np.asarray(envs, dtype=int)
        self.last_fallbacks[:] = 0
        self.last_ood[:] = 0
        if len(envs):
            before = self.stepper.stats()["fallback_envs"]
            self._live = envs
            step(self.model, [self.datas[i] for i in envs], self.stepper, nstep=self.nsub)
            for j, c in self.stepper.stats()["fallback_envs"].items():
                self.last_fallbacks[envs[j]] += c - before.get(j, 0)
            if self.contact == "surrogate":
                self._pad_wrench[envs] = self.stepper.pad_wrenches(self.pad_bodies)

    def observe(self, envs: Sequence[int] | None = None) -> np.ndarray:
        """[n, obs_dim] float32 observations."""
        envs = list(range(self.num_envs)) if envs is None else list(envs)
        out = np.zeros((len(envs), self.obs_dim), dtype=np.float32)
        wr = self._pad_wrench if self.contact == "surrogate" else None
        for r, i in enumerate(envs):
            d = self.datas[i]
            R = d.xmat[self.base_id].reshape(3, 3)
            bp = d.xpos[self.base_id]
            rel = R.T @ (d.xipos[self.ob] - bp)
            qb = np.zeros(4)
            mujoco.mju_negQuat(qb, d.xquat[self.base_id])
            rq = np.zeros(4)
            mujoco.mju_mulQuat(rq, qb, d.xquat[self.ob])
            vo, vb = np.zeros(6), np.zeros(6)
            mujoco.mj_objectVelocity(self.model, d, mujoco.mjtObj.mjOBJ_BODY, self.ob, vo, 0)
            mujoco.mj_objectVelocity(self.model, d, mujoco.mjtObj.mjOBJ_BODY, self.base_id, vb, 0)
            # velocity of the object relative to the base frame (moving with the base)
            wb = vb[:3]
            v_rel = vo[3:] - (vb[3:] + np.cross(wb, d.xipos[self.ob] - d.xipos[self.base_id]))
            ft = d.sensordata[self.sensor_adr].reshape(-1, 6).copy()
            if wr is not None:
                ft -= self._sensor_frame(d, wr[i])
            out[r] = np.concatenate([d.qpos[self.qadr], d.qvel[self.vadr], rel, rq, R.T @ v_rel, R.T @ (vo[:3] - wb),
                                     ft.ravel(), [d.xipos[self.ob][2] - self.rest_z]])
        return out

    def _sensor_frame(self, d, wrench: np.ndarray) -> np.ndarray:
        """[P, 6] a per-pad wrench (world force, torque about the pad body COM) as an F/T sensor at the pad site reads it.

        The sensor reads the force of the finger on the pad, in the site frame; a contact wrench on the
        pad adds its negative (torque taken about the site)."""
        out = np.zeros((len(self.pad_sites), 6))
        for p, (b, site) in enumerate(zip(self.pad_bodies, self.pad_sites)):
            Rs = d.site_xmat[site].reshape(3, 3)
            f, t = wrench[p, :3], wrench[p, 3:]
            t_site = t + np.cross(d.xipos[b] - d.site_xpos[site], f)
            out[p, :3], out[p, 3:] = Rs.T @ f, Rs.T @ t_site
        return out

    def evaluate(self, envs: Sequence[int] | None = None):
        """(reward [n], terminated [n] bool, info dict of [n] arrays) after a step; updates ``lifted``."""
        envs = list(range(self.num_envs)) if envs is None else list(envs)
        n = len(envs)
        rew, term = np.zeros(n), np.zeros(n, dtype=bool)
        rise, dropped, off = np.zeros(n), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        tips = np.zeros(n, dtype=np.int64)
        for r, i in enumerate(envs):
            d = self.datas[i]
            p = d.xipos[self.ob]
            finite = bool(np.isfinite(d.qpos).all() and np.isfinite(d.qvel).all())
            rise[r] = p[2] - self.rest_z if finite else -np.inf
            tips[r] = self.fingertips_touching(i) if finite else 0
            held = tips[r] >= MIN_FINGERTIPS
            if held and rise[r] > self.lift_threshold:
                self.lifted[i] = True
            dropped[r] = bool(self.lifted[i] and rise[r] < _DROP_BAND)
            off[r] = (not finite) or abs(p[0]) > TABLE_HALF[0] or abs(p[1]) > TABLE_HALF[1] or p[2] < TABLE_HEIGHT - 0.05
            term[r] = dropped[r] or off[r]
            rew[r] = (min(max(rise[r], 0.0), self.lift_target) / self.lift_target if held else 0.0) \
                - (self.drop_penalty if term[r] else 0.0)
        info = {"rise": rise, "held": tips >= MIN_FINGERTIPS, "fingertips": tips, "dropped": dropped, "off_table": off,
                "lifted": self.lifted[envs].copy()}
        return rew, term, info

    def fingertips_touching(self, i: int) -> int:
        """Number of fingertips (a pad or the finger link that carries it) within ``contact_tol`` of the object in copy ``i``.

        Uses the contacts MuJoCo detected at the last physics step (owned pairs are detected in
        both contact modes), so it is the same test for analytic and surrogate contact.
        """
        d = self.datas[i]
        n = d.ncon
        if n == 0:
            return 0
        g1, g2 = d.contact.geom1[:n], d.contact.geom2[:n]
        b1, b2 = self.model.geom_bodyid[g1], self.model.geom_bodyid[g2]
        near = d.contact.dist[:n] <= self.contact_tol
        other = np.where(b1 == self.ob, g2, np.where(b2 == self.ob, g1, -1))
        fingers = self.geom_finger[other[(other >= 0) & near]]
        return int(len(np.unique(fingers[fingers >= 0])))

    def render(self, renderer: mujoco.Renderer, i: int = 0) -> np.ndarray:
        cam = mujoco.MjvCamera()
        cam.lookat[:] = self.datas[i].xipos[self.ob]
        cam.distance, cam.azimuth, cam.elevation = 0.5, 135.0, -25.0
        renderer.update_scene(self.datas[i], camera=cam)
        return renderer.render()


def _max_target_step(lo: np.ndarray, hi: np.ndarray, dt: float, *, rate_limit: bool, base_speed: float,
                     yaw_rate: float, finger_time: float) -> np.ndarray:
    """[nu] the largest change of each actuator's target in one control step (ctrl units).

    Actuators are the base's x, y, z (m), yaw (rad), then the fingers (``lo``/``hi`` [nu]: ctrlrange).
    """
    if not rate_limit:
        return np.full(len(lo), np.inf)
    for key, v in (("max_base_speed", base_speed), ("max_yaw_rate", yaw_rate), ("finger_travel_time", finger_time)):
        if not (np.isfinite(v) and v > 0):
            raise ConfigError(f"{key} must be a positive number, got {v!r}", key=key)
    out = (hi - lo) / finger_time * dt
    out[:3] = base_speed * dt
    out[3] = yaw_rate * dt
    return out


def _fingertip_of_geom(m: mujoco.MjModel, pad_bodies: np.ndarray) -> np.ndarray:
    """[ngeom] the fingertip index of each geom (-1 for none): pad k's geoms and those of its parent link."""
    out = np.full(m.ngeom, -1, dtype=np.int64)
    for k, b in enumerate(pad_bodies):
        for body in (int(b), int(m.body_parentid[b])):
            out[m.geom_bodyid == body] = k
    return out


def _checked_actions(actions, n: int, nu: int, envs: list) -> np.ndarray:
    """[n, nu] float actions; ValueError naming the environment and components if not finite or mis-shaped."""
    try:
        a = np.asarray(actions, dtype=float)
    except (TypeError, ValueError) as e:
        raise ValueError(f"action must be numbers, got {type(actions).__name__} ({e})") from None
    if a.size != n * nu:
        raise ValueError(f"action has shape {list(a.shape)}; expected {n} x {nu} (environments x actuators)")
    a = a.reshape(n, nu)
    bad = ~np.isfinite(a)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        comps = np.flatnonzero(bad[r]).tolist()
        raise ValueError(f"action of environment {envs[r]} is not finite ({a[r, c]!r} at components {comps}); "
                         "actions must be finite numbers in [-1, 1]")
    return a


def _count_ood_per_env(task: GraspTask) -> None:
    """Count the stepper's out-of-range contacts per copy into ``task.last_ood``.

    The stepper counts them for the whole batch; this wraps its range check (on this task's
    stepper only) to attribute each out-of-range contact to its environment.
    """
    rng = task.stepper.input_range
    if rng is None:
        return
    check = rng.check

    def per_env_check(graph, *args, **kwargs):
        r = check(graph, *args, **kwargs)
        edge_env = graph.batch[graph.edge_index[1]].numpy()
        counts = np.bincount(edge_env[np.asarray(r["edge"], bool)], minlength=len(task._live))
        task.last_ood[task._live] += counts[:len(task._live)]
        return r

    rng.check = per_env_check
