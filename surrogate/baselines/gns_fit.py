"""The training path of the end-to-end peer (``model.kind: gns``): Lightning fit, checkpoint by validation rollouts, export.

The peer learns the whole rigid-body step with no MuJoCo (``baselines.gns``). One stage:
``trainer.max_epochs`` epochs of the one-step noisy loss (``baselines.gns_lightning``); every validation
epoch (``trainer.check_val_every_n_epoch``) rolls the whole validation episodes out, and the epoch
with the lowest ``val_score`` is the one exported, as safetensors + JSON card
(``model.checkpoint.export_checkpoint``), to ``export.dir`` (or ``export.release_dir`` with ``--release``).
"""

from __future__ import annotations

import time
from pathlib import Path

from ..paths import TRAINING_PATH_KEYS as PATH_KEYS
from ..paths import portable_path, portable_paths  # cards carry no machine paths


def fit_gns(cfg: dict) -> dict:
    """Train the end-to-end peer under the loaded config ``cfg``; returns the run's summary."""
    import lightning as L
    import torch
    from lightning.pytorch.callbacks import ModelCheckpoint

    from ..learn.loggers import lr_monitor, run_loggers
    from .gns_data import GNSData
    from .gns_lightning import GNSLightning

    torch.set_num_threads(int(cfg.get("threads", 1)))
    L.seed_everything(int(cfg["seed"]), workers=True)
    out = Path(cfg["out_dir"])
    model_cfg = {k: v for k, v in cfg["model"].items() if k != "kind"}
    module = GNSLightning(model=model_cfg, loss=cfg["loss"], optim=cfg["optim"],
                          init_frames=int(cfg["data"].get("init_frames", 5)))
    dm = GNSData(history=module.model.history, grid=module.model.grid, seed=int(cfg["seed"]), **cfg["data"])
    dm.setup("fit")  # reads and validates every episode: bad captures stop here, before training
    module.val_episodes, module.gravity_nd, module.symmetries = dm.val_episodes, dm.gravity_nd, dm.symmetries
    tcfg = dict(cfg["trainer"])
    epochs = int(tcfg.get("max_epochs") or 1)
    module.max_steps = epochs * len(dm.train_dataloader())
    ckpt = ModelCheckpoint(dirpath=out / "checkpoints", monitor="val_score", mode="min", save_top_k=1, filename="best")
    trainer = L.Trainer(default_root_dir=str(out), logger=run_loggers(out), callbacks=[ckpt, lr_monitor()],
                        num_sanity_val_steps=0, **tcfg)
    t0 = time.time()
    trainer.fit(module, datamodule=dm)
    wall = time.time() - t0
    best = min(module.val_history, key=lambda r: r["val_score"]) if module.val_history else None
    result = {"train_wall_s": wall, "epochs": trainer.current_epoch, "steps": trainer.global_step,
              "train_windows": len(dm.train_set), "train_episodes": len(dm.train_ids), "val_episodes": len(dm.val_ids),
              "best": best, "validation": module.val_history}
    if cfg["export"].get("dir"):
        result["exported"] = export_gns(cfg, dm, module, ckpt, result)
    return {k: v for k, v in result.items() if k != "validation"}


def export_gns(cfg: dict, dm, module, ckpt, result: dict) -> str:
    """Export the best validation epoch's weights (read back from Lightning's checkpoint) with their card."""
    import torch

    from ..capture import dataset_hash
    from ..learn.objective import episode_scores
    from ..model.checkpoint import export_checkpoint
    from .gns_rollout import predict_episodes

    model = module.model
    if ckpt.best_model_path:  # Lightning's .ckpt is only for its own bookkeeping; the release is safetensors
        state = torch.load(ckpt.best_model_path, map_location="cpu", weights_only=True)["state_dict"]
        model.load_state_dict({k[len("model."):]: v for k, v in state.items() if k.startswith("model.")})
    model.cpu().eval()
    preds = predict_episodes(model, dm.val_episodes, init_frames=module.init_frames, gravity_nd=dm.gravity_nd,
                             progress=False)
    c = dm.cfg
    data = {"name": dm.capture.meta.name, "root": portable_path(c["root"]), "sha256": dataset_hash(c["root"]),
            "train_episodes": dm.train_ids, "val_episodes": dm.val_ids, "split_seed": c["split_seed"],
            "bench_split": c["bench_split"], "train_windows": len(dm.train_set), "gravity_nd": dm.gravity_nd,
            "frame_rate_hz": float(dm.val_episodes[0].provenance.capture_rate_hz),
            "object_size_m": float(dm.val_episodes[0].object.size), "body_points_L": dm.body.tolist(),
            "initial_state": "frame 0: ballistic / constant-rate fit over the first init_frames frames (as the "
                             "benchmarks), extrapolated backwards for the history; training windows: recorded poses"}
    metrics = {k: v for k, v in result.items() if k != "exported"}
    export_checkpoint(model, cfg["export"]["dir"], data=data,
                      training={"config": portable_paths(cfg, PATH_KEYS), "metrics": metrics,
                                "val_per_episode": episode_scores(preds, dm.val_episodes)})
    return str(cfg["export"]["dir"])
