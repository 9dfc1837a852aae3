"""The physics of N grasp-and-lift environments (``GraspTask``): one scene, one ``Stepper``, and either N ``MjData``
or N copies of the scene in one ``MjModel`` (``envs.physics``: ``copies=True``, one MuJoCo call pair per physics
step for all N).

Observations, rewards, held / lifted / dropped and terminations of all environments are computed with
numpy from the same arrays on either backend (``physics.EnvArrays``); spaces, reward and termination are
described in ``surrogate.envs.grasp``, whose Gymnasium environments are thin shells around this task.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import mujoco
import numpy as np
from gymnasium import spaces

from ..errors import ConfigError
from ..model.law import cross
from ..objects import ObjectAsset, load_mesh_object, load_split, make_object
from ..paths import release_checkpoint
from ..quat import quat_conj, quat_mul
from ..scenes import GRASPING_HANDS, TABLE_HEIGHT, build_scene
from ..scenes.builder import TABLE_HALF
from ..sim.stepper import CONTACT_MODES, Stepper
from . import checks
from .physics import CopiesPhysics, DataPhysics, EnvArrays, Ids

HANDS = GRASPING_HANDS  # every hand a scene builds (jaco: dm_control's Kinova hand)
DEFAULT_RELEASE = "rig_default"  # the checkpoint contact="surrogate" loads when none is given

_DROP_BAND = 0.005  # m: a lifted object back within this of its rest height is dropped
_BAND_WHY = " m, the drop band: a held object within it of its rest height would be lifted and dropped at once"

MIN_FINGERTIPS = 2  # fingertips touching the object for it to count as held


def resolve_object(object=None, *, object_seed: int | None = None, split: str | None = None,
                   split_index: int | None = None, mesh: str | Path | None = None, mass: float | None = None,
                   scale=None) -> ObjectAsset:
    """The object of an environment.

    Args:
      object: an ``ObjectAsset``, or a procedural family name (default ``box``).
      object_seed: seed of the procedural family (default 0); not with a split, a mesh or an ``ObjectAsset``
        (ConfigError: it would be ignored).
      split: a named split (``surrogate.objects.load_split``); ``split_index`` picks the object (default 0).
      mesh: a mesh file (``load_mesh_object``) of mass ``mass`` kg (default 0.1), its coordinates times ``scale`` (a
        number or three; default 1: metres), as the mesh loader's unit hint asks (``scale=0.001`` for millimetres).
    An argument the chosen source would ignore (``mass`` or ``scale`` without ``mesh``, ``split_index`` without
    ``split``) is refused with a ConfigError naming it.
    """
    given = [x is not None for x in (object, split, mesh)]
    if sum(given) > 1:
        raise ConfigError("give one of object (family), split or mesh", key="object")
    for key, v, needs, what in (("scale", scale, mesh, "a mesh file: give mesh=PATH"),
                                ("mass", mass, mesh, "a mesh file: give mesh=PATH"),
                                ("split_index", split_index, split, "a split: give split=NAME")):
        if v is not None and needs is None:
            raise ConfigError(f"{key} applies to {what} with it", key=key)
    if object_seed is not None and (split is not None or mesh is not None or isinstance(object, ObjectAsset)):
        raise ConfigError("object_seed seeds a procedural family (object=NAME); a split's object is picked by "
                          "split_index, a mesh or an ObjectAsset has none", key="object_seed")
    if isinstance(object, ObjectAsset):
        return object
    if mesh is not None:
        return load_mesh_object(mesh, mass=0.1 if mass is None else mass, scale=1.0 if scale is None else scale)
    if split is not None:
        objs = load_split(split)
        k = checks.whole("split_index", 0 if split_index is None else split_index)
        if k >= len(objs):
            raise ConfigError(f"split_index must be in [0, {len(objs)}) for split {split!r}", key="split_index")
        return objs[k]
    return make_object(object or "box", checks.whole("object_seed", 0 if object_seed is None else object_seed))


class GraspTask:
    """N copies of the grasp task sharing one model and one stepper.

    Args:
      num_envs: N.
      hand: ``parallel_jaw``, ``three_finger`` or ``jaco`` (``HANDS``; jaco needs dm_control's assets).
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
      copies: hold the N environments as copies of the scene in one ``MjModel`` (``physics.CopiesPhysics``: no
        ``datas``, subsets cannot step alone, the scene's model must not be edited afterwards) instead of N
        ``MjData`` (``datas``).
    Every argument is checked here (``envs.checks``): a value of the wrong kind or range (``lift_target=0``, a
    negative ``contact_tol``, ``randomize="false"``, a checkpoint with analytic contact) raises a ``ConfigError``
    naming it. ``lift_threshold`` must be at least the 5 mm drop band.
    """

    def __init__(self, num_envs: int = 1, *, hand: str = "parallel_jaw", obj: ObjectAsset | None = None,
                 contact: str = "analytic", checkpoint: str | Path | None = None, contact_model=None,
                 control_dt: float = 0.02, timestep: float = 0.002, grip_force: float | None = None,
                 lift_target: float = 0.05, lift_threshold: float = 0.02, drop_penalty: float = 5.0,
                 randomize: bool = True, xy_noise: float = 0.01, rate_limit: bool = True,
                 max_base_speed: float = 0.5, max_yaw_rate: float = 25.0, finger_travel_time: float = 0.16,
                 contact_tol: float = 1e-3, stepper_options: dict | None = None, copies: bool = False):
        if hand not in HANDS:
            raise ConfigError(f"hand must be one of {HANDS}, got {hand!r}", key="hand")
        if contact not in CONTACT_MODES:
            raise ConfigError(f"contact must be one of {CONTACT_MODES}, got {contact!r}", key="contact")
        self.num_envs = checks.whole("num_envs", num_envs, low=1)
        timestep, control_dt = checks.positive("timestep", timestep), checks.positive("control_dt", control_dt)
        nsub = round(control_dt / timestep)
        if nsub < 1 or abs(nsub * timestep - control_dt) > 1e-9:
            raise ConfigError(f"control_dt {control_dt} s must be a multiple of timestep {timestep} s", key="control_dt")
        if grip_force is not None:
            checks.positive("grip_force", grip_force)
        self.lift_target = checks.positive("lift_target", lift_target)
        self.drop_penalty = checks.finite("drop_penalty", drop_penalty)
        self.lift_threshold = checks.positive("lift_threshold", lift_threshold, at_least=_DROP_BAND, why=_BAND_WHY)
        self.randomize, self.xy_noise = checks.flag("randomize", randomize), checks.non_negative("xy_noise", xy_noise)
        self.contact_tol = checks.non_negative("contact_tol", contact_tol)
        rate_limit, copies = checks.flag("rate_limit", rate_limit), checks.flag("copies", copies)
        contact_model = _contact_model(contact, checkpoint, contact_model)
        self.obj = obj if obj is not None else make_object("box", 0)
        self.scene = build_scene(self.obj, hand=hand, setting="table", timestep=timestep, object_quat="stable",
                                 grip_force=grip_force)
        self.model = self.scene.model
        self.hand = self.scene.hand
        self.contact = contact
        self.nsub = nsub
        self.control_dt = float(control_dt)
        opts = {"on_bad_force": "fallback", **(stepper_options or {})}
        self.stepper = Stepper(self.scene, contact_model, contact=contact, **opts)
        m, s, h = self.model, self.scene, self.hand
        self.act_ids = np.asarray(s.hand_actuator_ids, dtype=np.int64)
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
        bodies = np.concatenate([[self.ob, self.base_id], self.pad_bodies])
        self.ids = Ids(qadr=self.qadr, vadr=self.vadr, bodies=bodies,
                       roots=m.body_rootid[[self.ob, self.base_id]], sites=self.pad_sites, sensor_adr=self.sensor_adr)
        self.physics = CopiesPhysics(s, self.num_envs, h.pad_site_names) if copies else DataPhysics(s, self.num_envs)
        self.obs_dim = 2 * len(jids) + 13 + 6 * len(self.pad_bodies) + 1
        self.action_space = spaces.Box(-1.0, 1.0, shape=(len(self.act_ids),), dtype=np.float32)
        self.observation_space = spaces.Box(-np.inf, np.inf, shape=(self.obs_dim,), dtype=np.float32)
        self.max_delta = _max_target_step(self.ctrl_lo, self.ctrl_hi, self.control_dt, rate_limit=rate_limit,
                                          base_speed=max_base_speed, yaw_rate=max_yaw_rate,
                                          finger_time=finger_travel_time)
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
        d = self.physics.reset_data(i)
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
        self.physics.loaded(i)
        self.lifted[i] = False
        self.steps[i] = 0
        self._pad_wrench[i] = 0.0

    def apply_action(self, actions: np.ndarray, envs: Sequence[int] | None = None) -> None:
        """Set the actuator targets of the given copies (all by default) from [n, nu] actions in [-1, 1].

        Targets move toward the commanded ones by at most ``max_delta`` per step (the rate limit).
        Raises ValueError for a wrong shape or a non-finite action, before any copy changes.
        """
        envs = list(range(self.num_envs)) if envs is None else [int(i) for i in envs]
        acts = checks.checked_actions(actions, len(envs), len(self.act_ids), envs)
        if not envs:
            return
        prev = self.physics.ctrl(envs)[:, self.act_ids]
        step = np.clip(self.targets_from_action(acts) - prev, -self.max_delta, self.max_delta)
        self.physics.set_ctrl(envs, self.act_ids, prev + step)

    def simulate(self, envs: Sequence[int] | None = None) -> None:
        """``control_dt`` of physics for the given copies (all by default), one network call per physics step."""
        envs = np.arange(self.num_envs) if envs is None else np.asarray(envs, dtype=np.int64)
        self.last_fallbacks[:] = 0
        self.last_ood[:] = 0
        if not len(envs):
            return
        before = self.stepper.fallback_envs()
        # the environment of each row of the stepper's batch (the copies: all, some of them sitting out)
        self._live = np.arange(self.num_envs) if self.physics.copies else envs
        rows = self.physics.simulate(envs, self.stepper, self.nsub)
        for j, c in self.stepper.fallback_envs().items():
            self.last_fallbacks[rows[j]] += c - before.get(j, 0)
        out = np.ones(self.num_envs, dtype=bool)
        out[envs] = False  # a copy sitting out a step: its discarded step reports nothing
        self.last_fallbacks[out], self.last_ood[out] = 0, 0
        if self.contact == "surrogate":
            row_of = np.full(self.num_envs, -1, dtype=np.int64)
            row_of[rows] = np.arange(len(rows))
            self._pad_wrench[envs] = self.stepper.pad_wrenches(self.pad_bodies)[row_of[envs]]

    @property
    def datas(self) -> list:
        """The environments' ``MjData`` (``copies=False``; with copies there are none: ``ConfigError``)."""
        return self.physics.datas

    def arrays(self, envs: Sequence[int] | None = None) -> EnvArrays:
        """What observations and rewards read of environments ``envs`` (all by default), for their current state
        (pass it to ``evaluate`` and ``observe`` of the same state to read it once)."""
        envs = list(range(self.num_envs)) if envs is None else [int(i) for i in envs]
        return self.physics.arrays(envs, self.ids)

    def observe(self, envs: Sequence[int] | None = None, arrays: EnvArrays | None = None) -> np.ndarray:
        """[n, obs_dim] float32 observations (``arrays``: ``self.arrays(envs)`` if already read)."""
        envs = list(range(self.num_envs)) if envs is None else [int(i) for i in envs]
        A = self.arrays(envs) if arrays is None else arrays
        R = A.xmat_base  # [n, 3, 3] base frame; R^T v is v in the base frame
        to_base = lambda v: np.einsum("nji,nj->ni", R, v)  # noqa: E731
        p_ob, p_base = A.xipos[:, 0], A.xipos[:, 1]
        rel = to_base(p_ob - A.xpos_base)
        rq = quat_mul(quat_conj(A.xquat_base), A.xquat_ob)
        vo, vb = _body_velocity(A, 0), _body_velocity(A, 1)
        wb = vb[:, :3]
        v_rel = vo[:, 3:] - (vb[:, 3:] + cross(wb, p_ob - p_base))  # relative to the base frame, moving with it
        ft = A.sensordata.reshape(len(envs), -1, 6).copy()
        if self.contact == "surrogate":
            ft -= _sensor_frame(A, self._pad_wrench[envs])
        out = np.concatenate([A.qpos, A.qvel, rel, rq, to_base(v_rel), to_base(vo[:, :3] - wb),
                              ft.reshape(len(envs), -1), (p_ob[:, 2] - self.rest_z)[:, None]], axis=1)
        return out.astype(np.float32)

    def evaluate(self, envs: Sequence[int] | None = None, arrays: EnvArrays | None = None):
        """(reward [n], terminated [n] bool, info dict of [n] arrays) after a step; updates ``lifted``."""
        envs = list(range(self.num_envs)) if envs is None else [int(i) for i in envs]
        A = self.arrays(envs) if arrays is None else arrays
        p = A.xipos[:, 0]
        rise = np.where(A.finite, p[:, 2] - self.rest_z, -np.inf)
        tips = np.where(A.finite, self._fingertips(A), 0).astype(np.int64)
        held = tips >= MIN_FINGERTIPS
        self.lifted[envs] |= held & (rise > self.lift_threshold)
        lifted = self.lifted[envs].copy()
        dropped = lifted & (rise < _DROP_BAND)
        with np.errstate(invalid="ignore"):
            off = ~A.finite | (np.abs(p[:, 0]) > TABLE_HALF[0]) | (np.abs(p[:, 1]) > TABLE_HALF[1]) \
                | (p[:, 2] < TABLE_HEIGHT - 0.05)
        term = dropped | off
        rew = np.where(held, np.clip(rise, 0.0, self.lift_target) / self.lift_target, 0.0) \
            - np.where(term, self.drop_penalty, 0.0)
        info = {"rise": rise, "held": held, "fingertips": tips, "dropped": dropped, "off_table": off, "lifted": lifted}
        return rew, term, info

    def _fingertips(self, A: EnvArrays) -> np.ndarray:
        """[n] fingertips (a pad or the finger link that carries it) within ``contact_tol`` of the object in each row of
        ``A``, from the contacts MuJoCo detected at the last physics step (the same test for both contacts)."""
        g = A.con_geom
        b = self.model.geom_bodyid[g] if len(g) else np.zeros((0, 2), np.int64)
        other = np.where(b[:, 0] == self.ob, g[:, 1], np.where(b[:, 1] == self.ob, g[:, 0], -1))
        finger = np.where(other >= 0, self.geom_finger[np.maximum(other, 0)], -1)
        ok = (A.con_dist <= self.contact_tol) & (finger >= 0)
        bits = np.zeros(len(A.finite), dtype=np.int64)
        np.bitwise_or.at(bits, A.con_row[ok], np.left_shift(1, finger[ok]))
        return sum((bits >> k) & 1 for k in range(len(self.pad_bodies)))

    def render(self, renderer: mujoco.Renderer, i: int = 0) -> np.ndarray:
        """Environment ``i`` as an RGB image (``renderer``: a ``mujoco.Renderer`` of ``self.model``, the scene's)."""
        _, d = self.physics.render_data(i)
        cam = mujoco.MjvCamera()
        cam.lookat[:] = d.xipos[self.ob]
        cam.distance, cam.azimuth, cam.elevation = 0.5, 135.0, -25.0
        renderer.update_scene(d, camera=cam)
        return renderer.render()


def _body_velocity(A: EnvArrays, k: int) -> np.ndarray:
    """[n, 6] (angular, linear) world velocity of body k of ``A`` at its COM: ``mj_objectVelocity(..., flg_local=0)``
    (``cvel`` is about the root's subtree COM; the linear part moved to ``xipos``)."""
    c = A.cvel[:, k]
    return np.concatenate([c[:, :3], c[:, 3:] - cross(A.xipos[:, k] - A.com[:, k], c[:, :3])], axis=1)


def _sensor_frame(A: EnvArrays, wrench: np.ndarray) -> np.ndarray:
    """[n, P, 6] per-pad wrenches ([n, P, 6]: world force, torque about the pad body COM) as an F/T sensor at the pad
    site reads them.

    The sensor reads the force of the finger on the pad, in the site frame; a contact wrench on the
    pad adds its negative (torque taken about the site)."""
    f, t = wrench[..., :3], wrench[..., 3:]
    t_site = t + cross(A.xipos[:, 2:] - A.site_xpos, f)
    Rs = A.site_xmat
    return np.concatenate([np.einsum("npji,npj->npi", Rs, f), np.einsum("npji,npj->npi", Rs, t_site)], axis=-1)


def _max_target_step(lo: np.ndarray, hi: np.ndarray, dt: float, *, rate_limit: bool, base_speed: float,
                     yaw_rate: float, finger_time: float) -> np.ndarray:
    """[nu] the largest change of each actuator's target in one control step (ctrl units).

    Actuators are the base's x, y, z (m), yaw (rad), then the fingers (``lo``/``hi`` [nu]: ctrlrange).
    """
    if not rate_limit:
        return np.full(len(lo), np.inf)
    for key, v in (("max_base_speed", base_speed), ("max_yaw_rate", yaw_rate), ("finger_travel_time", finger_time)):
        checks.positive(key, v)
    out = (hi - lo) / finger_time * dt
    out[:3] = base_speed * dt
    out[3] = yaw_rate * dt
    return out


def _contact_model(contact: str, checkpoint, contact_model):
    """The contact model the stepper takes: None for analytic contact, else ``contact_model``, or the one of
    ``checkpoint`` (default: the released grasp model, what a user who asks for learned contact expects).

    A task's contact is fixed at construction, so a checkpoint or model given with analytic contact would never
    be used: ConfigError, as for both given at once."""
    given = [k for k, v in (("checkpoint", checkpoint), ("contact_model", contact_model)) if v is not None]
    if contact == "analytic" and given:
        raise ConfigError(f"{given[0]} is for learned contact, which contact='analytic' (the default) never uses: "
                          "pass contact='surrogate' with it, or leave it out", key=given[0])
    if len(given) == 2:
        raise ConfigError("give checkpoint or contact_model, not both", key="checkpoint")
    if contact == "analytic" or contact_model is not None:
        return contact_model
    from ..model.checkpoint import load_checkpoint

    return load_checkpoint(release_checkpoint(DEFAULT_RELEASE) if checkpoint is None else checkpoint)[0]


def _fingertip_of_geom(m: mujoco.MjModel, pad_bodies: np.ndarray) -> np.ndarray:
    """[ngeom] the fingertip index of each geom (-1 for none): pad k's geoms and those of its parent link."""
    out = np.full(m.ngeom, -1, dtype=np.int64)
    for k, b in enumerate(pad_bodies):
        for body in (int(b), int(m.body_parentid[b])):
            out[m.geom_bodyid == body] = k
    return out


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
        # the stepper checks a batch's arrays (``ContactBatch.arrays``) or its graph: each contact's environment
        edge_env = np.asarray(graph["env"] if isinstance(graph, dict) else graph.env)
        counts = np.bincount(edge_env[np.asarray(r["edge"], bool)], minlength=len(task._live))
        task.last_ood[task._live] += counts[:len(task._live)]
        return r

    rng.check = per_env_check
