"""Further learned rows of a suite (``surrogate.rows``: a law-only checkpoint, a network, the previous release)
against its ``surrogate`` row, paired per test episode of the acceptance sets: the ablation a researcher reads from
one run on the same episodes, with intervals (``metrics.paired_difference``: row minus surrogate)."""

from __future__ import annotations

from ..metrics import paired_difference

# (ledger key of a per-episode value, what it is): the suite's verdict metric and the whole-episode ones
PAIRED_METRICS = {"pos_pct_at_horizon": "position % of size at the verdict's horizon",
                  "pos_pct_size": "position % of size over the episode",
                  "pad_force_weights": "pad force error, object weights"}


def episodes_at_horizon(row: dict, sets, horizon_s: float) -> list[dict]:
    """The row's per-episode scores on ``sets``, with the horizon's position error as ``pos_pct_at_horizon``."""
    sets, h = set(sets), f"{float(horizon_s):g}"
    out = []
    for r in row.get("per_episode") or []:
        if r.get("set") in sets:
            at = (r.get("horizon_pos_pct_size") or {}).get(h)
            out.append({**r, "pos_pct_at_horizon": at})
    return out


def paired_minus(ref: dict, row: dict, *, sets, horizon_s: float, by: str | None = None) -> dict:
    """{metric: paired_difference (row - ref), "horizon_s"} of two rows' per-episode scores on ``sets``; a metric an
    episode lacks in either row (no horizon reached, no pad sensors) leaves that episode out of its pair; ``by``: the
    episode field whose units the bootstrap resamples (the suite's ``metrics.paired_by``)."""
    a, b = episodes_at_horizon(ref, sets, horizon_s), episodes_at_horizon(row, sets, horizon_s)
    return {**{key: paired_difference(a, b, key, by=by) for key in PAIRED_METRICS}, "horizon_s": float(horizon_s)}


def paired_minus_surrogate(models: dict, *, sets, horizon_s: float, by: str | None = None) -> dict:
    """{row: ``paired_minus`` (row - surrogate)} for every learned row besides ``surrogate`` (rows with per-episode
    scores)."""
    base = models.get("surrogate") or {}
    if not base.get("per_episode"):
        return {}
    return {name: paired_minus(base, row, sets=sets, horizon_s=horizon_s, by=by) for name, row in models.items()
            if name != "surrogate" and row.get("checkpoint") and row.get("per_episode")}
