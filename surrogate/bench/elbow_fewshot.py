"""``elbow-real``'s few-shot surrogate rows: the released cube law refitted on N elbow training tosses.

The differentiable twin (``sim.twin``) integrates one free rigid body, not the elbow's hinged pair, so the fine-tune is
derivative-free through the hybrid stepper, the benchmark's own rollouts: a law refit, not gradient training (the
network, if the release has one, is not retrained; its weights and normalizers stay the release's). Searched: the
floor group's (group 0, ``contact_law.GROUPS``: static surfaces) global log-parameters ``log_stiffness``,
``log_damping``, ``log_friction`` and, with ``stribeck``, ``log_static_friction`` and ``log_stribeck_speed``, in log
space within ``span`` (a factor) of the release's values and inside ``law_ranges`` (a candidate outside them, e.g.
static x kinetic friction above ``mu_max``, loses to every one inside). Optimizer: scipy's differential evolution as
MuJoCo's identification runs it (``identify.fit_params``: sobol init, deferred updating, no polish), with the release's
law as a member of the first population (``x0``), so the fit can only improve on the release on its training tosses.
Loss: MuJoCo's identification loss (``identify.toss_errors`` / ``loss_of``: link 1's mean position error / size +
rotation error / 100) on the same training tosses, from the same first-state estimate (``TossSet``).
"""

from __future__ import annotations

import copy
import time

import numpy as np
from scipy.optimize import differential_evolution

from ..metrics import paired_difference
from ..model.law_ranges import bounds as law_bounds
from ..model.law_ranges import check_model, range_problems
from .analytic import TossSet
from .identify import UNSTABLE_LOSS, loss_of, toss_errors
from .predictors import DEFAULT_MARGIN, object_scene
from .rows import scored

GROUP = 0  # contact_law.GROUPS[0]: static surfaces (the floor)
SPAN = {"stiffness": 4.0, "damping": 4.0, "friction": 2.0, "static_friction": 2.0, "stribeck_speed": 4.0}
METRICS = ("pos_pct_size", "rot_deg", "joint_deg")


def refit_keys(model) -> list[str]:
    """The floor group's global parameters a refit searches (the Stribeck pair only with ``model.stribeck``)."""
    return ["stiffness", "damping", "friction"] + (["static_friction", "stribeck_speed"] if model.stribeck else [])


def law_values(model) -> dict:
    """{key: the floor group's current value} of ``refit_keys``."""
    return {k: float(getattr(model, f"log_{k}")[GROUP].detach().exp()) for k in refit_keys(model)}


def set_law(model, keys, x) -> None:
    """Set the floor group's log-parameters ``keys`` to ``x`` (in place)."""
    import torch

    with torch.no_grad():
        for k, v in zip(keys, x):
            getattr(model, f"log_{k}")[GROUP] = float(v)


def search_bounds(model, span: dict | None = None) -> list[tuple[float, float]]:
    """Log-space bounds of ``refit_keys``: ``span`` (factors) around the release's values, inside ``law_ranges``
    (friction also below ``mu_max``); the release's value always lies inside."""
    span = {**SPAN, **(span or {})}
    out = []
    for k, v in law_values(model).items():
        lo, hi = law_bounds(k, model.units)
        if k == "friction":
            hi = min(hi, model.mu_max)
        out.append((float(np.log(max(v / span[k], lo))), float(np.log(min(v * span[k], hi)))))
    return out


def link_rollout(model, scene, tosses: TossSet) -> tuple[np.ndarray, dict]:
    """([N, F, 7 + J] base pose and joints at the capture frames, the stepper's counts): ``tosses`` rolled out together
    through the rollout API (one batch of MjData, one contact-model call per physics step), ``model`` owning every
    link's floor contacts."""
    from ..sim import Stepper
    from ..sim.rollout import object_states, rollout

    stepper = Stepper(scene, model, on_bad_force="fallback")
    try:
        traj = rollout(scene, object_states(scene, tosses.qpos0, tosses.qvel0), contact=stepper,
                       substeps=tosses.substeps, frames=int(tosses.n_frames.max()))
    finally:
        stepper.close()
    a = scene.object_qpos_adr
    cols = list(range(a, a + 7)) + list(scene.meta["object_joint_qpos_adr"])
    st = traj.stats
    return traj.qpos[:, :, cols], {k: st[k] for k in ("env_steps", "contacts", "fallbacks", "bad_force_events",
                                                        "mujoco_resets")}


def toss_loss(model, scene, tosses: TossSet, size: float) -> float:
    """MuJoCo's identification loss (``identify.loss_of``) of ``model``'s rollouts of ``tosses``; ``UNSTABLE_LOSS``
    for a law outside ``law_ranges``."""
    if range_problems(model.prior("surface").to_json(), mu_max=model.mu_max):
        return UNSTABLE_LOSS
    pred, _ = link_rollout(model, scene, tosses)
    pos, rot = toss_errors(pred[None, :, :, :7], tosses, size)
    return float(loss_of(pos, rot)[0])


def refit_law(model, episodes, *, substeps: int, init_frames: int, margin: float = DEFAULT_MARGIN, maxiter: int = 20,
              popsize: int = 8, seed: int = 0, span: dict | None = None):
    """(a copy of ``model`` with its floor law refitted on ``episodes``, info): see the module docstring. info:
    ``keys``, ``start`` / ``fitted`` values, ``bounds`` (values), ``start_loss``, ``loss`` (<= ``start_loss``),
    ``evaluations``, ``optimizer``, ``episodes`` (their ids), ``wall_s``."""
    t0 = time.time()
    m = copy.deepcopy(model).eval()
    keys, start = refit_keys(m), law_values(m)
    scene = object_scene(episodes[0], substeps=substeps, mode="external", margin=margin)
    tosses = TossSet.from_episodes(episodes, substeps=substeps, k=init_frames)
    size = float(episodes[0].object.size)
    evals = [0]

    def loss(x) -> float:
        evals[0] += 1
        set_law(m, keys, x)
        return toss_loss(m, scene, tosses, size)

    x0 = np.log([start[k] for k in keys])
    start_loss = loss(x0)
    bnds = search_bounds(m, span)
    res = differential_evolution(lambda X: np.array([loss(X[:, s]) for s in range(X.shape[1])]), bnds, x0=x0,
                                 maxiter=maxiter, popsize=popsize, seed=seed, tol=1e-3, polish=False, vectorized=True,
                                 updating="deferred", init="sobol")
    best, best_loss = (res.x, float(res.fun)) if res.fun <= start_loss else (x0, start_loss)
    set_law(m, keys, best)
    check_model(m, where="the refitted elbow law")
    info = {"keys": keys, "group": "surface", "start": start, "fitted": law_values(m),
            "bounds": {k: [float(np.exp(lo)), float(np.exp(hi))] for k, (lo, hi) in zip(keys, bnds)},
            "start_loss": start_loss, "loss": best_loss, "evaluations": evals[0],
            "optimizer": f"scipy differential_evolution (popsize {popsize}, maxiter {maxiter}, seed {seed}; the "
                         f"release's law in the first population)",
            "episodes": [str(e.episode_id) for e in episodes], "wall_s": time.time() - t0}
    return m.eval(), info


def predict_groups(model, episodes, *, substeps: int, init_frames: int, margin: float) -> tuple[dict, dict]:
    """({episode id: [T, 7 + J]}, summed stepper counts): ``episodes`` grouped by object and capture rate, each group
    one batch (``link_rollout``)."""
    groups: dict = {}
    for e in episodes:
        groups.setdefault((e.object.name, e.provenance.capture_rate_hz), []).append(e)
    preds, counts = {}, {}
    for group in groups.values():
        scene = object_scene(group[0], substeps=substeps, mode="external", margin=margin)
        out, c = link_rollout(model, scene, TossSet.from_episodes(group, substeps=substeps, k=init_frames))
        preds.update({e.episode_id: out[i, :e.num_frames] for i, e in enumerate(group)})
        counts = {k: counts.get(k, 0) + v for k, v in c.items()}
    return preds, counts


def finetuned_rows(cfg, pool_by_id, sp, *, checkpoint, test, scorer, models: dict) -> dict:
    """Rows ``surrogate_finetuned_elbow_<N>``: the ``--checkpoint`` law refitted (``refit_law``) on the same N elbow
    training tosses as ``analytic_identified_elbow_<N>``, scored on the same test tosses, each with ``paired``: the row
    minus MuJoCo identified on the same N (the acceptance at N = 16), minus the cube surrogate and minus the
    cube-identified row, per metric, over the same test episodes."""
    from ..model.checkpoint import load_checkpoint

    fs = cfg.get("few_shot") or {}
    sc = {"maxiter": 20, "popsize": 8, "span": None, **(fs.get("surrogate") or {})}
    if checkpoint is None or "overall" not in (models.get("surrogate") or {}) or not sc.get("enabled", True):
        return {}
    release, card = load_checkpoint(checkpoint)
    margin = float(card.get("data", {}).get("margin_m", DEFAULT_MARGIN))
    sim, pool, rows = cfg["simulation"], sp["pool"], {}
    for n in fs.get("sizes", []):
        k = len(pool) if n == "all" else int(n)
        if k > len(pool) or k < 1:
            continue
        train = [pool_by_id[i] for i in pool[:k]]
        fitted, info = refit_law(release, train, substeps=sim["substeps"], init_frames=sim["init_frames"], margin=margin,
                                 maxiter=int(sc["maxiter"]), popsize=int(sc["popsize"]), seed=k, span=sc["span"])
        preds, counts = predict_groups(fitted, test, substeps=sim["substeps"], init_frames=sim["init_frames"],
                                       margin=margin)
        m = scored(scorer, preds)
        row = {"description": f"the cube release's contact law refitted on {k} elbow training tosses (law refit, "
                              f"derivative-free, the network is not retrained): the floor's {', '.join(info['keys'])} "
                              f"by differential evolution through the hybrid stepper",
               "checkpoint": str(checkpoint), "refit": info, "law": fitted.prior("surface").to_json(),
               "train_size": k, "trained_on": "cube, then elbow (law refit)", "stepper": counts,
               "test_episodes_seen_in_training": sorted(set(info["episodes"]) & {str(e.episode_id) for e in test}), **m}
        refs = {f"analytic_identified_elbow_{k}": models.get(f"analytic_identified_elbow_{k}"),
                "surrogate": models.get("surrogate"), "analytic_identified": models.get("analytic_identified")}
        row["paired"] = [{"metric": key, "vs": name, **paired_difference(ref["per_episode"], m["per_episode"], key)}
                         for name, ref in refs.items() if ref and "per_episode" in ref for key in METRICS]
        rows[f"surrogate_finetuned_elbow_{k}"] = row
    return rows


def few_shot_detail(models: dict) -> str:
    """One sentence per fine-tuned row: its paired difference against MuJoCo identified on the same N tosses."""
    out = []
    for name, row in models.items():
        if not name.startswith("surrogate_finetuned_elbow_"):
            continue
        k = name.rsplit("_", 1)[1]
        p = {(d["vs"], d["metric"]): d for d in row.get("paired", [])}
        words = []
        for key, unit in (("pos_pct_size", " points"), ("rot_deg", " deg"), ("joint_deg", " deg hinge")):
            d = p.get((f"analytic_identified_elbow_{k}", key))
            if d and d.get("n"):
                words.append(f"{d['mean']:+.2f} [{d['ci95'][0]:+.2f}, {d['ci95'][1]:+.2f}]{unit}")
        if words:
            out.append(f"Few-shot, N = {k}: the refitted surrogate law minus MuJoCo identified on the same {k} elbow "
                       f"tosses, paired: " + ", ".join(words) + ".")
    return " ".join(out)
