"""The loggers and the learning-rate monitor of every training run (both training paths use these).

CSV and TensorBoard under ``out``; TensorBoard without Lightning's placeholder ``hp_metric`` (the
hyperparameters are still logged); the learning rate of every optimizer step (``lr-Adam``).
"""

from __future__ import annotations

from pathlib import Path


def run_loggers(out: str | Path, suffix: str = "") -> list:
    """``[CSVLogger(out/csv<suffix>), TensorBoardLogger(out/tb<suffix>)]``."""
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    return [CSVLogger(str(out), name=f"csv{suffix}"),
            TensorBoardLogger(str(out), name=f"tb{suffix}", default_hp_metric=False)]


def lr_monitor():
    """Logs the learning rate at every optimizer step."""
    from lightning.pytorch.callbacks import LearningRateMonitor

    return LearningRateMonitor(logging_interval="step")
