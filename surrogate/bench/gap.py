"""``surrogate rig gap``: how far the rig's physics is from MuJoCo's analytic contact, and which effects make the gap.

The study (``study``), for the rig with all its configured effects on and with each one off in turn:

1. records grasps of both hands on the training split (identification) and on the held-out split
   (test), the same seeds and scripts in every variant (``rig.simulate``: an effect's switch changes no
   draw of the script or of another effect);
2. identifies MuJoCo's analytic contact on the variant's training grasps (friction, solref, solimp, cone,
   object mass and actuator latency; differential evolution, ``bench.replay.identify_replays``; one
   parameter set for both hands: the same pads and objects);
3. replays every recorded grasp open loop in MuJoCo with the identified parameters and scores it against
   the recorded poses (``rig_scoring.EpisodeScorer`` with the ``rig-grasp`` suite's metrics: mean
   position and rotation error over the episode, a rollout that blows up or leaves the scene flagged
   unstable, outcome labels by the rig's own definition).

Per split and hand the residual of identified MuJoCo (stable episodes; unstable ones counted) is set
against the rig's repeatability: the same physics recorded again with an independent sensor-noise draw
(held-out all-on grasps). Each effect's share of the residual is paired over episodes,
``(residual(all on) - residual(effect off)) / residual(all on)``, with a bootstrap interval
(``gap_stats``); identified MuJoCo's outcome agreement with the recordings has a Wilson interval.
Outputs: ``gap_report`` (gap.json, gap.md, gap.png).
"""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path

import numpy as np

from ..capture import read_dataset
from ..hand_names import CODE_HANDS
from ..rig.config import effect_names, load_rig_config, with_effects
from ..rig.generate import generate
from ..suites import load_suite
from . import gap_stats
from .replay import identify_replays, prepare_replay, simulate_replay_qpos
from .rig_scoring import EpisodeScorer

log = logging.getLogger(__name__)

HANDS = CODE_HANDS  # ``hand="both"``
SPLITS = ("train", "test")


def variants(cfg: dict) -> dict[str, str | None]:
    """{"all_on": None, "without_<effect>": effect, ...} for the effects ``cfg`` has on."""
    return {"all_on": None, **{f"without_{e}": e for e in effect_names() if cfg["effects"][e]["enabled"]}}


def _record(cfg: dict, out: Path, *, objects: str, episodes: int, hand: str, seed: int, duration: float,
            workers: int, progress: bool, noise_seed: int | None = None):
    generate(cfg, objects=objects, episodes=episodes, out=out, workers=workers, seed=seed, hand=hand,
             duration=duration, noise_seed=noise_seed, progress=progress, overwrite=True)
    return read_dataset(out)


def _score(ds, hand: str, params, metrics: dict, thresholds: dict) -> list[dict]:
    """Per-episode scores of identified MuJoCo's replays of the dataset ``ds`` (one worker: threads=1)."""
    out = []
    for ep in ds.episodes:
        r = prepare_replay(ep, ds.meta)
        sc = EpisodeScorer(r, {"metrics": metrics}, thresholds).score(simulate_replay_qpos(r, [params], threads=1)[0])
        out.append({"id": ep.episode_id, "hand": hand, "object": ep.object.name, "pos_mm": 1e3 * sc["pos_m"],
                    "rot_deg": sc["rot_deg"], "unstable": bool(sc["unstable"]), "outcome": sc["outcome"],
                    "recorded": {k: bool(ep.labels[k]) for k in ("lifted", "slipped", "dropped")} if ep.labels else None})
    return out


def _variant(name: str, off: str | None, base: dict, s: dict, work: Path, progress: bool) -> dict:
    """Record, identify and score one rig variant (effect ``off`` switched off; None: all on)."""
    t0 = time.time()
    cfg = base if off is None else with_effects(base, {off: False})
    data = {(split, hand): _record(cfg, work / f"{name}-{split}-{hand}", objects=s[f"{split}_objects"],
                                   episodes=s[f"{split}_episodes"], hand=hand, seed=s["seed"] + (split == "test"),
                                   duration=s["duration_s"], workers=s["workers"], progress=progress)
            for split in SPLITS for hand in s["hands"]}
    replays = [prepare_replay(ep, ds.meta) for (split, _), ds in data.items() if split == "train" for ep in ds.episodes]
    params, info = identify_replays(replays, threads=1, fit_mass=True, fit_delay=True, maxiter=s["maxiter"],
                                    popsize=s["popsize"], seed=s["seed"], progress=progress, what=f"identify {name}")
    thr = {k: float(cfg["script"][k]) for k in ("lift_threshold", "slip_threshold", "slip_angle_threshold")}
    scores = {split: [sc for (sp, hand), ds in data.items() if sp == split
                      for sc in _score(ds, hand, params, s["metrics"], thr)] for split in SPLITS}
    row = {"variant": name, "effect_off": off, "fitted": params.to_json(), "fit_loss": info["loss"],
           "fit_evaluations": sum(c["evaluations"] for c in info["per_cone"].values()), "scores": scores,
           "wall_s": time.time() - t0}
    res = gap_stats.residual(scores["test"])
    log.info("gap %s: held-out residual %.2f mm / %.2f deg (%d unstable), %.0f s", name, res["pos_mm"]["mean"] or 0,
             res["rot_deg"]["mean"] or 0, res["unstable"], row["wall_s"])
    return row


def _repeatability(base: dict, s: dict, work: Path, progress: bool) -> list[dict]:
    """Per held-out all-on episode: mean position (mm) and rotation (deg) difference between two recordings
    of the same physics with independent sensor noise (frames tracked in both)."""
    from ..metrics import pose_errors

    out = []
    for hand in s["hands"]:
        kw = dict(objects=s["test_objects"], episodes=s["test_episodes"], hand=hand, seed=s["seed"] + 1,
                  duration=s["duration_s"], workers=s["workers"], progress=progress)
        a = _record(base, work / f"all_on-test-{hand}", **kw) if not (work / f"all_on-test-{hand}").exists() \
            else read_dataset(work / f"all_on-test-{hand}")
        b = {e.episode_id: e for e in _record(base, work / f"repeat-{hand}", noise_seed=1, **kw).episodes}
        for e in a.episodes:
            if e.episode_id in b:
                f = b[e.episode_id]
                n = min(e.num_frames, f.num_frames)
                valid = np.ones(n, bool)
                for x in (e, f):
                    if x.object_pose_valid is not None:
                        valid &= x.object_pose_valid[:n].astype(bool)
                err = pose_errors(e.object_pose[:n], f.object_pose[:n], valid)
                out.append({"id": e.episode_id, "hand": hand, "pos_mm": 1e3 * float(err["pos_m"][err["valid"]].mean()),
                            "rot_deg": float(err["rot_deg"][err["valid"]].mean())})
    return out


def study(config=None, *, objects: str = "heldout", train_objects: str = "train", episodes: int = 6,
          train_episodes: int = 3, hands=HANDS, duration: float = 4.0, seed: int = 0, workers: int = 1,
          maxiter: int = 3, popsize: int = 3, only=None, work_dir=None, progress: bool = True) -> dict:
    """Run the gap study (module docstring).

    Args:
      config: rig config (path or None for ``configs/rig/default.yaml``).
      objects / train_objects: the test (held-out) and identification splits.
      episodes / train_episodes: grasps per hand in each.
      hands: which hands.  duration: s per grasp.  workers: generation processes (rollouts use one thread).
      maxiter / popsize: differential evolution per cone.  only: variant names to run (default all).
    Returns:
      {"settings", "repeatability": [per episode], "variants": [rows with per-episode scores],
       "summary": ``gap_report.summarize``, "rows": the held-out residual per variant (short form)}.
    """
    from .gap_report import summarize

    t0 = time.time()
    base = load_rig_config(config)
    work = Path(work_dir or tempfile.mkdtemp(prefix="rig-gap-"))
    s = {"config": str(config) if config else "configs/rig/default.yaml", "test_objects": objects,
         "train_objects": train_objects, "test_episodes": int(episodes), "train_episodes": int(train_episodes),
         "hands": list(hands), "duration_s": float(duration), "seed": int(seed), "workers": int(workers),
         "maxiter": int(maxiter), "popsize": int(popsize), "metrics": load_suite("rig-grasp")["metrics"]}
    rows = [_variant(name, off, base, s, work, progress) for name, off in variants(base).items()
            if not only or name in only]
    rep = _repeatability(base, s, work, progress)
    s["wall_s"] = time.time() - t0
    result = {"settings": s, "repeatability": rep, "variants": rows}
    result["summary"] = summarize(result)
    result["rows"] = result["summary"]["rows"]
    return result
