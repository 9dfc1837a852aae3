"""Does `elbow-real`'s few-shot fine-tune carry to elbow tosses it did not see? Folds of the training pool.

    python eval/elbow_fewshot_folds.py [--sizes 8 16] [--checkpoint checkpoints/cube_tosses]

The suite fine-tunes the cube release on the first N tosses of its few-shot pool and scores it on its 30 test tosses,
once per N. This repeats the fine-tune (the suite's own settings, ``few_shot.surrogate``) inside the pool, where no
test toss is touched: for each N, on the pool's first N tosses and on its last N, each scored on the other pool
tosses against the release it started from, paired per toss. Two folds per N give a second and third look at the
same question with other tosses: whether fine-tuning on N tosses of an object lowers the error on its other tosses.
Writes nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path


def sibling(name: str):
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def folds(pool: list, n: int) -> list[tuple[str, list, list]]:
    """(label, training tosses, held-out tosses): the first ``n`` and the last ``n`` of ``pool``, each against the
    rest."""
    return [(f"first {n}", pool[:n], pool[n:]), (f"last {n}", pool[-n:], pool[:-n])]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", default="checkpoints/cube_tosses", help="the release the suite fine-tunes")
    p.add_argument("--sizes", type=int, nargs="+", default=[8, 16], help="training tosses per fold")
    args = p.parse_args(argv)
    sens = sibling("elbow_sensitivity")
    from surrogate.bench.cube_real import toss_scorer
    from surrogate.bench.elbow_fewshot import fit_on_tosses, surrogate_settings
    from surrogate.bench.predictors import DEFAULT_MARGIN
    from surrogate.metrics import paired_difference, signed_interval
    from surrogate.model.checkpoint import load_checkpoint

    cfg, _, pool = sens.suite_tosses("elbow-real", "pool")
    sim, settings = cfg["simulation"], surrogate_settings(cfg)
    release, card = load_checkpoint(args.checkpoint)
    margin = float(card.get("data", {}).get("margin_m", DEFAULT_MARGIN))
    print(f"{len(pool)} pool tosses of elbow-real; fine-tune: {settings['steps']} steps, lr {settings['lr']}")
    print("| fold | held-out pool tosses | release: position % | fine-tuned | fine-tuned − release, paired | kept step |")
    print("|---|---:|---:|---:|---|---:|")
    for n in args.sizes:
        if not 1 <= n < len(pool):
            p.error(f"--sizes: {n} is not between 1 and {len(pool) - 1}")
        for label, train, held in folds(pool, n):
            fitted, info, _ = fit_on_tosses(release, train, settings, substeps=sim["substeps"],
                                            init_frames=sim["init_frames"], margin=margin, seed=n)
            scorer = toss_scorer(held, cfg)
            before = scorer.score(sens.predict_law(release, held, cfg, margin=margin))
            after = scorer.score(sens.predict_law(fitted, held, cfg, margin=margin))
            d = paired_difference(before, after, "pos_pct_size")
            mean = [sum(s["pos_pct_size"] for s in x) / len(x) for x in (before, after)]
            print(f"| {label} | {len(held)} | {mean[0]:.2f} | {mean[1]:.2f} | {signed_interval(d['mean'], d['ci95'])} "
                  f"| {info['best_step']} of {settings['steps']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
