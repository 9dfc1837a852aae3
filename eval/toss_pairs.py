"""Rows of toss-suite ledgers (`cube-real`, `elbow-real`) paired per test toss, within one ledger or across two runs
of the same suite (e.g. one protocol against another on the same test tosses)::

    python eval/toss_pairs.py runs/bench/elbow_s37_whole/ledger.json:analytic_identified_elbow_16 \\
                              runs/bench/elbow_s37/ledger.json:analytic_identified_elbow_16 [A B ...]

Each pair ``A B`` (``LEDGER:ROW``) prints B − A with its 95 % bootstrap interval (``metrics.paired_difference``, the
suites' own) for the whole-toss means the ledgers hold: position % of size, rotation deg and, for an articulated
object, joint deg. Refused when the two rows were not scored on the same test tosses.
"""

from __future__ import annotations

import argparse
import json
import sys

METRICS = {"pos_pct_size": "position, % of size", "rot_deg": "rotation, deg", "joint_deg": "joint, deg"}


def load_row(spec: str, cache: dict) -> tuple[str, dict]:
    """(``spec``, the row) of ``LEDGER:ROW``; the ledger read once."""
    path, sep, name = spec.rpartition(":")
    if not sep or not path:
        raise SystemExit(f"{spec!r}: expected LEDGER:ROW")
    if path not in cache:
        with open(path) as f:
            cache[path] = json.load(f)["models"]
    models = cache[path]
    if name not in models or not models[name].get("per_episode"):
        raise SystemExit(f"{path}: no row {name!r} with per-episode scores; rows: {sorted(models)}")
    return spec, models[name]


def pair(a: dict, b: dict) -> dict:
    """{metric: paired_difference b - a} over the same test tosses, with each row's mean; SystemExit if the tosses
    differ."""
    import numpy as np

    from surrogate.metrics import paired_difference

    ids = [{(r.get("set"), r["id"]) for r in row["per_episode"]} for row in (a, b)]
    if ids[0] != ids[1]:
        raise SystemExit(f"the rows were scored on different test tosses ({len(ids[0] ^ ids[1])} differ)")
    out = {}
    for k in METRICS:
        if all(r.get(k) is not None for row in (a, b) for r in row["per_episode"]):
            means = [float(np.mean([r[k] for r in row["per_episode"]])) for row in (a, b)]
            out[k] = {"means": means, **paired_difference(a["per_episode"], b["per_episode"], k)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rows", nargs="+", help="pairs A B of LEDGER:ROW; prints B - A")
    args = ap.parse_args(argv)
    if len(args.rows) % 2:
        ap.error("rows come in pairs A B")
    cache: dict = {}
    for sa, sb in zip(args.rows[::2], args.rows[1::2]):
        (_, a), (_, b) = load_row(sa, cache), load_row(sb, cache)
        print(f"{sb} - {sa} ({len(a['per_episode'])} test tosses):")
        for k, d in pair(a, b).items():
            lo, hi = d["ci95"]
            print(f"  {METRICS[k]:<20} {d['means'][1]:7.2f} - {d['means'][0]:7.2f} = {d['mean']:+.2f} "
                  f"[{lo:+.2f}, {hi:+.2f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
