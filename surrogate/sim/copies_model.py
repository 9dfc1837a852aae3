"""B copies of a scene inside one ``MjModel``: one ``mj_step1`` / ``mj_step2`` for a whole batch.

The hybrid stepper's MuJoCo part over B separate ``MjData`` is a Python loop of 2 B calls, each with its own
per-call overhead (the collision driver's broadphase, the arena, the constraint and island setup); in one model of
B copies those are paid once. ``copies_model`` builds that model so that every copy steps exactly as the scene's
own model would:

- copy i is attached to a frame of the world body (prefix ``c{i}_``): its bodies, joints, actuators and sensors
  are one contiguous block, its world geoms (ground, table) are geoms of the shared world body (a free joint must
  hang from the world, so a per-copy base body is not possible); MuJoCo orders contacts by body-pair signature, so
  the copies' world contacts come first and ``copies.CopiesViews`` sorts the contacts by copy;
- copies overlap in space and never touch: every geom gets ``contype = conaffinity = 0``, and each copy's
  collisions are explicit pairs: the scene's own pairs plus one pair for every geom pair that MuJoCo's dynamic
  collision would test in the scene (``dynamic_geom_pairs``: bitmask, weld and parent filters, excluded body pairs),
  with the contact parameters MuJoCo would mix for it (``mixed_pair_params``, as ``mj_contactParam``); the scene's
  own pairs take the scene model's current pair parameters (friction, solref, solimp, condim, margin, gap: a model
  edited in place, as identification does, is copied as it is at build time);
- the copies' arrays are blocks: ``qpos`` is [B * nq] with copy i at ``[i * nq, (i + 1) * nq)``, and so are
  ``qvel``, ``ctrl``, ``act``, ``qfrc_applied``, the sparse inertia ``M`` and ``sensordata`` (checked at build time:
  ``CopiesLayout``).

``tests/test_copies.py`` checks the copies against the scene's model: the same contacts (geoms, distance, point,
frame) from states with dynamic contacts (the hand on the table), and the same trajectories.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from ..errors import ConfigError
from ..scenes.collisions import dynamic_geom_pairs, mixed_pair_params
from .model_params import OPTIONS, physics_differences

_PAIR_FIELDS = ("pair_dim", "pair_friction", "pair_solref", "pair_solreffriction", "pair_solimp", "pair_margin", "pair_gap")
_SPEC_OPTIONS = ("timestep", "integrator", "cone", "solver", "tolerance", "iterations", "gravity")


class ModelEditedError(ConfigError):
    """The scene's model was edited after it was compiled: copies compiled from its spec would step other physics."""


@dataclass(frozen=True)
class CopiesLayout:
    """Where copy i's things are in the copies model (``copies_model``); the scene's model has nq, nv, nu, na,
    nM, nsensordata per copy. body [B, nbody] / geom [B, ngeom] / pair [B, npair]: the copies model's id of each of
    the scene's bodies (the scene's world body: the copy's static base), geoms and pairs; ``geom_copy`` [ngeom of the
    copies model]: the copy of each geom, ``geom_local``: its id in the scene's model."""

    copies: int
    nq: int
    nv: int
    nu: int
    na: int
    nM: int
    nsensordata: int
    body: np.ndarray
    geom: np.ndarray
    pair: np.ndarray
    geom_copy: np.ndarray
    geom_local: np.ndarray


def _name_everything(spec: mujoco.MjSpec) -> None:
    """Give unnamed bodies, geoms, joints, actuators and sensors of ``spec`` a name (``_<kind><k>``), so that each
    copy's can be found by its prefixed name."""
    for kind, items in (("b", spec.bodies), ("g", spec.geoms), ("j", spec.joints), ("a", spec.actuators),
                        ("s", spec.sensors), ("p", spec.pairs)):
        for k, it in enumerate(items):
            if not it.name:
                it.name = f"_{kind}{k}"


def copies_model(scene, copies: int) -> tuple[mujoco.MjModel, CopiesLayout]:
    """[copies] copies of ``scene``'s model in one ``MjModel`` (module docstring), and where each copy's parts are.

    The scene's model's options (timestep, integrator, solver, cone, tolerances, flags, gravity) and its pairs'
    current parameters are copied (the owned pairs' mode, margin and gap: the stepper switches them per copy,
    ``copies.Copies.set_mode``); later edits of the scene's model do not reach the copies. With MuJoCo's islands
    disabled (``mjDSBL_ISLAND``) one constraint solve spans all copies, so copies then agree with separate ``MjData``
    to the solver's tolerance, not bit for bit. Raises ``ConfigError`` for what the copies cannot reproduce (flexes, mocap bodies,
    equality constraints or tendons across copies are not an issue: each copy's own are copied with it).
    """
    copies = int(copies)
    if copies < 1:
        raise ConfigError(f"copies must be >= 1, got {copies}", key="copies")
    m = scene.model
    if m.opt.enableflags & mujoco.mjtEnableBit.mjENBL_OVERRIDE:
        raise ConfigError("copies_model: the contact override (mjENBL_OVERRIDE) is not supported", key="model")
    if m.nmocap:
        raise ConfigError("copies_model: scenes with mocap bodies are not supported", key="model")
    child = scene.spec.copy()
    _name_everything(child)
    ref = child.compile()
    if ref.nbody != m.nbody or ref.ngeom != m.ngeom or ref.nq != m.nq or ref.npair != m.npair:
        raise ConfigError("copies_model: the scene's spec does not compile to the scene's model", key="scene")
    names = lambda obj, n: [mujoco.mj_id2name(ref, obj, i) for i in range(n)]  # noqa: E731
    geom_names = names(mujoco.mjtObj.mjOBJ_GEOM, ref.ngeom)
    for g1, g2 in dynamic_geom_pairs(m):
        p = mixed_pair_params(m, g1, g2)
        pair = child.add_pair(name=f"_dyn{g1}_{g2}", geomname1=geom_names[g1], geomname2=geom_names[g2])
        pair.condim, pair.solref, pair.solimp, pair.friction = p["condim"], p["solref"], p["solimp"], p["friction"]
        pair.margin, pair.gap = p["margin"], p["gap"]
    for g in child.geoms:
        g.contype, g.conaffinity = 0, 0
    parent = mujoco.MjSpec()
    for k in _SPEC_OPTIONS:  # before attaching: a child's options that differ from its parent's are a conflict
        setattr(parent.option, k, getattr(m.opt, k))
    for i in range(copies):
        parent.attach(child.copy(), frame=parent.worldbody.add_frame(), prefix=f"c{i}_")
    big = parent.compile()
    for k in OPTIONS:
        setattr(big.opt, k, getattr(m.opt, k))
    layout = _layout(m, ref, big, copies)
    # the copies are compiled from the spec: a value of the scene's model edited since it was compiled would not
    # reach them (its pairs and options are copied below and above)
    edited = physics_differences(m, ref, skip=_PAIR_FIELDS + tuple(f"opt.{k}" for k in OPTIONS))
    if edited:
        raise ModelEditedError(f"copies_model: the scene's model differs from its spec in {', '.join(edited[:6])}"
                               f"{', ...' if len(edited) > 6 else ''} (was the model edited after it was compiled? "
                               "edit scene.spec and compile it again, or step separate MjData)", key="scene")
    # runtime values of the scene's model (the owned pairs' mode, identified parameters) over the compiled ones
    for f in _PAIR_FIELDS:
        getattr(big, f)[layout.pair.ravel()] = np.tile(getattr(m, f), (copies,) + (1,) * (getattr(m, f).ndim - 1))
    _check_same_physics(m, big, layout)
    return big, layout


def _ids(big, obj, names, prefix):
    ids = np.array([mujoco.mj_name2id(big, obj, prefix + n) for n in names], dtype=np.int64)
    if (ids < 0).any():
        raise RuntimeError(f"copies_model: {prefix}{names[int(np.flatnonzero(ids < 0)[0])]} not found")
    return ids


def _layout(m, ref, big, B) -> CopiesLayout:
    """The copies' id tables, with the block layout of their arrays checked."""
    obj = mujoco.mjtObj
    nm = lambda obj, n: [mujoco.mj_id2name(ref, obj, i) for i in range(n)]  # noqa: E731
    bodies = nm(obj.mjOBJ_BODY, ref.nbody)[1:]
    geoms, pairs = nm(obj.mjOBJ_GEOM, ref.ngeom), nm(obj.mjOBJ_PAIR, ref.npair)
    body = np.stack([np.concatenate([[0], _ids(big, obj.mjOBJ_BODY, bodies, f"c{i}_")]) for i in range(B)])
    geom = np.stack([_ids(big, obj.mjOBJ_GEOM, geoms, f"c{i}_") for i in range(B)])
    pair = np.stack([_ids(big, obj.mjOBJ_PAIR, pairs, f"c{i}_") for i in range(B)]) if ref.npair else np.zeros((B, 0), int)
    geom_copy = np.full(big.ngeom, -1, dtype=np.int64)
    geom_local = np.full(big.ngeom, -1, dtype=np.int64)
    for i in range(B):
        geom_copy[geom[i]], geom_local[geom[i]] = i, np.arange(ref.ngeom)
    lay = CopiesLayout(copies=B, nq=m.nq, nv=m.nv, nu=m.nu, na=m.na, nM=m.nM, nsensordata=m.nsensordata,
                       body=body, geom=geom, pair=pair, geom_copy=geom_copy, geom_local=geom_local)
    # block layout: copy i's joints, dofs, actuators, sensors and inertia entries at offset i x the scene's counts
    checks = {
        "nq": (big.nq, B * m.nq), "nv": (big.nv, B * m.nv), "nu": (big.nu, B * m.nu), "na": (big.na, B * m.na),
        "nM": (big.nM, B * m.nM), "nsensordata": (big.nsensordata, B * m.nsensordata), "ncopy geoms": (big.ngeom, B * m.ngeom),
    }
    bad = [k for k, (a, b) in checks.items() if a != b]
    if bad:
        raise RuntimeError(f"copies_model: sizes {bad} are not B x the scene's")
    for i in range(B):
        b = body[i, 1:]
        ok = (np.array_equal(big.body_dofadr[b] - np.where(ref.body_dofadr[1:] >= 0, i * m.nv, 0), ref.body_dofadr[1:])
              and np.array_equal(big.jnt_qposadr[big.body_jntadr[b][ref.body_jntnum[1:] > 0]] - i * m.nq,
                                 ref.jnt_qposadr[ref.body_jntadr[1:][ref.body_jntnum[1:] > 0]])
              and np.array_equal(big.dof_Madr[i * m.nv:(i + 1) * m.nv] - i * m.nM, ref.dof_Madr))
        if not ok:
            raise RuntimeError(f"copies_model: copy {i}'s joints, dofs or inertia entries are not one block")
    return lay


def _check_same_physics(m, big, lay: CopiesLayout) -> None:
    """Every copy's bodies, geoms, dofs and actuators have the scene model's parameters: the copies were put together
    as the scene is (an edited scene model is refused before, ``ModelEditedError``)."""
    B = lay.copies
    tables = {
        "body_mass": (big.body_mass[lay.body[:, 1:]], m.body_mass[1:]),
        "body_inertia": (big.body_inertia[lay.body[:, 1:]], m.body_inertia[1:]),
        "geom_size": (big.geom_size[lay.geom], m.geom_size), "geom_friction": (big.geom_friction[lay.geom], m.geom_friction),
        "dof_damping": (big.dof_damping.reshape(B, m.nv), m.dof_damping),
        "dof_armature": (big.dof_armature.reshape(B, m.nv), m.dof_armature),
        "actuator_gainprm": (big.actuator_gainprm.reshape(B, *m.actuator_gainprm.shape), m.actuator_gainprm),
        "actuator_biasprm": (big.actuator_biasprm.reshape(B, *m.actuator_biasprm.shape), m.actuator_biasprm),
        "qpos0": (big.qpos0.reshape(B, m.nq), m.qpos0),
    }
    for name, (a, b) in tables.items():
        if not np.allclose(a, np.broadcast_to(b, a.shape), rtol=1e-12, atol=1e-15):
            raise RuntimeError(f"copies_model: the copies' {name} differs from the scene's model, which equals its "
                               "spec: the copies were not put together as the scene is")
