"""Check captures with LeRobot itself: ``LeRobotDataset`` loads them offline, and one training step of the
stock ACT and Diffusion policies runs on each (CPU).

LeRobot pulls its own large torch build, so run it from a separate environment, not the project's:

    python3 -m venv /tmp/lerobot-venv && /tmp/lerobot-venv/bin/pip install lerobot==0.4.4
    /tmp/lerobot-venv/bin/python eval/lerobot_check.py CAPTURE_DATASET [CAPTURE_DATASET ...]

CI checks the exact feature mapping LeRobot applies without LeRobot (``tests/test_lerobot_compat.py``).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def load(root: str) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    ds = LeRobotDataset("local/capture", root=root)
    item = ds[len(ds) - 1]
    print(f"OK   {root}: {ds.num_episodes} episodes, {ds.num_frames} frames, fps {ds.fps}; "
          + ", ".join(f"{k} {tuple(getattr(v, 'shape', ()))}" for k, v in item.items() if hasattr(v, "shape")))


def train_step(root: str) -> None:
    import torch
    from lerobot.configs.types import FeatureType
    from lerobot.datasets.factory import resolve_delta_timestamps
    from lerobot.datasets.lerobot_dataset import LeRobotDataset, LeRobotDatasetMetadata
    from lerobot.datasets.utils import dataset_to_policy_features
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy
    from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig
    from lerobot.policies.diffusion.modeling_diffusion import DiffusionPolicy
    from lerobot.policies.factory import make_pre_post_processors

    meta = LeRobotDatasetMetadata("local/capture", root=root)
    features = dataset_to_policy_features(meta.features)
    out = {k: f for k, f in features.items() if f.type is FeatureType.ACTION}
    inp = {k: f for k, f in features.items() if k not in out}
    for name, Cfg, Pol, kw in (("ACT", ACTConfig, ACTPolicy, dict(chunk_size=10, n_action_steps=10)),
                               ("Diffusion", DiffusionConfig, DiffusionPolicy, dict(horizon=16, n_action_steps=8))):
        cfg = Cfg(input_features=inp, output_features=out, device="cpu", **kw)
        ds = LeRobotDataset("local/capture", root=root, delta_timestamps=resolve_delta_timestamps(cfg, meta))
        policy = Pol(cfg)
        pre, _ = make_pre_post_processors(cfg, dataset_stats=meta.stats)
        batch = pre(next(iter(torch.utils.data.DataLoader(ds, batch_size=4, shuffle=True))))
        loss, _ = policy.forward(batch)
        loss.backward()
        print(f"{name}: one training step on {root}: loss {loss.item():.4f}")


def main(argv=None) -> int:
    roots = sys.argv[1:] if argv is None else argv
    if not roots:
        print(__doc__)
        return 2
    bad = 0
    for root in roots:
        try:
            load(root)
            train_step(root)
        except Exception as e:  # report every dataset, then fail
            bad += 1
            print(f"FAIL {root}: {type(e).__name__}: {str(e)[:300]}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
