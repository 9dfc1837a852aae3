"""Derivative-free refits of a contact law's global parameters through the hybrid stepper: the benchmark's own
rollouts, actuated hand and all, where the differentiable twin cannot go (the twin moves the hand kinematically; the
stepper actuates it through its servos, as users' rollouts do).

One search for every refit (``refit_search``): scipy's differential evolution as MuJoCo's identification runs it
(``identify.fit_params``: sobol init, deferred updating, no polish) over log-parameters ``(name, group)`` within
``span`` (a factor) of the start and inside ``law_ranges`` (friction also below ``mu_max``), with the start in the first
population (``x0``) and kept unless a candidate beats it, so a refit can only improve on its start on the episodes it
is fitted on. Used by ``elbow_fewshot`` (the floor law on elbow tosses, ``method: search``) and ``refit_grasp_law``
(the pads and the table on closed-loop replays of grasps: the training's ``stages.closed_loop.refit``).
"""

from __future__ import annotations

import copy
import time

import numpy as np
import torch
from scipy.optimize import differential_evolution

from ..metrics import paired_difference
from ..model.contact_law import GROUPS
from ..model.law_ranges import bounds as law_bounds
from ..model.law_ranges import check_model

SPAN = {"stiffness": 4.0, "damping": 4.0, "friction": 2.0, "static_friction": 2.0, "stribeck_speed": 4.0}
# the grasp refit: the pads' stiffness, damping and friction, the table's friction (what decides slip and grip)
GRASP_KEYS = (("stiffness", 1), ("damping", 1), ("friction", 1), ("friction", 0))
GRASP_SPAN = {"stiffness": 10.0, "damping": 10.0, "friction": 2.5}


def law_values(model, keys) -> dict:
    """{"name[group]": value} of the ``(name, group)`` global parameters ``keys`` of a ``ContactLawGNN``."""
    return {f"{k}[{GROUPS[g]}]": float(getattr(model, f"log_{k}")[g].detach().exp()) for k, g in keys}


def set_law(model, keys, x) -> None:
    """Set the log-parameters ``keys`` of ``model`` to ``x`` [K] (in place)."""
    with torch.no_grad():
        for (k, g), v in zip(keys, x):
            getattr(model, f"log_{k}")[g] = float(v)


def search_bounds(model, keys, span: dict | None = None) -> list[tuple[float, float]]:
    """Log-space bounds of ``keys``: ``span`` (factors, default ``SPAN``) around the current values, inside
    ``law_ranges`` (friction also below ``mu_max``); the current value always lies inside."""
    span = {**SPAN, **(span or {})}
    out = []
    for k, g in keys:
        v = float(getattr(model, f"log_{k}")[g].detach().exp())
        lo, hi = law_bounds(k, model.units)
        if k == "friction":
            hi = min(hi, model.mu_max)
        out.append((float(np.log(max(v / span[k], lo))), float(np.log(min(v * span[k], hi)))))
    return out


def refit_search(model, keys, loss, *, span: dict | None = None, maxiter: int = 20, popsize: int = 8, seed: int = 0,
                 where: str = "the refitted law"):
    """(a copy of ``model`` with ``keys`` refitted to minimize ``loss(model copy) -> float``, info {keys, start,
    fitted, bounds, start_loss, loss (<= start_loss), evaluations, optimizer, wall_s})."""
    t0 = time.time()
    m = copy.deepcopy(model).eval()
    start = law_values(m, keys)
    evals = [0]

    def f(x) -> float:
        evals[0] += 1
        set_law(m, keys, x)
        return float(loss(m))

    x0 = np.array([float(getattr(m, f"log_{k}")[g].detach()) for k, g in keys])
    start_loss = f(x0)
    bnds = search_bounds(m, keys, span)
    res = differential_evolution(lambda X: np.array([f(X[:, s]) for s in range(X.shape[1])]), bnds, x0=x0,
                                 maxiter=maxiter, popsize=popsize, seed=seed, tol=1e-3, polish=False, vectorized=True,
                                 updating="deferred", init="sobol")
    best, best_loss = (res.x, float(res.fun)) if res.fun <= start_loss else (x0, start_loss)
    set_law(m, keys, best)
    check_model(m, where=where)
    info = {"keys": list(start), "start": start, "fitted": law_values(m, keys),
            "bounds": {n: [float(np.exp(lo)), float(np.exp(hi))] for n, (lo, hi) in zip(start, bnds)},
            "start_loss": start_loss, "loss": best_loss, "evaluations": evals[0],
            "optimizer": f"scipy differential_evolution (popsize {popsize}, maxiter {maxiter}, seed {seed}; the "
                         "start in the first population)", "wall_s": time.time() - t0}
    return m.eval(), info


def refit_grasp_law(model, train_episodes, val_episodes, meta, *, substeps: int, margin: float, rot_weight: float,
                    maxiter: int = 4, popsize: int = 4, seed: int = 0, val_rows: list[dict] | None = None,
                    delay_s: float = 0.0):
    """The pads' (stiffness, damping, friction) and the table's friction of ``model`` refitted on closed-loop replays
    (``law_selection.replay_scores``: the recorded commands through MuJoCo's servos, the stepper's solve) of
    ``train_episodes``, then scored on ``val_episodes`` against ``model``; the commands act ``delay_s`` late.

    Returns:
      (the refitted copy, info: ``refit_search``'s plus ``val_score`` / ``val_score_start`` (means), ``per_episode``
      (the refit's validation rows), ``paired_minus_start`` (refit minus start on validation, 95 % interval)).
    """
    from .law_selection import replay_scores

    kw = dict(substeps=substeps, margin=margin, rot_weight=rot_weight, progress=False, delay_s=delay_s)

    def loss(m) -> float:
        return float(np.mean([r["score"] for r in replay_scores(m, train_episodes, meta, **kw)]))

    fitted, info = refit_search(model, GRASP_KEYS, loss, span=GRASP_SPAN, maxiter=maxiter, popsize=popsize, seed=seed,
                                where="the closed-loop refit of the pads and the table")
    start_rows = val_rows if val_rows is not None else replay_scores(model, val_episodes, meta, **kw)
    rows = replay_scores(fitted, val_episodes, meta, **kw)
    info.update(train_episodes=[str(e.episode_id) for e in train_episodes], per_episode=rows,
                val_score=float(np.mean([r["score"] for r in rows])),
                val_score_start=float(np.mean([r["score"] for r in start_rows])),
                paired_minus_start=paired_difference(start_rows, rows, "score", by="object"))
    return fitted, info
