"""Benchmark suites as YAML under ``configs/eval/``: loading with ``base:`` inheritance."""

from __future__ import annotations

from pathlib import Path

from .config import (
    apply_overrides,
    check_override_keys,
    config_hash,  # noqa: F401  (re-exported: the ledger's config identity)
    load_yaml,
    merge,
)
from .errors import ConfigError
from .paths import CONFIG_DIR

SUITE_DIR = CONFIG_DIR / "eval"
OPEN_KEYS = ("surrogate.rows", "data.test_sets")  # mappings of the user's own names: a new one may be added


def suite_path(name_or_path: str | Path) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return p
    cand = SUITE_DIR / f"{name_or_path}.yaml"
    if not cand.exists():
        known = sorted(x.stem for x in SUITE_DIR.glob("*.yaml"))
        raise ConfigError(f"unknown suite {str(name_or_path)!r}; known: {known}", key="suite")
    return cand


def load_suite(name_or_path, overrides=()) -> dict:
    """The suite config with its ``base`` chain merged (child wins) and overrides applied."""
    path = suite_path(name_or_path)
    cfg = load_yaml(path)
    seen = {path.resolve()}
    while "base" in cfg:
        base_path = (path.parent / cfg.pop("base")).resolve()
        if base_path in seen:
            raise ConfigError("circular base chain", file=path, key="base")
        seen.add(base_path)
        cfg = merge(load_yaml(base_path), cfg)
        path = base_path
    check_override_keys(cfg, list(overrides), open_keys=OPEN_KEYS)
    cfg = apply_overrides(cfg, list(overrides), file=path)
    if "suite" not in cfg:
        raise ConfigError("missing", file=path, key="suite")
    return cfg
