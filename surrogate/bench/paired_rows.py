"""Further learned rows of a suite (``surrogate.rows``: a law-only checkpoint, a network, the previous release)
against its ``surrogate`` row, paired per test episode of the acceptance sets: the ablation a researcher reads from
one run on the same episodes, with intervals (``metrics.paired_difference``: row minus surrogate)."""

from __future__ import annotations

from ..metrics import paired_difference

# (ledger key of a per-episode value, what it is): the suite's verdict metric and the whole-episode ones
PAIRED_METRICS = {"pos_pct_at_horizon": "position % of size at the verdict's horizon",
                  "pos_pct_size": "position % of size over the episode",
                  "pad_force_weights": "pad force error, object weights"}


def _per_episode(row: dict, sets: set, horizon: str) -> list[dict]:
    """The row's per-episode scores on ``sets``, with the horizon's position error as ``pos_pct_at_horizon``."""
    out = []
    for r in row.get("per_episode") or []:
        if r.get("set") in sets:
            at = (r.get("horizon_pos_pct_size") or {}).get(horizon)
            out.append({**r, "pos_pct_at_horizon": at})
    return out


def paired_minus_surrogate(models: dict, *, sets, horizon_s: float, by: str | None = None) -> dict:
    """{row: {metric: paired_difference (row - surrogate), "horizon_s"}} for every learned row besides
    ``surrogate`` (rows with per-episode scores); a metric an episode lacks in either row (no horizon reached, no
    pad sensors) leaves that episode out of its pair; ``by``: the episode field whose units the bootstrap resamples
    (the suite's ``metrics.paired_by``)."""
    base = models.get("surrogate") or {}
    if not base.get("per_episode"):
        return {}
    sets, h = set(sets), f"{float(horizon_s):g}"
    ref = _per_episode(base, sets, h)
    out = {}
    for name, row in models.items():
        if name == "surrogate" or not row.get("checkpoint") or not row.get("per_episode"):
            continue
        mine = _per_episode(row, sets, h)
        out[name] = {**{key: paired_difference(ref, mine, key, by=by) for key in PAIRED_METRICS},
                     "horizon_s": float(horizon_s)}
    return out
