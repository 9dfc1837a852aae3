"""What B copies of a scene inside one ``MjModel`` would save the hybrid stepper's MuJoCo part (option (a) of
the speed issue), measured: ``mj_step1`` + ``mj_step2`` over B separate ``MjData`` (of the one-copy model, so
both sides have the same collisions) against one ``MjData`` of B copies, from the same grasped state with the
owned pairs external (as the hybrid step runs them), and the cost of reading the batch's contact and body
tables both ways.

A cost probe, not a stepper: the copies are attached with ``MjSpec.attach`` (prefix ``c{i}_``) and every geom
gets ``contype = conaffinity = 0`` so that copies never touch (they overlap in space); the scene's explicit
pairs (the object's) are kept per copy, its dynamic collisions (the hand against the table and ground) are
dropped (a stepper would need them as explicit pairs per copy). From a state without such contacts (the grasp)
one copies step equals the separate steps exactly.
"""

from __future__ import annotations

import mujoco
import numpy as np


def copies_model(scene, copies: int) -> mujoco.MjModel:
    """[copies] copies of ``scene`` in one model, owned pairs external; copy i's joints, dofs and actuators are
    block i of ``qpos`` / ``qvel`` / ``ctrl`` (``attach`` keeps each subtree together)."""
    from ..scenes import set_contact_mode

    m = scene.model
    parent = mujoco.MjSpec()
    for k in ("timestep", "integrator", "cone", "solver", "tolerance", "iterations", "gravity"):
        setattr(parent.option, k, getattr(m.opt, k))
    for i in range(copies):
        child = scene.spec.copy()
        for g in child.geoms:
            g.contype, g.conaffinity = 0, 0
        parent.attach(child, frame=parent.worldbody.add_frame(), prefix=f"c{i}_")
    big = parent.compile()
    if big.nq != copies * m.nq or big.nv != copies * m.nv or big.nu != copies * m.nu:
        raise RuntimeError(f"copies model has nq/nv/nu {big.nq}/{big.nv}/{big.nu}, expected {copies} x the scene's")
    set_contact_mode(m, scene, "external")
    for p in range(big.npair):  # the owned pairs of every copy take the scene's external margin and gap
        name = big.pair(p).name.split("_", 1)[1]
        q = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_PAIR, name)
        big.pair_margin[p], big.pair_gap[p] = m.pair_margin[q], m.pair_gap[q]
    return big


def _read_tables(datas) -> int:
    """Copy what the graph builder reads (contacts, body tables, dofs) from every MjData; returns the contact count."""
    n = 0
    for d in datas:
        c = d.contact
        n += len(c.dist)
        for a in (c.geom, c.pos, c.frame, c.dist, d.xipos, d.cvel, d.subtree_com, d.ximat, d.cdof, d.M, d.qvel):
            a.copy()
    return n


def measure_copies(scene, d0: mujoco.MjData, copies: int, *, steps: int = 20, min_seconds: float = 0.5,
                   timer=None) -> dict:
    """Per environment (us): ``mj_step1`` + ``mj_step2`` and reading the tables, separate MjData vs one copies
    MjData, both from ``d0``'s state (restored before each timed step; at least ``steps`` steps and
    ``min_seconds`` of ``timer``); ``max_state_diff`` after one step (0 when the state has no dynamic
    collisions); ``compile_s``; ``contacts_per_env``."""
    import time

    timer = timer or time.process_time
    t0 = time.perf_counter()
    big = copies_model(scene, copies)
    compile_s = time.perf_counter() - t0
    # the separate side steps the one-copy model, so that both sides have the same collisions
    m = copies_model(scene, 1)
    datas = [mujoco.MjData(m) for _ in range(copies)]
    D = mujoco.MjData(big)

    def set_state(d, n):
        d.qpos[:], d.qvel[:], d.ctrl[:], d.act[:] = (np.tile(d0.qpos, n), np.tile(d0.qvel, n), np.tile(d0.ctrl, n),
                                                     np.tile(d0.act, n))
        d.time = d0.time

    def restore():
        for d in datas:
            set_state(d, 1)
        set_state(D, copies)

    def separate():
        for d in datas:
            mujoco.mj_step1(m, d)
            mujoco.mj_step2(m, d)

    def one():
        mujoco.mj_step1(big, D)
        mujoco.mj_step2(big, D)

    restore()
    separate()
    one()
    diff = float(np.abs(np.concatenate([d.qpos for d in datas]) - D.qpos).max())

    def rate(f):
        # every timed step starts from the grasped state: without contact forces the object would fall
        # through the pads within a few steps and the two sides would time other states
        n, total = 0, 0.0
        while n < steps or total < min_seconds:
            restore()
            s = timer()
            f()
            total += timer() - s
            n += 1
        return 1e6 * total / (n * copies)

    out = {"copies": copies, "compile_s": compile_s, "max_state_diff": diff,
           "separate_step_us": rate(separate), "copies_step_us": rate(one),
           "separate_read_us": rate(lambda: _read_tables(datas)), "copies_read_us": rate(lambda: _read_tables([D]))}
    out["contacts_per_env"] = D.ncon / copies
    return out


def format_copies(rows) -> str:
    lines = ["copies in one MjModel (option (a) probe; us per environment, mj_step1 + mj_step2 | reading the tables):"]
    for r in rows:
        lines.append(f"  {r['copies']} envs: separate MjData {r['separate_step_us']:.1f} | {r['separate_read_us']:.2f}, "
                     f"one MjData of copies {r['copies_step_us']:.1f} | {r['copies_read_us']:.2f} "
                     f"(compiled in {r['compile_s']:.1f} s; state difference after one step {r['max_state_diff']:.1e})")
    return "\n".join(lines)
