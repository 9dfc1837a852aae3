"""Paired differences between any two rows of a suite's ledger, as the ledger's own ``paired_minus_surrogate`` pairs
every learned row with the ``surrogate`` row (``bench.paired_rows``: the verdict's horizon, the whole episode, the
pad force; resampling the suite's paired unit, objects for ``rig-grasp``)::

    python eval/ledger_pairs.py runs/bench/rgw_fdg/ledger.json fd_network fdg_network [surrogate fdg_network ...]

Each pair ``A B`` prints B − A with its 95 % interval, and each row's means.
"""

from __future__ import annotations

import argparse
import json
import sys


def row_means(row: dict, sets, horizon_s: float) -> dict:
    """{metric: mean over the row's episodes on ``sets``} for the metrics ``paired_rows`` pairs."""
    import numpy as np

    from surrogate.bench.paired_rows import PAIRED_METRICS, episodes_at_horizon

    rows = episodes_at_horizon(row, sets, horizon_s)
    return {k: float(np.mean([r[k] for r in rows if r.get(k) is not None])) if rows else None for k in PAIRED_METRICS}


def pairs(ledger: dict, names: list[str]) -> list[dict]:
    """[{a, b, means, metric: paired_difference (b - a)}] for consecutive pairs of ``names``, on every test set the
    rows were scored on, at the suite's acceptance horizon."""
    from surrogate.bench.paired_rows import paired_minus

    models, out = ledger["models"], []
    sets = sorted({r.get("set") for m in models.values() for r in (m.get("per_episode") or [])})
    horizon = float(ledger["config"]["acceptance"]["horizon_s"])
    by = (ledger["config"].get("metrics") or {}).get("paired_by")
    for a, b in zip(names[::2], names[1::2]):
        for n in (a, b):
            if n not in models or not models[n].get("per_episode"):
                raise SystemExit(f"no row {n!r} with per-episode scores in the ledger; rows: {sorted(models)}")
        out.append({"a": a, "b": b, "means": {n: row_means(models[n], sets, horizon) for n in (a, b)},
                    **paired_minus(models[a], models[b], sets=sets, horizon_s=horizon, by=by)})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ledger")
    ap.add_argument("rows", nargs="+", help="pairs of row names A B: prints B - A")
    a = ap.parse_args(argv)
    if len(a.rows) % 2:
        ap.error("rows come in pairs A B")
    with open(a.ledger) as f:
        ledger = json.load(f)
    from surrogate.bench.paired_rows import PAIRED_METRICS

    for p in pairs(ledger, a.rows):
        print(f"{p['b']} - {p['a']} (horizon {p['horizon_s']:g} s):")
        for k, what in PAIRED_METRICS.items():
            d = p[k]
            if d.get("mean") is None:
                continue
            ma, mb = p["means"][p["a"]][k], p["means"][p["b"]][k]
            print(f"  {what:<46} {mb:7.2f} - {ma:7.2f} = {d['mean']:+.2f} [{d['ci95'][0]:+.2f}, {d['ci95'][1]:+.2f}]"
                  f"  n={d['n']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
