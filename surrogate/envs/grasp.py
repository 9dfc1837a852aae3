"""Grasp-and-lift environments: a hand, an object of the library (or a mesh) on a table,
MuJoCo physics with analytic or learned (surrogate) contact.

``GraspTask`` holds the physics of N environments (one ``Stepper``: one network call per physics step for all;
N ``MjData``, or with ``copies=True`` N copies of the scene in one ``MjModel``: one ``mj_step1`` / ``mj_step2`` for
all, ``envs.physics``) and computes observations, rewards and terminations for all of them with numpy;
``GraspEnv`` (``gymnasium.Env``, N = 1, on ``MjData``) and ``GraspVectorEnv`` (``gymnasium.vector.VectorEnv``, on
copies by default) are thin shells around it, so N single environments and one vector environment of N compute the
same thing.

Spaces (float32; J = 4 base joints + finger joints, P pads):

* action [4 + n_finger_actuators] in [-1, 1]: position targets of the hand's actuators, each
  mapped linearly onto its ``ctrlrange`` (-1 -> low, +1 -> high). Base targets are x, y, z (m,
  relative to the start pose) and yaw (rad); finger targets as in ``surrogate.scenes.hands``.
  ``GraspTask.action_from_targets`` converts targets to actions.
* observation [2 J + 13 + 6 P + 1]: hand joint positions (J) and velocities (J); object position
  (3, m), orientation (4, w x y z), linear velocity (3, m/s) and angular velocity (3, rad/s)
  relative to the hand base, in the base frame; per pad the force (3, N) and torque (3, N m)
  of its F/T sensor in the pad site frame (with surrogate contact the contact model's wrench
  on the pad is included: MuJoCo's sensors do not see ``qfrc_applied``); the object's rise
  above its rest height (1, m).

Actions are rate limited: the position target sent to each actuator moves from the previous
target toward the commanded one by at most ``max_base_speed`` (0.5 m/s) for the base's x, y, z,
``max_yaw_rate`` (25 rad/s) for its yaw, and, for the finger actuators, their whole
``ctrlrange`` in ``finger_travel_time`` (0.16 s), per second of ``control_dt`` (the scripted grasp of
``surrogate.policies`` stays inside these limits). A random policy therefore cannot fling the hand
into the object. ``rate_limit=False`` sends the commanded targets at once. Actions that are not
finite raise ``ValueError`` naming the environment and the action components.

Held: the object touches at least two fingertips (each pad and the finger link it sits on,
contact distance <= ``contact_tol``, 1 mm): both jaws of the gripper, two of the three fingers of
the hand. Reward per step: ``min(rise, lift_target) / lift_target`` (0..1) while held, 0 otherwise,
and ``-drop_penalty`` on the step the episode terminates. ``lifted`` is set once the object is
above ``lift_threshold`` while held (an object knocked or tossed up is not lifted). Terminated: the
object was lifted and fell back to within 5 mm of the table (dropped), or it left the table (off
the table top's area or 5 cm below its surface), or the state is not finite. Truncated:
``max_episode_steps``. ``info``: rise (m), held, fingertips (number touching), lifted, dropped,
off_table, and after a step fallbacks and ood_contacts (this step's analytic fallbacks and
out-of-training-range contacts of the surrogate).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import gymnasium as gym
import mujoco
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from ..errors import ConfigError
from . import checks
from .task import HANDS, MIN_FINGERTIPS, GraspTask, resolve_object

__all__ = ["HANDS", "MIN_FINGERTIPS", "GraspEnv", "GraspTask", "GraspVectorEnv", "resolve_object"]


def _env_info(task: GraspTask, info: dict, row: int, i: int, *, stepped: bool) -> dict:
    """The ``info`` of one environment (copy ``i``, row ``row`` of ``task.evaluate``'s arrays), as ``GraspEnv`` returns it.

    After a step it also holds this step's analytic fallbacks and out-of-training-range contacts
    (cumulative counts: ``task.stepper.stats()``).
    """
    out = {k: v[row] for k, v in info.items()}
    if stepped:
        out["fallbacks"] = int(task.last_fallbacks[i])
        out["ood_contacts"] = int(task.last_ood[i])
    return out


def _entropy_rngs(n: int) -> list:
    """``n`` independent generators seeded from OS entropy (what an unseeded Gymnasium env uses)."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence().spawn(n)]


def _randomize_option(options, where: str):
    """The ``randomize`` of reset ``options`` (None: the task's own), refusing what is not a dict or a bool."""
    if options is None:
        return None
    if not isinstance(options, dict):
        raise TypeError(f"{where}: options must be a dict (e.g. {{'randomize': False}}) or None, "
                        f"got {type(options).__name__} {options!r}")
    if "randomize" not in options:
        return None
    r = options["randomize"]
    if not isinstance(r, (bool, np.bool_)):
        raise TypeError(f"{where}: options['randomize'] must be True or False, got {type(r).__name__} {r!r}")
    return bool(r)


def _reset(task: GraspTask, envs, rngs, randomize) -> None:
    """Reset environments ``envs`` of ``task`` with their generators; ``randomize``: None for the task's own."""
    keep = task.randomize
    if randomize is not None:
        task.randomize = randomize
    try:
        for i in envs:
            task.reset_one(int(i), rngs[i])
    finally:
        task.randomize = keep


def _make_task(num_envs, kwargs) -> GraspTask:
    obj_keys = ("object", "object_seed", "split", "split_index", "mesh", "mass", "scale")
    okw = {k: kwargs.pop(k) for k in obj_keys if k in kwargs}
    return GraspTask(num_envs, obj=resolve_object(**okw), **kwargs)


class GraspEnv(gym.Env):
    """One grasp-and-lift environment (see the module docstring).

    Keyword options: ``hand``, the object (``object`` family or ``ObjectAsset``, ``object_seed``, or
    ``split`` + ``split_index``, or ``mesh`` + ``mass``), ``contact`` (``analytic`` | ``surrogate``),
    ``checkpoint`` or ``contact_model``, ``render_mode`` (None | ``rgb_array``), ``width``, ``height``,
    and the ``GraspTask`` options (control_dt, timestep, grip_force, lift_target, rate_limit,
    max_base_speed, max_yaw_rate, finger_travel_time, contact_tol, ...). Actions are rate limited and
    must be finite (``ValueError`` otherwise); reward and ``lifted`` need the object held between
    two fingertips (module docstring). Arguments of the wrong kind or range, or ones the environment would ignore,
    raise ``ConfigError`` naming them (``GraspTask``, ``resolve_object``); ``width`` / ``height`` are integers >= 1,
    of any size (the offscreen framebuffer grows to them).
    ``reset(options={"randomize": False})`` starts from the nominal pose.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}

    def __init__(self, render_mode: str | None = None, *, width: int = 320, height: int = 240, **kwargs):
        if render_mode not in (None, "rgb_array"):
            raise ConfigError(f"render_mode must be None or 'rgb_array', got {render_mode!r}", key="render_mode")
        self._size = checks.image_size(width, height)
        self.task = _make_task(1, dict(kwargs))
        self.observation_space = self.task.observation_space
        self.action_space = self.task.action_space
        self.render_mode = render_mode
        self.metadata = {**self.metadata, "render_fps": int(round(1.0 / self.task.control_dt))}
        self._renderer = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        randomize = _randomize_option(options, "GraspEnv.reset")
        super().reset(seed=None if seed is None else _seed_int(seed, "GraspEnv.reset"))
        t = self.task
        _reset(t, [0], [self.np_random], randomize)
        A = t.arrays()
        _, _, info = t.evaluate(arrays=A)
        return t.observe(arrays=A)[0], _env_info(t, info, 0, 0, stepped=False)

    def step(self, action):
        t = self.task
        a = _action_array(action, self.action_space.shape, "GraspEnv.step")
        t.apply_action(a[None])
        t.simulate()
        t.steps[0] += 1
        A = t.arrays()
        rew, term, info = t.evaluate(arrays=A)
        return t.observe(arrays=A)[0], float(rew[0]), bool(term[0]), False, _env_info(t, info, 0, 0, stepped=True)

    def render(self):
        if self.render_mode != "rgb_array":
            return None
        if self._renderer is None:
            self._renderer = make_renderer(self.task.model, *self._size)
        return self.task.render(self._renderer, 0)

    def close(self):
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None


class GraspVectorEnv(VectorEnv):
    """N copies of ``GraspEnv`` stepped together: ONE network call per physics step for all of them, and by default
    ONE ``mj_step1`` / ``mj_step2`` pair too (``copies=True``: the N environments are copies of the scene in one
    ``MjModel``, ``envs.physics.CopiesPhysics``; ``copies=False`` steps N ``MjData``, with the same observations,
    rewards and ``info``: ``tests/test_vector_env.py``).

    Next-step autoreset (``AutoresetMode.NEXT_STEP``, declared in ``metadata``): the step after a copy terminated or
    was truncated resets it and ignores its action. ``reset(options={"reset_mask": mask})`` resets only the copies of
    the [N] bool ``mask`` (Gymnasium 1.x's partial reset; the others keep their state, and ``info`` holds the reset
    ones'). Copy ``i`` is seeded with ``seed + i`` (or ``seed[i]`` for a list); unseeded copies draw from OS entropy,
    so two unseeded vector envs do not start alike. ``info`` holds what ``SyncVectorEnv`` over N ``GraspEnv`` would
    return: every key of the single env's info as an [N] array and a ``_key`` [N] bool mask of the copies that
    returned it (a copy reset on this step returns the reset info, without fallbacks and ood_contacts).

    Args:
      num_envs: N.  max_episode_steps: truncation (None: never).  copies: see above.  The rest as ``GraspEnv``.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 50, "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 4, *, max_episode_steps: int | None = 150, render_mode: str | None = None,
                 width: int = 320, height: int = 240, copies: bool = True, **kwargs):
        if render_mode not in (None, "rgb_array"):
            raise ConfigError(f"render_mode must be None or 'rgb_array', got {render_mode!r}", key="render_mode")
        self._size = checks.image_size(width, height)
        self.task = _make_task(num_envs, {**kwargs, "copies": copies})
        self.num_envs = self.task.num_envs
        self.single_observation_space = self.task.observation_space
        self.single_action_space = self.task.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.max_episode_steps = max_episode_steps
        self.render_mode = render_mode
        self._renderer = None
        self.metadata = {**self.metadata, "render_fps": int(round(1.0 / self.task.control_dt))}
        self._rngs = _entropy_rngs(self.num_envs)
        self._autoreset = np.zeros(self.num_envs, dtype=bool)

    def reset(self, *, seed: int | Sequence[int] | None = None, options: dict | None = None):
        randomize = _randomize_option(options, "GraspVectorEnv.reset")
        mask = _reset_mask(options, self.num_envs)
        if seed is not None:
            seeds = _seed_list(seed, self.num_envs)
            for i in np.flatnonzero(mask):
                self._rngs[i] = _entropy_rngs(1)[0] if seeds[i] is None else np.random.default_rng(seeds[i])
        t = self.task
        envs = np.flatnonzero(mask)
        _reset(t, envs, self._rngs, randomize)
        self._autoreset[envs] = False
        A = t.arrays()
        _, _, info = t.evaluate(arrays=A)
        return t.observe(arrays=A), self._batch_info(info, np.zeros(self.num_envs, dtype=bool), shown=mask)

    def step(self, actions):
        t = self.task
        actions = _action_array(actions, self.action_space.shape, "GraspVectorEnv.step")
        reset = np.flatnonzero(self._autoreset)
        live = np.flatnonzero(~self._autoreset)
        t.apply_action(actions[live], live)  # checks every live action before anything changes
        _reset(t, reset, self._rngs, None)
        t.simulate(live)  # with copies: all step, a copy just reset sits out (put back to its reset state)
        t.steps[live] += 1
        A = t.arrays()
        rew, term, info = t.evaluate(arrays=A)
        trunc = np.zeros(self.num_envs, dtype=bool)
        if self.max_episode_steps is not None:
            trunc = t.steps >= self.max_episode_steps  # as gymnasium's TimeLimit: may coincide with term
        rew[reset], term[reset], trunc[reset] = 0.0, False, False
        self._autoreset = term | trunc
        return t.observe(arrays=A), rew, term, trunc, self._batch_info(info, ~np.isin(np.arange(self.num_envs), reset))

    def _batch_info(self, info: dict, stepped: np.ndarray, shown: np.ndarray | None = None) -> dict:
        """Per-copy infos (``GraspEnv``'s) of the ``shown`` copies (all by default) batched as gymnasium's own
        ``VectorEnv._add_info`` batches them (an [N] array per key, zero where not shown, and a ``_key`` [N] mask),
        built from ``evaluate``'s arrays at once instead of N dicts."""
        n = self.num_envs
        shown = np.ones(n, dtype=bool) if shown is None else np.asarray(shown, dtype=bool)
        t, out = self.task, {}
        columns = dict(info)
        columns["fallbacks"], columns["ood_contacts"] = t.last_fallbacks, t.last_ood  # after a step only
        for k, v in columns.items():
            mask = shown & stepped if k in ("fallbacks", "ood_contacts") else shown
            if not mask.any():
                continue
            v = np.asarray(v)
            if issubclass(v.dtype.type, np.number):
                out[k] = np.zeros(n, dtype=v.dtype)
            else:  # _add_info's rule: a numpy bool is no np.number, its array holds objects (None where not shown)
                out[k] = np.full(n, None, dtype=object)
            out[k][mask] = v[mask]
            out["_" + k] = mask.copy()
        return out

    def render(self):
        """[N, H, W, 3] one image per copy (``render_mode="rgb_array"``), None otherwise."""
        if self.render_mode != "rgb_array":
            return None
        if self._renderer is None:
            self._renderer = make_renderer(self.task.model, *self._size)
        return np.stack([self.task.render(self._renderer, i) for i in range(self.num_envs)])

    def close_extras(self, **kwargs):
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None


def make_renderer(model: mujoco.MjModel, height: int, width: int) -> mujoco.Renderer:
    """A ``mujoco.Renderer`` of ``model`` for ``height`` x ``width`` images, enlarging the model's offscreen
    framebuffer (``vis.global_.offwidth`` / ``offheight``: 640 x 480 by default) when they are larger, as
    ``surrogate render`` does: MuJoCo refuses a renderer larger than it."""
    g = model.vis.global_
    g.offwidth, g.offheight = max(int(g.offwidth), int(width)), max(int(g.offheight), int(height))
    return mujoco.Renderer(model, int(height), int(width))


def _seed_int(seed, where: str) -> int:
    """An integer seed (Python or numpy integer) as ``int``; a clear error otherwise."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"{where}: seed must be an integer or None, got {type(seed).__name__} {seed!r}")
    return int(seed)


def _seed_list(seed, n: int) -> list:
    """Gymnasium's vector seeds: an integer s (Python or numpy) gives s, s + 1, ..., a sequence one per copy."""
    if isinstance(seed, numbers.Integral) and not isinstance(seed, (bool, np.bool_)):
        return [int(seed) + i for i in range(n)]
    if isinstance(seed, (str, bytes)) or not hasattr(seed, "__len__"):
        raise TypeError(f"GraspVectorEnv.reset: seed must be an integer, a list of {n} integers (or None) or None, "
                        f"got {type(seed).__name__} {seed!r}")
    seeds = [None if s is None else _seed_int(s, "GraspVectorEnv.reset") for s in seed]
    if len(seeds) != n:
        raise ValueError(f"reset got {len(seeds)} seeds for {n} environments")
    return seeds


def _reset_mask(options, n: int) -> np.ndarray:
    """[n] bool: the copies a reset resets (``options["reset_mask"]`` as in Gymnasium's ``SyncVectorEnv``; all)."""
    if options is None or "reset_mask" not in options:
        return np.ones(n, dtype=bool)
    mask = options["reset_mask"]
    if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.shape != (n,) or not mask.any():
        raise ValueError(f"GraspVectorEnv.reset: options['reset_mask'] must be a numpy bool array of shape ({n},) with "
                         f"at least one True, got {mask!r}")
    return mask


def _action_array(action, shape: tuple, where: str) -> np.ndarray:
    """``action`` as a float array of exactly ``shape`` (the action space's); a clear error otherwise (a (6, 1)
    action is not a (6,) one: reshaping it would hide a caller's bug)."""
    try:
        a = np.asarray(action, dtype=float)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: action must be numbers, got {type(action).__name__} ({e})") from None
    if a.shape != tuple(shape):
        raise ValueError(f"{where}: action has shape {tuple(a.shape)}; expected {tuple(shape)} (the action space's)")
    return a
