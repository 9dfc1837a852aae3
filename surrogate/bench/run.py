"""``surrogate bench <suite>``: run a suite, write ``ledger.json`` and ``report.md`` atomically."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from ..paths import cache_dir
from .ledger import build_ledger, write_ledger
from .report import write_report
from .suites import config_hash, load_suite

CACHE_DIR = cache_dir()  # imported and generated test sets (see surrogate.paths.cache_dir)


def _runner(kind: str):
    if kind == "cube-real":
        from . import cube_real
        return cube_real.run
    if kind == "rig-grasp":
        from . import rig_grasp
        return rig_grasp.run
    if kind == "policy":
        from . import policy
        return policy.run
    raise ConfigError(f"unknown suite kind {kind!r}; known: ['cube-real', 'rig-grasp', 'policy']", key="suite")


def run_suite(suite: str, *, out, checkpoint=None, test_data=None, overrides=(), progress: bool = True,
              cache_dir: Path = CACHE_DIR) -> dict:
    cfg = load_suite(suite, overrides)
    if checkpoint is not None:  # a bad checkpoint fails now, not after minutes of baseline work
        from ..model.checkpoint import load_checkpoint

        load_checkpoint(checkpoint)
    run = _runner(cfg["suite"])(cfg, cache_dir=Path(cache_dir), checkpoint=checkpoint, test_data=test_data, progress=progress)
    ledger = build_ledger(suite=cfg["suite"], cfg=cfg, cfg_hash=config_hash(cfg), run=run)
    out = Path(out)
    write_ledger(ledger, out)
    write_report(ledger, out)
    return ledger


def summary_lines(ledger: dict) -> list[str]:
    lines = [f"suite {ledger['suite']}: {ledger['result']['verdict']} — {ledger['result']['detail']}"]
    for name, m in ledger["models"].items():
        if "overall" not in m:
            lines.append(f"  {name:22s} {m.get('status')}: {m.get('reason')}")
            continue
        o = m["overall"]
        if "pos_pct_size" not in o:
            lines.append(f"  {name:22s} success {o['success_rate']:.2f}   slip {o['slip_rate'] if o['slip_rate'] is None else round(o['slip_rate'], 2)}"
                         f"   n={o['episodes']}")
            continue
        lines.append(f"  {name:22s} position {o['pos_pct_size']['mean']:6.2f} % of size (median {o['pos_pct_size']['median']:6.2f})"
                     f"   rotation {o['rot_deg']['mean']:6.2f} deg (median {o['rot_deg']['median']:6.2f})   n={o['episodes']}")
    return lines
