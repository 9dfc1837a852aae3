"""The hybrid stepper: a contact model inside MuJoCo, for one ``MjData`` or a batch.

    stepper = Stepper(scene, load_checkpoint("checkpoints/cube_tosses")[0], contact="surrogate")
    step(scene.model, datas, stepper, nstep=10)     # datas: one MjData or a list
    stepper.stats()                                  # fallbacks, out-of-range inputs, timings

One physics step with ``contact="surrogate"``, for all B ``MjData`` of a batch:

1. the owned pairs (of ``roles``) are put in ``external`` mode (MuJoCo detects, applies no
   force; ``surrogate.scenes.builder`` explains the switch) and ``mj_step1`` runs on each;
2. one batched contact graph of all owned contacts of all B environments (``GraphBuilder``);
3. ONE call of the contact model: [E, 3] forces on the object in world axes (N);
4. guards: a non-finite force, or one larger than ``max_force`` x the object's weight, is
   an error naming env, step and body (``on_bad_force="raise"``) or makes that environment
   take this step with MuJoCo's analytic contact (``"fallback"``); inputs outside the
   model's training range are counted; both are reported by ``stats()`` and warned about once;
5. the forces go into ``qfrc_applied`` (zeroed before step 1): a law model's generalized forces
   ``J^T F`` (``law_solve``) in one write per environment; for a raw-force model each body's wrench
   (the object gets F at the contact, the other body -F: equal and opposite) with ``mj_applyFT``
   at its COM. A constant law (no network) is stepped from the contact arrays without building
   the torch graph; the per-body wrenches (``last_wrench``, ``pad_wrenches``) are computed when read;
6. ``mj_step2``.

After every physics step (either mode) MuJoCo's bad-state warning counters (``mjWARN_BADQPOS``,
``BADQVEL``, ``BADQACC``: MuJoCo resets an ``MjData`` itself on a NaN, Inf or huge value) are read,
a few bytes per environment; each reset is counted in ``stats()["mujoco_resets"]`` and per environment
in ``stats()["mujoco_reset_envs"]``, and warned about once naming the environment.

``contact="analytic"`` on the same model switches the owned pairs to analytic mode, zeroes
``qfrc_applied`` and calls ``mj_step``: no network. Everything is deterministic for the same
inputs (CPU torch, fixed thread count).

Why ``qfrc_applied``: it leaves ``xfrc_applied`` to the user (the viewer's perturbations write
there). MuJoCo's force/torque sensors do not see ``qfrc_applied`` (``cfrc_ext`` holds only
``xfrc_applied`` and solver contacts), so ``pad_wrenches`` gives the contact model's wrench on
chosen bodies for sensor-like readings (the Gymnasium envs add it to the pad F/T sensors).
"""

from __future__ import annotations

import math
import time
import warnings
from pathlib import Path
from typing import Sequence

import mujoco
import numpy as np
import torch

from ..errors import ConfigError, SurrogateError
from ..scenes import ROLES, set_contact_mode
from .batch import GraphBuilder
from .contact import InputRange
from ..model.law import cross
from .law_solve import law_forces

CONTACT_MODES = ("analytic", "surrogate")
BAD_FORCE_POLICIES = ("raise", "fallback")
PHASES = ("step1", "graph", "network", "checks", "apply", "step2", "fallback", "analytic")
# The warnings MuJoCo raises when it resets an MjData itself (NaN, Inf or huge qpos / qvel / qacc).
BAD_STATE_WARNINGS = {int(mujoco.mjtWarning.mjWARN_BADQPOS): "qpos", int(mujoco.mjtWarning.mjWARN_BADQVEL): "qvel",
                      int(mujoco.mjtWarning.mjWARN_BADQACC): "qacc"}
_BAD_STATE_IDS = np.array(sorted(BAD_STATE_WARNINGS))
_BAD_STATE_SLICE = (slice(int(_BAD_STATE_IDS[0]), int(_BAD_STATE_IDS[-1]) + 1)
                    if _BAD_STATE_IDS[-1] - _BAD_STATE_IDS[0] == len(_BAD_STATE_IDS) - 1 else None)
_NO_BAD_STATE = np.zeros(len(_BAD_STATE_IDS), dtype=np.int32).tobytes()


class SurrogateStepError(SurrogateError, FloatingPointError):
    """The contact model returned a non-finite or exploding force.

    Attributes: env (index in the batch), step (the stepper's physics step count), body (name
    of the other body of the contact), force (N, the offending contact force norm or nan).
    """

    def __init__(self, message: str, *, env: int, step: int, body: str, force: float):
        super().__init__(message)
        self.env, self.step, self.body, self.force = env, step, body, force


class SurrogateWarning(UserWarning):
    """Something the stepper did that the user should know about (fallbacks, out-of-range inputs)."""


def _check_choice(name, value, allowed):
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {allowed}, got {value!r}", key=name)


def _as_datas(data) -> list[mujoco.MjData]:
    if isinstance(data, mujoco.MjData):
        return [data]
    datas = list(data)
    if not all(isinstance(d, mujoco.MjData) for d in datas):
        raise TypeError("data must be an MjData or a sequence of MjData")
    return datas


def _check_model(m: mujoco.MjModel, datas, builder: GraphBuilder) -> None:
    if m.nbody != builder.nbody or m.ngeom != builder.ngeom:
        raise ConfigError(f"model has {m.nbody} bodies / {m.ngeom} geoms; the stepper's scene has "
                          f"{builder.nbody} / {builder.ngeom}: step a model of the stepper's scene", key="model")
    for i, d in enumerate(datas):
        if d.qpos.shape[0] != m.nq or d.qvel.shape[0] != m.nv or d.ctrl.shape[0] != m.nu:
            raise ConfigError(f"data[{i}] does not belong to this model (nq/nv/nu differ)", key="data")


class Stepper:
    """Configuration and running state of the hybrid stepper for one scene (all its ``MjModel`` copies).

    Args:
      scene: the ``Scene`` (its owned pairs and object).
      contact_model: a ``ContactModel`` (a ``ContactGNN`` is one), or a checkpoint folder; needed
        for ``contact="surrogate"``.
      contact: ``surrogate`` or ``analytic``.
      roles: owned-pair roles the contact model takes over (default all: pads, table, ground);
        the other owned pairs stay analytic.
      on_bad_force: ``raise`` or ``fallback`` (that env takes that step with analytic contact).
      max_force: largest allowed contact force, in units of the object's weight (m |g|).
      ood_std: inputs farther than this many training standard deviations are out of range.
      check_inputs: compare inputs with the training range (models with normalizers only). Default
        (None): on for models with a network, off for a constant contact law (``ContactLawGNN`` with
        ``corrections=False``), whose forces do not depend on learned features: the law extrapolates
        by construction, and computing the 41 features of every contact would cost half its step.
      num_threads: ``torch.set_num_threads`` for the network (a process-wide torch setting). Default 1:
        the graphs are small, and on a shared 2-core machine two OpenMP threads made one call
        ~80x slower (437 ms vs 5.6 ms for 4 envs) by contending with MuJoCo and other processes.
        None leaves torch's setting alone.
    """

    def __init__(self, scene, contact_model=None, *, contact: str = "surrogate", roles: Sequence[str] | None = None,
                 on_bad_force: str = "raise", max_force: float = 1000.0, ood_std: float = 6.0,
                 check_inputs: bool | None = None, num_threads: int | None = 1):
        _check_choice("contact", contact, CONTACT_MODES)
        _check_choice("on_bad_force", on_bad_force, BAD_FORCE_POLICIES)
        roles = tuple(ROLES if roles is None else roles)
        for r in roles:
            _check_choice("roles", r, ROLES)
        if not max_force > 0:
            raise ConfigError(f"max_force must be positive (object weights), got {max_force!r}", key="max_force")
        if isinstance(contact_model, (str, Path)):
            from ..model.checkpoint import load_checkpoint

            contact_model = load_checkpoint(contact_model)[0]
        if contact == "surrogate" and contact_model is None:
            raise ConfigError("contact='surrogate' needs a contact_model (a ContactGNN, a ContactModel or a checkpoint)",
                              key="contact_model")
        if contact_model is not None and not callable(contact_model):
            raise ConfigError("contact_model must be callable: graph -> [E, 3] forces", key="contact_model")
        if num_threads is not None:
            torch.set_num_threads(int(num_threads))
        self.scene = scene
        self.contact = contact
        self.contact_model = contact_model
        self.roles = roles
        self.on_bad_force = on_bad_force
        self.max_force = float(max_force)
        if check_inputs is None:
            check_inputs = getattr(contact_model, "corrections", True)
        self.check_inputs = bool(check_inputs)
        ids = [pid for name, pid in zip(scene.owned_pairs, scene.owned_pair_ids) if scene.pair_roles[name] in roles]
        self.pair_ids = np.asarray(ids, dtype=int)
        self.builder = GraphBuilder(scene.model, object_body=scene.object_body_id, length=scene.obj.size,
                                    owned_pair_ids=self.pair_ids)
        self.input_range = InputRange.from_model(contact_model, k=ood_std) if contact_model is not None else None
        # Stepped from the batch's numpy arrays (no torch) when the model is a constant law (no network).
        # Law models solve their forces semi-implicitly in float64 (``ContactLawGNN.graph_dtype``).
        self.graph_dtype = getattr(contact_model, "graph_dtype", torch.float32)
        self.law_model = hasattr(contact_model, "law_terms")
        self._body_names = [scene.model.body(int(b)).name for b in self.builder.node_body]
        self._last = None  # (ContactBatch, forces [E, 3]) of the last surrogate step; its wrenches on demand
        self._wrench: np.ndarray | None = None
        self._warned: set[str] = set()
        self.reset_stats()

    @property
    def last_wrench(self) -> np.ndarray | None:
        """[B, K, 6] the contact model's wrench on every node body in the last surrogate step (``body_wrenches``;
        None before one or after an analytic step); computed when first read, most steps nobody does."""
        if self._wrench is None and self._last is not None:
            self._wrench = body_wrenches(*self._last)
        return self._wrench

    def _set_last(self, cb, forces) -> None:
        self._last, self._wrench = ((cb, forces) if cb is not None else None), None

    def close(self) -> None:
        """Let go of the contact model (the stepper holds no hooks on it: the network's inputs come from its
        ``features``); afterwards the stepper steps analytic contact only."""
        self.contact_model, self.input_range, self.law_model, self.contact = None, None, False, "analytic"

    # -- statistics -------------------------------------------------------------------------
    def reset_stats(self) -> None:
        self._stats = {"physics_steps": 0, "env_steps": 0, "network_calls": 0, "contacts": 0, "fallbacks": 0,
                       "bad_force_events": 0, "ood_edges": 0, "ood_nodes": 0, "ood_env_steps": 0, "mujoco_resets": 0}
        self._fallback_envs: dict[int, int] = {}
        self._reset_envs: dict[int, int] = {}
        self._ood_edge_features = np.zeros(41, dtype=np.int64)
        self._ood_node_features = np.zeros(9, dtype=np.int64)
        self._time = dict.fromkeys(PHASES, 0.0)

    def stats(self) -> dict:
        """Counts since construction (or ``reset_stats``) and per-phase wall time (s).

        Keys: physics_steps (calls of one physics step for the whole batch), env_steps (summed over
        environments), network_calls, contacts (owned contacts seen), fallbacks (env-steps run with
        analytic contact after a bad force), fallback_envs {env: count}, bad_force_events,
        ood_edges / ood_nodes (inputs outside the training range), ood_env_steps, ood_features
        {feature name: count}, mujoco_resets (env-steps in which MuJoCo reset the MjData itself on a
        NaN, Inf or huge qpos, qvel or qacc: its ``mjWARN_BADQPOS/BADQVEL/BADQACC`` warnings),
        mujoco_reset_envs {env: count}, time_s {phase: s}.
        """
        from ..model.graph import EDGE_FEATURES, NODE_FEATURES

        s = dict(self._stats)
        s["fallback_envs"] = dict(self._fallback_envs)
        s["mujoco_reset_envs"] = dict(self._reset_envs)
        feats = {f"edge:{n}": int(c) for n, c in zip(EDGE_FEATURES, self._ood_edge_features) if c}
        feats.update({f"node:{n}": int(c) for n, c in zip(NODE_FEATURES, self._ood_node_features) if c})
        s["ood_features"] = feats
        s["time_s"] = dict(self._time)
        return s

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, SurrogateWarning, stacklevel=4)

    # -- modes ------------------------------------------------------------------------------
    def set_mode(self, m: mujoco.MjModel, contact: str | None = None) -> None:
        """Put ``m``'s owned pairs in the mode ``contact`` needs (default: the stepper's)."""
        contact = self.contact if contact is None else contact
        _check_choice("contact", contact, CONTACT_MODES)
        scene = self.scene
        set_contact_mode(m, scene, "analytic")
        if contact == "surrogate":
            set_contact_mode(m, scene, "external", roles=self.roles)

    def pad_wrenches(self, body_ids: Sequence[int]) -> np.ndarray:
        """[B, len(body_ids), 6] the last surrogate step's wrench on these bodies (force N, torque about
        the body COM N m; world axes); zeros for bodies the contact model does not touch."""
        if self.last_wrench is None:
            return np.zeros((0, len(body_ids), 6))
        out = np.zeros((self.last_wrench.shape[0], len(body_ids), 6))
        for j, b in enumerate(body_ids):
            k = np.flatnonzero(self.builder.node_body == b)
            if k.size:
                out[:, j] = self.last_wrench[:, k[0]]
        return out


def _bad_state_reader(datas):
    """A function returning each MjData's bad qpos / qvel / qacc warning counters, as bytes (cheap to
    read and compare: views into the MjData, read once per physics step)."""
    if _BAD_STATE_SLICE is not None:
        views = [d.warning.number[_BAD_STATE_SLICE] for d in datas]
        return lambda: [v.tobytes() for v in views]
    return lambda: [d.warning.number[_BAD_STATE_IDS].tobytes() for d in datas]


def _count_resets(datas, stepper: Stepper, before: list, after: list, times, step_no: int) -> None:
    """Count the environments MuJoCo reset in this physics step.

    The counters change only when MuJoCo warns about a bad state, and it then resets the MjData
    (``mj_resetData`` zeroes every counter before counting the one that caused it). So a changed
    counter is a reset, and so is a positive counter on a clock that did not advance (a second
    reset of the same kind leaves its counter at 1).
    """
    reset = [i for i, (b, a) in enumerate(zip(before, after))
             if a != b or (times is not None and a != _NO_BAD_STATE and datas[i].time <= times[i])]
    if not reset:
        return
    stepper._stats["mujoco_resets"] += len(reset)
    for i in reset:
        stepper._reset_envs[i] = stepper._reset_envs.get(i, 0) + 1
    i = reset[0]
    counts = np.frombuffer(after[i], dtype=np.int32)
    kinds = [BAD_STATE_WARNINGS[int(w)] for w, n in zip(_BAD_STATE_IDS, counts) if n] or ["state"]
    stepper._warn_once("mujoco_reset", f"MuJoCo reset env {i} at step {step_no} (NaN, Inf or huge {'/'.join(kinds)}): "
                                       f"its state went back to the model's initial one; counted in "
                                       f"stats()['mujoco_resets'] and stats()['mujoco_reset_envs']")


def _physics_step_analytic(m, datas, stepper: Stepper) -> None:
    t0 = time.perf_counter()
    for d in datas:
        d.qfrc_applied[:] = 0.0
        mujoco.mj_step(m, d)
    stepper._time["analytic"] += time.perf_counter() - t0
    stepper._set_last(None, None)


def _contact_forces(m, datas, stepper: Stepper, cb):
    """(forces [E, 3] float64 on the object, generalized forces [B, nv] of a law model or None, the network's
    input features if the inputs are checked, else None): one call of the contact model for the batch."""
    model = stepper.contact_model
    prepare = getattr(model, "prepare", None)
    if prepare is not None:
        prepare(m, datas)
    feats = None
    if stepper.input_range is not None and stepper.check_inputs and hasattr(model, "features"):
        with torch.inference_mode():  # computed once: the network's input and the range check's
            feats = model.features(cb.graph)
    qfrc = None
    if stepper.law_model:  # the law solved with every body's mobility (sim/law_solve.py)
        f, qfrc = law_forces(m, datas, cb, model, stepper.builder, features=feats)
    else:
        with torch.inference_mode():
            f = model(cb.graph) if feats is None else model(cb.graph, features=feats)
    forces = f.detach().double().numpy() if isinstance(f, torch.Tensor) else np.asarray(f, dtype=np.float64)
    if forces.shape != (cb.num_contacts, 3):
        raise ConfigError(f"contact model returned shape {forces.shape}, expected ({cb.num_contacts}, 3)", key="contact_model")
    stepper._stats["network_calls"] += 1
    return forces, qfrc, feats


def _bad_force_envs(m, stepper: Stepper, cb, forces: np.ndarray) -> np.ndarray:
    """[B] bool: environments with a non-finite force or one above ``max_force`` object weights (raises with
    ``on_bad_force="raise"``; counted and warned about once otherwise)."""
    bad_env = np.zeros(cb.num_envs, dtype=bool)
    if not len(forces):
        return bad_env
    g = m.opt.gravity
    limit = stepper.max_force * max(float(m.body_mass[stepper.builder.object_body]) * math.sqrt(float(g @ g)), 1e-12)
    norm = np.sqrt(np.einsum("ej,ej->e", forces, forces))
    bad_edge = ~(norm <= limit)  # NaN compares False: caught too
    if not bad_edge.any():
        return bad_env
    st, step_no = stepper._stats, stepper._stats["physics_steps"]
    e = int(np.flatnonzero(bad_edge)[0])
    env = int(cb.env[e])
    body = stepper._body_names[int(cb.node[e]) % cb.K]
    st["bad_force_events"] += int(bad_edge.sum())
    msg = (f"contact model force {norm[e]:.4g} N on the object from body '{body}' (env {env}, step {step_no}) is "
           f"{'not finite' if not np.isfinite(norm[e]) else f'above the limit {limit:.4g} N ({stepper.max_force:g} x the object weight)'}")
    if stepper.on_bad_force == "raise":
        raise SurrogateStepError(msg + "; pass on_bad_force='fallback' to continue with analytic contact there",
                                 env=env, step=step_no, body=body, force=float(norm[e]))
    bad_env[cb.env[bad_edge]] = True
    stepper._warn_once("fallback", msg + "; falling back to analytic contact for that env and step "
                                         "(counted in stats()['fallbacks'])")
    return bad_env


def _check_inputs(stepper: Stepper, cb, feats) -> None:
    """Count (and warn once about) inputs outside the model's training range."""
    st, g = stepper._stats, cb.graph
    r = stepper.input_range.check(g, *(feats or (None, None)))
    ne, nn = int(r["edge"].sum()), int(r["node"].sum())
    if not (ne or nn):
        return
    st["ood_edges"] += ne
    st["ood_nodes"] += nn
    envs = np.zeros(cb.num_envs, dtype=bool)
    envs[cb.env[r["edge"]]] = True
    envs[g.batch.numpy()[r["node"]]] = True
    st["ood_env_steps"] += int(envs.sum())
    stepper._ood_edge_features += r["edge_features"]
    stepper._ood_node_features += r["node_features"]
    stepper._warn_once("ood", f"contact model inputs outside its training range (> {stepper.input_range.k:g} std) "
                              f"at step {st['physics_steps']}: {ne} contacts, {nn} bodies; counted in stats()['ood_*']")


def body_wrenches(cb, forces: np.ndarray) -> np.ndarray:
    """[B, K, 6] per node body the contact wrench (force N, torque about the body's COM N m; world axes): F at
    each contact on the object, -F on the other body (equal and opposite)."""
    W = np.zeros((cb.num_envs * cb.K, 6))
    if len(forces):
        np.add.at(W, cb.env * cb.K, np.concatenate([forces, cross(cb.r_obj, forces)], axis=1))
        np.add.at(W, cb.node, -np.concatenate([forces, cross(cb.r_oth, forces)], axis=1))
    return W.reshape(cb.num_envs, cb.K, 6)


def _apply(m, datas, stepper: Stepper, cb, forces, qfrc, bad_env) -> None:
    """Add the forces of the environments without a bad force to their ``qfrc_applied``."""
    if qfrc is not None:  # a law model's J^T F: one write per environment
        for i in np.flatnonzero(~bad_env):
            datas[i].qfrc_applied += qfrc[i]
        return
    W, K = stepper.last_wrench, cb.K
    nb = stepper.builder.node_body
    active = np.zeros((cb.num_envs, K), dtype=bool)
    active[cb.env, 0] = True
    active[cb.env, cb.node % K] = True
    active[:, np.setdiff1d(np.arange(K), stepper.builder.dynamic_nodes)] = False
    active &= ~bad_env[:, None]
    for i, k in zip(*np.nonzero(active)):
        d = datas[i]
        w = W[i, k]
        mujoco.mj_applyFT(m, d, w[:3], w[3:], d.xipos[nb[k]], int(nb[k]), d.qfrc_applied)


def _fallback(m, datas, stepper: Stepper, bad_env) -> None:
    """The environments with a bad force take this step with analytic contact."""
    # mj_step1 changed no state (qpos, qvel, act, time), so the analytic step can start over.
    ids = stepper.scene.owned_pair_ids
    saved = m.pair_margin[ids].copy(), m.pair_gap[ids].copy()
    try:
        stepper.set_mode(m, "analytic")
        for i in np.flatnonzero(bad_env):
            mujoco.mj_step(m, datas[i])
            stepper._fallback_envs[int(i)] = stepper._fallback_envs.get(int(i), 0) + 1
    finally:
        m.pair_margin[ids], m.pair_gap[ids] = saved
    stepper._stats["fallbacks"] += int(bad_env.sum())


def _physics_step_surrogate(m, datas, stepper: Stepper) -> None:
    """One physics step of the batch with the contact model owning its pairs (module docstring, steps 1-6)."""
    T = stepper._time
    t0 = time.perf_counter()
    for d in datas:
        # Zeroed before the contact model runs: a model that reads the MjData (MuJoCoContact)
        # must not see last step's surrogate forces as external forces.
        d.qfrc_applied[:] = 0.0
        mujoco.mj_step1(m, d)
    t1 = time.perf_counter()
    cb = stepper.builder.build(m, datas, dtype=stepper.graph_dtype, dynamics=stepper.law_model)
    E = cb.num_contacts
    t2 = time.perf_counter()
    forces, qfrc, feats = _contact_forces(m, datas, stepper, cb) if E else (np.zeros((0, 3)), None, None)
    t3 = time.perf_counter()
    bad_env = _bad_force_envs(m, stepper, cb, forces)
    if stepper.input_range is not None and stepper.check_inputs and E:
        _check_inputs(stepper, cb, feats)
    t4 = time.perf_counter()
    stepper._set_last(cb, forces * ~bad_env[cb.env][:, None])
    if E:
        _apply(m, datas, stepper, cb, forces, qfrc, bad_env)
    t5 = time.perf_counter()
    if bad_env.any():
        _fallback(m, datas, stepper, bad_env)
    t6 = time.perf_counter()
    for i, d in enumerate(datas):
        if not bad_env[i]:
            mujoco.mj_step2(m, d)
    t7 = time.perf_counter()
    stepper._stats["contacts"] += E
    for k, dt in zip(("step1", "graph", "network", "checks", "apply", "fallback", "step2"),
                     (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t7 - t6)):
        T[k] += dt


def step(m: mujoco.MjModel, data, stepper: Stepper, *, nstep: int = 1, contact: str | None = None) -> None:
    """Advance one ``MjData`` or a batch of them by ``nstep`` physics steps.

    Args:
      m: a compiled model of ``stepper.scene`` (the owned pairs' mode is set here; nothing else changes).
      data: an ``MjData`` or a sequence of them (all of ``m``).
      stepper: the ``Stepper``.
      nstep: physics steps (substeps) to take, >= 1.
      contact: override the stepper's ``surrogate`` / ``analytic`` for this call.
    Raises:
      SurrogateStepError: a bad force with ``on_bad_force="raise"``.
      ConfigError: bad options, or a model/data of another scene.
    """
    datas = _as_datas(data)
    if int(nstep) != nstep or nstep < 1:
        raise ConfigError(f"nstep must be a positive integer, got {nstep!r}", key="nstep")
    contact = stepper.contact if contact is None else contact
    _check_choice("contact", contact, CONTACT_MODES)
    if contact == "surrogate" and stepper.contact_model is None:
        raise ConfigError("this stepper has no contact model: contact must be 'analytic'", key="contact")
    _check_model(m, datas, stepper.builder)
    stepper.set_mode(m, contact)
    one = _physics_step_surrogate if contact == "surrogate" else _physics_step_analytic
    read = _bad_state_reader(datas)  # MuJoCo's own resets of an MjData (bad qpos/qvel/qacc) are counted
    counts = read()
    for _ in range(int(nstep)):
        times = [d.time for d in datas] if any(c != _NO_BAD_STATE for c in counts) else None
        one(m, datas, stepper)
        after = read()
        if after != counts or times is not None:
            _count_resets(datas, stepper, counts, after, times, stepper._stats["physics_steps"])
        counts = after
        stepper._stats["physics_steps"] += 1
        stepper._stats["env_steps"] += len(datas)
