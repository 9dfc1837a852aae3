"""The release gates of issue 24 on one candidate checkpoint, in one command, each printed with its number.

    python eval/release_gates.py runs/NAME/network --out runs/gates/NAME [--skip policy] [--workers 2]

A candidate that `surrogate release` keeps by the paired rule on a suite still has to pass these before a maintainer
commits it over `checkpoints/rig_default` (docs/contact-model.md):

- **untouched**: the hand held still above a box, a cylinder and a capsule on the table for 60 environment steps
  (1.2 s) in each Gymnasium environment under the candidate: the object moves less than 2 mm, no fallback (the test
  ``test_released_rig_surrogate_leaves_an_untouched_object_at_rest`` holds the release to the same);
- **soak**: scripted grasps of the held-out objects (``bench.soak``, 1,000 steps, 2 copies each) under the candidate
  and under MuJoCo's contact: nothing blows up or leaves the scene, and the dropped fraction of lifted objects is
  within 0.1 of analytic's;
- **policy**: ``surrogate bench policy`` (its own verdict: success and slip within 0.1 of analytic);
- **speed**: ``bench.speed.measure`` at batch 1 and 256 with the candidate (network on): hybrid / analytic >= 0.05
  at 1 and >= 0.5 at 256 (fastest path of each; a wall clock on a shared machine, so the number is printed).

Writes ``OUT/gates.json`` (atomically; ``OUT`` new or an earlier run of this script's) and exits 1 if a gate fails.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ENVS = ("ContactSurrogate/GripperGrasp-v0", "ContactSurrogate/HandGrasp-v0")
FAMILIES = ("box", "cylinder", "capsule")
UNTOUCHED_MAX_MM, DROP_GAP, SPEED_MIN = 2.0, 0.1, {1: 0.05, 256: 0.5}


def held_still(env_id: str, family: str, checkpoint: str, steps: int = 60) -> dict:
    """The hand held still above an object of ``family`` for ``steps`` env steps under the surrogate: {"env",
    "family", "mm" (the object's displacement), "fallbacks", "terminated" (whether any step ended the episode)}."""
    import gymnasium as gym
    import numpy as np

    import surrogate.envs  # noqa: F401  (registers the ids)

    env = gym.make(env_id, object=family, contact="surrogate", checkpoint=checkpoint)
    env.reset(seed=0)
    task = env.unwrapped.task
    d = task.datas[0]
    hold = task.action_from_targets(d.ctrl[task.scene.hand_actuator_ids][None].copy())[0]
    p0, terminated = d.xipos[task.ob].copy(), False
    for _ in range(steps):
        terminated |= bool(env.step(hold)[2])
    row = {"env": env_id, "family": family, "mm": float(np.linalg.norm(d.xipos[task.ob] - p0) * 1e3),
           "fallbacks": int(task.stepper.stats()["fallbacks"]), "terminated": terminated}
    env.close()
    return row


def untouched(checkpoint: str) -> dict:
    """Object displacement (mm) with the hand held still above it for 60 env steps, per environment and family."""
    rows = [held_still(env_id, fam, checkpoint) for env_id in ENVS for fam in FAMILIES]
    ok = all(r["mm"] < UNTOUCHED_MAX_MM and r["fallbacks"] == 0 and not r["terminated"] for r in rows)
    return {"ok": ok, "max_mm": max(r["mm"] for r in rows), "rows": rows}


def soak_gate(checkpoint: str) -> dict:
    """The soak of the held-out objects under the candidate and under analytic contact, dropped fractions compared."""
    from surrogate.bench.soak import soak
    from surrogate.objects import load_split

    out = {}
    for contact in ("surrogate", "analytic"):
        r = soak(checkpoint, load_split("heldout"), steps=1000, contact=contact)
        lifted = sum(o["lifted"] for o in r["objects"])
        dropped = sum(o["dropped"] for o in r["objects"])
        out[contact] = {"ok": bool(r["ok"]), "lifted": int(lifted), "dropped": int(dropped),
                        "dropped_fraction": dropped / lifted if lifted else None, "failures": r["failures"]}
    s, a = out["surrogate"]["dropped_fraction"], out["analytic"]["dropped_fraction"]
    gap = None if s is None or a is None else s - a
    out["dropped_gap"] = gap
    out["ok"] = out["surrogate"]["ok"] and gap is not None and abs(gap) <= DROP_GAP
    return out


def policy_gate(checkpoint: str, out: Path, workers: int) -> dict:
    """``surrogate bench policy`` on the candidate; its ledger's verdict."""
    folder = out / "policy"
    cmd = [sys.executable, "-m", "surrogate.cli", "bench", "policy", "--checkpoint", checkpoint, "--out", str(folder),
           "--no-video", "--backend", "process", "--workers", str(workers)]
    subprocess.run(cmd, check=True)
    result = json.loads((folder / "ledger.json").read_text())["result"]
    return {"ok": result["verdict"] == "supported", "verdict": result["verdict"], "detail": result["detail"],
            "command": " ".join(["surrogate"] + cmd[3:])}


def speed_gate(checkpoint: str) -> dict:
    """Hybrid / analytic env steps per second at batch 1 and 256 (network on, one thread)."""
    from surrogate.bench.speed import measure
    from surrogate.model.checkpoint import load_checkpoint

    rows = measure(load_checkpoint(checkpoint)[0], batches=tuple(SPEED_MIN), min_seconds=2.0)
    ratios = {int(r["batch"]): float(r["ratio"]) for r in rows}
    return {"ok": all(ratios[b] >= m for b, m in SPEED_MIN.items()), "ratio": ratios, "min": SPEED_MIN}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint", help="the candidate checkpoint folder")
    p.add_argument("--out", required=True, help="folder for gates.json and the policy ledger (new or this script's)")
    p.add_argument("--skip", action="append", default=[], choices=["untouched", "soak", "policy", "speed"],
                   help="a gate not to run (reported as skipped; the exit code then covers the others only)")
    p.add_argument("--workers", type=int, default=2, help="policy benchmark worker processes (default 2)")
    args = p.parse_args(argv)
    from surrogate.atomic import write_json_atomic
    from surrogate.errors import OutputError
    from surrogate.model.checkpoint import load_checkpoint

    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not (out / "gates.json").exists():
        raise OutputError("exists, is not empty and holds no gates.json: not this script's folder", file=out)
    out.mkdir(parents=True, exist_ok=True)
    card = load_checkpoint(args.checkpoint)[1]  # its hash checked before anything runs
    gates = {"untouched": lambda: untouched(args.checkpoint), "soak": lambda: soak_gate(args.checkpoint),
             "policy": lambda: policy_gate(args.checkpoint, out, args.workers),
             "speed": lambda: speed_gate(args.checkpoint)}
    report = {"checkpoint": args.checkpoint, "weights_sha256": card.get("weights_sha256"), "gates": {}}
    for name, run in gates.items():
        if name in args.skip:
            report["gates"][name] = {"skipped": True}
            continue
        t0 = time.time()
        report["gates"][name] = {**run(), "wall_s": time.time() - t0}
        write_json_atomic(out / "gates.json", report)  # what finished is kept if a later gate is interrupted
        print(f"{name}: {'pass' if report['gates'][name]['ok'] else 'FAIL'} {_summary(name, report['gates'][name])}",
              flush=True)
    report["ok"] = all(g.get("ok", True) for g in report["gates"].values())
    write_json_atomic(out / "gates.json", report)
    print(f"release gates: {'all pass' if report['ok'] else 'FAILED'} ({out / 'gates.json'})")
    return 0 if report["ok"] else 1


def _summary(name: str, g: dict) -> str:
    if name == "untouched":
        return f"max {g['max_mm']:.2f} mm over {len(g['rows'])} (env, object) pairs (< {UNTOUCHED_MAX_MM} mm)"
    if name == "soak":
        s, a = g["surrogate"], g["analytic"]
        gap = "n/a" if g["dropped_gap"] is None else f"{g['dropped_gap']:+.2f}"
        return (f"surrogate dropped {s['dropped']} of {s['lifted']} lifted, analytic {a['dropped']} of {a['lifted']} "
                f"(gap {gap}, within {DROP_GAP}); failures {s['failures']}")
    if name == "policy":
        return g["detail"]
    return ", ".join(f"batch {b}: {r:.2f} (>= {g['min'][b]})" for b, r in g["ratio"].items())


if __name__ == "__main__":
    sys.exit(main())
