"""What the real cube's impacts ask of a law's damping, restarted just before each toss's first impact.

    python eval/cube_impacts.py [--tosses pool|train] [--checkpoint checkpoints/cube_tosses] [--damping 4 16 0.25]

`elbow-real`'s cube-trained rows part from the elbow at its first impact, and a bouncier law (the cube release's
damping divided by 4 or 16) is 2-4 points closer there (`eval/elbow_impacts.py`): the fitted law is more dissipative
than the elbow. Is it more dissipative than the cube it was fitted on, which a cube-only training objective could
then correct? The release was fitted on whole tosses from their first frame, where the outcome of the first impact
scatters; this measures the impact alone, as `eval/elbow_impacts.py` does on the elbow: each toss restarted
``--lead`` frames before its first impact from the benchmarks' first-state estimate on the last free-flight frames,
and each row's error read ``--after-s`` after the impact (the cube's position error in % of its size, the suite's
pose error), with how far its centre rises in that time beside the recording's. Rows: nominal MuJoCo, the release's
law, and the law with its damping divided by each ``--damping`` factor (a factor below 1 is a more dissipative law),
each paired per toss against the release. By default on cube-real's training pool less the release's 64 training
tosses (tosses no cube-trained row was fitted on, none of the suite's test tosses). Writes nothing.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
from pathlib import Path

import numpy as np

from surrogate.metrics import box_corners


@functools.cache  # the studies call it per row and per fold: each script loaded once
def sibling(name: str):
    """The module of ``eval/<name>.py`` (the studies are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cube_tosses(which: str, max_tosses: int | None) -> tuple[dict, list]:
    """(cube-real's config, its training pool less the first 64 tosses (``pool``) or those 64 (``train``))."""
    from surrogate.bench.run import CACHE_DIR
    from surrogate.bench.toss_data import load_tosses
    from surrogate.splits import suite_split
    from surrogate.suites import load_suite

    cfg = load_suite("cube-real")
    ds = load_tosses(cfg["data"]["source"], cache_dir=CACHE_DIR, progress=False)
    eps, sp = suite_split(ds.episodes, cfg["data"], [64])
    by_id = {e.episode_id: e for e in eps}
    seen = set(sp["train"][64])
    ids = sp["train"][64] if which == "train" else [i for i in sp["pool"] if i not in seen]
    return cfg, [by_id[i] for i in ids[:max_tosses]]


def restarts(tosses: list, *, lead: int, init_frames: int) -> tuple[dict, dict]:
    """({id: the recording's first impact frame}, {id: the toss from ``lead`` frames before it}), for the tosses whose
    impact has at least ``lead`` >= ``init_frames`` + 2 frames of flight before it."""
    imp = sibling("elbow_impacts")
    hits, cut = {}, {}
    for e in tosses:
        i = imp.first_impact(box_corners(e.object_pose, e.object.geometry["half_extents"])[..., 2].min(axis=1))
        if i is not None and (r := imp.restarted(e, i, lead, init_frames)) is not None:
            hits[e.episode_id], cut[e.episode_id] = i, r
    return hits, cut


def row_scores(preds: dict, cut: dict, *, lead: int, frames: int) -> list[dict]:
    """Per restarted toss (``cut``, each ``lead`` frames before its recorded impact): {"id", "pos_pct_size": the error
    ``frames`` after the impact, "rise_mm": how far the predicted centre climbs in that time}."""
    imp = sibling("elbow_impacts")
    out = []
    for i, ep in cut.items():
        f = lead + frames
        out.append({"id": i, "pos_pct_size": imp.position_pct(preds[i], ep, f),
                    "rise_mm": 1e3 * imp.rise(preds[i][:, 2], lead, frames)})
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", default="checkpoints/cube_tosses", help="the law rolled out as the release row")
    p.add_argument("--tosses", choices=["pool", "train"], default="pool",
                   help="cube-real's training pool less the release's 64 (default) or those 64")
    p.add_argument("--damping", type=float, nargs="*", default=[4.0, 16.0, 0.25],
                   help="the law's damping divided by these")
    p.add_argument("--after-s", type=float, default=0.1, help="the error read this long after the impact (s)")
    p.add_argument("--lead", type=int, default=7, help="restarts this many frames before the impact")
    p.add_argument("--max-tosses", type=int, default=None, help="the first N tosses only")
    args = p.parse_args(argv)
    sens = sibling("elbow_sensitivity")
    from surrogate.bench.analytic import nominal_params
    from surrogate.bench.predictors import surrogate_predict
    from surrogate.metrics import paired_difference, signed_interval
    from surrogate.model.checkpoint import load_checkpoint

    cfg, tosses = cube_tosses(args.tosses, args.max_tosses)
    sim = cfg["simulation"]
    frames = int(round(args.after_s * tosses[0].provenance.capture_rate_hz))
    _, cut = restarts(tosses, lead=args.lead, init_frames=int(sim["init_frames"]))
    eps = list(cut.values())
    card = load_checkpoint(args.checkpoint)[1]
    base = sens.law_values(args.checkpoint)
    rows = [("nominal MuJoCo", sens.predict_mujoco(nominal_params(eps[0], cfg["baselines"]["nominal"]).friction,
                                                   eps, cfg))]
    for label, f in [("the release", None)] + [(f"the release, damping / {f:g}", f) for f in args.damping]:
        model = sens.law_variant(args.checkpoint, {} if f is None else {"damping": base["damping"] / f})
        rows.append((label, surrogate_predict((model, card), eps, substeps=sim["substeps"],
                                              init_frames=sim["init_frames"], progress=False)[0]))
    scored = {label: row_scores(preds, cut, lead=args.lead, frames=frames) for label, preds in rows}
    recorded = [1e3 * sibling("elbow_impacts").rise(ep.object_pose[:, 2], args.lead, frames) for ep in eps]
    print(f"{len(eps)} of {len(tosses)} {args.tosses} tosses of cube-real restarted {args.lead} frames before their "
          f"first impact; error {args.after_s:g} s ({frames} frames) after it; the law of {args.checkpoint}: damping "
          f"{base['damping']:.4g}")
    print("| row | position % of size at impact + after (mean) | − the release, paired | rise of the centre, mm "
          "(median) |")
    print("|---|---:|---|---:|")
    print(f"| the recording | - | - | {np.median(recorded):.1f} |")
    for label, s in scored.items():
        d = paired_difference(scored["the release"], s, "pos_pct_size")
        diff = "-" if label == "the release" else signed_interval(d["mean"], d["ci95"])
        print(f"| {label} | {np.mean([r['pos_pct_size'] for r in s]):.2f} | {diff} | "
              f"{np.median([r['rise_mm'] for r in s]):.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
