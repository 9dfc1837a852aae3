"""Is what is left of a learned row's error in the hand or in the contact? (issue 24)

``rig-grasp`` replays each test grasp's recorded commands through the hybrid stepper: the scene's servos move the
fingers, delayed by the hand's identified latency, and the checkpoint's contact pushes back on them. Training
(``data.hand: kinematic``, the default) rolls the same grasp out in the twin instead, whose fingers follow the recorded
hand joints. Scoring one checkpoint both ways on the same grasps (the replay from the first recorded frame, the twin
from training's first-state estimate over 5 frames; the object rests there), with the suite's own scorer, separates
two parts of its error:

- ``kinematic - actuated`` at a horizon: what the replay's hand (servo dynamics under the contact's load, latency)
  adds to the error, or takes from it;
- the kinematic error itself: what the contact gets wrong with the fingers where they really were.

``--replayed`` adds a third rollout: the twin with its fingers on the checkpoint's own actuated replay of the grasp
(where its servos put them under its contact), which says whether the twin tracks the benchmark's replay once the
fingers are where use puts them.

With it, the actuated replay's finger error against the recording (mm, the hand's slide joints; deg for hinges) at
the same moment. Position error in % of the object's size, paired per grasp (resampling grasps; one grasp per
object on the rig's ``heldout_wide``)::

    python eval/hand_or_contact.py DATASET CKPT [CKPT ...] --delay-s 0.0104 --episodes 240 [--replayed] --out runs/notes/hand.json
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def _finger_error(replay, qpos: np.ndarray, frame: int) -> float:
    """The largest recorded hand joint's error at ``frame`` (mm for slides, deg for hinges)."""
    import mujoco

    from surrogate.bench.replay import joint_qpos_columns

    m, ep, worst = replay.scene.model, replay.episode, 0.0
    for col, adr in joint_qpos_columns(m, list(replay.joint_names)):
        j = int(np.flatnonzero(m.jnt_qposadr == adr)[0])
        scale = 1000.0 if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_SLIDE else 180.0 / np.pi
        worst = max(worst, abs(float(qpos[frame, adr] - ep.joint_pos[frame, col])) * scale)
    return worst


def score(dataset: str, checkpoints: list[str], *, episodes: int, delay_s: float, horizon_s: float,
          substeps: int = 4, margin: float = 0.005, replayed: bool = False) -> dict:
    """Per checkpoint, per grasp: the position errors with the hand actuated and kinematic (and with ``replayed``,
    the twin's fingers on the checkpoint's own actuated replay of the grasp: ``replayed_h``, ``replayed_ep``)."""
    import dataclasses

    import torch
    from tqdm import tqdm

    from surrogate.bench.replay import replay_with_model
    from surrogate.bench.rig_data import thresholds
    from surrogate.bench.rig_scoring import EpisodeScorer, hand_joints, scene_qpos
    from surrogate.capture import read_dataset
    from surrogate.learn.objective import rollout_episodes
    from surrogate.learn.windows import group_episodes
    from surrogate.model.checkpoint import load_checkpoint
    from surrogate.sim.twin import Twin
    from surrogate.suites import load_suite

    torch.set_num_threads(1)
    cfg = load_suite("rig-grasp")  # the suite's own scorer, its horizons with this one
    cfg["metrics"]["horizons_s"] = sorted({*map(float, cfg["metrics"]["horizons_s"]), float(horizon_s)})
    key, thr = f"{float(horizon_s):g}", thresholds({"config": None, "overrides": ()})
    ds = read_dataset(dataset)
    eps = ds.episodes[:episodes]
    groups = group_episodes(eps, ds.meta, margin=margin, substeps=substeps)
    twins = [Twin(g.scene) for g in groups]
    group_of = {e.episode_id: gi for gi, g in enumerate(groups) for e in g.episodes}
    out = {"dataset": str(dataset), "episodes": [str(e.episode_id) for e in eps], "delay_s": delay_s,
           "horizon_s": horizon_s, "rows": {}}
    for path in checkpoints:
        model, _ = load_checkpoint(path)
        kin = rollout_episodes(twins, model, eps, ds.meta, groups=[group_of[e.episode_id] for e in eps],
                               substeps=substeps)
        rows, moved = [], []
        for e in tqdm(eps, desc=f"actuated replays, {path}"):
            r, q, _, _ = replay_with_model(e, ds.meta, model, substeps=substeps, margin=margin, delay_s=delay_s)
            scorer = EpisodeScorer(r, cfg, thr)
            act = scorer.score(q)
            pose = kin[str(e.episode_id)]  # the twin's hand is the recorded one: scored with the recorded joints
            k = scorer.score(scene_qpos(r, pose, None if e.joint_pos is None else e.joint_pos[:len(pose)]))
            f = int(np.flatnonzero(e.timestamps - e.timestamps[0] <= scorer.origin + horizon_s + 1e-9)[-1])
            rows.append({"id": str(e.episode_id), "object": e.object.name,
                         "actuated_h": act["horizon_pos_pct_size"][key], "kinematic_h": k["horizon_pos_pct_size"][key],
                         "actuated_ep": act["pos_pct_size"], "kinematic_ep": k["pos_pct_size"],
                         "finger_err_h": _finger_error(r, q, min(f, len(q) - 1))})
            if replayed:  # the same grasp with the fingers where this checkpoint's replay moved them
                moved.append((r, scorer, dataclasses.replace(e, joint_pos=hand_joints(r, q))))
        if replayed:
            rep = rollout_episodes(twins, model, [m for _, _, m in moved], ds.meta,
                                   groups=[group_of[e.episode_id] for e in eps], substeps=substeps)
            for row, (r, scorer, m) in zip(rows, moved):
                pose = rep[str(m.episode_id)]
                sc = scorer.score(scene_qpos(r, pose, m.joint_pos[:len(pose)]))
                row.update(replayed_h=sc["horizon_pos_pct_size"][key], replayed_ep=sc["pos_pct_size"])
        out["rows"][str(path)] = rows
    return out


def summary(out: dict) -> list[str]:
    from scipy.stats import spearmanr

    from surrogate.metrics import bootstrap_ci, signed_interval

    lines = [f"{len(out['episodes'])} grasps of {out['dataset']}, hand latency {out['delay_s'] * 1000:.1f} ms, "
             f"position % of size {out['horizon_s']:g} s after the close starts / over the episode"]
    for path, rows in out["rows"].items():
        col = {k: np.array([r[k] for r in rows]) for k in rows[0] if k not in ("id", "object")}
        lines.append(f"{path}: actuated {col['actuated_h'].mean():.2f} / {col['actuated_ep'].mean():.2f}, "
                     f"kinematic {col['kinematic_h'].mean():.2f} / {col['kinematic_ep'].mean():.2f}")
        for other in ("kinematic", "replayed"):
            for h in ("h", "ep") if f"{other}_h" in col else ():
                d = col[f"{other}_{h}"] - col[f"actuated_{h}"]
                lines.append(f"  {other} - actuated ({h}): {signed_interval(float(d.mean()), bootstrap_ci(d))}"
                             + (f"; {other} {col[f'{other}_{h}'].mean():.2f}" if other == "replayed" else ""))
        fe = col["finger_err_h"]
        rho = float(spearmanr(fe, col["actuated_h"]).statistic)
        lines.append(f"  the actuated replay's finger error at the horizon: median {np.median(fe):.2f}, "
                     f"90th percentile {np.percentile(fe, 90):.2f}; Spearman with its position error {rho:+.2f}")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dataset")
    p.add_argument("checkpoints", nargs="+")
    p.add_argument("--episodes", type=int, default=240)
    p.add_argument("--delay-s", type=float, default=0.0, help="the hand's latency (a rig-grasp ledger's command_delay)")
    p.add_argument("--horizon-s", type=float, default=1.0)
    p.add_argument("--replayed", action="store_true",
                   help="also roll the twin out with its fingers on each checkpoint's own actuated replay")
    p.add_argument("--out", help="JSON with every grasp's rows")
    a = p.parse_args(argv)
    out = score(a.dataset, a.checkpoints, episodes=a.episodes, delay_s=a.delay_s, horizon_s=a.horizon_s,
                replayed=a.replayed)
    if a.out:
        from surrogate.atomic import write_json_atomic

        write_json_atomic(a.out, out)
    print("\n".join(summary(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
