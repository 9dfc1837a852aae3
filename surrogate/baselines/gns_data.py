"""Training data of the end-to-end peer: one-step windows of surface-point positions, and GNS input noise.

A window is H + 2 consecutive frames of an episode's points (from the recorded poses): H + 1
frames of input history and the next frame, whose acceleration is the target. Windows that touch
a tracking dropout (``object_pose_valid`` false) are skipped. The split follows the hybrid
surrogate's: ``data.bench_split: {suite, size}`` trains on exactly a suite's training set and
validates on the next pool episodes (``learn.episodes.bench_split_ids``), so that no test
episode of the suite is ever trained or validated on.

Shapes: N = windows, H = history, V = points per body.
"""

from __future__ import annotations

import math

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset
from tqdm import tqdm

from ..errors import ConfigError
from ..learn.episodes import checked_data_config, load_split
from .gns_defaults import DATA_DEFAULTS
from .gns_geometry import box_symmetries, episode_body_points, pose_points, rigid_points, shape_match
from .gns_rollout import scene_units


def episode_windows(ep, *, history: int, grid: int) -> dict:
    """{"x": [N, H + 2, V, 3] points (L), "body": [V, 3] (L), "up": [3], "floor": float (L), "gravity_nd"} of an episode."""
    u = scene_units(ep)
    body = episode_body_points(ep, grid)
    X = pose_points(ep.object_pose, body) / u["L"]
    w = history + 2
    valid = np.ones(ep.num_frames, bool) if ep.object_pose_valid is None else np.asarray(ep.object_pose_valid, bool)
    starts = [t for t in range(ep.num_frames - w + 1) if valid[t:t + w].all()]
    x = np.stack([X[t:t + w] for t in starts]) if starts else np.zeros((0, w, len(body), 3))
    return {"x": x, "body": body / u["L"], "up": u["up"], "floor": u["floor"] / u["L"], "gravity_nd": u["gravity_nd"]}


def noisy_window(x: torch.Tensor, body: torch.Tensor, noise_std: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(input history [B, H + 1, V, 3], target acceleration [B, V, 3], world, L / frame^2) of windows x [B, H + 2, V, 3].

    GNS training noise: a random walk on the input positions (velocity noise of std ``noise_std``
    L / frame at the newest frame, none at the oldest position), then every noisy frame is put back
    on its nearest rigid pose by shape matching, so that training inputs are rigid like the
    rollout's. The target is the acceleration that restores the true next velocity from the noisy
    history: x(t+1) - x(t) - (x~(t) - x~(t-1)) (Sanchez-Gonzalez et al. 2020), so a model that
    drifts off the recorded path learns to steer back rather than to continue its error.
    """
    hist, nxt = x[:, :-1], x[:, -1]
    B, H1, V, _ = hist.shape
    if noise_std > 0 and H1 > 1:
        steps = torch.randn(B, H1 - 1, V, 3, dtype=x.dtype, device=x.device) * (noise_std / math.sqrt(H1 - 1))
        noisy = hist + torch.cat([torch.zeros_like(steps[:, :1]), steps.cumsum(dim=1)], dim=1)
        flat_body = body.repeat_interleave(H1, dim=0)
        R, p = shape_match(noisy.reshape(B * H1, V, 3), flat_body)
        hist = rigid_points(R, p, flat_body).reshape(B, H1, V, 3)
    target = (nxt - x[:, -2]) - (hist[:, -1] - hist[:, -2])
    return hist, target


def _stacked(parts: list[dict]) -> tuple:
    """(x [N, H + 2, V, 3], body [N, V, 3], up [N, 3], floor [N]) of the windows of every episode of ``parts``."""
    n = [len(p["x"]) for p in parts]
    per_window = [np.concatenate([np.repeat(np.asarray(p[key])[None], k, 0) for p, k in zip(parts, n)])
                  for key in ("body", "up", "floor")]
    return (np.concatenate([p["x"] for p in parts]), *per_window)


class GNSData(L.LightningDataModule):
    """Episodes of a capture dataset, split, cut into one-step windows (training) and kept whole (validation)."""

    def __init__(self, *, history: int, grid: int, seed: int = 0, **cfg):
        super().__init__()
        self.cfg = checked_data_config(cfg, DATA_DEFAULTS)
        self.history, self.grid, self.seed = int(history), int(grid), int(seed)
        self.capture = self.train_set = None

    def load(self):
        if self.capture is None:
            self.capture, self.train_ids, self.val_ids = load_split(self.cfg)
            if not self.train_ids or not self.val_ids:
                raise ConfigError(f"{len(self.train_ids)} training and {len(self.val_ids)} validation episodes: "
                                  "the end-to-end peer needs both", key="data.val_fraction")
        return self.capture

    def setup(self, stage=None):
        if self.train_set is not None:
            return
        cap = self.load()
        by_id = {e.episode_id: e for e in cap.episodes}
        self.val_episodes = [by_id[i] for i in self.val_ids]
        parts = [episode_windows(by_id[i], history=self.history, grid=self.grid)
                 for i in tqdm(self.train_ids, desc="training windows", unit="episode", disable=len(self.train_ids) < 8)]
        gravity = sorted({round(p["gravity_nd"], 9) for p in parts})
        same_body = all(p["body"].shape == parts[0]["body"].shape and np.allclose(p["body"], parts[0]["body"]) for p in parts)
        if len(gravity) > 1 or not same_body:  # one learned gravity; one body, whose symmetries augment the data
            raise ConfigError("the end-to-end peer trains on one object shape and size and one capture rate at a time "
                              f"(gravity per frame^2 in L: {gravity})", key="data.root")
        self.gravity_nd = float(parts[0]["gravity_nd"])
        self.train_set = TensorDataset(*(torch.as_tensor(a) for a in _stacked(parts)))
        self.body = torch.as_tensor(parts[0]["body"])
        self.symmetries = torch.as_tensor(box_symmetries(parts[0]["body"]))

    def train_dataloader(self):
        gen = torch.Generator().manual_seed(self.seed)  # the order of windows is a function of the seed
        return DataLoader(self.train_set, batch_size=int(self.cfg["batch_size"]), shuffle=True, generator=gen)

    def val_dataloader(self):
        return DataLoader([0], batch_size=None)  # one item: the module rolls the whole validation episodes out
