"""Speed of the hybrid stepper against MuJoCo's analytic contact: environment steps per second.

    python -m surrogate.bench.speed [--batches 1 64 256 1024] [--steps 20] [--checkpoint DIR] [--threads 1]
    python -m surrogate.bench.speed --env [--batches 1 64]      # the Gymnasium environments (``measure_env``)

An environment step here is one physics step of one environment (the Gymnasium environments take
``control_dt / timestep`` of them per action). Every environment starts from the same grasped
state (a parallel jaw holding a box on the table, reached with analytic contact), so both modes
see the same contacts (object-table and pad-object). Both modes are timed on every path: B separate ``MjData``
(a Python loop of MuJoCo calls), B copies of the scene in one ``MjData`` (``sim.copies``: one call per physics step),
and for analytic contact also MuJoCo's own ``rollout``; the ratio is fastest hybrid over fastest analytic.
Per-phase times of the hybrid step (mj_step1, graph build, network, checks, apply, mj_step2) come from
``Stepper.stats``.
"""

from __future__ import annotations

import argparse
import time
import warnings

from ..cli_args import positive_int, refuse_unused
from ..hand_names import CODE_HANDS
from ..paths import release_checkpoint

# MuJoCo, torch and the stepper are imported inside the functions, so that building the
# ``surrogate`` CLI parser (build_parser) stays cheap.
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
DEFAULT_CHECKPOINT = release_checkpoint("rig_default")  # the released grasp surrogate (pads and table) shipped with the package
DEFAULTS = {"batches": [1, 64, 256, 1024], "steps": 20, "hand": "parallel_jaw", "family": "box"}  # of the flags


def grasped_state(scene, *, seconds: float = 1.0):
    """An ``MjData`` of ``scene`` after a scripted analytic close (pads and table in contact)."""
    from ..scenes import hand_ctrl
    from ..sim.stepper import Stepper, step

    m, h = scene.model, scene.hand
    st = Stepper(scene, contact="analytic", num_threads=None)  # the threads are the caller's
    d = scene.make_data()
    dt = m.opt.timestep
    for k in range(int(seconds / dt)):
        t = k * dt
        d.ctrl[scene.hand_actuator_ids] = hand_ctrl(h, base=(0, 0, scene.meta["grasp_base_z"] * min(t / 0.4, 1), 0),
                                                    grip=min(max((t - 0.4) / 0.3, 0.0), 1.0))
        step(m, d, st)
    return d


def measure(contact_model, *, batches=(1, 64, 256, 1024), steps: int = 20, hand: str = "parallel_jaw",
            family: str = "box", seed: int = 0, min_seconds: float = 0.5, clock: str = "wall", threads: int = 1):
    """Env steps per second, analytic and hybrid, per batch size, each on every path a user can take.

    Args:
      contact_model: the surrogate (e.g. a ``ContactLawGNN``).
      batches: numbers of environments stepped together.
      steps: physics steps per timing (repeated until ``min_seconds`` have passed).
      clock: ``wall`` (``time.perf_counter``) or ``cpu`` (``time.process_time``: this process's CPU time, which
        other jobs on a shared machine disturb much less; all paths are timed with the same clock).
      threads: the network's threads (``Stepper(num_threads=...)``: torch's and its compiled copy's BLAS).
    Returns:
      one dict per batch: batch; per path the env steps per second: ``analytic_loop_sps`` (``mj_step`` over B
      ``MjData``, as the stepper's loop runs it), ``analytic_rollout_sps`` (MuJoCo's ``rollout``, C loop, one
      thread), ``analytic_copies_sps`` (``mj_step`` of B copies in one ``MjData``, ``sim.copies``),
      ``hybrid_loop_sps`` (B ``MjData``), ``hybrid_copies_sps`` (``Copies``); ``analytic_sps`` / ``hybrid_sps``
      the fastest of each, ``hybrid_path`` which; ratio (fastest hybrid / fastest analytic); contacts_per_env;
      phases_ms (the fastest hybrid path's per physics step, whole batch).
    """
    import mujoco
    import numpy as np

    from ..objects import make_object
    from ..scenes import build_scene
    from ..sim.copies import Copies
    from ..sim.stepper import Stepper, step

    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {tuple(CLOCKS)}, got {clock!r}")
    timer = CLOCKS[clock]
    scene = build_scene(make_object(family, seed), hand=hand, setting="table")
    m = scene.model
    d0 = grasped_state(scene)
    rows = []
    for B in batches:
        datas = [mujoco.MjData(m) for _ in range(B)]
        for d in datas:
            mujoco.mj_copyData(d, m, d0)
        copies = Copies(scene, B)
        snap = [np.concatenate([d.qpos, d.qvel]) for d in datas]

        def restore(datas=datas, snap=snap, copies=copies, B=B):
            for d, s in zip(datas, snap):
                d.qpos[:], d.qvel[:] = s[:m.nq], s[m.nq:]
                mujoco.mj_forward(m, d)
            for i in range(B):
                copies.set_state(i, d0, forward=False)
            mujoco.mj_forward(copies.model, copies.data)

        out = {"batch": B}
        for mode in ("analytic", "hybrid"):
            for path, model, batch in (("loop", m, datas), ("copies", copies.model, copies)):
                st = Stepper(scene, contact_model if mode == "hybrid" else None,
                             contact="surrogate" if mode == "hybrid" else "analytic", on_bad_force="fallback",
                             num_threads=threads)
                restore()
                with warnings.catch_warnings():
                    # out-of-range inputs are expected with a toss model on pads; speed is all we measure
                    warnings.simplefilter("ignore")
                    step(model, batch, st, nstep=1)  # warm-up (allocations, torch kernels)
                    st.reset_stats()
                    n, t0 = 0, timer()
                    while n == 0 or timer() - t0 < min_seconds:
                        step(model, batch, st, nstep=steps)
                        n += steps
                dt = timer() - t0
                out[f"{mode}_{path}_sps"] = B * n / dt
                if mode == "hybrid":
                    s = st.stats()
                    out[f"contacts_per_env_{path}"] = s["contacts"] / max(s["env_steps"], 1)
                    out[f"phases_ms_{path}"] = {k: 1e3 * v / n for k, v in s["time_s"].items() if v > 0}
        # the analytic side on its fastest path: the loops above or MuJoCo's own rollout (C loop, one thread)
        out["analytic_rollout_sps"] = _rollout_sps(scene, datas, snap, steps=steps, min_seconds=min_seconds, timer=timer)
        out["analytic_sps"] = max(out["analytic_loop_sps"], out["analytic_rollout_sps"], out["analytic_copies_sps"])
        path = "copies" if out["hybrid_copies_sps"] >= out["hybrid_loop_sps"] else "loop"
        out["hybrid_path"], out["hybrid_sps"] = path, out[f"hybrid_{path}_sps"]
        out["contacts_per_env"], out["phases_ms"] = out[f"contacts_per_env_{path}"], out[f"phases_ms_{path}"]
        out["ratio"] = out["hybrid_sps"] / out["analytic_sps"]
        rows.append(out)
    return rows


def _rollout_sps(scene, datas, snap, *, steps: int, min_seconds: float, timer) -> float:
    """Env steps per second of ``mujoco.rollout`` (analytic contact, one thread) from the same states."""
    import mujoco
    import numpy as np
    from mujoco import rollout

    from ..sim.stepper import Stepper

    m = scene.model
    Stepper(scene, contact="analytic", num_threads=None).set_mode(m, "analytic")
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    d = datas[0]
    states = []
    for s in snap:
        d.qpos[:], d.qvel[:] = s[:m.nq], s[m.nq:]
        mujoco.mj_forward(m, d)
        st = np.empty(mujoco.mj_stateSize(m, spec))
        mujoco.mj_getState(m, d, st, spec)
        states.append(st)
    x0 = np.stack(states)
    work = mujoco.MjData(m)
    rollout.rollout(m, work, x0, nstep=1)  # warm-up
    n, t0 = 0, timer()
    while n == 0 or timer() - t0 < min_seconds:
        rollout.rollout(m, work, x0, nstep=steps)
        n += steps
    return len(snap) * n / (timer() - t0)


def measure_env(contact_model, *, batches=(1, 64), hand: str = "parallel_jaw", family: str = "box", seed: int = 0,
                min_seconds: float = 2.0, clock: str = "wall", threads: int = 1) -> list[dict]:
    """Environment steps per second of the Gymnasium environments under uniform random actions, analytic and
    surrogate contact side by side.

    An environment step here is one ``step`` of one environment (``control_dt`` = 20 ms, 10 physics steps). Batch 1 is
    the single ``GraspEnv``; a batch B > 1 is ``GraspVectorEnv(B)`` on copies (``copies=True``, what
    ``gymnasium.make_vec`` gives) and on B ``MjData`` (``copies=False``, the vector env before the copies). Episodes
    truncate at 150 steps and autoreset as the environments do (the single env is reset by hand on its end).

    Returns:
      one dict per batch: batch; ``{contact}_{path}_sps`` for contact in analytic / surrogate and path ``single``
      (batch 1) or ``copies`` / ``mjdata``; ``ratio`` the surrogate's over analytic contact's, each on its fastest
      path.
    """
    from ..envs import GraspEnv, GraspVectorEnv

    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {tuple(CLOCKS)}, got {clock!r}")
    timer = CLOCKS[clock]
    rows = []
    for B in batches:
        out = {"batch": int(B)}
        paths = ("single",) if B == 1 else ("copies", "mjdata")
        for contact in ("analytic", "surrogate"):
            model = contact_model if contact == "surrogate" else None
            for path in paths:
                kw = {"hand": hand, "object": family, "contact": contact, "contact_model": model,
                      "stepper_options": {"num_threads": threads}}
                env = GraspEnv(**kw) if path == "single" else GraspVectorEnv(B, copies=path == "copies", **kw)
                out[f"{contact}_{path}_sps"] = _env_sps(env, B, seed=seed, min_seconds=min_seconds, timer=timer)
                env.close()
        for contact in ("analytic", "surrogate"):
            out[f"{contact}_sps"] = max(out[f"{contact}_{p}_sps"] for p in paths)
        out["ratio"] = out["surrogate_sps"] / out["analytic_sps"]
        rows.append(out)
    return rows


def _env_sps(env, B: int, *, seed: int, min_seconds: float, timer) -> float:
    """Environment steps per second of ``env`` (B environments) under seeded uniform random actions."""
    import numpy as np

    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    shape = env.action_space.shape
    single, steps = B == 1 and not hasattr(env, "num_envs"), 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # out-of-range contacts of random actions: speed is all we measure
        env.step(rng.uniform(-1, 1, size=shape).astype(np.float32))  # warm-up
        t0 = timer()
        while steps == 0 or timer() - t0 < min_seconds:
            for _ in range(10):
                res = env.step(rng.uniform(-1, 1, size=shape).astype(np.float32))
                steps += 1
                if single and (res[2] or res[3] or env.task.steps[0] >= 150):
                    env.reset()
        return B * steps / (timer() - t0)


def format_env_table(rows) -> str:
    lines = ["| envs | analytic steps/s | surrogate steps/s | surrogate / analytic (fastest of each) |",
             "|---:|---:|---:|---:|"]
    for r in rows:
        if r["batch"] == 1:
            a, s = f"{r['analytic_single_sps']:,.0f} (single env)", f"{r['surrogate_single_sps']:,.0f} (single env)"
        else:
            a = f"{r['analytic_copies_sps']:,.0f} copies / {r['analytic_mjdata_sps']:,.0f} MjData"
            s = f"{r['surrogate_copies_sps']:,.0f} copies / {r['surrogate_mjdata_sps']:,.0f} MjData"
        lines.append(f"| {r['batch']} | {a} | {s} | {r['ratio']:.2f} |")
    return "\n".join(lines)


def format_table(rows) -> str:
    lines = ["| batch | analytic steps/s (loop / mujoco.rollout / copies) | hybrid steps/s (loop / copies) | "
             "hybrid / analytic (fastest of each) | contacts/env |",
             "|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['batch']} | {r['analytic_loop_sps']:,.0f} / {r['analytic_rollout_sps']:,.0f} / "
                     f"{r['analytic_copies_sps']:,.0f} | {r['hybrid_loop_sps']:,.0f} / {r['hybrid_copies_sps']:,.0f} | "
                     f"{r['ratio']:.2f} | {r['contacts_per_env']:.1f} |")
    lines.append("")
    lines.append("hybrid phases, ms per physics step of the whole batch (loop | copies):")
    for r in rows:
        lines.append(f"  batch {r['batch']}: " + ", ".join(f"{k} {v:.2f}" for k, v in r["phases_ms_loop"].items())
                     + " | " + ", ".join(f"{k} {v:.2f}" for k, v in r["phases_ms_copies"].items()))
    return "\n".join(lines)


def check_args(parser: argparse.ArgumentParser, args) -> None:
    """Refuse the flags of another timing: the Jaco's is batch 1 of its own scene, the environments' take no
    ``--steps``."""
    if args.robot == "jaco":
        refuse_unused(parser, args, "--robot jaco", ("--env", "--hand", "--family", "--batches", "--steps"))
    elif args.env:
        refuse_unused(parser, args, "--env", ("--steps",))


def build_parser(p: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = p or argparse.ArgumentParser(prog="surrogate speed", description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=positive_int, nargs="+",
                   help="batch sizes to time (default 1 64 256 1024; not with --robot jaco: batch 1)")
    p.add_argument("--steps", type=positive_int, help="physics steps per timed chunk (default 20; not with --env or "
                                                      "--robot jaco)")
    p.add_argument("--checkpoint", default=str(DEFAULT_CHECKPOINT),
                   help="surrogate checkpoint of the hybrid stepper (default: the released rig_default shipped with the package)")
    p.add_argument("--threads", type=positive_int, default=1,
                   help="the network's threads: torch's and its compiled copy's BLAS (default 1; MuJoCo runs on one)")
    p.add_argument("--hand", choices=list(CODE_HANDS), help="hand model (default parallel_jaw; the Jaco: --robot jaco)")
    p.add_argument("--family", help="procedural object family held in the grip (default box; not with --robot jaco)")
    p.add_argument("--min-seconds", type=float, default=None,
                   help="time each batch size for at least this long (default 0.5; 2 with --env)")
    p.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                   help="wall time (default) or this process's CPU time (steadier on a machine other jobs share)")
    p.add_argument("--json", action="store_true", help="print the rows as one JSON object (for scripts) instead of the table")
    p.add_argument("--robot", choices=["gripper", "jaco"], default="gripper",
                   help="gripper: the built-in hands (--hand); jaco: the Kinova Jaco arm and hand of dm_control holding a "
                        "held-out object, batch 1 (assets: `surrogate jaco --help`)")
    p.add_argument("--env", action="store_true",
                   help="time the Gymnasium environments instead (random actions; batch 1: the single env, B > 1: "
                        "the vector env on copies and on B MjData; --min-seconds default 2 there)")
    p.set_defaults(check_args=lambda a: check_args(p, a))  # run by the ``surrogate`` command after parsing
    return p


def run(args) -> list[dict]:
    import torch

    from ..model.checkpoint import load_checkpoint

    for key, default in DEFAULTS.items():  # None: not given (check_args refuses the flags a timing ignores)
        if getattr(args, key, None) is None:
            setattr(args, key, default)
    torch.set_num_threads(args.threads)
    if args.checkpoint is None:
        args.checkpoint = str(DEFAULT_CHECKPOINT)
    model = load_checkpoint(args.checkpoint)[0]
    clock = getattr(args, "clock", "wall")
    env = getattr(args, "env", False)
    if getattr(args, "robot", "gripper") == "jaco":
        return _jaco(model, args, clock)
    if env:
        rows = measure_env(model, batches=args.batches, hand=args.hand, family=args.family, clock=clock,
                           min_seconds=args.min_seconds if args.min_seconds is not None else 2.0, threads=args.threads)
    else:
        rows = measure(model, batches=args.batches, steps=args.steps, hand=args.hand, family=args.family,
                       min_seconds=args.min_seconds if args.min_seconds is not None else 0.5, clock=clock,
                       threads=args.threads)
    if getattr(args, "json", False):
        import json

        out = {"checkpoint": str(args.checkpoint), "threads": args.threads, "hand": args.hand, "clock": clock,
               "object": args.family, "env": env, "rows": rows}
        print(json.dumps(out))
        return rows
    print(f"checkpoint {args.checkpoint}, torch threads {args.threads}, hand {args.hand}, object {args.family}, "
          f"clock {clock}" + (", Gymnasium environments, uniform random actions" if env else ""))
    print(format_env_table(rows) if env else format_table(rows))
    return rows


def _jaco(model, args, clock: str) -> list[dict]:
    from .jaco_grasp import jaco_speed

    row = jaco_speed(model, min_seconds=args.min_seconds if args.min_seconds is not None else 1.0, timer=CLOCKS[clock],
                     threads=args.threads)
    if getattr(args, "json", False):
        import json

        print(json.dumps({"checkpoint": str(args.checkpoint), "threads": args.threads, "clock": clock, "rows": [row]}))
        return [row]
    print(f"checkpoint {args.checkpoint}, torch threads {args.threads}, Kinova Jaco (dm_control) holding {row['object']}, "
          f"{row['contacts']} owned contacts, clock {clock}")
    print("| robot | analytic steps/s | hybrid steps/s | hybrid / analytic |\n|---|---:|---:|---:|")
    print(f"| jaco | {row['analytic']:,.0f} | {row['surrogate']:,.0f} | {row['ratio']:.2f} |")
    return [row]


def main(argv=None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    check_args(p, args)
    run(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
