"""The capture rig as a closed-loop environment: a policy "deployed" on the stand-in for hardware.

``RigGraspVectorEnv`` is the Gymnasium grasp vector environment (``envs.GraspVectorEnv``: the same action
and observation spaces, rate limit, reward, termination and ``info``) whose physics is the capture rig's
(``RigPhysics``: its own contact laws, actuator delay and backlash, mass mismatch, fingertip effects),
stepped command by command from the policy's actions instead of from a script. So one policy
(``policies.ScriptedGraspPolicy``, ``policies.rollout``) runs unchanged on the simulators and on the rig.

    venv = RigGraspVectorEnv(2, object=make_object("box", 3), hand="parallel_jaw")
    res = rollout(venv, ScriptedGraspPolicy(venv.task), seed=0, duration=2.5)
    episodes = venv.captures(hold_start=policy.hold_start)    # capture Episodes, provenance.real = False

How it plugs in: ``RigLoop`` implements the physics interface of ``envs.physics.DataPhysics`` (reset_data,
loaded, ctrl, set_ctrl, simulate, arrays, render_data, datas) and replaces the task's. A reset builds the
state exactly as the simulated environment does (the task's own ``reset_one``: same object yaw and xy draws
for a seed), then starts a fresh ``RigPhysics`` of episode seed ``s`` (the per-purpose generators of
``rig.simulate.episode_rng``) from that state: ``seed + i`` for copy i after ``reset(seed=seed)``, a new seed drawn
from the copy's generator (seeded by that seed, or from OS entropy) for every reset that gets none. The actuator
targets the policy sets are the rig's *commands*: they pass the rig's actuator channel (delay, backlash) before
reaching MuJoCo's ``ctrl``.

Steps: the rig's physics step divides both the recorder's frame period and the control period
(``rig_timestep``: 1/1200 s for 120 Hz frames and 20 ms control at ``physics.max_timestep`` 1 ms), so frames
and actions fall on physics steps. Every frame is sampled as the scripted rig samples it (``simulate._Samples``)
and ``captures`` turns the trace into a capture ``Episode`` through the rig's recorder (sensor noise, dropouts,
``truth``), labelled by the one outcome definition (``scripts.episode_labels``) with the policy's hold start,
``provenance.real = False`` and ``provenance.generator.closed_loop`` saying it is a stand-in for hardware.
"""

from __future__ import annotations

import copy
import math

import mujoco
import numpy as np

from ..capture import DatasetMeta, Episode
from ..envs.grasp import GraspVectorEnv, _entropy_rngs, _randomize_option, _reset_mask, _seed_list
from ..envs.physics import arrays_of_datas
from ..errors import ConfigError
from ..rig.config import load_rig_config, recorder_rate_hz, validate_rig_config
from ..rig.generate import hand_entry
from ..rig.physics import RigPhysics
from ..rig.recorder import record, recorder_rng
from ..rig.recorder_config import validate_recorder_config
from ..rig.regions import contact_region_seeds
from ..rig.simulate import _Samples, _trace, episode_rng

_DRAW_STREAM = 0x5EED  # the spawn key of the episode-seed generators (apart from the reset's own object draws)
STAND_IN = ("closed-loop rollout of a policy on the capture rig's reference physics: a simulated stand-in "
            "for hardware, not a real robot")


def rig_timestep(frame_rate_hz: float, control_dt: float, max_timestep: float) -> tuple[float, int, int]:
    """(dt s, physics steps per frame, physics steps per control step): the largest dt <= ``max_timestep`` that
    divides both the frame period and ``control_dt``. Raises ConfigError when none does (within 1000 steps)."""
    period = 1.0 / float(frame_rate_hz)
    for m in range(1, 1001):
        dt = period / m
        per_ctrl = control_dt / dt
        if dt <= max_timestep + 1e-12 and abs(per_ctrl - round(per_ctrl)) < 1e-6:
            return dt, m, round(per_ctrl)
    raise ConfigError(f"no physics step divides both the frame period {period:g} s and control_dt {control_dt:g} s",
                      key="control_dt")


class _Commands:
    """What ``_Samples`` reads as the script: the command in force (hand actuator order) and the phases."""

    def __init__(self, nu: int):
        self.current = np.zeros(nu)
        self.phases = {"hold": (0.0, math.inf)}

    def command(self, t: float) -> np.ndarray:
        return self.current.copy()


class RigLoop:
    """The physics of N closed-loop rig environments (the ``DataPhysics`` interface).

    Args:
      task: the ``GraspTask`` whose physics this replaces (its scene builds the reset state).
      cfg: validated rig config.  duration: s, the longest episode recorded.  grip_force: N (None: hand default).
    """

    copies = False

    def __init__(self, task, cfg: dict, *, duration: float, grip_force: float | None):
        self.task, self.cfg, self.grip_force = task, cfg, grip_force
        self.rate = recorder_rate_hz(cfg)
        self.dt, self.per_frame, self.per_ctrl = rig_timestep(self.rate, task.control_dt,
                                                              cfg["physics"]["max_timestep"])
        self.n_frames = math.floor(duration * self.rate + 1e-9) + 1
        n = task.num_envs
        self.seeds: list[int | None] = [None] * n  # the episode seed of each copy's current episode
        self._next: list[int | None] = [None] * n  # the seed a ``reset(seed=...)`` gives the next episode
        self._draws = _entropy_rngs(n)  # each copy's episode seeds when its reset gets none
        self._scratch = [task.scene.make_data() for _ in range(n)]
        self.rigs: list[RigPhysics | None] = [None] * n
        self.cmd = [_Commands(len(task.act_ids)) for _ in range(n)]
        self.samples: list[_Samples | None] = [None] * n
        self.steps = np.zeros(n, dtype=np.int64)

    @property
    def datas(self) -> list:
        return [r.data for r in self.rigs]

    def reset_data(self, i: int) -> mujoco.MjData:
        return self._scratch[i]

    def seed(self, envs, seeds: list) -> None:
        """The next episode of copy ``envs[k]`` has episode seed ``seeds[k]`` and the later ones draw theirs from a
        generator of it (None: from OS entropy), as Gymnasium's ``np_random``."""
        draws = [_entropy_rngs(1)[0] if s is None else
                 np.random.default_rng(np.random.SeedSequence(int(s), spawn_key=(_DRAW_STREAM,))) for s in seeds]
        for i, s, g in zip(envs, seeds, draws):  # all made (a bad seed refused) before any copy changes
            self._next[i], self._draws[i] = s, g

    def loaded(self, i: int) -> None:
        """Start a new episode of copy ``i`` on a fresh rig from the state the task's reset wrote: episode seed the
        one ``seed`` gave, else a new one drawn from the copy's generator (in [2^32, 2^63), apart from the seeds
        below 2^32 that ``reset(seed=s)`` gives), so every episode has its own hidden draws, recorder noise and id."""
        s = self._next[i] if self._next[i] is not None else int(self._draws[i].integers(2**32, 2**63))
        self._next[i], self.seeds[i], src = None, int(s), self._scratch[i]
        rig = RigPhysics(self.cfg, self.task.obj, hand=self.task.hand.name, timestep=self.dt, object_quat="stable",
                         grip_force=self.grip_force,
                         rngs={k: episode_rng(s, k) for k in ("mass_mismatch", "actuator", "fingertips")})
        d = rig.data
        d.qpos[:], d.qvel[:], d.ctrl[:] = src.qpos, src.qvel, src.ctrl
        d.act[:] = src.act
        mujoco.mj_forward(rig.model, d)
        self.rigs[i] = rig
        self.cmd[i].current = d.ctrl[rig.act_ids].copy()
        self.samples[i] = _Samples(rig, self.cmd[i], np.arange(self.n_frames) / self.rate)
        self.samples[i].record(0, rig.evaluate())
        self.steps[i] = 0

    def ctrl(self, envs) -> np.ndarray:
        """[n, nu] the commanded targets (before the actuator channel), as the task's rate limit reads them."""
        out = np.stack([self.rigs[i].data.ctrl.copy() for i in envs])
        for k, i in enumerate(envs):
            out[k, self.rigs[i].act_ids] = self.cmd[i].current
        return out

    def set_ctrl(self, envs, ids: np.ndarray, values: np.ndarray) -> None:
        for i, v in zip(envs, values):
            act = list(self.rigs[i].act_ids)
            self.cmd[i].current = np.asarray(v, float)[[list(ids).index(a) for a in act]]

    def simulate(self, envs: np.ndarray, stepper, nstep: int) -> np.ndarray:
        """One control period of rig physics for ``envs`` (``stepper`` / ``nstep``: the simulator's, unused)."""
        for i in envs:
            rig, rec = self.rigs[i], self.samples[i]
            for _ in range(self.per_ctrl):
                rig.step(self.cmd[i].current)
                self.steps[i] += 1
                k = self.steps[i] // self.per_frame
                if self.steps[i] % self.per_frame == 0 and k < self.n_frames:
                    rec.record(int(k), rig.patches)
            if not np.isfinite(rig.data.qpos).all():  # pragma: no cover - a diverged rig is a bug, say so
                raise FloatingPointError(f"rig physics diverged (episode seed {self.seeds[i]}, {self.task.obj.name})")
        return np.asarray(envs)

    def arrays(self, envs, ids):
        return arrays_of_datas([self.rigs[i].data for i in envs], ids)

    def render_data(self, i: int):
        return self.rigs[i].model, self.rigs[i].data


class RigGraspVectorEnv(GraspVectorEnv):
    """``GraspVectorEnv`` on the capture rig (module docstring); ``reset(seed=s)`` also fixes the rig's hidden
    draws of each copy (episode seed ``s + i``, as the copy's reset generator), and every later reset without a
    seed (autoresets too) draws new ones from a generator seeded by it: each episode its own hidden physics,
    recorder noise and ``episode_id``, reproducible from ``s``. Unseeded from the start, they draw from OS entropy.

    Args: those of ``GraspVectorEnv`` (``contact`` is the rig's: not accepted), and ``rig_config`` (a loaded rig
    config or a path; default ``configs/rig/default.yaml``), ``duration`` (s recorded at most).
    """

    def __init__(self, num_envs: int = 1, *, rig_config=None, duration: float = 3.0, grip_force: float | None = None,
                 **kwargs):
        if "contact" in kwargs or "contact_model" in kwargs or "checkpoint" in kwargs:
            raise ConfigError("the rig has its own contact laws: give no contact, contact_model or checkpoint",
                              key="contact")
        cfg = validate_rig_config(rig_config) if isinstance(rig_config, dict) else load_rig_config(rig_config)
        super().__init__(num_envs, copies=False, contact="analytic", grip_force=grip_force,
                         **{"max_episode_steps": None, **kwargs})
        self.rig_cfg = cfg
        self.task.physics = RigLoop(self.task, cfg, duration=duration, grip_force=grip_force)

    def reset(self, *, seed=None, options=None):
        """As ``GraspVectorEnv.reset``; a reset copy starts a new rig episode: of episode seed ``seed + i`` (or
        ``seed[i]``), and without a seed of the next seed its generator draws (``RigLoop.seed``)."""
        _randomize_option(options, "RigGraspVectorEnv.reset")  # refused before anything changes
        mask = _reset_mask(options, self.num_envs)
        if seed is not None:
            envs, seeds = np.flatnonzero(mask), _seed_list(seed, self.num_envs)
            self.task.physics.seed(envs, [seeds[i] for i in envs])
        return super().reset(seed=seed, options=options)

    def captures(self, hold_start=None, *, policy: str = "policy") -> list[Episode]:
        """The copies' episodes so far as capture ``Episode`` (the rig's recorder), labelled with the hold window
        from ``hold_start`` ([N] s; None: the whole episode)."""
        loop, out = self.task.physics, []
        for i, rig in enumerate(loop.rigs):
            if rig is None:
                raise ConfigError("captures() before reset(): nothing was recorded", key="captures")
            n = int(min(loop.steps[i] // loop.per_frame + 1, loop.n_frames))
            if n < 2:  # an episode is frames over time: the recorder's rates and labels need two
                raise ConfigError(f"copy {i} has recorded one frame since its reset: step it before captures()",
                                  key="captures")
            rec = _trimmed(loop.samples[i], n)
            hs = 0.0 if hold_start is None else float(np.broadcast_to(hold_start, (loop.task.num_envs,))[i])
            loop.cmd[i].phases = {"hold": (hs, math.inf)}
            script = {"closed_loop": True, "policy": policy, "phases": {"hold": [hs, float(rec.times[-1])]},
                      "physics": {"timestep_s": loop.dt, "substeps": loop.per_frame, "rate_hz": loop.rate,
                                  "duration_s": float(rec.times[-1]), "control_dt_s": loop.task.control_dt},
                      "hand_base_pos": [float(v) for v in rig.scene.meta["hand_base_pos"]]}
            tr = _trace(loop.cfg, loop.task.obj, rig, loop.cmd[i], rec, script, hand=loop.task.hand.name,
                        seed=loop.seeds[i])
            ep = record(tr, loop.cfg, rng=recorder_rng(loop.seeds[i]), obj=loop.task.obj,
                        episode_id=f"rig-loop-{loop.task.hand.name}-{loop.task.obj.name}-{loop.seeds[i]}")
            ep.provenance.generator["closed_loop"] = {"stand_in_for_hardware": True, "note": STAND_IN, "policy": policy}
            ep.task = f"{ep.task}, closed loop ({policy}) on the rig: stand-in for hardware"
            out.append(ep)
        return out

    def capture_meta(self, name: str = "rig-closed-loop", regions: int = 16) -> DatasetMeta:
        """The ``DatasetMeta`` to write ``captures()`` with (``capture.write_dataset``)."""
        t, rc = self.task, validate_recorder_config(self.rig_cfg.get("recorder"))
        sensors = [n[: -len("_force")] for n in t.hand.sensor_names[::2]]
        hand, robot_files = hand_entry(t.hand.name, self.rig_cfg)  # as the rig's generator writes it
        return DatasetMeta(name=name, robot_type=t.hand.name, hand=hand, robot_files=robot_files,
                           joint_names=list(t.hand.joint_names),
                           wrench_sensors=sensors if rc["wrench"]["enabled"] else None,
                           tactile_unit="N" if rc["tactile"]["enabled"] else None,
                           contact_region_seeds={t.obj.name: contact_region_seeds(t.obj, regions)})


def _trimmed(rec: _Samples, n: int) -> _Samples:
    """A copy of ``rec`` cut to its first ``n`` frames (an episode that ended early); the live trace is untouched, so
    stepping may go on after a capture is taken."""
    rec = copy.copy(rec)
    for key in ("times", "pose", "twist", "jpos", "jvel", "jcmd", "wrench", "hod", "rel_pos", "rel_quat", "rel_pad"):
        setattr(rec, key, getattr(rec, key)[:n])
    rec.points = rec.points[:n]
    return rec
