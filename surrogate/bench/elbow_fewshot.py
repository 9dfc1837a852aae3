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

import numpy as np

from ..metrics import paired_difference
from ..model.law_ranges import range_problems
from .analytic import TossSet
from .identify import UNSTABLE_LOSS, loss_of, toss_errors
from .law_refit import refit_search
from .predictors import DEFAULT_MARGIN, object_scene
from .rows import scored

GROUP = 0  # contact_law.GROUPS[0]: static surfaces (the floor)
METRICS = ("pos_pct_size", "rot_deg", "joint_deg")


def refit_keys(model) -> list[tuple[str, int]]:
    """The floor group's global parameters a refit searches, ``(name, group)`` (the Stribeck pair only with
    ``model.stribeck``)."""
    names = ["stiffness", "damping", "friction"] + (["static_friction", "stribeck_speed"] if model.stribeck else [])
    return [(k, GROUP) for k in names]


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
    """(a copy of ``model`` with its floor law refitted on ``episodes``, info): see the module docstring and
    ``law_refit.refit_search`` (info: ``keys``, ``start`` / ``fitted`` values, ``bounds``, ``start_loss``, ``loss``
    (<= ``start_loss``), ``evaluations``, ``optimizer``, ``wall_s``; here also ``group`` and ``episodes``)."""
    scene = object_scene(episodes[0], substeps=substeps, mode="external", margin=margin)
    tosses = TossSet.from_episodes(episodes, substeps=substeps, k=init_frames)
    size = float(episodes[0].object.size)
    fitted, info = refit_search(model, refit_keys(model), lambda m: toss_loss(m, scene, tosses, size), span=span,
                                maxiter=maxiter, popsize=popsize, seed=seed, where="the refitted elbow law")
    info.update(group="surface", episodes=[str(e.episode_id) for e in episodes])
    return fitted, info


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
                              f"derivative-free, the network is not retrained): the floor's "
                              f"{', '.join(k.split('[')[0] for k in info['keys'])} "
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
