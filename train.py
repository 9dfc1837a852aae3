"""Train the contact surrogate: ``python train.py fit --config configs/train/<name>.yaml [--set key=value ...]``.

A thin wrapper: the same command as ``surrogate train`` (``surrogate.training``, shipped with the package,
so an installed package trains without this file). ``python train.py --help`` lists the arguments:
``--print-config``, ``--seed``, ``--accelerator``/``--device``, ``--devices``, ``--release``, ``--overwrite``.
"""

from __future__ import annotations

import sys

from surrogate.training.cli import main, script_main  # main: the in-process entry point, returns the run's summary
from surrogate.training.config import DEFAULTS, LAW_DEFAULTS, load_config, resolved_config
from surrogate.training.run import RUN_CONFIG, export_dir, fit, fit_law

__all__ = ["main", "script_main", "DEFAULTS", "LAW_DEFAULTS", "load_config", "resolved_config", "RUN_CONFIG",
           "export_dir", "fit", "fit_law"]

if __name__ == "__main__":
    sys.exit(script_main())
