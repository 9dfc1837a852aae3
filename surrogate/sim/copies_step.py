"""The hybrid stepper's physics step on ``Copies`` (B copies of the scene in one ``MjData``): the same steps 1-6
as for separate ``MjData`` (``stepper`` module docstring), with one MuJoCo call for the batch where the separate
path loops over the environments, and the same pieces for everything in between (``hybrid_step``): the contact
model's call, the force guards, the input-range check.

Per physics step with ``contact="surrogate"``: ``mj_step1`` (and, for a law model, ``mj_fwdActuation`` +
``mj_fwdAcceleration`` for its solve) once; the batched graph from the copies' contacts (``copies.CopiesViews``); one
call of the contact model; its generalized forces ``J^T F`` written into the copies' ``qfrc_applied`` in one
assignment (added to the user's, which are back there after the step); ``mj_step2`` once. A copy with a bad force
(``on_bad_force="fallback"``) takes the step with analytic contact: its owned pairs are switched to analytic and
``mj_step1`` runs again for the batch (it changed no state, and the other copies' contacts and rows come out the same),
so that the solver sees that copy's contacts, before the one ``mj_step2``.
"""

from __future__ import annotations

import time

import mujoco
import numpy as np

from .hybrid_step import contact_stage, phase_times, user_forces


def physics_step_surrogate_copies(copies, stepper) -> None:
    """One physics step of all copies with the contact model owning its pairs (module docstring)."""
    m, D = copies.model, copies.data
    law = stepper.law_model
    t0 = time.perf_counter()
    # the user's generalized forces act (``hybrid_step.physics_step_surrogate``): the contact model's are added for
    # mj_step2 only, and the user's value is back after it (no step sees a previous step's contact forces)
    user = D.qfrc_applied.copy().reshape(copies.qfrc_applied.shape) if D.qfrc_applied.any() else None
    mujoco.mj_step1(m, D)
    if law:
        mujoco.mj_fwdActuation(m, D)
        mujoco.mj_fwdAcceleration(m, D)
    t1 = time.perf_counter()
    # sizes, masses and options of one copy: the graph and the law use the scene model's ids
    cb, forces, qfrc, bad_env, (t2, t3, t4) = contact_stage(stepper.scene.model, copies, stepper, copies.views)
    E = cb.num_contacts
    fallback = bool(bad_env.any())
    if qfrc is not None:
        user_forces(copies.qfrc_applied, user, qfrc)
    if fallback:  # the user's forces alone
        copies.qfrc_applied[bad_env] = 0.0 if user is None else user[bad_env]
    t5 = time.perf_counter()
    if fallback:
        _fallback(copies, stepper, bad_env)
    t6 = time.perf_counter()
    mujoco.mj_step2(m, D)
    if qfrc is not None:
        user_forces(copies.qfrc_applied, user)
    t7 = time.perf_counter()
    stepper.count("contacts", E)
    stepper.add_times(phase_times(t0, t1, t2, t3, t4, t5, t6, t7))


def physics_step_analytic_copies(copies, stepper) -> None:
    if stepper.history is not None:  # the contact model's state does not survive MuJoCo's contact
        stepper.history.clear()
    t0 = time.perf_counter()
    mujoco.mj_step(copies.model, copies.data)  # with the user's qfrc_applied, as the separate path
    stepper.add_times({"analytic": time.perf_counter() - t0})
    stepper.set_last(None, None)


def _fallback(copies, stepper, bad_env) -> None:
    """The copies with a bad force take this step with analytic contact (module docstring)."""
    bad = np.flatnonzero(bad_env)
    try:
        copies.set_mode_of(bad, "analytic")
        mujoco.mj_step1(copies.model, copies.data)
    finally:
        copies.set_mode_of(bad, "external", roles=stepper.roles)
    stepper.fell_back(bad)


def reset_bad(copies, stepper, step_no: int, *, inputs: bool) -> None:
    """Reset the copies with a bad state (``Copies`` docstring: MuJoCo's own reset is off for the copies) and count
    them as the separate path counts MuJoCo's resets. ``inputs``: before the step, ``Copies.bad_inputs`` (MuJoCo's
    solve over all copies would spread a NaN to the others; MuJoCo resets a separate ``MjData`` with a bad qpos or
    qvel at the start of its step too); after it, ``Copies.bad_copies`` (a bad qpos, qvel or qacc)."""
    bad = copies.bad_inputs() if inputs else copies.bad_copies()
    if not bad.any():
        return
    envs = np.flatnonzero(bad)
    copies.reset(envs)
    if not inputs:
        mujoco.mj_forward(copies.model, copies.data)
    stepper.was_reset(envs)
    stepper.warn_once("mujoco_reset", f"env {int(envs[0])} reached a bad state (NaN, Inf or huge qpos/qvel/qacc) at "
                                       f"step {step_no}: it went back to the model's initial state; counted in "
                                       f"stats()['mujoco_resets'] and stats()['mujoco_reset_envs']")


def step_copies(m, copies, stepper, *, nstep: int, contact: str) -> None:
    """``stepper.step`` for ``Copies`` (its arguments checked there)."""
    from ..errors import ConfigError

    if m is not copies.model:
        raise ConfigError("step the copies with their own model: step(batch.model, batch, stepper)", key="model")
    if copies.scene is not stepper.scene:  # the same sizes are not enough: the law reads the scene's masses
        raise ConfigError("these copies are of another scene than the stepper's: build both from the same Scene",
                          key="data")
    copies.set_mode("analytic")
    if contact == "surrogate":
        copies.set_mode("external", roles=stepper.roles)
    one = physics_step_surrogate_copies if contact == "surrogate" else physics_step_analytic_copies
    stepper.use_views(copies.views)
    dt = m.opt.timestep
    for _ in range(int(nstep)):
        reset_bad(copies, stepper, stepper.step_number, inputs=True)
        one(copies, stepper)
        copies.time += dt
        reset_bad(copies, stepper, stepper.step_number, inputs=False)
        stepper.count("physics_steps")
        stepper.count("env_steps", copies.copies)
