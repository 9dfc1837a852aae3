"""Training entry point of the package: ``surrogate train`` (and the repository's ``train.py``, a thin wrapper).

- ``config``: finding a config (path or packaged name), defaults, the path rule, the resolved config;
- ``keys``: the keys every section may hold, checked against the code that reads them;
- ``dataset``: a missing capture dataset names the command that creates it;
- ``run``: the training paths (``model.kind: law``, contact model v2, the default; ``gns``, the end-to-end peer)
  and export;
- ``cli``: the arguments shared by ``surrogate train`` and ``train.py``; ``main(argv)`` runs them in-process.

In Python::

    from surrogate.training import export_dir, fit, load_config
    cfg = load_config("rig_default", ["data.root=datasets/generated/rig_default", "stages.prior.epochs=1"])
    cfg["export"]["dir"] = export_dir(cfg)
    summary = fit(cfg)

Submodules import Lightning lazily, so ``surrogate --help`` stays fast.
"""

from __future__ import annotations


def __getattr__(name):  # lazy: ``from surrogate.training import fit`` imports the training code only then
    if name in ("load_config", "resolved_config", "find_config", "to_yaml", "DEFAULTS", "LAW_DEFAULTS"):
        from . import config
        return getattr(config, name)
    if name in ("fit", "fit_law", "export_dir", "RUN_CONFIG"):
        from . import run
        return getattr(run, name)
    if name == "main":
        from .cli import main
        return main
    raise AttributeError(f"module 'surrogate.training' has no attribute {name!r}")


__all__ = ["load_config", "resolved_config", "find_config", "to_yaml", "DEFAULTS", "LAW_DEFAULTS", "fit", "fit_law",
           "export_dir", "RUN_CONFIG", "main"]
