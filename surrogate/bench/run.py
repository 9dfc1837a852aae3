"""``surrogate bench <suite>``: run a suite, write ``ledger.json`` and ``report.md`` atomically."""

from __future__ import annotations

import logging
import os
import time
from contextlib import contextmanager
from pathlib import Path

from ..atomic import claim_output
from ..errors import ConfigError
from ..parallel import executor
from ..paths import cache_dir
from ..suites import config_hash, load_suite
from .ledger import build_ledger, write_ledger
from .report import write_report

logger = logging.getLogger(__name__)

MARKER = ".bench"  # in --out: a benchmark's folder, whose outputs a later run replaces
# what a suite may write besides its ledger and report: a run that writes one of them no more (another suite, --no-video,
# a model row without per-episode errors) removes the earlier run's, which would otherwise sit beside a report of another
OPTIONAL_OUTPUTS = ("horizons.png", "data_efficiency.png", "per_object.png", "attribution.png", "pad_forces.png",
                    "transfer.png", *(f"videos/{w}.{x}" for w in ("median", "worst") for x in ("mp4", "png")))
CACHE_DIR = cache_dir()  # imported and generated test sets (see surrogate.paths.cache_dir)


def _runner(kind: str):
    if kind == "cube-real":
        from . import cube_real
        return cube_real.run
    if kind == "elbow-real":
        from . import elbow_real
        return elbow_real.run
    if kind == "rig-grasp":
        from . import rig_grasp
        return rig_grasp.run
    if kind == "policy":
        from . import policy
        return policy.run
    if kind == "transfer":
        from . import transfer
        return transfer.run
    raise ConfigError(f"unknown suite kind {kind!r}; known: ['cube-real', 'elbow-real', 'rig-grasp', 'policy', 'transfer']",
                      key="suite")


def _check_checkpoint(kind: str, checkpoint) -> None:
    """Raise what is wrong with ``checkpoint``: ``cube-real`` asks its card's model class
    (``predictors.learned_for``); the grasp suites need a contact model for the hybrid stepper."""
    from .predictors import check_contact_model, learned_for

    if kind in ("cube-real", "elbow-real"):
        learned_for(checkpoint)[0].check(checkpoint)
    else:
        check_contact_model(checkpoint)


def suite_display_name(suite) -> str:
    """The name a suite was run under: ``cube-real-small``, or a YAML file's stem."""
    p = Path(str(suite))
    return p.stem if p.suffix in (".yaml", ".yml") else str(suite)


@contextmanager
def mujoco_log(folder, *, created: bool | None = None):
    """MuJoCo's warnings go to ``folder/mujoco.log`` (console off) while the block runs, here and in the worker
    processes it starts (``SURROGATE_MUJOCO_LOG``, read by ``surrogate._third_party_output``), instead of the
    console and ``MUJOCO_LOG.TXT`` in the current folder; the previous settings come back after. Off with
    ``SURROGATE_VERBOSE=1`` (``--verbose``): then everything is shown as MuJoCo prints it."""
    if os.environ.get("SURROGATE_VERBOSE"):
        yield
        return
    import mujoco

    from .. import _third_party_output

    created = not Path(folder).exists() if created is None else created  # by this run: removed if it fails first
    Path(folder).mkdir(parents=True, exist_ok=True)
    before, env = mujoco.MjLogConfig.get(), os.environ.get("SURROGATE_MUJOCO_LOG")
    os.environ["SURROGATE_MUJOCO_LOG"] = str(Path(folder).resolve() / "mujoco.log")
    _third_party_output()
    try:
        yield
    except BaseException:
        if created:  # a run that failed before writing anything leaves no folder behind (only what it made)
            _remove_if_empty(Path(folder))
        raise
    finally:
        before.set()
        if env is None:
            os.environ.pop("SURROGATE_MUJOCO_LOG", None)
        else:
            os.environ["SURROGATE_MUJOCO_LOG"] = env



def _remove_if_empty(folder: Path) -> None:
    """Remove ``folder`` if it holds nothing, or only an empty ``mujoco.log`` (nothing was logged) and the suite's
    claim on it (``MARKER``)."""
    entries = list(folder.iterdir())
    if all(e.is_file() and (e.name == MARKER or (e.name == "mujoco.log" and e.stat().st_size == 0)) for e in entries):
        for e in entries:
            e.unlink()
        folder.rmdir()

def run_suite(suite: str, *, out, checkpoint=None, test_data=None, overrides=(), progress: bool = True,
              cache_dir: Path = CACHE_DIR, video: bool | None = None, backend: str = "local", workers: int | None = None,
              ray_address: str | None = None) -> dict:
    """Run ``suite``; write ``out/ledger.json``, ``out/report.md``, its plots and the videos of the
    median and worst test episode (``out/videos/``; ``video=False`` or the suite's ``video.enabled:
    false`` skips them, and they are skipped with the reason in the report where rendering is
    unavailable). Returns the ledger.

    ``test_data``: a capture dataset, or several (``testsets``), in place of the suite's test episodes.
    ``backend``: ``local`` (this process), ``process`` (``workers`` local processes) or ``ray`` (tasks on a local Ray
    instance of ``workers`` CPUs or on the cluster at ``ray_address``); ``workers`` defaults to the suite's, else 2:
    the same ledger either way (``parallel``)."""
    created = not Path(out).exists()
    claim_output(out, marker=MARKER, command="surrogate bench", earlier=("ledger.json",))
    started = (Path(out) / MARKER).stat().st_mtime  # claim_output just wrote it: this run's start, in the folder's clock
    _log_header(Path(out) / "mujoco.log", suite)
    with mujoco_log(out, created=created):
        ledger = _run_suite(suite, out=out, checkpoint=checkpoint, test_data=test_data, overrides=overrides,
                          progress=progress, cache_dir=cache_dir, video=video, backend=backend, workers=workers,
                          ray_address=ray_address)
    _remove_stale_outputs(Path(out), started)
    return ledger


def _log_header(log: Path, suite) -> None:
    """Start this run's part of ``mujoco.log``, which every run into the folder appends to, where it already has one."""
    if log.is_file() and log.stat().st_size:
        with log.open("a") as f:
            f.write(f"\n# surrogate bench {suite_display_name(suite)}, {time.strftime('%Y-%m-%d %H:%M:%S')}\n")


def _remove_stale_outputs(out: Path, started: float) -> None:
    """Remove the ``OPTIONAL_OUTPUTS`` an earlier run wrote (older than this run's marker) that this one did not write
    again: the folder is a bench's (``claim_output``), and these are a bench's own outputs."""
    for name in OPTIONAL_OUTPUTS:
        p = out / name
        if p.is_file() and p.stat().st_mtime < started:
            p.unlink()
    videos = out / "videos"
    if videos.is_dir() and not any(videos.iterdir()):
        videos.rmdir()


def _run_suite(suite, *, out, checkpoint, test_data, overrides, progress, cache_dir, video, backend, workers,
               ray_address) -> dict:
    cfg = load_suite(suite, overrides)
    if checkpoint is not None:  # a bad checkpoint fails now, not after minutes of baseline work
        _check_checkpoint(cfg["suite"], checkpoint)
    workers = int(workers if workers is not None else cfg.get("workers", 2))
    with executor(backend, workers=workers, address=ray_address, progress=progress) as ex:
        run = _runner(cfg["suite"])(cfg, cache_dir=Path(cache_dir), checkpoint=checkpoint, test_data=test_data,
                                    progress=progress, ex=ex)
        run["execution"] = ex.info()
    ledger = build_ledger(suite=cfg["suite"], cfg=cfg, cfg_hash=config_hash(cfg), run=run,
                          suite_name=suite_display_name(suite), result=run.get("result"))
    out = Path(out)
    settings = dict(cfg.get("video") or {})
    if video is not None:
        settings["enabled"] = bool(video)
    from .video import suite_videos

    if progress and settings.get("enabled", True):
        logger.info("rendering videos of the median and worst test episode (--no-video skips)")
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
                     f"   rotation {o['rot_deg']['mean']:6.2f} deg (median {o['rot_deg']['median']:6.2f})   n={o['episodes']}"
                     + (f"   unstable {o['unstable_rate']:.2f}" if o.get("unstable_rate") is not None else "")
                     + (f"   joint {o['joint_deg']['mean']:6.2f} deg" if o.get("joint_deg") else ""))
    for r in ledger.get("transfer") or []:  # the transfer suite: sim vs rig of each source's tuned policy
        def f(x):
            return "—" if x is None else f"{x:+.2f}"
        lines.append(f"  transfer {r['source']:20s} rig success {r['rig_success_rate']:.2f}   success_gap "
                     f"{f(r['success_gap'])}   slip_gap {f(r['slip_gap'])}   tuned {r['tuned']}")
    if ledger["result"].get("randomized"):
        rnd = ledger["result"]["randomized"]
        lines.append(f"  randomized learned contact against randomized MuJoCo: {rnd['verdict']} — {rnd['detail']}")
    v = ledger.get("videos") or {}
    for r in v.get("videos") or []:
        lines.append(f"  video ({r['which']} episode {r['episode']}): {r['video']}")
    if v.get("skipped"):
        lines.append(f"  videos not rendered: {v['skipped']}")
    return lines
