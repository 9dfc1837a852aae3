"""The transfer ledger: one JSON file per benchmark run, validated against a schema.

Schema: ``eval/ledger.schema.json`` (documented in the README, "Transfer ledger").
"""

from __future__ import annotations

import json
import platform
from datetime import datetime, timezone
from pathlib import Path

import jsonschema

from ..atomic import write_json_atomic
from ..paths import REPO_ROOT

SCHEMA_PATH = REPO_ROOT / "eval" / "ledger.schema.json"
LEDGER_VERSION = "1.0"


def versions() -> dict:
    import mujoco
    import numpy
    import scipy

    from .. import __version__

    v = {"contact-surrogate": __version__, "python": platform.python_version(), "numpy": numpy.__version__,
         "scipy": scipy.__version__, "mujoco": mujoco.__version__}
    try:
        import torch
        import torch_geometric

        v["torch"], v["torch_geometric"] = torch.__version__, torch_geometric.__version__
    except ImportError:
        pass
    return v


def verdict(models: dict, *, metric: str = "pos_pct_size", baseline: str = "analytic_identified") -> dict:
    """Compare the surrogate with the baseline on the mean of ``metric`` (lower is better)."""
    s, b = models.get("surrogate", {}), models.get(baseline)
    if "overall" not in s or b is None or "overall" not in b:
        missing = "surrogate" if "overall" not in s else baseline
        return {"verdict": "not tested", "detail": f"{missing} was not evaluated in this run"}
    sm, bm = s["overall"][metric], b["overall"][metric]
    ok = sm["mean"] < bm["mean"]
    ci = lambda x: f"[{x['mean_ci95'][0]:.2f}, {x['mean_ci95'][1]:.2f}]" if x.get("mean_ci95") else ""
    return {"verdict": "supported" if ok else "falsified",
            "detail": f"surrogate mean {metric} {sm['mean']:.2f} {ci(sm)} vs {baseline} {bm['mean']:.2f} {ci(bm)} "
                      f"(medians {sm['median']:.2f} vs {bm['median']:.2f}; 95 % bootstrap intervals over {sm['n']} test episodes)"}


def build_ledger(*, suite: str, cfg: dict, cfg_hash: str, run: dict, assets: dict | None = None, result: dict | None = None) -> dict:
    ledger = {
        "ledger_version": LEDGER_VERSION,
        "suite": suite,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "wall_s": float(run.get("wall_s", 0.0)),
        "versions": versions(),
        "config_hash": cfg_hash,
        "config": cfg,
        "data": run["data"],
        "assets": assets or {},
        "split": run.get("split", {}),
        "hypothesis": " ".join(str(cfg.get("hypothesis", "")).split()),
        "falsified_if": " ".join(str(cfg.get("falsified_if", "")).split()),
        "models": run["models"],
        "result": result or verdict(run["models"]),
        "reported": cfg.get("reported", {}),
    }
    return ledger


def validate_ledger(ledger: dict) -> None:
    """Raise jsonschema.ValidationError if ``ledger`` does not follow the schema."""
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.validate(ledger, schema)


def write_ledger(ledger: dict, out_dir: str | Path) -> Path:
    validate_ledger(ledger)
    path = Path(out_dir) / "ledger.json"
    write_json_atomic(path, ledger)
    return path
