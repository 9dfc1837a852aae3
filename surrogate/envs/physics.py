"""Where a ``GraspTask``'s N environments live: N separate ``MjData`` (``DataPhysics``) or N copies of the scene in
one ``MjModel`` / ``MjData`` (``CopiesPhysics``, ``sim.copies``: one ``mj_step1`` / contact model / ``mj_step2`` per
physics step for all of them), and what the task's observations and rewards read from either (``EnvArrays``).

Both backends give the same arrays for the same states: the observation and reward are computed once, from
``EnvArrays``, whatever holds the environments. The copies cannot step a subset of the environments (one
``MjData``); the one subset the Gymnasium vector env needs, a copy being reset that sits out a step (next-step
autoreset), is stepped with the others from its reset state and put back to that state afterwards; until it
steps, its arrays come from the ``MjData`` it was reset in (``CopiesPhysics`` docstring).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from ..errors import ConfigError
from ..sim.copies import Copies
from ..sim.model_params import physics_fingerprint
from ..sim.stepper import step


@dataclass
class Ids:
    """The scene-model ids the task reads: qadr / vadr [J] hand joints' qpos / dof addresses; bodies [2 + P] the object,
    the hand base, then the pads; roots [2] the root body of the object and of the base (``subtree_com`` of
    ``mj_objectVelocity``); sites [P] pad sites; sensor_adr [S] the pads' F/T sensor entries."""

    qadr: np.ndarray
    vadr: np.ndarray
    bodies: np.ndarray
    roots: np.ndarray
    sites: np.ndarray
    sensor_adr: np.ndarray


@dataclass
class EnvArrays:
    """What observations and rewards read, for n environments (row r: the r-th environment asked for).

    qpos [n, J], qvel [n, J] hand joints; finite [n] whole qpos and qvel finite; xpos_base [n, 3], xmat_base [n, 3, 3],
    xquat_base [n, 4], xquat_ob [n, 4]; xipos [n, 2 + P, 3] (object, base, pads); cvel [n, 2, 6] (object, base);
    com [n, 2, 3] subtree_com of their roots; sensordata [n, S]; site_xpos [n, P, 3], site_xmat [n, P, 3, 3];
    contacts: con_row [C] (the row), con_geom [C, 2] (scene-model geom ids), con_dist [C].
    """

    qpos: np.ndarray
    qvel: np.ndarray
    finite: np.ndarray
    xpos_base: np.ndarray
    xmat_base: np.ndarray
    xquat_base: np.ndarray
    xquat_ob: np.ndarray
    xipos: np.ndarray
    cvel: np.ndarray
    com: np.ndarray
    sensordata: np.ndarray
    site_xpos: np.ndarray
    site_xmat: np.ndarray
    con_row: np.ndarray
    con_geom: np.ndarray
    con_dist: np.ndarray


def arrays_of_datas(datas, ids: Ids) -> EnvArrays:
    """``EnvArrays`` of separate ``MjData`` of the scene's model (one row each)."""
    b, s = ids.bodies, ids.sites
    n = [d.ncon for d in datas]
    stack = lambda f: np.stack([f(d) for d in datas])  # noqa: E731
    return EnvArrays(
        qpos=stack(lambda d: d.qpos[ids.qadr]), qvel=stack(lambda d: d.qvel[ids.vadr]),
        finite=np.array([bool(np.isfinite(d.qpos).all() and np.isfinite(d.qvel).all()) for d in datas]),
        xpos_base=stack(lambda d: d.xpos[b[1]]), xmat_base=stack(lambda d: d.xmat[b[1]].reshape(3, 3)),
        xquat_base=stack(lambda d: d.xquat[b[1]]), xquat_ob=stack(lambda d: d.xquat[b[0]]),
        xipos=stack(lambda d: d.xipos[b]), cvel=stack(lambda d: d.cvel[b[:2]]),
        com=stack(lambda d: d.subtree_com[ids.roots]), sensordata=stack(lambda d: d.sensordata[ids.sensor_adr]),
        site_xpos=stack(lambda d: d.site_xpos[s]), site_xmat=stack(lambda d: d.site_xmat[s].reshape(-1, 3, 3)),
        con_row=np.repeat(np.arange(len(datas)), n),
        con_geom=np.concatenate([d.contact.geom[:k] for d, k in zip(datas, n)]).reshape(-1, 2).astype(np.int64),
        con_dist=np.concatenate([d.contact.dist[:k] for d, k in zip(datas, n)]))


def arrays_of_copies(batch: Copies, envs: np.ndarray, ids: Ids, site_ids: np.ndarray) -> EnvArrays:
    """``EnvArrays`` of copies ``envs`` [n] of ``batch`` (``site_ids`` [B, P]: the copies model's pad sites)."""
    D, lay = batch.data, batch.layout
    body = lay.body[envs][:, ids.bodies]  # [n, 2 + P] copies-model body ids
    roots = lay.body[envs][:, ids.roots]
    sites = site_ids[envs]
    qpos, qvel = batch.qpos[envs], batch.qvel[envs]
    ncon = D.ncon
    geom = D.contact.geom[:ncon].reshape(-1, 2)
    copy = batch.layout.geom_copy[geom[:, 0]] if ncon else np.zeros(0, np.int64)
    row_of = np.full(batch.copies, -1, dtype=np.int64)
    row_of[envs] = np.arange(len(envs))
    row = row_of[copy]
    keep = np.flatnonzero(row >= 0)
    keep = keep[np.argsort(row[keep], kind="stable")]  # each copy's contacts in its own order, as its MjData's
    return EnvArrays(
        qpos=qpos[:, ids.qadr], qvel=qvel[:, ids.vadr], finite=np.isfinite(qpos).all(1) & np.isfinite(qvel).all(1),
        xpos_base=D.xpos[body[:, 1]], xmat_base=D.xmat[body[:, 1]].reshape(-1, 3, 3), xquat_base=D.xquat[body[:, 1]],
        xquat_ob=D.xquat[body[:, 0]], xipos=D.xipos[body], cvel=D.cvel[body[:, :2]], com=D.subtree_com[roots],
        sensordata=batch.sensordata[envs][:, ids.sensor_adr], site_xpos=D.site_xpos[sites],
        site_xmat=D.site_xmat[sites].reshape(len(envs), -1, 3, 3), con_row=row[keep],
        con_geom=lay.geom_local[geom[keep]], con_dist=D.contact.dist[:ncon][keep])


def _merge(parts: list[tuple[np.ndarray, EnvArrays]], n: int) -> EnvArrays:
    """One ``EnvArrays`` of n rows from parts (rows [k] of the result, the part's arrays)."""
    parts = [(r, a) for r, a in parts if len(r)]
    if len(parts) == 1 and np.array_equal(parts[0][0], np.arange(n)):
        return parts[0][1]
    out = {}
    for f in EnvArrays.__dataclass_fields__:
        if f.startswith("con_"):
            continue
        first = getattr(parts[0][1], f)
        out[f] = np.zeros((n,) + first.shape[1:], dtype=first.dtype)
        for r, a in parts:
            out[f][r] = getattr(a, f)
    rows = np.concatenate([r[a.con_row] for r, a in parts])
    order = np.argsort(rows, kind="stable")
    out["con_row"] = rows[order]
    out["con_geom"] = np.concatenate([a.con_geom for _, a in parts])[order]
    out["con_dist"] = np.concatenate([a.con_dist for _, a in parts])[order]
    return EnvArrays(**out)


class DataPhysics:
    """N separate ``MjData`` of the scene's model (``datas``); any subset of them steps alone."""

    copies = False

    def __init__(self, scene, n: int):
        self.scene, self.model = scene, scene.model
        self.datas = [scene.make_data() for _ in range(n)]

    def reset_data(self, i: int) -> mujoco.MjData:
        """The ``MjData`` that environment i's reset writes its state into (then ``mj_forward``)."""
        return self.datas[i]

    def loaded(self, i: int) -> None:
        """Environment i's reset state is in ``reset_data(i)``."""

    def ctrl(self, envs) -> np.ndarray:
        return np.stack([self.datas[i].ctrl for i in envs])

    def set_ctrl(self, envs, ids: np.ndarray, values: np.ndarray) -> None:
        for i, v in zip(envs, values):
            self.datas[i].ctrl[ids] = v

    def simulate(self, envs: np.ndarray, stepper, nstep: int) -> np.ndarray:
        """``nstep`` physics steps of environments ``envs``; returns the environment of each row of the stepper's
        batch (its stats and wrenches are per row)."""
        step(self.model, [self.datas[i] for i in envs], stepper, nstep=nstep)
        return envs

    def arrays(self, envs, ids: Ids) -> EnvArrays:
        return arrays_of_datas([self.datas[i] for i in envs], ids)

    def render_data(self, i: int) -> tuple[mujoco.MjModel, mujoco.MjData]:
        return self.model, self.datas[i]


class CopiesPhysics:
    """N copies of the scene in one ``MjModel`` (``sim.copies.Copies``): every physics step is one MuJoCo call pair
    and one contact-model call for all N.

    A reset builds the environment's state in an ``MjData`` of the scene's model, exactly as ``DataPhysics`` does
    (``mj_resetData``, the scene's initial state, the random pose, ``mj_forward``), and copies the state into the
    copy; until the copy next steps, its arrays are read from that ``MjData`` (the copies' one ``MjData`` holds the
    other copies' derived quantities of their last step, which a forward of all copies would change). A copy that
    sits out a step (``simulate`` without it: just reset, next-step autoreset) is stepped with the others and then put
    back to its reset state; its step is discarded (the stepper's ``stats`` count it).

    The copies take the scene model's parameters when built; ``simulate`` refuses to step after ``scene.model`` was
    edited (e.g. ``bench.analytic.apply_params``), which would otherwise not reach the copies: use
    ``copies=False`` for an environment whose model is edited.
    """

    copies = True

    def __init__(self, scene, n: int, site_names):
        self.scene, self.model = scene, scene.model
        self.batch = Copies(scene, n)
        big = self.batch.model
        self.site_ids = np.array([[big.site(f"c{i}_{s}").id for s in site_names] for i in range(n)], dtype=np.int64)
        self._fresh: list[mujoco.MjData | None] = [None] * n
        self._pending = np.zeros(n, dtype=bool)  # reset and not stepped since: read from _fresh
        self._fingerprint = physics_fingerprint(scene.model)
        self._render = None

    @property
    def datas(self):
        raise ConfigError("this GraspTask steps its environments as copies in one MjData (copies=True, the vector "
                          "env's default): there is no MjData per environment; build it with copies=False for them",
                          key="copies")

    def reset_data(self, i: int) -> mujoco.MjData:
        if self._fresh[i] is None:
            self._fresh[i] = mujoco.MjData(self.model)
        return self._fresh[i]

    def loaded(self, i: int) -> None:
        self.batch.set_state(i, self._fresh[i], forward=False)
        self._pending[i] = True

    def ctrl(self, envs) -> np.ndarray:
        return self.batch.ctrl[np.asarray(envs, dtype=np.int64)]

    def set_ctrl(self, envs, ids: np.ndarray, values: np.ndarray) -> None:
        envs = np.asarray(envs, dtype=np.int64)
        self.batch.ctrl[envs[:, None], ids[None, :]] = values
        for i, v in zip(envs[self._pending[envs]], values[self._pending[envs]]):
            self._fresh[i].ctrl[ids] = v  # the state a copy sitting out a step goes back to keeps its controls

    def simulate(self, envs: np.ndarray, stepper, nstep: int) -> np.ndarray:
        n = self.batch.copies
        sit_out = np.ones(n, dtype=bool)
        sit_out[envs] = False
        if (sit_out & ~self._pending).any():
            i = int(np.flatnonzero(sit_out & ~self._pending)[0])
            raise ConfigError(f"copies step all environments together: environment {i} can sit out a step only "
                              "right after its reset (use copies=False to step subsets)", key="envs")
        if physics_fingerprint(self.model) != self._fingerprint:
            raise ConfigError("the scene's model was edited after its copies were built (any physics value: contact "
                              "parameters, masses, actuator ranges, options): the copies would not see it; build the "
                              "task with copies=False",
                              key="copies")
        step(self.batch.model, self.batch, stepper, nstep=nstep)
        for i in np.flatnonzero(sit_out):
            self.batch.set_state(int(i), self._fresh[i], forward=False)
        self._pending[envs] = False
        return np.arange(n)

    def arrays(self, envs, ids: Ids) -> EnvArrays:
        envs = np.asarray(envs, dtype=np.int64)
        fresh = self._pending[envs]
        if not fresh.any():
            return arrays_of_copies(self.batch, envs, ids, self.site_ids)
        r_c, r_f = np.flatnonzero(~fresh), np.flatnonzero(fresh)
        parts = [(r_f, arrays_of_datas([self._fresh[i] for i in envs[r_f]], ids))]
        if len(r_c):
            parts.append((r_c, arrays_of_copies(self.batch, envs[r_c], ids, self.site_ids)))
        return _merge(parts, len(envs))

    def render_data(self, i: int) -> tuple[mujoco.MjModel, mujoco.MjData]:
        if self._pending[i]:
            return self.model, self._fresh[i]
        self._render = self.batch.get_data(i, self._render)
        return self.model, self._render
