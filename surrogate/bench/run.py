"""``surrogate bench <suite>``: run a suite, write ``ledger.json`` and ``report.md`` atomically."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from ..paths import cache_dir
from .ledger import build_ledger, write_ledger
from .report import write_report
from ..suites import config_hash, load_suite

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


def suite_display_name(suite) -> str:
    """The name a suite was run under: ``cube-real-small``, or a YAML file's stem."""
    p = Path(str(suite))
    return p.stem if p.suffix in (".yaml", ".yml") else str(suite)


def run_suite(suite: str, *, out, checkpoint=None, test_data=None, overrides=(), progress: bool = True,
              cache_dir: Path = CACHE_DIR, video: bool | None = None) -> dict:
    """Run ``suite``; write ``out/ledger.json``, ``out/report.md``, its plots and the videos of the
    median and worst test episode (``out/videos/``; ``video=False`` or the suite's ``video.enabled:
    false`` skips them, and they are skipped with the reason in the report where rendering is
    unavailable). Returns the ledger."""
    cfg = load_suite(suite, overrides)
    if checkpoint is not None:  # a bad checkpoint fails now, not after minutes of baseline work
        from ..model.checkpoint import is_end_to_end, load_checkpoint

        if is_end_to_end(load_checkpoint(checkpoint)[1]) and cfg["suite"] != "cube-real":
            raise ConfigError(f"{checkpoint} is the end-to-end peer (GNS, no MuJoCo): it predicts a free object, not "
                              f"the hand-object coupling of {cfg['suite']}; score it with cube-real", key="--checkpoint")
    run = _runner(cfg["suite"])(cfg, cache_dir=Path(cache_dir), checkpoint=checkpoint, test_data=test_data, progress=progress)
    ledger = build_ledger(suite=cfg["suite"], cfg=cfg, cfg_hash=config_hash(cfg), run=run,
                          suite_name=suite_display_name(suite))
    out = Path(out)
    settings = dict(cfg.get("video") or {})
    if video is not None:
        settings["enabled"] = bool(video)
    from .video import suite_videos

    if progress and settings.get("enabled", True):
        print("rendering videos of the median and worst test episode (--no-video skips)", flush=True)
    ledger["videos"] = suite_videos(ledger, out, settings=settings)
    write_ledger(ledger, out)
    write_report(ledger, out)
    return ledger


def summary_lines(ledger: dict) -> list[str]:
    lines = [f"suite {ledger.get('suite_name') or ledger['suite']}: {ledger['result']['verdict']} — {ledger['result']['detail']}"]
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
    v = ledger.get("videos") or {}
    for r in v.get("videos") or []:
        lines.append(f"  video ({r['which']} episode {r['episode']}): {r['video']}")
    if v.get("skipped"):
        lines.append(f"  videos not rendered: {v['skipped']}")
    return lines
