"""Lightning training of the end-to-end peer (``surrogate.baselines.gns``): the GNS recipe.

Training steps: one-step loss, the mean squared error of the normalized per-node acceleration
(body frame) on windows with random-walk input noise (``gns_data.noisy_window``). Validation:
every validation epoch rolls the *whole* validation episodes out from the benchmarks' first-state
estimate (``gns_rollout.predict_episodes``) and logs their mean position error (% of size) and
rotation error (deg); the checkpoint kept is the one with the lowest ``val_score`` = position % +
``rot_weight_val`` x rotation deg, the benchmarks' metric, never the one-step loss.
"""

from __future__ import annotations

import math

import lightning as L
import numpy as np
import torch

from ..learn.objective import episode_scores  # the law's validation scores, as the benchmarks score (masks, bounds)
from .gns import GNSNet, features
from .gns_data import noisy_window
from .gns_defaults import LOSS_DEFAULTS, OPTIM_DEFAULTS
from .gns_rollout import predict_episodes


class GNSLightning(L.LightningModule):
    """``GNSNet`` under the one-step noisy loss; validation by whole-episode rollouts (see the module docstring).

    ``val_episodes``, ``gravity_nd`` (the data's gravity in L / frame^2) and ``symmetries`` (the body's
    rotational symmetries, ``gns_geometry.box_symmetries``) are set before ``fit``. With
    ``loss.symmetry_augment`` every training window is seen in the body frame of a random symmetry of
    the box (the same motion, the corners relabelled): 24 equivalent descriptions of each cube window.
    """

    def __init__(self, model: dict | None = None, loss: dict | None = None, optim: dict | None = None,
                 max_steps: int = 1000, init_frames: int = 5):
        super().__init__()
        self.save_hyperparameters()
        self.model = GNSNet(**(model or {}))
        self.loss_cfg = {**LOSS_DEFAULTS, **(loss or {})}
        self.optim_cfg = {**OPTIM_DEFAULTS, **(optim or {})}
        self.max_steps, self.init_frames = max_steps, init_frames
        self.val_episodes, self.gravity_nd, self.val_history, self.symmetries = [], None, [], None

    def one_step_loss(self, batch) -> torch.Tensor:
        x, body, up, floor = batch
        if self.loss_cfg["symmetry_augment"] and self.symmetries is not None:
            S = self.symmetries.to(body)[torch.randint(len(self.symmetries), (len(body),), device=body.device)]
            body = body @ S.transpose(1, 2)  # b' = S b: the same point set; the body frame turns by S
        hist, target = noisy_window(x, body, float(self.loss_cfg["noise_std"]))
        node, edge, ei, R = features(hist, body, up, floor, floor_clip=self.model.floor_clip)
        target_body = torch.einsum("bji,bvj->bvi", R, target).reshape(-1, 3).float()
        pred = self.model(node, edge, ei)
        return ((pred - self.model.target_norm(target_body)) ** 2).mean()

    def training_step(self, batch, _):
        loss = self.one_step_loss(batch)
        self.log("train/loss", loss, prog_bar=True, batch_size=int(batch[0].shape[0]))
        return loss

    def validation_step(self, batch, _):
        preds = predict_episodes(self.model, self.val_episodes, init_frames=self.init_frames,
                                 gravity_nd=self.gravity_nd, progress=False)
        rows = episode_scores(preds, self.val_episodes)
        pos = float(np.mean([r["pos_pct"] for r in rows]))
        rot = float(np.mean([r["rot_deg"] for r in rows]))
        score = pos + float(self.loss_cfg["rot_weight_val"]) * rot
        if not math.isfinite(score):
            score = float("inf")  # a rollout that blew up is never the kept checkpoint
        n = len(rows)
        self.log("val/pos_pct", pos, batch_size=n)
        self.log("val/rot_deg", rot, batch_size=n)
        self.log("val_score", score, prog_bar=True, batch_size=n)
        self.val_history.append({"epoch": int(self.current_epoch), "step": int(self.global_step), "pos_pct": pos,
                                 "rot_deg": rot, "val_score": score})
        self.last_val_rows = rows

    def configure_optimizers(self):
        return adam_decaying(self.parameters(), self.optim_cfg, self.max_steps)


def adam_decaying(params, o: dict, max_steps: int) -> dict:
    """Lightning's optimizer config: Adam (``lr``, ``weight_decay``) with the learning rate decayed
    exponentially, every step, to ``final_lr_fraction`` of itself after ``max_steps``."""
    opt = torch.optim.Adam(params, lr=o["lr"], weight_decay=o["weight_decay"])
    gamma = math.exp(math.log(o["final_lr_fraction"]) / max(1, max_steps))
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=gamma)
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
