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


def is_release(path) -> bool:
    """Whether ``path`` is a shipped release: a checkpoint folder directly in ``checkpoints_dir()`` (a checkout's or
    the installed package's). Only ``surrogate train --release`` writes one; nothing else replaces it."""
    p = Path(path)
    return (p / "card.json").exists() and p.resolve().parent == checkpoints_dir().resolve()


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


def portable_path(path) -> str | None:
    """A path as a checkpoint card stores it, with nothing of the machine it was made on: relative to the
    project root when inside it (``datasets/generated/rig_default``), ``${SURROGATE_DATA}/...`` when inside the
    shared data folder, else the folder's name alone (the card's ``sha256`` then identifies the content).
    Readers resolve it as they resolve a config's paths (relative to the project root, ``$SURROGATE_DATA``)."""
    if path is None or str(path) == "":
        return None if path is None else ""
    p = Path(os.path.expandvars(str(path)))
    if not p.is_absolute():
        return str(path)
    p = p.resolve()
    for base, prefix in ((project_root(), ""), (os.environ.get("SURROGATE_DATA"), "${SURROGATE_DATA}/")):
        if base:
            try:
                return prefix + str(p.relative_to(Path(base).resolve()))
            except ValueError:
                pass
    return p.name


# the keys of a training config that hold paths (the path rule of ``training.config``; made portable in cards)
TRAINING_PATH_KEYS = ("out_dir", "ckpt_path", "data.root", "export.dir", "export.release_dir", "export.prior_dir",
                      "export.network_dir", "stages.closed_loop.reference", "stages.closed_loop.decision_data")

def portable_paths(cfg: dict, keys) -> dict:
    """A copy of ``cfg`` with each dotted key of ``keys`` that holds a path made ``portable_path``."""
    import copy

    out = copy.deepcopy(cfg)
    for key in keys:
        *parents, leaf = key.split(".")
        d = out
        for k in parents:
            d = d.get(k) if isinstance(d, dict) else None
        if isinstance(d, dict) and isinstance(d.get(leaf), str):
            d[leaf] = portable_path(d[leaf])
    return out


def file_sha256(path: str | Path) -> str:
    """sha256 (hex) of a file's bytes: the identity of a checkpoint's weights, or of the mesh or URDF a capture's
    object was made from."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
