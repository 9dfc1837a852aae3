"""Twin pad forces against the fingertip force sensors, on a capture dataset's validation windows.

    python eval/pad_forces.py CHECKPOINT [CHECKPOINT ...] [--config configs/train/rig_default.yaml]

The windows (64 frames, one per second of each validation episode, as in training) are rolled out
through the differentiable twin with the hand kinematic at its recorded joints; for every pad frame
the force the object exerts on the pad is compared with the sensor's (world axes). Printed per
checkpoint (one JSON line): the force loss of training (``learn.objective.force_loss``) and, over the
frames where a pad is loaded (measured force > 0.5 N), the median and 10th / 90th percentiles of
|F_twin| / |F_sensor| and the median error |F_twin - F_sensor| (N).
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch


def evaluate(checkpoint, dm, windows) -> dict:
    from surrogate.learn.objective import force_loss, stack_forces, stack_windows
    from surrogate.learn.windows import batches
    from surrogate.model.checkpoint import load_checkpoint
    from surrogate.sim.twin import rollout

    model = load_checkpoint(checkpoint)[0].eval()
    loss_sum, n_sum, ratios, errors = 0.0, 0.0, [], []
    for b in batches(windows, 16):
        state0, target, _, _, qpos, qvel = stack_windows(b, dm.cfg["substeps"])
        bodies, meas, valid = stack_forces(b, target.shape[1])
        twins = [dm.twins[w.group] for w in b]
        with torch.no_grad():
            _, _, pred = rollout(model, twins, state0, target.shape[1], substeps=dm.cfg["substeps"], qpos=qpos, qvel=qvel,
                                 force_bodies=bodies)
        weight = torch.tensor([t.weight for t in twins], dtype=torch.float64)
        n = float(valid.sum())
        loss_sum += float(force_loss(pred, meas, valid, weight)) * n
        n_sum += n
        loaded = valid & (meas.norm(dim=-1) > 0.5)
        ratios += (pred.norm(dim=-1)[loaded] / meas.norm(dim=-1)[loaded]).tolist()
        errors += (pred - meas).norm(dim=-1)[loaded].tolist()
    r = np.array(ratios)
    return {"checkpoint": str(checkpoint), "windows": len(windows), "force_loss": loss_sum / max(n_sum, 1.0),
            "loaded_pad_frames": int(len(r)), "force_ratio_median": float(np.median(r)),
            "force_ratio_p10": float(np.quantile(r, 0.1)), "force_ratio_p90": float(np.quantile(r, 0.9)),
            "force_error_median_n": float(np.median(errors))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoints", nargs="+", help="checkpoint folders (safetensors + card.json)")
    p.add_argument("--config", default="rig_default", help="training config whose data section names the dataset "
                                                               "and split (default: the packaged rig_default)")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    from surrogate.learn.lightning import RolloutData
    from surrogate.learn.windows import episode_windows
    from surrogate.training.config import load_config

    data = dict(load_config(a.config, [])["data"])
    data["max_train_episodes"] = 1  # only the validation episodes are used
    dm = RolloutData(**data)
    dm.setup()
    val = set(dm.val_ids)
    windows = [w for gi, g in enumerate(dm.groups) for e in g.episodes if e.episode_id in val
               for w in episode_windows(e, dm.capture.meta, g.scene, frames=dm.cfg["window_frames"],
                                        stride=dm.cfg["window_stride"], substeps=dm.cfg["substeps"], group=gi,
                                        with_force=True)]
    for ckpt in a.checkpoints:
        print(json.dumps(evaluate(ckpt, dm, windows)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
