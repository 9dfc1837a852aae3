"""Lightning's known, harmless output, filtered while the package trains (``quiet_lightning``)."""

from __future__ import annotations

import contextlib
import logging
import os
import warnings


@contextlib.contextmanager
def quiet_lightning(*, logs: bool = True):
    """Lightning's known, harmless warnings filtered while a run trains (``surrogate train``, the main job), as the
    command line filters other known third-party noise (``--verbose``, ``SURROGATE_VERBOSE``, keeps it); with
    ``logs``, its information lines too (devices, the model summary, DDP's start: the main job's stage prints its
    own, where ``surrogate train`` keeps Lightning's)."""
    if os.environ.get("SURROGATE_VERBOSE"):
        yield
        return
    import lightning.pytorch  # noqa: F401  (it sets its logger's level when imported: import it before changing it)

    loggers = [logging.getLogger(n) for n in ("lightning.pytorch", "lightning.fabric")]  # fabric: "Seed set to 0"
    levels = [log.level for log in loggers]
    with warnings.catch_warnings():
        # Lightning checks module modes as fit starts, before RolloutLightning.on_train_epoch_start puts the model in
        # train mode (the whole-episode validation before the fit left it in eval mode): harmless, and it read like
        # the eval-mode bug docs/training.md describes as fixed.
        warnings.filterwarnings("ignore", message=r".*module\(s\) in eval mode.*")
        # the training windows are tensors in memory: dataloader worker processes would only copy them
        warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
        # the main job's short run has fewer batches than Lightning's logging interval: nothing is lost
        warnings.filterwarnings("ignore", message=r".*smaller than the logging interval.*")
        # Lightning's own use of a torch pytree API it deprecated itself; nothing this package calls
        warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\).*")
        # "GPU available: False ...", a litlogger tip, the model summary: a dozen lines per training stage, every run
        for log in loggers if logs else ():
            log.setLevel(logging.WARNING)
        try:
            yield
        finally:
            for log, level in zip(loggers, levels):
                log.setLevel(level)
