"""Where shared data and the repository's configs are."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = REPO_ROOT / "configs"


def shared_data_dir() -> Path:
    """Folder of the public sample data: ``$SURROGATE_DATA``, else ``<repo>/../shared/data``."""
    env = os.environ.get("SURROGATE_DATA")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "data"
