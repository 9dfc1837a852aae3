"""Policy rollouts under analytic and learned contact: success and slip rates of a scripted grasp
and of the best grasp a CEM planner finds, for both contact modes.

    python eval/policy_rollouts.py                       # parallel jaw, 2 held-out objects, 2 poses each
    python eval/policy_rollouts.py --hand three_finger --objects 2 --envs 2 --cem-iterations 0
    python eval/policy_rollouts.py --checkpoint checkpoints/rig_default

The surrogate is ``--checkpoint``, by default the released grasp model ``checkpoints/rig_default`` (trained with
a hand's pads); there is no fallback: a missing checkpoint is an error. The analytic rows use no checkpoint.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np

from surrogate.envs import GraspVectorEnv
from surrogate.objects import load_split
from surrogate.paths import release_checkpoint
from surrogate.policies import GraspParams, ScriptedGraspPolicy, cem_grasp, rollout
from surrogate.rig.scripts import UngraspableObject


def default_checkpoint() -> Path:
    return release_checkpoint("rig_default")  # trained with a hand's pads (the cube release never saw one)


def evaluate(args) -> list[dict]:
    from surrogate.model.checkpoint import load_checkpoint

    model = load_checkpoint(args.checkpoint)[0]
    objs = load_split(args.split)[: args.objects]
    rows = []
    for contact in ("analytic", "surrogate"):
        acc = {"scripted": [], "cem": []}
        ood = contacts = fallbacks = 0
        t0 = time.perf_counter()
        learned = model if contact == "surrogate" else None  # analytic contact takes no model (ConfigError)
        for obj in objs:
            venv = GraspVectorEnv(args.envs, copies=False, hand=args.hand, object=obj, contact=contact,
                                  contact_model=learned, max_episode_steps=None)
            try:
                res = rollout(venv, ScriptedGraspPolicy(venv.task, GraspParams()), seed=args.seed, duration=args.duration)
            except UngraspableObject:
                continue
            acc["scripted"].append(res)
            st = res["stepper"]
            ood, contacts, fallbacks = ood + st["ood_edges"], contacts + st["contacts"], fallbacks + st["fallbacks"]
            if args.cem_iterations:
                cv = GraspVectorEnv(args.population, copies=False, hand=args.hand, object=obj, contact=contact,
                                    contact_model=learned, max_episode_steps=None)
                best = cem_grasp(cv, iterations=args.cem_iterations, elites=max(2, args.population // 4),
                                 seed=args.seed, duration=args.duration)["best"]
                acc["cem"].append(rollout(venv, ScriptedGraspPolicy(venv.task, best), seed=args.seed,
                                          duration=args.duration))
        for policy, results in acc.items():
            if not results:
                continue
            succ = np.concatenate([r["success"] for r in results])
            lifted = np.concatenate([r["lifted"] for r in results])
            slip = np.concatenate([r["slipped"] for r in results])
            rows.append({"contact": contact, "policy": policy, "episodes": len(succ), "success": succ.mean(),
                         "slip": slip[lifted].mean() if lifted.any() else float("nan"),
                         "ood": ood / max(contacts, 1) if contact == "surrogate" else 0.0,
                         "fallbacks": fallbacks, "seconds": time.perf_counter() - t0})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hand", default="parallel_jaw", choices=["parallel_jaw", "three_finger"])
    p.add_argument("--split", default="heldout")
    p.add_argument("--objects", type=int, default=2, help="first N objects of the split")
    p.add_argument("--envs", type=int, default=2, help="episodes (object poses) per object, batched")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--duration", type=float, default=2.5, help="s per episode")
    p.add_argument("--cem-iterations", type=int, default=1, help="0 skips the planner")
    p.add_argument("--population", type=int, default=4)
    p.add_argument("--checkpoint", default=str(default_checkpoint()))
    args = p.parse_args(argv)
    warnings.simplefilter("once")
    rows = evaluate(args)
    print(f"hand {args.hand}, split {args.split} ({args.objects} objects x {args.envs} poses), checkpoint {args.checkpoint}")
    print("| contact | policy | episodes | success | slip (of lifted) | surrogate inputs out of range | fallbacks |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['contact']} | {r['policy']} | {r['episodes']} | {r['success']:.2f} | {r['slip']:.2f} | "
              f"{r['ood']:.0%} | {r['fallbacks']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
