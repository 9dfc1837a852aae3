"""The `cube-real` data-efficiency sweep: one surrogate per training size, then the suite on all of them.

Each size N trains ``configs/train/cube_tosses.yaml`` (contact model v2: the passive law fitted on
rollouts, then the network's corrections) on exactly the suite's training set of N tosses
(``data.bench_split``: the first N of the suite's seeded pool; validation is the next 50 tosses of
the pool; the suite's test tosses are never seen), then ``surrogate bench cube-real`` scores every
checkpoint, and the fitted constant law alone as the row ``law_prior``, against the analytic
baselines identified at the same sizes.

    python eval/cube_sweep.py --out runs/cube_sweep                 # sizes 8 ... 256, the full suite
    python eval/cube_sweep.py --sizes 8 32 --suite cube-real-small  # quick

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


def stage_epochs(n: int, steps: int, batch: int = 8, *, lo: int = 2, hi: int = 30) -> int:
    """Epochs that give about ``steps`` Adam steps on ``n`` training tosses (one window each, ``batch`` a step)."""
    return int(min(hi, max(lo, round(steps * batch / max(n, 1)))))


def train_size(n: int, *, out: Path, suite: str, data_root: str, steps: int) -> tuple[Path, Path]:
    """Train the v2 contact law on the suite's N training tosses: (release checkpoint, its fitted prior law alone)."""
    ckpt, prior = out / f"checkpoint_{n}", out / f"prior_{n}"
    if (ckpt / "card.json").is_file() and (prior / "card.json").is_file():
        print(f"size {n}: reusing {ckpt}")
        return ckpt, prior
    cmd = [sys.executable, "-m", "surrogate.cli", "train", "--config", str(config_dir() / "train" / "cube_tosses.yaml"),
           "--set", f"data.bench_split={{suite: {suite}, size: {n}}}", "--set", "data.max_train_episodes=null",
           "--set", f"data.root={data_root}", "--set", f"out_dir={out / f'train_{n}'}", "--set", f"export.dir={ckpt}",
           "--set", f"export.prior_dir={prior}", "--set", f"stages.prior.epochs={stage_epochs(n, steps)}",
           "--set", f"stages.corrections.epochs={stage_epochs(n, steps // 2, lo=1)}",
           "--set", "trainer.enable_progress_bar=false"]
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
    p.add_argument("--gns", action="store_true", help="also train and score the end-to-end peer (row end_to_end_gns)")
    args = p.parse_args(argv)

    from surrogate.bench.cube_real import load_episodes
    from surrogate.bench.run import CACHE_DIR, run_suite, summary_lines
    from surrogate.suites import load_suite

    cfg = load_suite(args.suite, args.set)
    sizes = args.sizes or [int(s) for s in cfg["data"]["train_sizes"]]
    data_root = args.data or str(load_episodes(cfg["data"]["source"], cache_dir=CACHE_DIR).root)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    trained = {n: train_size(n, out=out, suite=args.suite, data_root=data_root, steps=args.steps) for n in sizes}
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
              f"{o['rot_deg']['mean']:6.2f} deg; test tosses seen in training: {len(entry['test_episodes_seen_in_training'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
