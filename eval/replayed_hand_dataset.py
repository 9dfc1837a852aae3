"""A copy of a capture dataset whose hand joints are a checkpoint's own replay of each grasp (issue 24).

Training's twin moves the hand along the capture's joints (``data.hand: kinematic``), so the grip force it trains
under is the law's stiffness times how far the *recorded* fingers press into the object, while the benchmark's
replays close the fingers on the scene's servos until their force bound holds (``eval/hand_or_contact.py``). This
writes a new dataset in which every episode's hand joints are where a checkpoint's actuated replay of that grasp put
them (the recorded commands through the hybrid stepper, each ``--delay-s`` late, as ``rig-grasp`` replays them);
everything else (object poses, commands, pad wrenches, provenance) is the recording's. Trained on it, the twin's
fingers stand where use puts them, with the twin's exact gradients::

    python eval/replayed_hand_dataset.py SRC CKPT OUT --delay-s 0.0104

The joints' velocities are the replayed positions' finite differences; a rig dataset's hidden truth (``truth.*``) is
not copied (training never reads it). ``OUT`` must not exist.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np


def replayed(ep, meta, model, *, delay_s: float, substeps: int = 4, margin: float = 0.005):
    """The episode with its hand joints [F, J] (and their velocities) taken from ``model``'s actuated replay."""
    from surrogate.bench.replay import joint_qpos_columns, replay_with_model
    from surrogate.bench.rig_scoring import hand_joints

    r, q, _, _ = replay_with_model(ep, meta, model, substeps=substeps, margin=margin, delay_s=delay_s)
    pos = np.array(ep.joint_pos, dtype=float, copy=True)
    n = min(len(pos), len(q))
    pos[:n] = hand_joints(r, q)
    vel = None if ep.joint_vel is None else np.array(ep.joint_vel, dtype=float, copy=True)
    cols = [c for c, _ in joint_qpos_columns(r.scene.model, list(r.joint_names))]
    if vel is not None and cols:  # the replayed joints' own rates; a joint the scene lacks keeps the recording's
        vel[:n, cols] = np.gradient(pos[:n, cols], ep.timestamps[:n], axis=0)
    return dataclasses.replace(ep, joint_pos=pos.astype(ep.joint_pos.dtype),
                               joint_vel=None if vel is None else vel.astype(ep.joint_vel.dtype))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("src")
    p.add_argument("checkpoint")
    p.add_argument("out")
    p.add_argument("--delay-s", type=float, default=0.0, help="the hand's latency (a rig-grasp ledger's command_delay)")
    a = p.parse_args(argv)
    import torch
    from tqdm import tqdm

    from surrogate.capture import read_dataset, write_dataset
    from surrogate.model.checkpoint import load_checkpoint

    if Path(a.out).exists():
        sys.exit(f"{a.out}: exists; this command writes a new dataset and never replaces one")
    torch.set_num_threads(1)
    ds = read_dataset(a.src)
    model, _ = load_checkpoint(a.checkpoint)
    eps = [replayed(e, ds.meta, model, delay_s=a.delay_s) for e in tqdm(ds.episodes, desc="replays", unit="episode")]
    write_dataset(a.out, eps, ds.meta)
    print(f"{a.out}: {len(eps)} episodes of {a.src}, hand joints from {a.checkpoint}'s replays ({a.delay_s * 1000:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
