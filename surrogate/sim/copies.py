"""A batch of B environments as B copies of the scene in one ``MjModel`` / ``MjData``: the hybrid stepper's fast path.

    batch = Copies(scene, 256)
    batch.set_state(i, d)                  # copy i from an MjData of the scene's model (or batch.qpos[i] = ...)
    step(batch.model, batch, stepper)      # one mj_step1 / contact model / mj_step2 for all 256
    d_i = batch.get_data(i)                # copy i as an MjData of the scene's model

Stepping the copies is the same physics as stepping B ``MjData`` of the scene's model (``copies_model``:
the same contacts, the same solver rows; ``tests/test_copies.py`` compares trajectories), for one ``mj_step1`` and
one ``mj_step2`` per physics step instead of 2 B calls. What differs from separate ``MjData``:

- ``batch.qpos``, ``qvel``, ``ctrl``, ``act``, ``qfrc_applied``, ``qacc``, ``qacc_warmstart``, ``sensordata`` are
  [B, n] views of the one ``MjData`` (writing them writes the copies);
- the ``MjData`` has one clock: each copy's own time is ``batch.time`` [B] (reset per copy);
- MuJoCo's automatic reset on a bad state (NaN, Inf, huge) would reset every copy, so it is off in the copies
  model (``mjDSBL_AUTORESET``), and the stepper resets only the bad copies (``copies_step.reset_bad``, to the
  model's initial state, as ``mj_resetData`` does), counted in ``stats()["mujoco_resets"]`` per environment as
  for separate ``MjData``: before each physics step a copy with a bad ``qpos`` or ``qvel`` (NaN, Inf, beyond 1e10:
  MuJoCo's own test) or a NaN or Inf in ``act`` or ``ctrl`` (a NaN in one copy would spread to all in MuJoCo's
  constraint solve over the one ``MjData``; a huge finite value does not while MuJoCo's islands are on: each copy
  is its own island), which then steps on from the initial state as MuJoCo does with a separate ``MjData``; after
  the step a copy whose ``qpos``, ``qvel`` or ``qacc`` went bad, which ends the step at the initial state (a
  separate ``MjData`` reset for a bad ``qacc`` would also integrate one step from it). A NaN that MuJoCo itself
  produces inside a step from finite inputs (an overflow) can still spread to the other copies in that step; they
  are then all reset and counted;
- ``xfrc_applied`` (the viewer's perturbations) is per body of the copies model (``batch.layout.body[i]`` are copy
  i's body ids).
"""

from __future__ import annotations

import mujoco
import numpy as np

from ..errors import ConfigError
from ..model.data_views import ContactRows
from ..scenes import set_contact_mode
from .copies_model import copies_model

_MAXVAL = 1e10  # MuJoCo's mjMAXVAL: a state entry beyond it is bad (mj_checkPos / Vel / Acc)


class Copies:
    """B copies of ``scene`` in one model (``copies_model``) and one ``MjData``, every copy at the scene's initial
    state (``scene.make_data()``).

    Attributes: scene; model (the copies ``MjModel``); data (its ``MjData``); layout (``CopiesLayout``); copies (B);
    time [B] each copy's time (s); qpos [B, nq], qvel [B, nv], ctrl [B, nu], act [B, na], qfrc_applied [B, nv],
    qacc [B, nv], qacc_warmstart [B, nv], sensordata [B, nsensordata]: views of ``data``.
    """

    def __init__(self, scene, copies: int):
        number = isinstance(copies, (int, float, np.integer, np.floating)) and not isinstance(copies, bool)
        if not (number and float(copies).is_integer() and copies >= 1):  # 1.7 made one copy silently
            raise ConfigError(f"copies must be a positive whole number, got {copies!r}", key="copies")
        copies = int(copies)
        self.scene = scene
        self.model, self.layout = copies_model(scene, copies)
        self.model.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_AUTORESET)  # one bad copy must not reset all
        self.data = mujoco.MjData(self.model)
        self.copies = B = int(copies)
        D, lay = self.data, self.layout
        self.qpos, self.qvel = D.qpos.reshape(B, lay.nq), D.qvel.reshape(B, lay.nv)
        self.ctrl, self.act = D.ctrl.reshape(B, lay.nu), D.act.reshape(B, lay.na)
        self.qfrc_applied, self.qacc = D.qfrc_applied.reshape(B, lay.nv), D.qacc.reshape(B, lay.nv)
        self.qacc_warmstart = D.qacc_warmstart.reshape(B, lay.nv)
        self.sensordata = D.sensordata.reshape(B, lay.nsensordata)
        self.time = np.zeros(B)
        self.views = CopiesViews(self)
        d0 = scene.make_data()
        for i in range(B):
            self.set_state(i, d0, forward=False)
        mujoco.mj_forward(self.model, D)

    def __len__(self) -> int:
        return self.copies

    def set_state(self, i: int, d: mujoco.MjData, *, forward: bool = True) -> None:
        """Copy i takes the state of ``d`` (an ``MjData`` of the scene's model): qpos, qvel, act, ctrl, the solver's
        warm start and the time; ``forward``: then ``mj_forward`` the copies (derived quantities of copy i).
        Raises ``ConfigError`` for an ``MjData`` of another model (another hand or object: other sizes)."""
        lay = self.layout
        have = (d.qpos.shape[0], d.qvel.shape[0], d.act.shape[0], d.ctrl.shape[0])
        if have != (lay.nq, lay.nv, lay.na, lay.nu):
            raise ConfigError(f"Copies.set_state(copy {i}): the MjData has nq, nv, na, nu = {have}, the copies' scene "
                              f"{(lay.nq, lay.nv, lay.na, lay.nu)}: it is an MjData of another model (another hand "
                              "or object?); give an MjData of this scene's model", key="data")
        self.qpos[i], self.qvel[i], self.act[i], self.ctrl[i] = d.qpos, d.qvel, d.act, d.ctrl
        self.qacc_warmstart[i], self.time[i] = d.qacc_warmstart, d.time
        if forward:
            mujoco.mj_forward(self.model, self.data)

    def get_data(self, i: int, out: mujoco.MjData | None = None) -> mujoco.MjData:
        """Copy i as an ``MjData`` of the scene's model (state copied, then ``mj_forward``)."""
        m = self.scene.model
        d = mujoco.MjData(m) if out is None else out
        d.qpos[:], d.qvel[:], d.act[:], d.ctrl[:] = self.qpos[i], self.qvel[i], self.act[i], self.ctrl[i]
        d.qacc_warmstart[:], d.time = self.qacc_warmstart[i], float(self.time[i])
        mujoco.mj_forward(m, d)
        return d

    def reset(self, envs) -> None:
        """Copies ``envs`` go back to the model's initial state, as ``mj_resetData`` does for one ``MjData``:
        ``qpos0``, zero velocities, activations, controls, applied forces and warm start, time 0."""
        envs = np.atleast_1d(np.asarray(envs, dtype=np.int64))
        q0 = self.model.qpos0.reshape(self.copies, self.layout.nq)
        self.qpos[envs] = q0[envs]
        for a in (self.qvel, self.act, self.ctrl, self.qfrc_applied, self.qacc_warmstart, self.qacc):
            a[envs] = 0.0
        self.data.xfrc_applied[self.layout.body[envs, 1:].ravel()] = 0.0
        self.time[envs] = 0.0

    def bad_copies(self) -> np.ndarray:
        """[B] bool: copies whose qpos, qvel or qacc has a NaN, Inf or entry beyond 1e10 (MuJoCo's bad state)."""
        bad = np.zeros(self.copies, dtype=bool)
        for a in (self.qpos, self.qvel, self.qacc):
            bad |= ~(np.abs(a) <= _MAXVAL).all(axis=1)
        return bad

    def bad_inputs(self) -> np.ndarray:
        """[B] bool: copies with a NaN, Inf or entry beyond 1e10 in qpos or qvel (MuJoCo's ``mj_checkPos`` /
        ``mj_checkVel``), or a NaN or Inf in act or ctrl (checked before each step)."""
        bad = np.zeros(self.copies, dtype=bool)
        for a in (self.qpos, self.qvel):
            bad |= ~(np.abs(a) <= _MAXVAL).all(axis=1)
        for a in (self.act, self.ctrl):
            if a.shape[1]:
                bad |= ~np.isfinite(a).all(axis=1)
        return bad

    def set_mode(self, mode: str, *, roles=None) -> None:
        """Put every copy's owned pairs (of ``roles``, default all) in ``analytic`` or ``external`` mode
        (``scenes.set_contact_mode``)."""
        set_contact_mode(self.model, self.scene, mode, roles=roles, pair_map=self.layout.pair)

    def set_mode_of(self, envs, mode: str, *, roles=None) -> None:
        """Only copies ``envs``' owned pairs (the analytic fallback of a bad force)."""
        set_contact_mode(self.model, self.scene, mode, roles=roles, pair_map=self.layout.pair[np.asarray(envs)])


class CopiesViews:
    """What ``batch_graph.GraphBuilder.gather`` and the law solve read, from the copies' one ``MjData``, with the
    scene model's ids (the ``data_views.DataViews`` interface: ``num_envs``, ``stack``, ``stacked_contacts``,
    ``contact_index``).

    MuJoCo orders contacts by body-pair signature, so the copies' contacts of the static world geoms (table,
    ground: the world body is shared) come before every copy's body-body contacts: each copy's contacts are in the
    order its own ``MjData`` would have them, but interleaved with other copies'. ``stacked_contacts`` sorts them by
    copy (stable), with the permutation kept while the same geoms touch.
    """

    _DOF = ("cdof", "M", "qvel", "qacc_smooth", "qfrc_applied")
    _BODY = ("xipos", "cvel", "subtree_com", "ximat")

    def __init__(self, copies: Copies):
        self.copies = copies
        self.num_envs = copies.copies
        self._ncon = -1
        self._contact = None  # (geom [C, 2] int32, dist/pos/frame [C, 13]) views of the data's contacts
        self._rows = ContactRows()
        self._order = None  # (geom bytes, ncon [B], permutation or None, local geom [C, 2])

    def stack(self, name: str) -> np.ndarray:
        """[B, ...] field ``name`` of every copy: a view for the dof arrays (block layout), a gather of the copy's
        bodies (``layout.body``) for the body arrays."""
        D, B = self.copies.data, self.num_envs
        a = getattr(D, name)
        if name in self._BODY:
            return a[self.copies.layout.body]
        if name in self._DOF:  # a copy, as DataViews gives: the batch's arrays must not change with the data
            return a.reshape(B, -1, *a.shape[1:]).copy()
        raise KeyError(f"CopiesViews cannot stack {name!r}")

    def stacked_contacts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ncon [B], geom [C, 2] in the scene model's geom ids, dist/pos/frame [C, 13]): every copy's contacts,
        copy 0's first, each copy's in its own order."""
        D = self.copies.data
        if D.ncon != self._ncon:  # the contact array starts at the arena's fixed start: views stay valid (DataViews)
            self._contact, self._ncon = self._rows.read(D, D.ncon), D.ncon
        geom, dpf = self._contact
        key = geom.tobytes()
        if self._order is None or self._order[0] != key:
            lay = self.copies.layout
            env = lay.geom_copy[geom[:, 0]] if len(geom) else np.zeros(0, dtype=np.int64)
            perm = None if (np.diff(env) >= 0).all() else np.argsort(env, kind="stable")
            local = lay.geom_local[geom if perm is None else geom[perm]]
            self._order = (key, np.bincount(env, minlength=self.num_envs).astype(np.int64), perm, local)
        _, ncon, perm, local = self._order
        return ncon, local, (dpf.copy() if perm is None else dpf[perm])  # a copy: the batch outlives the step

    def contact_index(self, env: np.ndarray, cid: np.ndarray) -> np.ndarray:
        """[E] the index in the copies' ``data.contact`` of contact ``cid`` of copy ``env`` (the sorted order's
        position mapped back through the permutation)."""
        _, ncon, perm, _ = self._order
        start = np.cumsum(ncon) - ncon
        pos = start[env] + cid
        return pos if perm is None else perm[pos]
