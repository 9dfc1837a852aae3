"""One physics step of a batch with the contact model owning its pairs (``stepper`` module docstring, steps
1-6), in small pieces: the contact model's call, the force guards, the input-range check, applying the forces,
the analytic fallback. ``stepper`` is the ``sim.stepper.Stepper`` whose counters and timers these update.
"""

from __future__ import annotations

import math
import time

import mujoco
import numpy as np
import torch

from ..errors import ConfigError, SurrogateError
from ..model.law import cross
from ..model.network_numpy import features as numpy_features
from ..model.network_numpy import numpy_network
from .law_solve import constant_law, contact_jacobians, law_forces


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


def needs_graph(stepper) -> bool:
    """Whether a surrogate step builds the contact graph: not for a constant law (``law_solve.constant_law``) whose
    inputs are not checked and whose solve is not recorded (``Stepper.tape``), which is stepped from the contact
    arrays alone (its ``ContactBatch`` is built with ``graph=False``: it skips reading the node velocities and the
    object's frame)."""
    checked = stepper.input_range is not None and stepper.check_inputs
    taped = stepper.tape is not None  # training through the step solves it again from the graph
    return checked or taped or not (stepper.law_model and constant_law(stepper.contact_model))


def _contact_forces(m, datas, stepper, cb):
    """(forces [E, 3] float64 on the object ([E, 6] with a law's torques about the contact points: torsional and
    rolling friction), their generalized forces [B, nv], the network's input features if the inputs are checked, else
    None): one call of the contact model for the batch."""
    model = stepper.contact_model
    prepare = getattr(model, "prepare", None)
    if prepare is not None:
        prepare(m, datas)
    feats = None
    if stepper.input_range is not None and stepper.check_inputs and hasattr(model, "features"):
        if numpy_network(model) is not None:  # computed once: the network's input and the range check's
            feats = numpy_features(cb.arrays)  # numpy, from the batch's arrays: the torch graph is never built
        else:
            with torch.inference_mode():
                feats = model.features(cb.graph)
    stepper.count("network_calls")
    if stepper.law_model:  # the law solved with every body's mobility (sim/law_solve.py)
        forces, qfrc = law_forces(m, datas, cb, model, stepper.builder, features=feats, views=stepper.views,
                                  accelerated=True, history=stepper.history, tape=stepper.tape)
        return forces, qfrc, feats
    # any other contact model (the oracles ``contact.MuJoCoContact``, ``ZeroContact``) returns forces
    with torch.inference_mode():
        f = model(cb.graph)
    forces = f.detach().double().numpy() if isinstance(f, torch.Tensor) else np.asarray(f, dtype=np.float64)
    if forces.shape != (cb.num_contacts, 3):
        raise ConfigError(f"contact model returned shape {forces.shape}, expected ({cb.num_contacts}, 3)", key="contact_model")
    return forces, generalized_forces(stepper.builder, cb, forces), feats


def generalized_forces(builder, cb, forces: np.ndarray) -> np.ndarray:
    """[B, nv] ``J^T F`` of per-contact forces [E, 3] (on the object, world axes; the other body gets -F at the same
    point), as the law's solve forms its own (which adds its torques' ``J_w^T T``): every contact model's forces reach
    MuJoCo the same way."""
    J = contact_jacobians(builder, cb)  # [E, 3, nv]
    q = np.zeros((cb.num_envs, J.shape[2]))
    np.add.at(q, cb.env, np.einsum("eiv,ei->ev", J, np.nan_to_num(forces)))  # a bad env's NaN: not applied anyway
    return q


def _bad_force_envs(m, stepper, cb, forces: np.ndarray) -> np.ndarray:
    """[B] bool: environments with a non-finite force or one above ``max_force`` object weights (raises with
    ``on_bad_force="raise"``; counted and warned about once otherwise)."""
    bad_env = np.zeros(cb.num_envs, dtype=bool)
    if not len(forces):
        return bad_env
    g = m.opt.gravity
    limit = stepper.max_force * max(float(m.body_mass[stepper.builder.object_body]) * math.sqrt(float(g @ g)), 1e-12)
    # squared norms against the squared limit: no square root on the usual step; NaN compares False: caught too
    if (np.einsum("ej,ej->e", forces, forces) <= limit * limit).all():
        return bad_env
    norm = np.sqrt(np.einsum("ej,ej->e", forces, forces))
    bad_edge = ~(norm <= limit)
    step_no = stepper.step_number
    e = int(np.flatnonzero(bad_edge)[0])
    env = int(cb.env[e])
    body = stepper.body_name(int(cb.node[e]) % cb.K)
    stepper.count("bad_force_events", int(bad_edge.sum()))
    msg = (f"contact model force {norm[e]:.4g} N on the object from body '{body}' (env {env}, step {step_no}) is "
           f"{'not finite' if not np.isfinite(norm[e]) else f'above the limit {limit:.4g} N ({stepper.max_force:g} x the object weight)'}")
    if stepper.on_bad_force == "raise":
        raise SurrogateStepError(msg + "; pass on_bad_force='fallback' to continue with analytic contact there",
                                 env=env, step=step_no, body=body, force=float(norm[e]))
    bad_env[cb.env[bad_edge]] = True
    stepper.warn_once("fallback", msg + "; falling back to analytic contact for that env and step "
                                         "(counted in stats()['fallbacks'])")
    return bad_env


def _check_inputs(stepper, cb, feats) -> None:
    """Count (and warn once about) inputs outside the model's training range."""
    # given the features (``_contact_forces``), the check reads only the batch's arrays: no torch graph
    r = stepper.input_range.check(cb.graph, None, None) if feats is None else stepper.input_range.check(cb.arrays, *feats)
    ne, nn = int(r["edge"].sum()), int(r["node"].sum())
    if not (ne or nn):
        return
    stepper.count("ood_edges", ne)
    stepper.count("ood_nodes", nn)
    envs = np.zeros(cb.num_envs, dtype=bool)
    envs[cb.env[r["edge"]]] = True
    envs[np.flatnonzero(r["node"]) // cb.K] = True  # node i * K + k is environment i's
    stepper.count("ood_env_steps", int(envs.sum()))
    stepper.count_out_of_range(r["edge_features"], r["node_features"])
    stepper.warn_once("ood", f"contact model inputs outside its training range (> {stepper.input_range.k:g} std) "
                             f"at step {stepper.step_number}: {ne} contacts, {nn} bodies; counted in stats()['ood_*']")


def node_wrenches(cb, forces: np.ndarray) -> np.ndarray:
    """[B, K, 6] per node body the contact wrench (force N, torque about the body's COM N m; world axes): F at
    each contact on the object, -F on the other body (equal and opposite). ``forces`` [E, 3], or [E, 6] with each
    contact's torque about its point (a law's torsional and rolling friction), added to the moments."""
    n = cb.num_envs * cb.K
    if not len(forces):
        return np.zeros((cb.num_envs, cb.K, 6))
    f, t = forces[:, :3], (forces[:, 3:] if forces.shape[1] == 6 else 0.0)
    # the object's node (env * K) and the other body's (env * K + k, k >= 1) never coincide: one sum per column
    # over both sides (bincount: ~20x faster than np.add.at, the same sums in the same order)
    index = np.concatenate([cb.env * cb.K, cb.node])
    values = np.concatenate([np.concatenate([f, cross(cb.r_obj, f) + t], axis=1),
                             -np.concatenate([f, cross(cb.r_oth, f) + t], axis=1)])
    W = np.stack([np.bincount(index, weights=values[:, j], minlength=n) for j in range(6)], axis=1)
    return W.reshape(cb.num_envs, cb.K, 6)


def _fallback(m, datas, stepper, bad_env) -> None:
    """The environments with a bad force take this step with analytic contact."""
    # mj_step1 changed no state (qpos, qvel, act, time), so the analytic step can start over.
    ids = stepper.scene.owned_pair_ids
    saved = m.pair_margin[ids].copy(), m.pair_gap[ids].copy()
    try:
        stepper.set_mode(m, "analytic")
        for i in np.flatnonzero(bad_env):
            mujoco.mj_step(m, datas[i])
    finally:
        m.pair_margin[ids], m.pair_gap[ids] = saved
    stepper.fell_back(np.flatnonzero(bad_env))


def contact_stage(m, datas, stepper, views):
    """Steps 2-4 of a surrogate physics step, after ``mj_step1``: the batched contacts (``views``: the batch's
    ``DataViews``, or a ``copies.CopiesViews`` with ``datas`` the ``Copies`` and ``m`` the scene's model), one call of
    the contact model, the force guards and the input check; the last step's forces kept (zero, not NaN, for the
    environments with a bad force). Returns (ContactBatch, forces [E, 3], their generalized forces [B, nv] (None
    without contacts), bad_env [B] bool, the clock after each of the three stages)."""
    cb = stepper.builder.build(m, datas, dtype=stepper.graph_dtype, dynamics=True, views=views,
                               graph=needs_graph(stepper), patch=getattr(stepper.contact_model, "patch", None))
    E = cb.num_contacts
    t_graph = time.perf_counter()
    wrench, qfrc, feats = _contact_forces(m, datas, stepper, cb) if E else (np.zeros((0, 3)), None, None)
    forces = wrench[:, :3]  # the guards and the callers read forces; the reported wrenches the torques too
    if not E and stepper.history is not None:  # no contact continues into the next step (law_solve stores the rest)
        stepper.history.clear()
    t_model = time.perf_counter()
    bad_env = _bad_force_envs(m, stepper, cb, forces)
    if stepper.input_range is not None and stepper.check_inputs and E:
        _check_inputs(stepper, cb, feats)
    t_checks = time.perf_counter()
    stepper.set_last(cb, np.where(bad_env[cb.env][:, None], 0.0, wrench) if bad_env.any() else wrench)  # NaN-free
    return cb, forces, qfrc, bad_env, (t_graph, t_model, t_checks)


def physics_step_surrogate(m, datas, stepper) -> None:
    """One physics step of the batch with the contact model owning its pairs (module docstring, steps 1-6)."""
    t0 = time.perf_counter()
    views = stepper.views  # the batch's array views (``views_for``, made by ``step`` for this batch)
    law = stepper.law_model
    users = []
    for d, applied in zip(datas, views.qfrc_applied):
        # The user's generalized forces act in this step (the law's solve sees them in qacc_smooth); the contact
        # model's J^T F is added to them for mj_step2 only, and the user's value is back after it (``user_forces``):
        # no step, and no model that reads the MjData (MuJoCoContact), sees a previous step's contact forces.
        users.append(applied.copy() if applied.any() else None)  # None: zero, the project's scenes
        mujoco.mj_step1(m, d)
        if law:  # the smooth acceleration the law's solve needs (law_solve), while this MjData is in the cache
            mujoco.mj_fwdActuation(m, d)
            mujoco.mj_fwdAcceleration(m, d)
    t1 = time.perf_counter()
    cb, forces, qfrc, bad_env, (t2, t3, t4) = contact_stage(m, datas, stepper, views)
    E = cb.num_contacts
    fallback = bool(bad_env.any())
    t5 = time.perf_counter()
    if fallback:
        _fallback(m, datas, stepper, bad_env)
    t6 = time.perf_counter()
    good = np.flatnonzero(~bad_env).tolist() if fallback else range(len(datas))
    if qfrc is not None:  # J^T F: one write per environment, right before its mj_step2
        applied = views.qfrc_applied
        if fallback:
            datas_good, applied, qfrc = [datas[i] for i in good], [applied[i] for i in good], qfrc[good]
            users = [users[i] for i in good]
        else:
            datas_good = datas
        for d, a, q, u in zip(datas_good, applied, list(qfrc), users):
            user_forces(a, u, q)
            mujoco.mj_step2(m, d)
            user_forces(a, u)
    else:
        for i in good:
            mujoco.mj_step2(m, datas[i])
    t7 = time.perf_counter()
    stepper.count("contacts", E)
    stepper.add_times(phase_times(t0, t1, t2, t3, t4, t5, t6, t7))


def user_forces(applied: np.ndarray, user: np.ndarray | None, qfrc: np.ndarray | None = None) -> None:
    """Write ``qfrc_applied``: the user's value ``user`` (None: zero) plus the contact model's ``qfrc`` (None: none).
    Without a user value the contact model's forces are copied, not summed: the same bits as before user forces
    were kept (a sum with zero would turn a -0.0 into 0.0)."""
    if user is None:
        if qfrc is None:
            applied.fill(0.0)
        else:
            applied[:] = qfrc
    elif qfrc is None:
        applied[:] = user
    else:
        np.add(user, qfrc, out=applied)


def phase_times(*clock) -> dict:
    """{phase: s} of one surrogate physics step from the clock read after each of its phases (``PHASES``' order)."""
    return {k: b - a for k, a, b in zip(("step1", "graph", "network", "checks", "apply", "fallback", "step2"), clock, clock[1:])}
