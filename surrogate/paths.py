"""Where the configs, the released checkpoints, the cache and the shared data are.

Two ways to run the package, one answer each:

- **from a checkout** (the repository, ``pip install -e .`` or plain ``python`` in it): the checkout's
  ``configs/`` and ``checkpoints/``, the cache in ``datasets/cache``;
- **installed** (``pip install .`` elsewhere, a wheel): the same files shipped inside the package as
  ``surrogate.configs`` and ``surrogate.checkpoints`` (mapped onto the two folders in pyproject.toml,
  one copy of each), found with ``importlib.resources``; the cache in ``$SURROGATE_CACHE`` or the
  user's cache folder.

A checkout wins over the package data, so code and configs always come from the same tree.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent  # the checkout when running from one (see ``checkout_root``)
PROJECT_NAME = "contact-surrogate"


def checkout_root() -> Path | None:
    """The repository this code runs from, or None when it runs from an installed package."""
    pyproject = REPO_ROOT / "pyproject.toml"
    try:
        if f'name = "{PROJECT_NAME}"' in pyproject.read_text():
            return REPO_ROOT
    except OSError:
        pass
    return None


def _package_data(name: str, folder: str) -> Path:
    """``<checkout>/<folder>`` from a checkout, else the installed package ``surrogate.<name>``."""
    root = checkout_root()
    if root is not None and (root / folder).is_dir():
        return root / folder
    try:
        return Path(str(resources.files(f"surrogate.{name}")))
    except ModuleNotFoundError:  # neither a checkout nor an install that ships it: name where it was looked for
        return PACKAGE_DIR / name


def config_dir() -> Path:
    """The folder of the project's YAML configs (``configs/``: eval, train, rig, objects, import, capture)."""
    return _package_data("configs", "configs")


def checkpoints_dir() -> Path:
    """The folder of the released checkpoints (``checkpoints/``)."""
    return _package_data("checkpoints", "checkpoints")


def release_checkpoint(name: str) -> Path:
    """The released checkpoint ``name`` (``cube_tosses``, ``rig_default``) of this package."""
    return checkpoints_dir() / name


def project_root() -> Path:
    """Where relative data paths of the packaged configs point (``datasets/...``): the checkout, else the
    current folder."""
    return checkout_root() or Path.cwd()


def cache_dir() -> Path:
    """Cache of imported and generated benchmark data: ``$SURROGATE_CACHE``, else ``<checkout>/datasets/cache``,
    else ``$XDG_CACHE_HOME/contact-surrogate`` (``~/.cache/contact-surrogate``)."""
    env = os.environ.get("SURROGATE_CACHE")
    if env:
        return Path(env)
    root = checkout_root()
    if root is not None:
        return root / "datasets" / "cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / PROJECT_NAME


def shared_data_dir() -> Path:
    """Folder of the public sample data: ``$SURROGATE_DATA``, else ``<checkout>/../shared/data`` (installed:
    ``../shared/data`` from the current folder)."""
    env = os.environ.get("SURROGATE_DATA")
    return Path(env) if env else project_root().parent / "shared" / "data"


CONFIG_DIR = config_dir()
