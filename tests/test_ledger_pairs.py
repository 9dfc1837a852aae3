"""``eval/ledger_pairs.py``: any two rows of a suite's ledger paired as the ledger pairs its learned rows with its
``surrogate`` row (the same episodes, horizon, unit of the bootstrap)."""

from __future__ import annotations

import numpy as np
import pytest

from surrogate.bench.paired_rows import paired_minus_surrogate

from .conftest import eval_script


def _row(rng, shift: float, checkpoint: str | None = "ckpt") -> dict:
    eps = [{"id": f"e{i}", "object": f"o{i // 2}", "set": "heldout" if i < 30 else "other",
            "horizon_pos_pct_size": {"1": float(10 + shift + rng.normal())}, "pos_pct_size": float(12 + shift + rng.normal()),
            "pad_force_weights": float(1 + rng.normal() * 0.1)} for i in range(40)]
    return {"checkpoint": checkpoint, "per_episode": eps}


def test_a_pair_is_the_ledgers_own_pairing_and_b_minus_a():
    pairs = eval_script("ledger_pairs")
    rng = np.random.default_rng(0)
    models = {"surrogate": _row(rng, 0.0), "net": _row(rng, -2.0), "law": _row(rng, 0.5),
              "analytic_nominal": _row(rng, 3.0, checkpoint=None)}
    own = paired_minus_surrogate(models, sets=["heldout", "other"], horizon_s=1.0, by="object")
    models["net"]["paired_minus_surrogate"] = own["net"]
    ledger = {"models": models, "config": {"metrics": {"paired_by": "object"}, "acceptance": {"horizon_s": 1.0}}}
    got = pairs.pairs(ledger, ["surrogate", "net", "law", "net", "net", "law", "surrogate", "analytic_nominal"])
    assert got[0]["pos_pct_at_horizon"] == own["net"]["pos_pct_at_horizon"]
    assert got[0]["pos_pct_size"] == own["net"]["pos_pct_size"]
    assert got[1]["pos_pct_at_horizon"]["mean"] == pytest.approx(-got[2]["pos_pct_at_horizon"]["mean"])
    assert got[1]["pos_pct_at_horizon"]["mean"] < -1.5 and got[1]["pos_pct_at_horizon"]["ci95"][1] < 0
    assert got[1]["pos_pct_at_horizon"]["units"] == 20  # objects, not episodes, are resampled
    assert got[3]["means"]["analytic_nominal"]["pos_pct_size"] > got[3]["means"]["surrogate"]["pos_pct_size"]
    with pytest.raises(SystemExit, match="no row 'missing'"):
        pairs.pairs(ledger, ["surrogate", "missing"])
