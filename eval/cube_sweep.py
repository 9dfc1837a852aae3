"""The `cube-real` data-efficiency sweep: one surrogate per training size, then the suite on all of them.

Each size N trains ``configs/train/cube_tosses.yaml`` (contact model v2: the passive law fitted on
rollouts, then the network's corrections) on exactly the suite's training set of N tosses
(``data.bench_split``: the first N of the suite's seeded pool; validation is the next 50 tosses of
the pool; the suite's test tosses are never seen), then ``surrogate bench cube-real`` scores every
checkpoint, and the fitted constant law alone as the row ``law_prior``, against the analytic
baselines identified at the same sizes.

    python eval/cube_sweep.py --out runs/cube_sweep                 # sizes 8 ... 256, the full suite
    python eval/cube_sweep.py --sizes 8 32 --suite cube-real-small  # quick

**Clean by default** (issue 25): every size chooses its starting law from its own training tosses (``CLEAN_GRID``:
whole-toss rollouts of at most 64 of them score every combination; the best starts the gradient fit) and selects its
epochs and whether the corrections ship on the same tosses (``bench_split.validation: training``), so the surrogate
at size N has seen exactly N tosses, as MuJoCo identified on the same N has. ``--from-config`` runs the earlier
protocol instead: the config's starting law (chosen on the 64-toss training set) and 50 validation tosses of the pool
beyond the N, which carries information from more tosses than N into the small sizes.

The largest size's checkpoint is the one the verdict uses. ``--gns`` also trains the end-to-end
learned peer (``configs/train/gns_cube.yaml``, GNS style, no MuJoCo) on the same tosses at every size
and scores it as the row ``end_to_end_gns``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from surrogate.paths import config_dir

# The clean sweep's starting-law grid: ranges a reader can choose without the data (a 0.1 m cube on a floor: k of
# 1e3-1e4 F0/L^p, damping 1-3 /V, Coulomb mu 0.1-0.3, friction at low slip 0.4x the kinetic or none); the shape
# constants (exponent 1.5, slip_eps 1e-3 V, stribeck_speed 0.2 V) stay the config's. 36 laws.
CLEAN_GRID = {"stiffness": [1000.0, 3000.0, 10000.0], "damping": [1.0, 3.0], "friction": [0.1, 0.2, 0.3],
              "static_friction": [0.4, 1.0], "max_episodes": 64}


def stage_epochs(n: int, steps: int, batch: int = 8, *, lo: int = 2, hi: int = 30) -> int:
    """Epochs that give about ``steps`` Adam steps on ``n`` training tosses (one window each, ``batch`` a step)."""
    return int(min(hi, max(lo, round(steps * batch / max(n, 1)))))


def train_overrides(n: int, *, out: Path, suite: str, data_root: str, steps: int, clean: bool = True) -> list[str]:
    """The ``--set`` overrides of ``configs/train/cube_tosses.yaml`` that train size N (``train_size``)."""
    sets = [f"data.bench_split={{suite: {suite}, size: {n}, validation: {'training' if clean else 'pool'}}}",
            "data.max_train_episodes=null", f"data.root={data_root}", f"out_dir={out / f'train_{n}'}",
            f"export.dir={out / f'checkpoint_{n}'}", f"export.prior_dir={out / f'prior_{n}'}",
            f"stages.prior.epochs={stage_epochs(n, steps)}", f"stages.corrections.epochs={stage_epochs(n, steps // 2, lo=1)}",
            "trainer.enable_progress_bar=false"]
    return sets + ([f"stages.grid={json.dumps(CLEAN_GRID)}"] if clean else [])


def train_size(n: int, *, out: Path, suite: str, data_root: str, steps: int, clean: bool = True) -> tuple[Path, Path]:
    """Train the v2 contact law on the suite's N training tosses: (release checkpoint, its fitted prior law alone).
    ``clean``: the starting law from ``CLEAN_GRID`` on these tosses, validation on them too (module docstring)."""
    ckpt, prior = out / f"checkpoint_{n}", out / f"prior_{n}"
    if (ckpt / "card.json").is_file() and (prior / "card.json").is_file():
        print(f"size {n}: reusing {ckpt}")
        return ckpt, prior
    cmd = [sys.executable, "-m", "surrogate.cli", "train", "--config", str(config_dir() / "train" / "cube_tosses.yaml")]
    for s in train_overrides(n, out=out, suite=suite, data_root=data_root, steps=steps, clean=clean):
        cmd += ["--set", s]
    t0 = time.time()
    subprocess.run(cmd, check=True)
    print(f"size {n}: trained in {time.time() - t0:.0f} s -> {ckpt}", flush=True)
    return ckpt, prior


def train_gns_size(n: int, *, out: Path, suite: str, data_root: str) -> Path:
    """Train the end-to-end peer on the suite's N training tosses (the hybrid surrogate's own split)."""
    ckpt = out / f"gns_{n}"
    if (ckpt / "card.json").is_file():
        print(f"size {n}: reusing {ckpt}")
        return ckpt
    cmd = [sys.executable, "-m", "surrogate.cli", "train", "--config", str(config_dir() / "train" / "gns_cube.yaml"),
           "--set", f"data.bench_split={{suite: {suite}, size: {n}}}", "--set", f"data.root={data_root}",
           "--set", f"out_dir={out / f'train_gns_{n}'}", "--set", f"export.dir={ckpt}",
           "--set", "trainer.enable_progress_bar=false"]
    t0 = time.time()
    subprocess.run(cmd, check=True)
    print(f"size {n}: end-to-end peer trained in {time.time() - t0:.0f} s -> {ckpt}", flush=True)
    return ckpt


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/cube_sweep")
    p.add_argument("--suite", default="cube-real")
    p.add_argument("--sizes", type=int, nargs="+", default=None, help="default: the suite's train_sizes")
    p.add_argument("--steps", type=int, default=96, help="Adam steps of the prior stage per size (half for the corrections)")
    p.add_argument("--data", default=None, help="imported tosses (default: the suite's source, imported into datasets/cache)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a suite value")
    p.add_argument("--from-config", action="store_true",
                   help="the earlier protocol: the config's starting law and 50 validation tosses beyond the N")
    p.add_argument("--gns", action="store_true", help="also train and score the end-to-end peer (row end_to_end_gns)")
    args = p.parse_args(argv)

    from surrogate.bench.run import CACHE_DIR, run_suite, summary_lines
    from surrogate.bench.toss_data import load_tosses
    from surrogate.suites import load_suite

    cfg = load_suite(args.suite, args.set)
    sizes = args.sizes or [int(s) for s in cfg["data"]["train_sizes"]]
    data_root = args.data or str(load_tosses(cfg["data"]["source"], cache_dir=CACHE_DIR).root)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    trained = {n: train_size(n, out=out, suite=args.suite, data_root=data_root, steps=args.steps,
                             clean=not args.from_config) for n in sizes}
    rows = {"law_prior": {str(n): str(p) for n, (_, p) in trained.items()}}
    if args.gns:
        rows["end_to_end_gns"] = {str(n): str(train_gns_size(n, out=out, suite=args.suite, data_root=data_root))
                                  for n in sizes}
    over = [*args.set, f"data.source={data_root}", f"data.train_sizes={json.dumps(sizes)}",
            f"surrogate.checkpoints={json.dumps({str(n): str(c) for n, (c, _) in trained.items()})}",
            f"surrogate.rows={json.dumps(rows)}"]
    ledger = run_suite(args.suite, out=out / "report", overrides=over)
    print("\n".join(summary_lines(ledger)))
    for key, entry in ledger["models"]["surrogate"]["by_train_size"].items():
        o = entry["overall"]
        print(f"  surrogate trained on {key:>5s} tosses: {o['pos_pct_size']['mean']:6.2f} % of width, "
              f"{o['rot_deg']['mean']:6.2f} deg; tosses it saw (fit and selection): {entry.get('episodes_seen')}, "
              f"test tosses among them: {len(entry['test_episodes_seen_in_training'])}")
        d = (entry.get("paired_minus_identified") or {}).get("pos_pct_size")
        if d and d.get("mean") is not None:
            print(f"    minus MuJoCo identified on the same {key} tosses, paired: {d['mean']:+.2f} "
                  f"[{d['ci95'][0]:+.2f}, {d['ci95'][1]:+.2f}] % of width")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
