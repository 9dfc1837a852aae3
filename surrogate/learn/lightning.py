"""Lightning training of the contact law on rollouts (``train.py`` wires it for ``model.kind: law``).

Two stages, each a ``Trainer.fit`` of ``RolloutLightning``:

1. ``prior``: only the global law's three log-parameters (stiffness, damping, friction) are
   trained; the network corrections are zero (the constant law).
2. ``corrections``: the prior is frozen and the network's bounded corrections are trained.

Every step rolls a batch of windows out through the differentiable twin (``surrogate.sim.twin``)
and takes the pose loss (``objective.pose_loss``), plus ``loss.force_weight`` x the pad force
loss (``objective.force_loss``) where the captures have fingertip force sensors; gradients are clipped. Every validation
epoch rolls the *whole* validation episodes out from the benchmarks' first-state estimate and
logs their mean position error (% of size) and rotation error (deg): the checkpoint kept is
the one with the lowest ``val_score`` = position % + ``rot_weight_val`` x rotation deg, the
benchmarks' metric, never a one-step loss.
"""

from __future__ import annotations

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset
from tqdm import tqdm

from ..errors import ConfigError
from ..model.contact_law import ContactLawGNN
from ..sim.twin import Twin
from .actuated import actuated_episodes, actuated_window_loss, episode_scene
from .defaults import DATA_DEFAULTS, LOSS_DEFAULTS
from .episodes import checked_data_config, load_split
from .objective import episode_scores, rollout_episodes, window_loss
from .windows import batches, episode_batches, episode_windows, group_episodes

HANDS = ("kinematic", "actuated")  # data.hand: how the training windows move the hand (learn.actuated)
# data.val_hand: how validation rolls the whole episodes out (None: as data.hand). kinematic training with actuated
# validation fits on the twin's exact gradients and keeps the epoch that is best in closed loop, as the benchmark runs
STAGES = ("prior", "corrections")


def check_hands(data: dict) -> None:
    """``data.hand`` one of ``HANDS``, ``data.val_hand`` one of them or null: the one rule of both, applied by
    ``RolloutData`` and, before any captures are read, by the config check (``training.setup.check_fit_rules``)."""
    for key, allowed in (("hand", HANDS), ("val_hand", (None, *HANDS))):
        value = data.get(key, DATA_DEFAULTS[key])
        if value not in allowed:
            raise ConfigError(f"data.{key} must be one of {list(allowed)}, got {value!r}", key=f"data.{key}")


class _Items(Dataset):
    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class RolloutData(L.LightningDataModule):
    """Episodes of a capture dataset, split, grouped by scene, cut into training windows.

    Training items are batches of windows of similar length (scenes mixed, padded; reshuffled every
    epoch); validation items are chunks of whole validation episodes of similar length.
    """

    def __init__(self, **cfg):
        super().__init__()
        self.cfg = checked_data_config(cfg, DATA_DEFAULTS)
        check_hands(self.cfg)
        self.val_hand = self.cfg["val_hand"] or self.cfg["hand"]
        self.capture = None
        self.groups = None

    def load(self):
        if self.capture is None:
            self.capture, self.train_ids, self.val_ids = load_split(self.cfg)
        return self.capture

    def setup(self, stage=None):
        if self.groups is not None:
            return
        cap = self.load()
        c = self.cfg
        by_id = {e.episode_id: e for e in cap.episodes}
        train, val = set(self.train_ids), set(self.val_ids)
        chosen = [by_id[i] for i in dict.fromkeys(self.train_ids + self.val_ids)]  # validation may be training's
        self.groups = group_episodes(chosen, cap.meta, margin=c["margin"], substeps=c["substeps"])
        self.twins = [Twin(g.scene) for g in self.groups]
        self.windows = []
        for gi, g in enumerate(tqdm(self.groups, desc="rollout windows", unit="scene", disable=len(self.groups) < 4)):
            for e in g.episodes:
                if e.episode_id in train:
                    self.windows += episode_windows(e, cap.meta, g.scene, frames=c["window_frames"], stride=c["window_stride"],
                                                    substeps=c["substeps"], init_frames=c["init_frames"], group=gi,
                                                    with_force=True)
        # actuated: each episode's own scene (its grip force bound); a training episode's windows are one batch
        actuated = ({*train} if c["hand"] == "actuated" else set()) | ({*val} if self.val_hand == "actuated" else set())
        self.episode_scenes = {e.episode_id: episode_scene(e, cap.meta, margin=c["margin"], substeps=c["substeps"])
                               for e in chosen if e.episode_id in actuated}
        val_eps = [(gi, e) for gi, g in enumerate(self.groups) for e in g.episodes if e.episode_id in val]
        val_eps.sort(key=lambda x: x[1].num_frames)
        self.val_items = [val_eps[k:k + 16] for k in range(0, len(val_eps), 16)]
        train_eps = sorted(((gi, e) for gi, g in enumerate(self.groups) for e in g.episodes if e.episode_id in train),
                           key=lambda x: x[1].num_frames)
        self.train_episode_items = [train_eps[k:k + 16] for k in range(0, len(train_eps), 16)]  # whole episodes
        self.n_windows = len(self.windows)

    def train_items(self, epoch: int) -> list:
        rng = np.random.default_rng((int(self.cfg["split_seed"]), epoch))
        if self.cfg["hand"] == "actuated":
            return episode_batches(self.windows, int(self.cfg["batch_size"]), rng=rng)
        return batches(self.windows, int(self.cfg["batch_size"]), rng=rng)

    def steps_per_epoch(self) -> int:
        return len(self.train_items(0))

    def train_dataloader(self):
        # the order of the trainer's epoch (restored on resume), not of a count of calls: a resumed fit calls this
        # once more than an uninterrupted one, and its epochs were shuffled as the run's next epochs
        epoch = self.trainer.current_epoch + 1
        return DataLoader(_Items(self.train_items(epoch)), batch_size=None, shuffle=False, collate_fn=lambda x: x)

    def val_dataloader(self):
        return DataLoader(_Items(self.val_items), batch_size=None, shuffle=False, collate_fn=lambda x: x)


def validate_chunk(model, dm: RolloutData, chunk) -> list[dict]:
    """Per-episode whole-rollout scores of one validation chunk [(group, episode)]."""
    eps = [e for _, e in chunk]
    if dm.val_hand == "actuated":  # scored in closed loop, the hand on its servos, as the benchmark runs it
        preds = actuated_episodes(model, eps, dm.capture.meta, [dm.episode_scenes[e.episode_id] for e in eps],
                                  substeps=dm.cfg["substeps"], init_frames=dm.cfg["init_frames"])
        return episode_scores(preds, eps)
    preds = rollout_episodes(dm.twins, model, eps, dm.capture.meta, groups=[gi for gi, _ in chunk],
                             substeps=dm.cfg["substeps"], init_frames=dm.cfg["init_frames"])
    return episode_scores(preds, eps)


class RolloutLightning(L.LightningModule):
    """The ``ContactLawGNN`` trained through the twin (see the module docstring).

    Args:
      model: ``ContactLawGNN`` keyword arguments.  stage: ``prior`` or ``corrections``.
      lr: Adam learning rate, decayed exponentially to ``final_lr_fraction`` x lr over ``total_steps``.
      loss: ``LOSS_DEFAULTS`` overrides.  data: the ``RolloutData`` (for its twins).
    """

    def __init__(self, model: dict, *, stage: str, lr: float, loss: dict | None = None, data: RolloutData | None = None,
                 final_lr_fraction: float = 1.0, total_steps: int = 0):
        super().__init__()
        if stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
        self.model = ContactLawGNN(**model)
        self.stage, self.lr = stage, float(lr)
        self.final_lr_fraction, self.total_steps = float(final_lr_fraction), int(total_steps)
        self.loss_cfg = {**LOSS_DEFAULTS, **(loss or {})}
        self.data = data
        self._val_rows: list[dict] = []
        self.val_history: list[dict] = []
        self.val_rows: dict[int, list[dict]] = {}  # per-episode scores of every validation epoch

    def _set_trainable(self):
        prior = self.stage == "prior"
        for p in self.model.prior_parameters():
            p.requires_grad_(prior)
        for p in self.model.correction_parameters():
            p.requires_grad_(not prior)

    def on_train_epoch_start(self):
        # Lightning keeps a submodule in the mode it found it in; whole-episode validation before the
        # fit leaves the model in eval mode, and its normalizers would then never accumulate.
        self.model.train()

    def training_step(self, windows, _):
        if self.data.cfg["hand"] == "actuated":  # through the stepper's own step, the hand on its servos
            loss = actuated_window_loss([self.data.episode_scenes[w.episode_id] for w in windows], self.model, windows,
                                        substeps=self.data.cfg["substeps"], rot_weight=self.loss_cfg["rot_weight"],
                                        force_weight=float(self.loss_cfg["force_weight"]))
            self.log("train/pose_loss", loss, prog_bar=True, batch_size=len(windows))
            return loss
        loss = window_loss(self.data.twins, self.model, windows, substeps=self.data.cfg["substeps"],
                           rot_weight=self.loss_cfg["rot_weight"], detach_every=int(self.data.cfg["detach_every"]),
                           force_weight=float(self.loss_cfg["force_weight"]))
        self.log("train/pose_loss", loss, prog_bar=True, batch_size=len(windows))
        return loss

    def validation_step(self, batch, _):
        self._val_rows += validate_chunk(self.model, self.data, batch)

    def on_validation_epoch_end(self):
        rows, self._val_rows = self._val_rows, []
        if not rows:
            return
        pos = float(np.mean([r["pos_pct"] for r in rows]))
        rot = float(np.mean([r["rot_deg"] for r in rows]))
        score = pos + self.loss_cfg["rot_weight_val"] * rot
        self.log("val/pos_pct", pos)
        self.log("val/rot_deg", rot)
        self.log("val_score", score, prog_bar=True)
        self.val_history.append({"epoch": int(self.current_epoch), "pos_pct": pos, "rot_deg": rot, "score": score,
                                 "prior": {grp: self.model.prior(grp).to_json() for grp in ("surface", "body")}})
        self.val_rows[int(self.current_epoch)] = rows

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        # the best epoch is chosen from these after the fit (``fit._load_best``): a resumed stage needs them too.
        # Nothing random is drawn in training (the shuffle is seeded by the epoch, the corrections' initial weights by
        # the run's seed: ``fit.fit_law``), so torch's generator is not part of what a resume restores
        checkpoint["val_history"], checkpoint["val_rows"] = self.val_history, self.val_rows

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.val_history = list(checkpoint.get("val_history", []))
        self.val_rows = {int(k): v for k, v in checkpoint.get("val_rows", {}).items()}

    def configure_optimizers(self):
        self._set_trainable()
        params = [p for p in self.model.parameters() if p.requires_grad]
        opt = torch.optim.Adam(params, lr=self.lr)
        if self.final_lr_fraction >= 1.0 or self.total_steps <= 1:
            return opt
        # exponential decay to final_lr_fraction x lr over the stage: the last epochs refine (the pose loss
        # of chaotic rollouts is noisy; a constant step keeps wandering around the optimum)
        gamma = self.final_lr_fraction ** (1.0 / self.total_steps)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": torch.optim.lr_scheduler.ExponentialLR(opt, gamma), "interval": "step"}}
