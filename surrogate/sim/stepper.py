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
5. the forces go into ``qfrc_applied`` as generalized forces ``J^T F`` (the object gets F at the contact, the other
   body -F: equal and opposite), added to the user's own ``qfrc_applied`` (which acted from step 1 on, and is all
   that ``qfrc_applied`` holds again after the step) in one write per environment, right before its ``mj_step2``:
   a law model's from its solve (``law_solve``; the ``mj_fwdActuation`` / ``mj_fwdAcceleration`` it needs run in the
   ``mj_step1`` loop: one pass over each ``MjData`` for both, while it is in the cache), any other model's (the
   oracles of ``contact``) from its forces (``hybrid_step.generalized_forces``). A constant law (no network) is
   stepped from the contact arrays without building the torch graph; the per-body wrenches (``last_wrench``,
   ``pad_wrenches``) are computed when read;
6. ``mj_step2``.

The numpy views of each ``MjData``'s arrays that these steps read and write are made once per batch
(``data_views.DataViews``, kept until the stepper steps another batch or is closed): MuJoCo's attribute
access builds a new view every time, a dozen per environment and physics step otherwise.

After every physics step (either mode) MuJoCo's bad-state warning counters (``mjWARN_BADQPOS``,
``BADQVEL``, ``BADQACC``: MuJoCo resets an ``MjData`` itself on a NaN, Inf or huge value) are read,
a few bytes per environment; each reset is counted in ``stats()["mujoco_resets"]`` and per environment
in ``stats()["mujoco_reset_envs"]``, and warned about once naming the environment.

``contact="analytic"`` on the same model switches the owned pairs to analytic mode and calls ``mj_step`` (the user's
``qfrc_applied`` acts, as in every step): no network. Everything is deterministic for the same
inputs (CPU torch, fixed thread count).

Why ``qfrc_applied``: it leaves ``xfrc_applied`` to the user (the viewer's perturbations write
there). MuJoCo's force/torque sensors do not see ``qfrc_applied`` (``cfrc_ext`` holds only
``xfrc_applied`` and solver contacts), so ``pad_wrenches`` gives the contact model's wrench on
chosen bodies for sensor-like readings (the Gymnasium envs add it to the pad F/T sensors).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import mujoco
import numpy as np
import torch

from ..errors import ConfigError
from ..model.data_views import views_for
from ..model.history import ContactHistory
from ..model.network_kernel import limit_blas_threads
from ..scenes import ROLES, set_contact_mode
from .contact import InputRange
from .contact_scope import check_contact_groups
from .copies import Copies
from .copies_step import step_copies
from .hybrid_step import SurrogateStepError, SurrogateWarning, node_wrenches, physics_step_surrogate  # noqa: F401 (re-exported)
from .link_graph import scene_builder
from .mujoco_resets import NO_BAD_STATE, bad_state_reader, count_resets
from .step_inputs import as_datas, check_model
from .surrogate_checks import check_roles, mocap_partner, model_problem

CONTACT_MODES = ("analytic", "surrogate")
BAD_FORCE_POLICIES = ("raise", "fallback")
PHASES = ("step1", "graph", "network", "checks", "apply", "step2", "fallback", "analytic")
# The warnings MuJoCo raises when it resets an MjData itself (NaN, Inf or huge qpos / qvel / qacc).


def _check_choice(name, value, allowed):
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {allowed}, got {value!r}", key=name)


class Stepper:
    """Configuration and running state of the hybrid stepper for one scene (all its ``MjModel`` copies).

    Args:
      scene: the ``Scene`` (its owned pairs and object).
      contact_model: a ``ContactLawGNN``, another ``ContactModel`` (``contact.MuJoCoContact``, ...), or a
        checkpoint folder; needed for ``contact="surrogate"``.
      contact: ``surrogate`` or ``analytic``.
      roles: owned-pair roles the contact model takes over (default all: pads, table, ground); the other owned
        pairs stay analytic. Roles that select no owned pair are refused.
      on_bad_force: ``raise`` or ``fallback`` (that env takes that step with analytic contact).
      max_force: largest allowed contact force, in units of the object's weight (m |g|).
      ood_std: inputs farther than this many training standard deviations are out of range.
      check_inputs: compare inputs with the training range (models with normalizers only). Default
        (None): on for models with a network, off for a constant contact law (``ContactLawGNN`` with
        ``corrections=False``), whose forces do not depend on learned features: the law extrapolates
        by construction, and computing the 41 features of every contact would cost half its step.
      num_threads: threads for the network, process-wide: ``torch.set_num_threads`` and the BLAS of its compiled
        copy (``network_kernel.limit_blas_threads``). Default 1: the graphs are small, and two OpenMP threads on a
        shared 2-core machine made one call ~80x slower; None leaves both settings alone, as does a stepper without
        a contact model.
      untrained_groups: ``refuse`` (a ``ConfigError``) owned pairs of a contact group the checkpoint's card says it
        never trained on (``contact_scope``), or ``allow`` them (its unfitted prior steps them).
    """

    def __init__(self, scene, contact_model=None, *, contact: str = "surrogate", roles: Sequence[str] | None = None,
                 on_bad_force: str = "raise", max_force: float = 1000.0, ood_std: float = 6.0,
                 check_inputs: bool | None = None, num_threads: int | None = 1, untrained_groups: str = "refuse"):
        _check_choice("contact", contact, CONTACT_MODES)
        _check_choice("on_bad_force", on_bad_force, BAD_FORCE_POLICIES)
        given_roles, roles = roles, tuple(ROLES if roles is None else roles)
        for r in roles:
            _check_choice("roles", r, ROLES)
        if not max_force > 0:
            raise ConfigError(f"max_force must be positive (object weights), got {max_force!r}", key="max_force")
        if isinstance(contact_model, (str, Path)):
            from ..model.checkpoint import load_checkpoint

            contact_model = load_checkpoint(contact_model)[0]
        if contact == "surrogate" and contact_model is None:
            raise ConfigError("contact='surrogate' needs a contact_model (a ContactLawGNN, a ContactModel or a "
                              "checkpoint)", key="contact_model")
        if contact_model is not None and not callable(contact_model):
            raise ConfigError("contact_model must be callable: graph -> [E, 3] forces", key="contact_model")
        check_contact_groups(getattr(contact_model, "contact_groups", None), scene, roles, untrained=untrained_groups)
        ids = [pid for name, pid in zip(scene.owned_pairs, scene.owned_pair_ids) if scene.pair_roles[name] in roles]
        self.pair_ids = np.asarray(ids, dtype=int)
        if given_roles is not None:
            check_roles(scene, roles, self.pair_ids)
        # refused for a surrogate step (``surrogate_checks``), now and at every switch to it
        self._mocap = mocap_partner(scene.model, self.pair_ids, scene.pair_roles)
        if contact == "surrogate":
            self.check_surrogate(scene.model)
        if num_threads is not None and contact_model is not None:  # analytic only: no network, no process setting
            torch.set_num_threads(int(num_threads))
            if getattr(contact_model, "corrections", False):
                limit_blas_threads(num_threads)
        self.scene = scene
        self.contact = contact
        self.contact_model = contact_model
        self.roles = roles
        self.on_bad_force = on_bad_force
        self.max_force = float(max_force)
        if check_inputs is None:
            check_inputs = getattr(contact_model, "corrections", True)
        self.check_inputs = bool(check_inputs)
        self.builder = scene_builder(scene, scene.model, self.pair_ids)  # every link of an articulated object
        self.input_range = InputRange.from_model(contact_model, k=ood_std) if contact_model is not None else None
        # Stepped from the batch's numpy arrays (no torch) when the model is a constant law (no network).
        # Law models solve their forces semi-implicitly in float64 (``ContactLawGNN.graph_dtype``).
        self.graph_dtype = getattr(contact_model, "graph_dtype", torch.float32)
        self.law_model = hasattr(contact_model, "law_terms")
        self._body_names = [scene.model.body(int(b)).name for b in self.builder.node_body]
        self._last = None  # (ContactBatch, forces [E, 3]) of the last surrogate step; its wrenches on demand
        self._views = None  # the last batch's array views (data_views.DataViews), made once per batch
        self._wrench: np.ndarray | None = None
        self._warned: set[str] = set()
        # the per-contact state a law with the presliding spring or history features carries across physics steps
        # (``model.history``); None for every other model
        stateful = getattr(contact_model, "presliding", False) or getattr(contact_model, "history", False)
        self.history = ContactHistory() if stateful and self.law_model else None
        self._history_time = None  # [B] each environment's time after the last surrogate step (``_sync_history``)
        self.tape: list | None = None  # a list: every law solve appends its system (``law_solve.SolveRecord``)
        self.reset_stats()

    @property
    def last_wrench(self) -> np.ndarray | None:
        """[B, K, 6] the contact model's wrench on every node body in the last surrogate step (``hybrid_step.node_wrenches``;
        None before one or after an analytic step); computed when first read, most steps nobody does."""
        if self._wrench is None and self._last is not None:
            self._wrench = node_wrenches(*self._last)
        return self._wrench

    # -- what the step functions (sim.hybrid_step, sim.copies_step) record: ``stats`` reads it; nothing else writes it
    def set_last(self, cb, forces) -> None:
        """The last surrogate step's contacts and forces (None, None after an analytic step): ``last_wrench``'s source."""
        self._last, self._wrench = ((cb, forces) if cb is not None else None), None

    @property
    def views(self):
        """The array views of the batch being stepped (``data_views.DataViews`` or ``copies.CopiesViews``)."""
        return self._views

    def use_views(self, views) -> None:
        self._views = views

    @property
    def step_number(self) -> int:
        """Physics steps taken since construction (or ``reset_stats``)."""
        return self._stats["physics_steps"]

    def count(self, key: str, n: int = 1) -> None:
        """Add ``n`` to the counter ``key`` of ``stats``."""
        self._stats[key] += int(n)

    def add_times(self, seconds: dict) -> None:
        """Add wall time (s) per phase (``PHASES``)."""
        for k, dt in seconds.items():
            self._time[k] += dt

    def fell_back(self, envs) -> None:
        """``envs`` took this step with analytic contact after a bad force: counted per environment, and their contact
        state forgotten (it came from forces that were not applied)."""
        envs = [int(i) for i in envs]
        for i in envs:
            self._fallback_envs[i] = self._fallback_envs.get(i, 0) + 1
        self._stats["fallbacks"] += len(envs)
        self.reset_history(envs)

    def was_reset(self, envs) -> None:
        """``envs`` went back to the model's initial state (MuJoCo's reset, or the copies' guard): counted per
        environment, and their contact state forgotten."""
        envs = [int(i) for i in envs]
        for i in envs:
            self._reset_envs[i] = self._reset_envs.get(i, 0) + 1
        self._stats["mujoco_resets"] += len(envs)
        self.reset_history(envs)

    def count_out_of_range(self, edge_features: np.ndarray, node_features: np.ndarray) -> None:
        """Per input feature, how many contacts / bodies were outside the training range in this step."""
        self._ood_edge_features += edge_features
        self._ood_node_features += node_features

    def body_name(self, node: int) -> str:
        return self._body_names[int(node)]

    def reset_history(self, envs=None) -> None:
        """Forget the per-contact state (``model.history``) of ``envs`` (None: all). The stepper also does this by
        itself for an environment whose time is not where its last surrogate step left it (a reset, a restored
        state), for every environment when it steps another batch or takes an analytic step, and for one that fell
        back to analytic contact or that MuJoCo reset."""
        if self.history is not None:
            self.history.reset(envs)

    def close(self) -> None:
        """Let go of the contact model (the stepper holds no hooks on it: the network's inputs come from its
        ``features``); afterwards the stepper steps analytic contact only."""
        self.contact_model, self.input_range, self.law_model, self.contact = None, None, False, "analytic"
        self._views = None  # lets go of the last batch's MjData too
        self.history = None

    # -- statistics -------------------------------------------------------------------------
    def reset_stats(self) -> None:
        self._stats = {"physics_steps": 0, "env_steps": 0, "network_calls": 0, "contacts": 0, "fallbacks": 0,
                       "bad_force_events": 0, "ood_edges": 0, "ood_nodes": 0, "ood_env_steps": 0, "mujoco_resets": 0}
        self._fallback_envs: dict[int, int] = {}
        self._reset_envs: dict[int, int] = {}
        self._ood_edge_features = np.zeros(41, dtype=np.int64)
        self._ood_node_features = np.zeros(9, dtype=np.int64)
        self._time = dict.fromkeys(PHASES, 0.0)

    def fallback_envs(self) -> dict[int, int]:  # ``stats()["fallback_envs"]`` alone: the envs read it every step
        return dict(self._fallback_envs)

    def stats(self) -> dict:
        """Counts since construction (or ``reset_stats``) and per-phase wall time (s).

        Keys: physics_steps (calls of one physics step for the whole batch), env_steps (summed over
        environments), network_calls, contacts (owned contacts seen), fallbacks (env-steps run with
        analytic contact after a bad force), fallback_envs {env: count}, bad_force_events,
        ood_edges / ood_nodes (inputs outside the training range), ood_env_steps, ood_features
        {feature name: count}, mujoco_resets (env-steps in which MuJoCo reset the MjData itself on a
        NaN, Inf or huge qpos, qvel or qacc: its ``mjWARN_BADQPOS/BADQVEL/BADQACC`` warnings),
        mujoco_reset_envs {env: count}, inputs_checked (whether the inputs are compared with the training range:
        ``check_inputs``; off by default for a constant law, whose forces read no learned features), time_s
        {phase: s}.
        """
        from ..model.graph import EDGE_FEATURES, NODE_FEATURES

        s = dict(self._stats)
        s["fallback_envs"] = dict(self._fallback_envs)
        s["mujoco_reset_envs"] = dict(self._reset_envs)
        feats = {f"edge:{n}": int(c) for n, c in zip(EDGE_FEATURES, self._ood_edge_features) if c}
        feats.update({f"node:{n}": int(c) for n, c in zip(NODE_FEATURES, self._ood_node_features) if c})
        s["ood_features"] = feats
        s["inputs_checked"] = self.input_range is not None and self.check_inputs
        s["time_s"] = dict(self._time)
        return s

    def warn_once(self, key: str, message: str) -> None:
        """Warn about ``key`` (a kind, optionally ``kind:detail``) once per stepper (a ``SurrogateWarning``)."""
        if key not in self._warned:
            self._warned.add(key)
            w = SurrogateWarning(message)
            w.kind = key.split(":")[0]  # what it is about, without the env or step (the CLI shows each kind once)
            warnings.warn(w, stacklevel=4)

    # -- modes ------------------------------------------------------------------------------
    def check_surrogate(self, m: mujoco.MjModel) -> None:
        """Refuse (``ConfigError``) to step ``m`` with the learned contact where it cannot (``surrogate_checks``:
        no gravity, RK4, an owned pair with a mocap body): at construction and at every switch to it."""
        problem = model_problem(m) or self._mocap
        if problem is not None:
            raise problem

    def set_mode(self, m: mujoco.MjModel, contact: str | None = None) -> None:
        """Put ``m``'s owned pairs in the mode ``contact`` needs (default: the stepper's); ``ConfigError`` for
        ``surrogate`` where the stepper cannot step it (``check_surrogate``)."""
        contact = self.contact if contact is None else contact
        _check_choice("contact", contact, CONTACT_MODES)
        if contact == "surrogate":
            self.check_surrogate(m)
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


def _sync_history(stepper: Stepper, views, times: np.ndarray) -> None:
    """Before a surrogate step: forget the contact history of the environments that did not continue from the last
    surrogate step (another batch: all; a time other than where that step left it: a reset or a restored state)."""
    if stepper.history is None:
        return
    last = stepper._history_time
    if views is not stepper.views or last is None or len(last) != len(times):
        stepper.history.clear()
    else:
        moved = np.flatnonzero(times != last)
        if len(moved):
            stepper.history.reset(moved)


def _physics_step_analytic(m, datas, stepper: Stepper) -> None:
    if stepper.history is not None:  # the contact model's state does not survive MuJoCo's contact
        stepper.history.clear()
    t0 = time.perf_counter()
    for d in datas:  # ``mj_step`` itself: the user's qfrc_applied acts (a surrogate step leaves only it there)
        mujoco.mj_step(m, d)
    stepper.add_times({"analytic": time.perf_counter() - t0})
    stepper.set_last(None, None)


def step(m: mujoco.MjModel, data, stepper: Stepper, *, nstep: int = 1, contact: str | None = None) -> None:
    """Advance one ``MjData`` or a batch of them by ``nstep`` physics steps.

    Args:
      m: a compiled model of ``stepper.scene`` (the owned pairs' mode is set here; nothing else changes).
      data: an ``MjData`` or a sequence of them (all of ``m``); or a ``copies.Copies`` (B copies of the scene in
        one ``MjData``, with ``m`` its ``model``: one MuJoCo call per physics step for the whole batch).
      stepper: the ``Stepper``.
      nstep: physics steps (substeps) to take, >= 1.
      contact: override the stepper's ``surrogate`` / ``analytic`` for this call.
    Raises:
      SurrogateStepError: a bad force with ``on_bad_force="raise"``.
      ConfigError: bad options, a model/data of another scene, or ``surrogate`` where the stepper cannot step it
        (``Stepper.check_surrogate``: no gravity, RK4, an owned pair with a mocap body).
    """
    if int(nstep) != nstep or nstep < 1:
        raise ConfigError(f"nstep must be a positive integer, got {nstep!r}", key="nstep")
    contact = stepper.contact if contact is None else contact
    _check_choice("contact", contact, CONTACT_MODES)
    if contact == "surrogate" and stepper.contact_model is None:
        raise ConfigError("this stepper has no contact model: contact must be 'analytic'", key="contact")
    if isinstance(data, Copies):  # the fast path: B copies in one MjData (sim/copies.py)
        if hasattr(stepper.builder, "body_chain"):
            raise ConfigError("an articulated object's stepper steps a list of MjData, not Copies", key="data")
        if contact == "surrogate":
            stepper.check_surrogate(m)  # as ``set_mode`` for separate MjData
            _sync_history(stepper, data.views, data.time)
        step_copies(m, data, stepper, nstep=int(nstep), contact=contact)
        stepper._history_time = data.time.copy() if stepper.history is not None else None
        return
    datas = as_datas(data)
    if not datas:  # nothing to step in either mode (a loop whose environments have all finished)
        return
    check_model(m, datas, stepper.builder, stepper.scene.model)
    stepper.set_mode(m, contact)
    one = physics_step_surrogate if contact == "surrogate" else _physics_step_analytic
    views = views_for(stepper.views, datas)  # the batch's array views, made once per batch
    if contact == "surrogate" and stepper.history is not None:
        _sync_history(stepper, views, np.array([d.time for d in datas]))
    stepper.use_views(views)
    read = bad_state_reader(views)  # MuJoCo's own resets of an MjData (bad qpos/qvel/qacc) are counted
    counts = read()
    for _ in range(int(nstep)):
        times = [d.time for d in datas] if any(c != NO_BAD_STATE for c in counts) else None
        one(m, datas, stepper)
        after = read()
        if after != counts or times is not None:
            count_resets(datas, stepper, counts, after, times, stepper.step_number)
        counts = after
        stepper.count("physics_steps")
        stepper.count("env_steps", len(datas))
    if stepper.history is not None:
        stepper._history_time = np.array([d.time for d in datas])
