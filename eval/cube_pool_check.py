"""Compare cube-toss checkpoints on pool tosses that neither trained nor selected them.

``cube-real``'s pool (every toss but its 120 test tosses) is shuffled once; a checkpoint trained with
``data.bench_split: {suite: cube-real, size: N}`` saw the first N tosses and was selected on the next
``val_min``. This rolls out (the hybrid stepper, the benchmarks' first state) the tosses of the first
``--pool-size`` that are in neither, and prints each checkpoint's means and the paired differences
against the first one; the test tosses are never touched.

    python eval/cube_pool_check.py runs/prev_cube_release checkpoints/cube_tosses --size 64 --pool-size 256
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from surrogate.learn.episodes import load_split
from surrogate.learn.lightning import DATA_DEFAULTS
from surrogate.learn.objective import stepper_scores
from surrogate.metrics import paired_difference
from surrogate.model.checkpoint import load_checkpoint


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoints", nargs="+", help="checkpoint folders; the first is the reference")
    p.add_argument("--data", default="datasets/generated/contactnets_cube")
    p.add_argument("--size", type=int, default=64, help="the training size whose training and validation tosses are left out")
    p.add_argument("--pool-size", type=int, default=256, help="tosses of the pool to draw from (training + validation split of this size)")
    p.add_argument("--val-min", type=int, default=50)
    p.add_argument("--rot-weight", type=float, default=0.25, help="score = position %% + w x rotation deg")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    cfg = {**DATA_DEFAULTS, "root": a.data, "val_min": a.val_min}
    cap, tr, va = load_split({**cfg, "bench_split": {"suite": "cube-real", "size": a.size}})
    _, tr2, va2 = load_split({**cfg, "bench_split": {"suite": "cube-real", "size": a.pool_size}})
    seen = set(tr) | set(va)
    by = {e.episode_id: e for e in cap.episodes}
    eps = [by[i] for i in tr2 + va2 if i not in seen]
    rows = {}
    for ck in a.checkpoints:
        model, card = load_checkpoint(ck)
        d = card.get("data", {})
        r = stepper_scores(model, eps, cap.meta, margin=float(d.get("margin_m", 0.02)),
                           substeps=int(d.get("substeps", 4)), init_frames=5)
        for x in r:
            x["score"] = x["pos_pct"] + a.rot_weight * x["rot_deg"]
        rows[ck] = r
    ref = a.checkpoints[0]
    out = {"tosses": len(eps), "left_out": f"training and validation tosses of size {a.size}", "models": {}}
    for ck, r in rows.items():
        out["models"][ck] = {k: float(np.mean([x[k] for x in r])) for k in ("pos_pct", "rot_deg", "score")}
        if ck != ref:
            out["models"][ck]["paired_minus_first"] = {k: paired_difference(rows[ref], r, k) for k in ("score", "pos_pct", "rot_deg")}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
