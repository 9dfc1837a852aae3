"""A suite's model rows: predictor -> scorer -> ledger row, the same way in every suite.

The protocol, in plain functions:

- a *predictor* predicts every test episode and returns its *members*: a list of {episode key:
  prediction}, one member for a single model, K for an ensemble. The analytic rows share one
  suite function, ``simulate(params_for, name) -> members``, where ``params_for(episode)`` gives the
  parameter sets (one per member) to simulate that episode with: nominal (the object's nominal
  friction, MuJoCo's defaults), identified (fitted on training episodes), randomized (an
  ensemble around the identified values). A learned row's predictor comes from its checkpoint
  card's model class (``predictors.learned_for`` for tosses; the hybrid stepper's replay in
  ``rig-grasp``);
- a suite's ``Scorer`` turns one member's predictions into per-episode scores, reduces an
  ensemble's member scores to one score per episode, measures how often the truth lies within an
  ensemble's spread, and aggregates scores into the ledger's metrics;
- ``analytic_rows`` / ``learned_row`` assemble the ledger rows from those.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .analytic import nominal_params
from .identify import ensemble_ranges, randomized_ensemble, stable_ensemble


@dataclass(frozen=True)
class Scorer:
    """How a suite scores predictions.

    score: {episode key: prediction} -> per-episode score dicts, in test order.
    metrics: scores -> {"overall", "per_object", ["per_set"], "per_episode"} of a ledger row.
    ensemble: [K][N] member scores -> [N] the ensemble's per-episode scores.
    coverage: [K] member predictions -> fraction of tracked frames with the truth within the spread.
    """

    score: Callable[[dict], list]
    metrics: Callable[[list], dict]
    ensemble: Callable[[list], list]
    coverage: Callable[[list], float]


def scored(scorer: Scorer, preds: dict) -> dict:
    """The ledger metrics of one model's predictions {episode key: prediction}."""
    return scorer.metrics(scorer.score(preds))


def ensemble_scored(scorer: Scorer, members: list[dict]) -> dict:
    """The ledger metrics of an ensemble (its reduced per-episode scores) and its spread coverage."""
    scores = [scorer.score(m) for m in members]
    return {"truth_within_spread": scorer.coverage(members),
            # per member: the fraction of test episodes on which it blew up (evaluate.episode_errors)
            "member_unstable_rate": [float(sum(bool(s.get("unstable")) for s in ms) / max(len(ms), 1)) for ms in scores],
            **scorer.metrics(scorer.ensemble(scores))}


def analytic_rows(baselines: dict, *, simulate: Callable, scorer: Scorer, text: dict, nominal_json: dict,
                  identified: tuple | None, stable: Callable | None = None, timestep: float = 0.0) -> dict:
    """The rows ``analytic_nominal``, ``analytic_identified`` and ``analytic_randomized``.

    Args:
      baselines: the suite's ``baselines`` (``nominal``, ``randomized``: n, seed, ranges).
      simulate: ``simulate(params_for, name) -> members`` (see the module docstring).
      text: descriptions {"nominal", "identified", "randomized"} ("{n}": the ensemble size).
      nominal_json: the nominal row's ``params``.
      identified: (AnalyticParams, extra fields of the identified row) or None: no identified
        and no randomized row (nothing to anchor it on).
      stable: ``stable(params) -> [P] bool``: which parameter sets roll out on training episodes without
        blowing up (``identify.stable_ensemble``'s stability pass; None: no pass); ``timestep``: the suite's
        MuJoCo timestep (s), bounding the members' solref time constant.
    """
    nom = baselines["nominal"]
    rows = {"analytic_nominal": {"description": text["nominal"], "params": nominal_json,
                                 **scored(scorer, simulate(lambda e: [nominal_params(e, nom)], "analytic_nominal")[0])}}
    if identified is None:
        return rows
    params, extra = identified
    rows["analytic_identified"] = {"description": text["identified"], "params": params.to_json(), **extra,
                                   **scored(scorer, simulate(lambda e: [params], "analytic_identified")[0])}
    rc = baselines["randomized"]
    if stable is None:
        members = randomized_ensemble(params, n=int(rc["n"]), seed=int(rc.get("seed", 0)), ranges=rc.get("ranges"))
        check = {"ranges": {k: list(v) for k, v in ensemble_ranges(rc.get("ranges")).items()}}
    else:
        members, check = stable_ensemble(params, n=int(rc["n"]), seed=int(rc.get("seed", 0)), ranges=rc.get("ranges"),
                                         stable=stable, timestep=timestep)
    m = ensemble_scored(scorer, simulate(lambda e: members, "analytic_randomized"))
    rows["analytic_randomized"] = {
        "description": text["randomized"].format(n=len(members)),
        "ensemble": {"n": len(members), "anchor": "analytic_identified", "ranges": check.pop("ranges"),
                     "stability_pass": check or None,
                     "members": [p.to_json() for p in members],
                     "member_unstable_rate": m.pop("member_unstable_rate"),
                     "truth_within_spread": m.pop("truth_within_spread")},
        **m}
    return rows


def learned_row(*, description: str, checkpoint, card: dict, seen: list, metrics: dict, **extra) -> dict:
    """A learned model's ledger row: what it is, which checkpoint, the test episodes it was trained on."""
    data = card.get("data") if isinstance(card.get("data"), dict) else {}
    return {"description": description, "checkpoint": str(checkpoint),
            "card": {**{k: card.get(k) for k in ("weights_sha256", "training", "model")},
                     "data": {k: data.get(k) for k in ("name", "sha256")}},  # what it was trained on: verdicts say
            **extra, "test_episodes_seen_in_training": seen, **metrics}


NOT_GIVEN = {"status": "not evaluated", "reason": "no --checkpoint given"}
