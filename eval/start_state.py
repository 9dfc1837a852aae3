"""How much of a model's error on rig grasps comes from starting its replay at the recorded first frame.

A suite replays a model from the capture's first frame: the object's pose as the tracker recorded it (a per-episode
calibration bias of about 1 mm and 0.5 deg per axis, plus jitter) and the hand's joints as the encoders read them.
The floor's rows (``bench.rig_floor``) start from the rig's exact state instead, which was thought to favour them.
This study replays each grasp twice with the same model, from the recorded first frame (as the
suites do) and from the exact first state the rig stored beside the capture (``truth.object_pose`` at the first
tracked frame, ``truth.joint_pos`` at frame 0), and scores both against the same recording with ``rig-grasp``'s own
scorer (``rig_scoring.EpisodeScorer``): position error in % of the object's size 1 s after the close starts and over
the episode, paired by object. Rows: a checkpoint through the hybrid stepper (``replay_with_model``, the commands
``--delay`` s late, as the suites replay learned rows) and nominal MuJoCo (the suites' ``baselines.nominal``, the
commands at once, as the suites replay it)::

    python eval/start_state.py DATASET [DATASET ...] --checkpoint checkpoints/rig_default --workers 2 --out rows.json

A diagnostic of the benchmark, not a model: no row of a suite changes.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import numpy as np

from surrogate.atomic import write_json_atomic

STARTS = ("recorded", "exact")


def exact_start(ep, meta):
    """``ep`` with its first tracked pose and first joint reading replaced by the rig's exact state (``ep.truth``,
    ``bench.rig_floor.recorded_state``), or None when the episode does not hold it in the dataset's columns."""
    from surrogate.bench.rig_floor import recorded_state

    t = recorded_state(ep.truth or {}, meta, ep.num_frames, keys=("object_pose", "joint_pos"))
    if t is None or ep.joint_pos is None:
        return None
    first = 0 if ep.object_pose_valid is None else int(np.argmax(ep.object_pose_valid))
    pose, jp = np.array(ep.object_pose, dtype=float), np.array(ep.joint_pos, dtype=float)
    pose[first], jp[0] = t["object_pose"][first], t["joint_pos"][0]
    return dataclasses.replace(ep, object_pose=pose, joint_pos=jp)


def _scores(common: dict, item) -> dict:
    """{start: {model: {at_horizon, pos_pct}}} of one grasp ``(set name, episode, meta)``."""
    from surrogate.bench.analytic import nominal_params
    from surrogate.bench.replay import prepare_replay, replay_with_model, simulate_replay_qpos
    from surrogate.bench.rig_data import thresholds
    from surrogate.bench.rig_scoring import EpisodeScorer
    from surrogate.model.checkpoint import load_checkpoint
    from surrogate.suites import load_suite

    name, ep, meta = item
    if "model" not in common:  # once per worker
        common["model"] = load_checkpoint(common["checkpoint"])[0]
        common["cfg"] = load_suite("rig-grasp")
        common["thr"] = thresholds({"config": None, "overrides": ()})
    cfg, sim, delay = common["cfg"], {"substeps": 4, "margin": 0.005}, common["delay_s"]
    out = {"id": f"{name}/{ep.episode_id}", "object": ep.object.name}
    exact = exact_start(ep, meta)
    if exact is None:
        return {**out, "skipped": "no exact state in the dataset's columns"}
    for start, e in zip(STARTS, (ep, exact)):
        rows = {}
        r, q, _, _ = replay_with_model(e, meta, common["model"], delay_s=delay, **sim)
        rows["checkpoint"] = EpisodeScorer(dataclasses.replace(r, episode=ep), cfg, common["thr"]).score(q)
        a = dataclasses.replace(prepare_replay(e, meta, **sim), episode=ep)  # scored against the recording
        qa = simulate_replay_qpos(a, [nominal_params(ep, cfg["baselines"]["nominal"])], threads=1)[0]
        rows["nominal"] = EpisodeScorer(a, cfg, common["thr"]).score(qa)
        out[start] = {k: {"at_horizon": s["horizon_pos_pct_size"]["1"], "pos_pct": s["pos_pct_size"]}
                      for k, s in rows.items()}
    return out


def study(datasets: list[str], checkpoint: str, *, delay_s: float, workers: int) -> list[dict]:
    """Per grasp of ``datasets`` {id, object, recorded: {model: scores}, exact: {...}} (``_scores``)."""
    from surrogate.capture import read_dataset
    from surrogate.parallel import executor

    items = []
    for path in datasets:
        ds = read_dataset(path, include_truth=True)
        items += [(ds.root.name, e, ds.meta) for e in ds.episodes]
    with executor("process" if workers > 1 else "local", workers=workers) as ex:
        return ex.map(_scores, items, common={"checkpoint": checkpoint, "delay_s": delay_s}, desc="grasps, two starts",
                      unit="grasp")


def summary(rows: list[dict]) -> list[str]:
    """Lines: per model and start the mean at 1 s and over the episode, and exact minus recorded, paired by object."""
    from surrogate.metrics import paired_difference

    done = [r for r in rows if "skipped" not in r]
    lines = [f"{len(done)} grasps ({len(rows) - len(done)} without an exact state)"]
    for model in ("checkpoint", "nominal"):
        per = {s: [{"id": r["id"], "object": r["object"], **r[s][model]} for r in done] for s in STARTS}
        for key, words in (("at_horizon", "at 1 s"), ("pos_pct", "over the episode")):
            means = {s: np.mean([x[key] for x in per[s] if x[key] is not None]) for s in STARTS}
            d = paired_difference(per["recorded"], per["exact"], key, by="object")
            lines.append(f"{model:10s} {words:16s} recorded start {means['recorded']:6.2f}, exact start "
                         f"{means['exact']:6.2f}; exact - recorded {d['mean']:+.2f} [{d['ci95'][0]:+.2f}, "
                         f"{d['ci95'][1]:+.2f}]")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("datasets", nargs="+", help="rig capture datasets (with the rig's truth.* features)")
    p.add_argument("--checkpoint", default="checkpoints/rig_default")
    p.add_argument("--delay", type=float, default=0.0104,
                   help="the hand's latency, s (the suites' learned rows: 0.0104)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", help="write the per-grasp rows here (JSON)")
    a = p.parse_args(argv)
    rows = study(a.datasets, a.checkpoint, delay_s=a.delay, workers=a.workers)
    if a.out:
        write_json_atomic(a.out, rows)
    print("\n".join(summary(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
