"""Which friction cone `elbow-real`'s few-shot identification would choose if the tracker's yaw did not count.

    python eval/cone_choice.py [--sizes 8 16 31] [--angles 22.5 45 67.5]

MuJoCo's identification fits each friction cone by differential evolution and keeps the cone with the lower training
loss (``identify.identify``). A pyramidal cone's forces depend on the contact frame's tangent axes, which for the
floor follow the world's: its rollouts, and so its loss, change when a toss is turned about the vertical, and the
recordings' yaw is the tracker's, not the object's (`eval/frame_check.py`: a median 16-20 points per toss). This
repeats the suite's few-shot identification on the pool's first N tosses (its settings and seeds: the parameters
are the ledger's) and asks what the choice would be with each cone's training loss averaged over the tosses turned
by ``--angles`` as well as as recorded (MuJoCo's condim-3 pyramid has four edges, so turns by multiples of 90 degrees
leave it unchanged: the default turns lie in between, as `eval/frame_check.py`'s); each cone is then scored on the
30 test tosses, as recorded and averaged over the same turns (the yaw-free score of a row). Printed per N: each
cone's training loss (recorded, averaged), which cone each rule keeps, and the test scores. Writes nothing.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
from pathlib import Path

import numpy as np


@functools.cache  # the studies call it per row and per fold: each script loaded once
def sibling(name: str):
    """The module of ``eval/<name>.py`` (the studies are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def turned_sets(episodes: list, angles: list[float]) -> list[list]:
    """``episodes`` as recorded, then turned about the vertical by each of ``angles`` (deg)."""
    yawed = sibling("frame_check").yawed
    return [episodes] + [[yawed(e, a, f"_yaw{a:g}") for e in episodes] for a in angles]


def scores_by_turn(params, sets: list[list], cfg: dict) -> np.ndarray:
    """[turns, tosses, 2] link 1's position error (% of size) and rotation error (deg) of MuJoCo at ``params``, scored
    by the suite's scorer on each set of ``turned_sets``."""
    from surrogate.bench.cube_real import toss_scorer
    from surrogate.bench.predictors import predict_analytic

    sim = cfg["simulation"]
    out = []
    for eps in sets:
        preds = predict_analytic([params], eps, substeps=sim["substeps"], init_frames=sim["init_frames"])[0]
        out.append([[s["pos_pct_size"], s["rot_deg"]] for s in toss_scorer(eps, cfg).score(preds)])
    return np.asarray(out, float)


def loss(scores: np.ndarray) -> np.ndarray:
    """[turns] MuJoCo's identification loss (``identify.loss_of``) of ``scores_by_turn``'s [turns, tosses, 2]."""
    from surrogate.bench.identify import loss_of

    return loss_of(scores[..., 0] / 100.0, scores[..., 1])


def choice(per_cone: dict) -> tuple[str, str]:
    """(the cone kept by the loss as recorded, the cone kept by the loss averaged over the turns): ``per_cone``
    {cone: [turns] losses, the recorded frame first}."""
    return (min(per_cone, key=lambda c: per_cone[c][0]), min(per_cone, key=lambda c: float(np.mean(per_cone[c]))))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 31], help="the pool's first N tosses (31: all)")
    p.add_argument("--angles", type=float, nargs="+", default=[22.5, 45.0, 67.5],
                   help="turns about the vertical (deg; a four-edged pyramid repeats every 90)")
    args = p.parse_args(argv)
    sens = sibling("elbow_sensitivity")
    from surrogate.bench.analytic import AnalyticParams
    from surrogate.bench.elbow_real import few_shot_identification, identify_on
    from surrogate.parallel import Executor

    cfg, _, pool = sens.suite_tosses("elbow-real", "pool")
    _, _, test = sens.suite_tosses("elbow-real", "test")
    ic = few_shot_identification(cfg)
    test_sets = turned_sets(test, args.angles)
    print(f"turns {', '.join(f'{a:g}' for a in args.angles)} deg; {len(test)} test tosses")
    print("| N | cone | training loss: recorded / averaged over the turns | kept by | test: position % recorded / "
          "averaged | rotation deg recorded / averaged |")
    print("|---|---|---|---|---|---|")
    for n in args.sizes:
        if not 1 <= n <= len(pool):
            p.error(f"--sizes: {n} is not between 1 and {len(pool)}")
        train = pool[:n]
        _, info = identify_on(train, cfg, ic, ex=Executor(progress=False), progress=False, seed=n)
        train_sets = turned_sets(train, args.angles)
        fitted = {c: AnalyticParams.from_json(v["params"]) for c, v in info["per_cone"].items()}
        losses = {c: loss(scores_by_turn(pc, train_sets, cfg)) for c, pc in fitted.items()}
        rules = choice(losses)
        for c, pc in fitted.items():
            t = scores_by_turn(pc, test_sets, cfg)
            kept = " and ".join(r for r, k in zip(("recorded", "averaged"), rules) if k == c) or "-"
            print(f"| {n} | {c} | {losses[c][0]:.4f} / {losses[c].mean():.4f} | {kept} | {t[0, :, 0].mean():.2f} / "
                  f"{t[..., 0].mean():.2f} | {t[0, :, 1].mean():.2f} / {t[..., 1].mean():.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
