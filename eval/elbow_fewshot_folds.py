"""Does `elbow-real`'s few-shot fine-tune carry to elbow tosses it did not see? Folds of the training pool.

    python eval/elbow_fewshot_folds.py [--sizes 8 16] [--checkpoint checkpoints/cube_tosses] [--fit-on whole|impacts]
                                       [--identified] [--grid] [--impacts] [--identified-impacts]

The suite fine-tunes the cube release on the first N tosses of its few-shot pool and scores it on its 30 test tosses,
once per N. This repeats the fine-tune (the suite's own settings, ``few_shot.surrogate``) inside the pool, where no
test toss is touched: for each N, on the pool's first N tosses and on its last N, each scored on the other pool
tosses against the release it started from, paired per toss. Two folds per N give a second and third look at the
same question with other tosses: whether fine-tuning on N tosses of an object lowers the error on its other tosses.

``--fit-on`` says what the fine-tune and ``--identified`` both fit of each training toss (default: the suite's
``few_shot.<side>.fit_on`` for each): the whole toss or its window around its first impact (``bench.toss_windows``).
``--identified`` also identifies MuJoCo on each fold's training tosses (the suite's few-shot identification,
``few_shot.identified`` over ``baselines.identified``) and pairs the fine-tuned release against it on the same
held-out tosses: the acceptance's comparison at N = 16, asked again on folds the test split never sees.
``--grid`` also fits the law by a derivative-free search, the grid of ``GRID`` factors of the release's damping,
friction and stiffness (inside the fine-tune's span) whose identification loss on the fold's training tosses is the
lowest, every grid law rolled out once on the whole pool: is it the gradient that does not carry, or the data?
``--impacts`` (with ``--grid``) also picks the grid law by its error just after the first impact of the fold's
training tosses, each cut from ``lead`` frames before the impact to ``after_s`` after it (``impact_windows``), and
``--identified-impacts`` identifies MuJoCo on those cuts: fits on what a few tosses can pin down, scored on the
held-out whole tosses. Writes nothing.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import itertools
from pathlib import Path

import numpy as np

# the grid's factors of the release's values (damping, friction, stiffness): within the suite's span (x4, x2, x4)
GRID = ((0.25, 0.5, 1.0, 2.0), (0.5, 0.71, 1.0, 1.41), (0.25, 1.0, 4.0))


@functools.cache  # the studies call it per row and per fold: each script loaded once
def sibling(name: str):
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def folds(pool: list, n: int) -> list[tuple[str, list, list]]:
    """(label, training tosses, held-out tosses): the first ``n`` and the last ``n`` of ``pool``, each against the
    rest."""
    return [(f"first {n}", pool[:n], pool[n:]), (f"last {n}", pool[-n:], pool[:-n])]


def identification_loss(scores: list[dict]) -> float:
    """MuJoCo's identification loss (``identify.loss_of``: link 1's mean position error in sizes plus its mean
    rotation error in degrees / 100) of the suite's per-toss scores."""
    from surrogate.bench.identify import loss_of

    pos, rot = (np.array([[s[k] for s in scores]]) for k in ("pos_pct_size", "rot_deg"))
    return float(loss_of(pos / 100.0, rot)[0])


def grid_scores(sens, checkpoint, pool: list, cfg: dict, margin: float) -> dict:
    """{(damping, friction, stiffness) factors: the suite's per-toss scores on ``pool``} of every ``GRID`` law."""
    from surrogate.bench.cube_real import toss_scorer

    base, scorer, out = sens.law_values(checkpoint), toss_scorer(pool, cfg), {}
    for f in itertools.product(*GRID):
        values = {k: base[k] * x for k, x in zip(("damping", "friction", "stiffness"), f)}
        out[f] = scorer.score(sens.predict_law(sens.law_variant(checkpoint, values), pool, cfg, margin=margin))
    return out


def grid_pick(grid: dict, train_idx: list[int]) -> tuple:
    """The ``GRID`` factors whose mean identification loss on the pool tosses ``train_idx`` is the lowest."""
    return min(grid, key=lambda f: identification_loss([grid[f][i] for i in train_idx]))


def impact_windows(tosses: list, cfg: dict) -> list:
    """The windows around the first impact of ``tosses`` that have one, as the suite cuts them
    (``elbow_fewshot.fitting_tosses``: ``few_shot.impacts``)."""
    from surrogate.bench.elbow_fewshot import fitting_tosses

    fs = cfg.get("few_shot") or {}
    return fitting_tosses(tosses, {**cfg, "few_shot": {**fs, "identified": {"fit_on": "impacts"}}}, "identified")[0]


def impact_errors(sens, checkpoint, pool: list, cfg: dict, margin: float) -> dict:
    """{GRID factors: {toss id: link 1's position error (% of size) at the end of its impact window, the window's
    ``after_s`` after the recorded first impact}}, for the pool tosses that have one (``impact_windows``)."""
    windows = impact_windows(pool, cfg)
    imp, base, out = sibling("elbow_impacts"), sens.law_values(checkpoint), {}
    for f in itertools.product(*GRID):
        values = {k: base[k] * x for k, x in zip(("damping", "friction", "stiffness"), f)}
        preds = sens.predict_law(sens.law_variant(checkpoint, values), windows, cfg, margin=margin)
        out[f] = {w.episode_id: imp.position_pct(preds[w.episode_id], w, w.num_frames - 1) for w in windows}
    return out


def impact_pick(errors: dict, train_ids: list) -> tuple:
    """The ``GRID`` factors with the lowest mean restarted-impact error (``impact_errors``) on ``train_ids``."""
    return min(errors, key=lambda f: float(np.mean([errors[f][i] for i in train_ids if i in errors[f]])))


def identified_scores(train: list, held: list, cfg: dict, scorer, seed: int) -> list[dict]:
    """MuJoCo identified on ``train`` as the suite's few-shot rows are (its seed: the fold's size), scored on
    ``held``."""
    from surrogate.bench.elbow_real import few_shot_identification, identify_on
    from surrogate.bench.predictors import predict_analytic
    from surrogate.parallel import Executor

    sim = cfg["simulation"]
    params, _ = identify_on(train, cfg, few_shot_identification(cfg), ex=Executor(progress=False), progress=False,
                             seed=seed)
    return scorer.score(predict_analytic([params], held, substeps=sim["substeps"], init_frames=sim["init_frames"])[0])


def mean_pos(scores: list[dict]) -> float:
    return float(np.mean([s["pos_pct_size"] for s in scores]))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", default="checkpoints/cube_tosses", help="the release the suite fine-tunes")
    p.add_argument("--sizes", type=int, nargs="+", default=[8, 16], help="training tosses per fold")
    p.add_argument("--fit-on", choices=("whole", "impacts"), default=None,
                   help="what the fine-tune and --identified both fit of each training toss (default: the suite's "
                        "few_shot.<side>.fit_on): the whole toss, or its window around its first impact")
    p.add_argument("--identified", action="store_true", help="MuJoCo identified on each fold too, paired")
    p.add_argument("--grid", action="store_true", help="the law fitted by a grid search on each fold too, paired")
    p.add_argument("--identified-impacts", action="store_true",
                   help="MuJoCo identified on the fold's training tosses cut to their first impact (impact_windows), "
                        "scored on the held-out whole tosses against the release")
    p.add_argument("--impacts", action="store_true",
                   help="with --grid: also the grid law with the lowest error just after the training tosses' first "
                        "impact, each restarted before it (eval/elbow_impacts.py)")
    args = p.parse_args(argv)
    sens = sibling("elbow_sensitivity")
    from surrogate.bench.cube_real import toss_scorer
    from surrogate.bench.elbow_fewshot import fit_on_tosses, fit_settings, fitting_tosses, surrogate_settings
    from surrogate.bench.predictors import DEFAULT_MARGIN
    from surrogate.metrics import paired_difference, signed_interval
    from surrogate.model.checkpoint import load_checkpoint

    cfg, _, pool = sens.suite_tosses("elbow-real", "pool")
    if args.fit_on:  # both sides
        fs = cfg.get("few_shot") or {}
        cfg = {**cfg, "few_shot": {**fs, **{k: {**(fs.get(k) or {}), "fit_on": args.fit_on}
                                            for k in ("identified", "surrogate")}}}
    for n in args.sizes:
        if not 1 <= n < len(pool):
            p.error(f"--sizes: {n} is not between 1 and {len(pool) - 1}")
    sim, settings = cfg["simulation"], surrogate_settings(cfg)
    release, card = load_checkpoint(args.checkpoint)
    margin = float(card.get("data", {}).get("margin_m", DEFAULT_MARGIN))
    if args.impacts and not args.grid:
        p.error("--impacts needs --grid")
    grid = grid_scores(sens, args.checkpoint, pool, cfg, margin) if args.grid else None
    impacts = impact_errors(sens, args.checkpoint, pool, cfg, margin) if args.impacts else None
    index = {e.episode_id: i for i, e in enumerate(pool)}

    def paired(a, b):
        d = paired_difference(a, b, "pos_pct_size")
        return signed_interval(d["mean"], d["ci95"])

    on = {side: fit_settings(cfg, side)["fit_on"] for side in ("surrogate", "identified")}
    print(f"{len(pool)} pool tosses of elbow-real; fine-tune: {settings['steps']} steps, lr {settings['lr']}, on "
          f"{on['surrogate']} tosses; identified on {on['identified']} tosses; position % of link 1's size over the "
          "held-out pool tosses, paired per toss")
    print("| fold | held out | release | fine-tuned | fine-tuned − release | kept step"
          + (" | identified | fine-tuned − identified" if args.identified else "")
          + (" | grid law (damping, friction, stiffness x) | grid − release" if args.grid else "")
          + (" | grid law picked on impacts | − release" if args.impacts else "")
          + (" | identified on impacts | − release" if args.identified_impacts else "") + " |")
    print("|---|---:|---:|---:|---|---:" + ("|---:|---" if args.identified else "") + ("|---|---" if args.grid else "")
          + ("|---|---" if args.impacts else "") + ("|---:|---" if args.identified_impacts else "") + "|")
    for n in args.sizes:
        for label, train, held in folds(pool, n):
            seen, _ = fitting_tosses(train, cfg, "surrogate")
            fitted, info, _ = fit_on_tosses(release, seen, settings, substeps=sim["substeps"],
                                            init_frames=sim["init_frames"], margin=margin, seed=n)
            scorer = toss_scorer(held, cfg)
            before = scorer.score(sens.predict_law(release, held, cfg, margin=margin))
            after = scorer.score(sens.predict_law(fitted, held, cfg, margin=margin))
            line = (f"| {label} | {len(held)} | {mean_pos(before):.2f} | {mean_pos(after):.2f} | "
                    f"{paired(before, after)} | {info['best_step']} of {settings['steps']}")
            if args.identified:
                ident = identified_scores(fitting_tosses(train, cfg, "identified")[0], held, cfg, scorer, seed=n)
                line += f" | {mean_pos(ident):.2f} | {paired(ident, after)}"
            if args.grid:
                f = grid_pick(grid, [index[e.episode_id] for e in train])
                picked = [grid[f][index[e.episode_id]] for e in held]
                line += f" | {mean_pos(picked):.2f} ({', '.join(f'{x:g}' for x in f)}) | {paired(before, picked)}"
            if args.impacts:
                f = impact_pick(impacts, [e.episode_id for e in train])
                picked = [grid[f][index[e.episode_id]] for e in held]
                line += f" | {mean_pos(picked):.2f} ({', '.join(f'{x:g}' for x in f)}) | {paired(before, picked)}"
            if args.identified_impacts:
                ident = identified_scores(impact_windows(train, cfg), held, cfg, scorer, seed=n)
                line += f" | {mean_pos(ident):.2f} | {paired(before, ident)}"
            print(line + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
