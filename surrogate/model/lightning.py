"""LightningModule and DataModule around the plain ``ContactGNN`` (train.py only wires these)."""

from __future__ import annotations

import math

import lightning as L
import torch
from torch.utils.data import DataLoader

from .data import DATA_DEFAULTS, GraphWindows, load_capture, split_episodes
from .dynamics import unroll
from .gnn import ContactGNN, body_wrenches
from .graph import batch_graphs, units

LOSS_DEFAULTS = dict(noise_vel=0.0, noise_dist=0.0, unroll_frames=0, unroll_weight=1000.0, wrench_weight=1.0, ft_weight=1.0)
OPTIM_DEFAULTS = dict(lr=1e-3, weight_decay=0.0, final_lr_fraction=0.1)


def wrench_scale(g):
    """[G, 6] per-graph units of the wrench loss: F0 for forces, F0 L for torques."""
    Lg, _, F0 = units(g)
    return torch.cat([F0[:, None].expand(-1, 3), (F0 * Lg)[:, None].expand(-1, 3)], dim=1)


class ContactLightning(L.LightningModule):
    """Losses: net object wrench (inverse dynamics targets, normalized by m g and m g L),
    optional pad F/T readings, optional unrolled pose loss through ``dynamics.unroll``;
    optional input noise on object velocities (in V) and contact distances (in L)."""

    def __init__(self, model: dict | None = None, loss: dict | None = None, optim: dict | None = None,
                 substeps: int = 4, max_steps: int = 1000):
        super().__init__()
        self.save_hyperparameters()
        self.model = ContactGNN(**(model or {}))
        self.loss_cfg = {**LOSS_DEFAULTS, **(loss or {})}
        self.optim_cfg = {**OPTIM_DEFAULTS, **(optim or {})}
        self.substeps, self.max_steps = substeps, max_steps

    def _noisy(self, g):
        c = self.loss_cfg
        if not (c["noise_vel"] or c["noise_dist"]):
            return g, None, None
        import copy
        Lg, V, _ = units(g)
        obj = g.object_index
        vel = g.vel.index_add(0, obj, torch.randn(len(obj), 3) * c["noise_vel"] * V[:, None])
        om = g.omega.index_add(0, obj, torch.randn(len(obj), 3) * c["noise_vel"] * (V / Lg)[:, None])
        h = copy.copy(g)
        h.dist = g.dist + torch.randn_like(g.dist) * c["noise_dist"] * Lg[g.batch[g.edge_index[1]]]
        return h, vel, om

    def losses(self, g, *, train: bool):
        c = self.loss_cfg
        h, vel, om = self._noisy(g) if train else (g, None, None)
        f = self.model(h, vel, om)
        w = body_wrenches(h, f)
        scale = wrench_scale(g)
        out = {"wrench": (((w[g.object_index] - g.wrench) / scale) ** 2).mean()}
        if bool(g.ft_mask.any()):
            node_scale = scale[g.batch]
            sel = g.ft_mask > 0
            out["ft"] = (((w[sel] - g.ft[sel]) / node_scale[sel]) ** 2).mean()
        K = int(c["unroll_frames"])
        if K:
            pos, quat = unroll(self.model, g, frames=K, substeps=self.substeps)
            Lg = g.length[:, None]
            ep = ((pos - g.future[:, :K, :3]).norm(dim=-1) / Lg) ** 2
            dq = (quat * g.future[:, :K, 3:]).sum(-1).abs().clamp(max=1.0)
            er = (1.0 - dq * dq)  # = sin^2(angle/2): small-angle (angle/2)^2
            out["unroll"] = (ep + 4.0 * er).mean()
        out["loss"] = c["wrench_weight"] * out["wrench"] + c["ft_weight"] * out.get("ft", 0.0) + c["unroll_weight"] * out.get("unroll", 0.0)
        return out

    def training_step(self, batch, _):
        out = self.losses(batch, train=True)
        bs = int(batch.num_graphs)
        for k, v in out.items():
            self.log(f"train/{k}", v, prog_bar=(k == "loss"), batch_size=bs)
        return out["loss"]

    def validation_step(self, batch, _):
        out = self.losses(batch, train=False)
        bs = int(batch.num_graphs)
        for k, v in out.items():
            if k != "loss":  # the total is logged once, as val_loss (the checkpoint's and early stopping's monitor)
                self.log(f"val/{k}", v, batch_size=bs, sync_dist=True)
        self.log("val_loss", out["loss"], prog_bar=True, batch_size=bs, sync_dist=True)

    def configure_optimizers(self):
        return adam_decaying(self.parameters(), self.optim_cfg, self.max_steps)


def adam_decaying(params, o: dict, max_steps: int) -> dict:
    """Lightning's optimizer config: Adam (``lr``, ``weight_decay``) with the learning rate decayed
    exponentially, every step, to ``final_lr_fraction`` of itself after ``max_steps``."""
    opt = torch.optim.Adam(params, lr=o["lr"], weight_decay=o["weight_decay"])
    gamma = math.exp(math.log(o["final_lr_fraction"]) / max(1, max_steps))
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=gamma)
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def bench_split_ids(episodes, spec: dict, *, val_fraction: float) -> tuple[list, list]:
    """Training and validation ids that follow a benchmark suite's split (``cube-real``).

    ``spec`` = {"suite": name, "size": N}: training is the suite's training set of size N (the
    first N of its shuffled pool), validation the next ``val_fraction`` x N pool episodes, so
    that no test episode of the suite is ever trained or validated on and the checkpoint
    scores cleanly in ``surrogate bench`` at that size.
    """
    from ..errors import ConfigError
    from ..splits import suite_split
    from ..suites import load_suite

    if not isinstance(spec, dict) or "suite" not in spec or "size" not in spec:
        raise ConfigError("bench_split must be {suite: NAME, size: N}", key="data.bench_split")
    n = int(spec["size"])
    _, sp = suite_split(episodes, load_suite(spec["suite"])["data"], [n])
    if n not in sp["train"]:
        raise ConfigError(f"bench_split size {n} exceeds the {len(sp['pool'])} episodes of the suite's training pool",
                          key="data.bench_split.size")
    n_val = max(1, int(round(val_fraction * n)))
    return list(sp["train"][n]), list(sp["pool"][n:n + n_val])


def checked_data_config(cfg: dict, defaults: dict) -> dict:
    """``defaults`` updated with ``cfg``; a key ``defaults`` lacks is refused, naming it (``data.<key>``)."""
    unknown = sorted(set(cfg) - set(defaults))
    if unknown:
        from ..errors import ConfigError

        raise ConfigError(f"unknown data keys {unknown}; known: {sorted(defaults)}", key=f"data.{unknown[0]}")
    return {**defaults, **cfg}


def load_split(c: dict) -> tuple:
    """(capture dataset, training ids, validation ids) of the trainings validated on whole episodes (the
    law fit, the end-to-end peer).

    ``c`` is a data config: ``root`` (at most ``max_episodes`` read); with ``bench_split`` the suite's
    training set and at least ``val_min`` validation episodes of its pool (``bench_split_ids``), else a
    seeded ``val_fraction`` split; then at most ``max_train_episodes`` / ``max_val_episodes`` of each.
    """
    capture = load_capture(c["root"], max_episodes=c["max_episodes"])
    episodes = capture.episodes
    if c["bench_split"]:
        n = int(c["bench_split"]["size"])
        frac = max(c["val_fraction"], c["val_min"] / max(n, 1))
        train, val = bench_split_ids(episodes, c["bench_split"], val_fraction=frac)
    else:
        train, val = split_episodes([e.episode_id for e in episodes], val_fraction=c["val_fraction"], seed=c["split_seed"])
    if c["max_train_episodes"]:
        train = train[: int(c["max_train_episodes"])]
    if c["max_val_episodes"]:
        val = val[: int(c["max_val_episodes"])]
    return capture, train, val


class CaptureDataModule(L.LightningDataModule):
    """Training windows from a capture dataset: fixed seeded episode split, features cached in memory.

    The dataset is read and validated in ``prepare`` (``setup``) before any training step, so a
    bad capture stops the run with a CaptureError naming the episode.
    """

    def __init__(self, **cfg):
        super().__init__()
        self.cfg = {**DATA_DEFAULTS, **cfg}
        self.train_set = self.val_set = None
        self.capture = None

    def load(self):
        if self.capture is None:
            self.capture = load_capture(self.cfg["root"], max_episodes=self.cfg["max_episodes"])
            ids = [e.episode_id for e in self.capture.episodes]
            n_min = self.cfg["hold_out_min_frames"]
            long_ids = [e.episode_id for e in self.capture.episodes if n_min and e.num_frames >= n_min]
            self.train_ids, self.val_ids = split_episodes(ids, val_fraction=self.cfg["val_fraction"], seed=self.cfg["split_seed"],
                                                          always_val=long_ids)
            if self.cfg["bench_split"]:
                self.train_ids, self.val_ids = bench_split_ids(self.capture.episodes, self.cfg["bench_split"],
                                                               val_fraction=self.cfg["val_fraction"])
            elif self.cfg["max_train_episodes"]:
                self.train_ids = self.train_ids[: int(self.cfg["max_train_episodes"])]
        return self.capture

    def setup(self, stage=None):
        if self.train_set is not None:
            return
        cap = self.load()
        kw = {k: self.cfg[k] for k in ("margin", "substeps", "window", "order", "unroll_frames", "frame_stride")}
        by_id = {e.episode_id: e for e in cap.episodes}
        self.train_set = GraphWindows([by_id[i] for i in self.train_ids], cap.meta, desc="train graphs", **kw)
        self.val_set = GraphWindows([by_id[i] for i in self.val_ids], cap.meta, desc="val graphs", **kw)

    def _loader(self, ds, shuffle):
        return DataLoader(ds, batch_size=self.cfg["batch_size"], shuffle=shuffle, collate_fn=batch_graphs,
                          num_workers=self.cfg["num_workers"], drop_last=False)

    def train_dataloader(self):
        return self._loader(self.train_set, True)

    def val_dataloader(self):
        return self._loader(self.val_set, False)
