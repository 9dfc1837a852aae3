"""``elbow-real``'s few-shot surrogate rows: the released cube surrogate fine-tuned on N elbow training tosses.

``finetune_law``, from the release and selected by the benchmark's own rollouts: gradient descent through the
differentiable twin of the hinged pair (``sim.twin_links``: the law solved in the elbow's joint space, gradients
through the joint). Trained: the floor group's (group 0, ``contact_law.GROUPS``: static surfaces) global
log-parameters ``log_stiffness``, ``log_damping``, ``log_friction`` and, with ``stribeck``, ``log_static_friction`` and
``log_stribeck_speed``, kept by projection within ``span`` (a factor) of the release's values and inside
``law_ranges``; and the network's weights when the release has one. Objective: the pose loss of link 1
(``learn.objective.pose_loss``, position over the link's size plus the rotation in degrees / 100, MuJoCo's
identification loss made smooth) over the first ``window`` frames of every toss, which hold the first impacts where
every model diverges, from the benchmarks' first-state estimate (``TossSet``), the same training tosses as the few-shot
MuJoCo rows; Adam, ``steps`` steps. What each side's fit sees of each training toss (``fitting_tosses``,
``few_shot.<side>.fit_on``): the whole toss (the default), or its window around its first floor impact
(``toss_windows``). The suite fits whole tosses on both sides: on the windows the fine-tune did not carry on folds of
the pool, and MuJoCo's identification tied at N = 8 and 16 and lost at 31 (docs/benchmarks.md). Selection: after
every step the law rolls out all of those training tosses through the hybrid stepper (``toss_loss``: MuJoCo's
identification loss, the benchmark's scorer on the training tosses), and the best step is kept, the release's own
law (step 0) included: the fine-tune can only improve on the release on its training tosses. (A derivative-free
refit through the stepper, ``method: search``, was its alternative until the twentieth session; its rows were no
better, and one fit of the law is kept.)
"""

from __future__ import annotations

import copy
import math
import time

import numpy as np
import torch
from tqdm import tqdm

from ..config import check_keys
from ..errors import ConfigError
from ..learn.objective import pose_loss
from ..metrics import paired_difference, signed_interval
from ..model.contact_law import GROUPS
from ..model.law_ranges import bounds as law_bounds
from ..model.law_ranges import check_model, range_problems
from ..scenes.from_capture import scene_key
from .analytic import TossSet
from .identify import UNSTABLE_LOSS, loss_of, toss_errors
from .predictors import DEFAULT_MARGIN, object_scene
from .rows import scored
from .toss_windows import AFTER_S, LEAD_FRAMES, impact_windows

GROUP = 0  # contact_law.GROUPS[0]: static surfaces (the floor)
METRICS = ("pos_pct_size", "rot_deg", "joint_deg")
ROT_WEIGHT = 180.0 / (100.0 * math.pi)  # per radian: MuJoCo's identification loss weighs degrees by 1/100
SPAN = {"stiffness": 4.0, "damping": 4.0, "friction": 2.0, "static_friction": 2.0, "stribeck_speed": 4.0}
# each step's log-parameters rounded to this grid (0.1 %): the twin's gradient through the tosses' impacts differs in
# its 6th-7th digit between CPUs (torch's vector kernels: AVX2 against the default, ATEN_CPU_CAPABILITY), Adam passes
# that into the parameters' last bits and the chaotic whole-toss rollouts that select the step amplify it; on the grid
# two CPUs take the same steps unless a difference lands on a rounding boundary
LOG_GRID = 1e-3


def refit_keys(model) -> list[tuple[str, int]]:
    """The floor group's global parameters the fine-tune trains, ``(name, group)`` (the Stribeck pair only with
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


def law_values(model, keys) -> dict:
    """{"name[group]": value} of the ``(name, group)`` global parameters ``keys`` of a ``ContactLawGNN``."""
    return {f"{k}[{GROUPS[g]}]": float(getattr(model, f"log_{k}")[g].detach().exp()) for k, g in keys}


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


def finetune_law(model, episodes, *, substeps: int, init_frames: int, margin: float = DEFAULT_MARGIN, steps: int = 8,
                 lr: float = 0.1, lr_network: float = 1e-3, window: int = 121, batch: int = 8, span: dict | None = None,
                 seed: int = 0, progress: bool = False):
    """(a copy of ``model`` fine-tuned on ``episodes`` by gradient through the articulated twin, info): see the module
    docstring (info: ``keys``, ``start`` / ``fitted`` values, ``bounds``, ``start_loss``, ``loss`` (<= ``start_loss``),
    ``history`` [(the batch's window loss before the step, the whole-toss loss after it)] per step, ``best_step``,
    ``evaluations``, ``optimizer``, ``wall_s``, ``network`` (whether its weights were trained too, at
    ``lr_network``: they also serve the pads' group)). Each step's gradient comes from ``batch`` tosses, taken in turn
    from a seeded shuffle of ``episodes``; the selection rolls out all of them. A batch without any contact in the
    window gives no gradient: its step is skipped (recorded with the last whole-toss loss)."""
    from ..sim.twin import Twin

    t0 = time.time()
    scene = object_scene(episodes[0], substeps=substeps, mode="external", margin=margin)
    tosses = TossSet.from_episodes(episodes, substeps=substeps, k=init_frames)
    size = float(episodes[0].object.size)
    m = copy.deepcopy(model).eval()  # eval: the normalizers stay the release's
    keys = refit_keys(m)
    start, bnds = law_values(m, keys), search_bounds(m, keys, span)
    laws = [getattr(m, f"log_{k}") for k, _ in keys]
    net = list(m.correction_parameters()) if m.corrections else []
    flags = [p.requires_grad for p in m.parameters()]
    for p in m.parameters():
        p.requires_grad_(any(p is q for q in laws + net))
    opt = torch.optim.Adam([{"params": laws, "lr": lr}] + ([{"params": net, "lr": lr_network}] if net else []))
    state0, target, valid = _toss_windows(tosses, window)
    twin, sizes = Twin(scene), torch.full((len(episodes),), size, dtype=torch.float64)

    def whole() -> float:
        with torch.no_grad():
            return toss_loss(m, scene, tosses, size)

    best = (whole(), 0, copy.deepcopy(m.state_dict()))
    start_loss, history, last = best[0], [], best[0]
    order = np.random.default_rng(seed).permutation(len(episodes))
    for i in tqdm(range(1, steps + 1), desc=f"fine-tune on {len(episodes)} elbow tosses", unit="step",
                  disable=not progress):
        idx = torch.from_numpy(order[(np.arange(min(batch, len(order))) + (i - 1) * batch) % len(order)])
        pos, quat, _ = twin.rollout(m, state0[idx], target.shape[1], substeps=substeps)
        loss = pose_loss(pos, quat, target[idx], valid[idx], sizes[idx], rot_weight=ROT_WEIGHT)
        if loss.requires_grad:  # else no toss of the batch touched the floor within the window
            _adam_step(opt, loss, laws, keys, bnds)
            last = whole()
        history.append((loss.item(), last))
        if last < best[0]:
            best = (last, i, copy.deepcopy(m.state_dict()))
    m.load_state_dict(best[2])
    opt.zero_grad(set_to_none=True)
    for p, flag in zip(m.parameters(), flags):
        p.requires_grad_(flag)
    check_model(m, where="the fine-tuned elbow law")
    info = {"keys": list(start), "start": start, "fitted": law_values(m, keys),
            "bounds": {n: [float(np.exp(lo)), float(np.exp(hi))] for n, (lo, hi) in zip(start, bnds)},
            "start_loss": start_loss, "loss": best[0], "history": history, "best_step": best[1],
            "evaluations": steps + 1, "network": bool(net),
            "optimizer": f"Adam (lr {lr}{f', network {lr_network}' if net else ''}, {steps} steps of "
                         f"{min(batch, len(order))} tosses, seed {seed}) through the articulated twin over the first "
                         f"{target.shape[1]} frames of each toss; the best step by whole-toss stepper rollouts of "
                         "every training toss, the start (step 0) included",
            "group": "surface", "episodes": [str(e.episode_id) for e in episodes], "wall_s": time.time() - t0}
    return m.eval(), info


def _adam_step(opt, loss, laws: list, keys: list, bnds: list) -> None:
    """One step on ``loss``: only each key's own group of the law moves (the pads' law is not in these tosses), then
    rounded to ``LOG_GRID`` and projected into ``bnds`` (within span of the release and inside law_ranges)."""
    opt.zero_grad()
    loss.backward()
    for p, (_, group) in zip(laws, keys):
        if p.grad is not None:
            keep = torch.zeros_like(p.grad)
            keep[group] = p.grad[group]
            p.grad = keep
    opt.step()
    with torch.no_grad():
        for p, (_, group), (lo, hi) in zip(laws, keys, bnds):
            p[group] = (torch.round(p[group] / LOG_GRID) * LOG_GRID).clamp(lo, hi)


def _toss_windows(tosses: TossSet, window: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(state0 [N, 13 + 2J] for the twin (``twin_links.link_rollout``), link 1's recorded poses [N, W, 7] and their
    validity [N, W]) over the first W = min(``window``, longest toss) frames (past a toss's end: not valid)."""
    q0, v0 = tosses.qpos0, tosses.qvel0
    state0 = torch.from_numpy(np.concatenate([q0[:, :7], v0[:, :6], q0[:, 7:], v0[:, 6:]], axis=1))
    W = int(min(window, tosses.n_frames.max()))
    target, valid = np.zeros((len(q0), W, 7)), np.zeros((len(q0), W), dtype=bool)
    target[..., 3] = 1.0
    for i, e in enumerate(tosses.episodes):
        n = min(W, e.num_frames)
        target[i, :n] = e.object_pose[:n]
        valid[i, :n] = True if e.object_pose_valid is None else e.object_pose_valid[:n]
    return state0, torch.from_numpy(target), torch.from_numpy(valid)


def predict_groups(model, episodes, *, substeps: int, init_frames: int, margin: float) -> tuple[dict, dict]:
    """({episode id: [T, 7 + J]}, summed stepper counts): ``episodes`` grouped by scene (``scene_key``), each group
    one batch (``link_rollout``)."""
    groups: dict = {}
    for e in episodes:
        groups.setdefault(scene_key(e), []).append(e)
    preds, counts = {}, {}
    for group in groups.values():
        scene = object_scene(group[0], substeps=substeps, mode="external", margin=margin)
        out, c = link_rollout(model, scene, TossSet.from_episodes(group, substeps=substeps, k=init_frames))
        preds.update({e.episode_id: out[i, :e.num_frames] for i, e in enumerate(group)})
        counts = {k: counts.get(k, 0) + v for k, v in c.items()}
    return preds, counts


SURROGATE_DEFAULTS = {"enabled": True, "fit_on": "whole", "steps": 8, "lr": 0.1, "lr_network": 1e-3, "window": 121,
                      "batch": 8, "span": None}
FEW_SHOT_KEYS = ("sizes", "impacts", "identified", "surrogate")
FIT_ON = ("whole", "impacts")  # what a few-shot fit sees of each training toss (toss_windows)
IMPACT_DEFAULTS = {"lead": LEAD_FRAMES, "after_s": AFTER_S}


def surrogate_settings(cfg: dict) -> dict:
    """``few_shot.surrogate`` with its defaults, its keys checked (before any work: a misspelt key is refused by
    name), and ``few_shot``'s own keys and both rows' ``fit_on`` checked."""
    fs = cfg.get("few_shot") or {}
    check_keys(fs, FEW_SHOT_KEYS, where="few_shot")
    for side in ("identified", "surrogate"):
        fit_settings(cfg, side)
    given = fs.get("surrogate") or {}
    check_keys(given, SURROGATE_DEFAULTS, where="few_shot.surrogate")
    return {**SURROGATE_DEFAULTS, **given}


def fit_settings(cfg: dict, side: str) -> dict:
    """``{"fit_on", "lead", "after_s"}``: what one side's few-shot fit (``identified``: MuJoCo's identification;
    ``surrogate``: the fine-tune) sees of each training toss, ``few_shot.<side>.fit_on`` (default ``whole``), and the
    windows' ``few_shot.impacts``, checked."""
    fs = cfg.get("few_shot") or {}
    fit_on, given = (fs.get(side) or {}).get("fit_on", "whole"), fs.get("impacts") or {}
    if fit_on not in FIT_ON:
        raise ConfigError(f"must be one of {list(FIT_ON)}, got {fit_on!r}", key=f"few_shot.{side}.fit_on")
    check_keys(given, IMPACT_DEFAULTS, where="few_shot.impacts")
    out = {"fit_on": fit_on, **IMPACT_DEFAULTS, **given}
    if not (isinstance(out["lead"], int) and out["lead"] >= int(cfg["simulation"]["init_frames"]) + 2):
        raise ConfigError(f"must be an integer of at least simulation.init_frames + 2, got {out['lead']!r}",
                          key="few_shot.impacts.lead")
    if not (isinstance(out["after_s"], (int, float)) and out["after_s"] > 0):
        raise ConfigError(f"must be a positive number of seconds, got {out['after_s']!r}",
                          key="few_shot.impacts.after_s")
    return out


def fitting_tosses(train: list, cfg: dict, side: str) -> tuple[list, dict]:
    """(what one side's few-shot fit of one N sees of ``train``, the ledger's record of it): the whole tosses, or
    with ``few_shot.<side>.fit_on: impacts`` each toss's window around its first floor impact (``toss_windows``; a
    toss without one is named under ``without_window``)."""
    fit = fit_settings(cfg, side)
    if fit["fit_on"] == "whole":
        return train, {"fit_on": "whole"}
    windows, skipped = impact_windows(train, lead=fit["lead"], after_s=float(fit["after_s"]),
                                      init_frames=int(cfg["simulation"]["init_frames"]))
    if not windows:
        raise ConfigError(f"none of the {len(train)} training tosses has an impact window ({skipped})",
                          key=f"few_shot.{side}.fit_on")
    return windows, {**fit, "windows": {str(w.episode_id): [w.labels["window_start"], w.num_frames] for w in windows},
                     "without_window": skipped}


def fit_on_tosses(release, train, sc: dict, *, substeps: int, init_frames: int, margin: float, seed: int,
                  progress: bool = False):
    """(the release fine-tuned on ``train`` (``finetune_law``), info, the row's description)."""
    fitted, info = finetune_law(release, train, substeps=substeps, init_frames=init_frames, margin=margin,
                                steps=int(sc["steps"]), lr=float(sc["lr"]), lr_network=float(sc["lr_network"]),
                                window=int(sc["window"]), batch=int(sc["batch"]), span=sc["span"], seed=seed,
                                progress=progress)
    what = "its network and " if info["network"] else ""
    around = " (each one's window around its first impact)" if train and "first_impact" in train[0].labels else ""
    return fitted, info, (f"the cube release fine-tuned on {len(train)} elbow training tosses{around} by gradient "
                          f"through the articulated twin: {what}the floor's {_names(info)}")


def _names(info: dict) -> str:
    return ", ".join(k.split("[")[0] for k in info["keys"])


def flight_starts(episodes) -> dict:
    """{episode id: frame} of the training tosses that start later than their first frame (still held there): the
    ledger's record that a few-shot row was fitted from free flight, as the test tosses are scored."""
    return {str(e.episode_id): int(e.labels["free_flight_start"])
            for e in episodes if e.labels.get("free_flight_start")}


def finetuned_rows(cfg, pool_by_id, sp, *, checkpoint, test, scorer, models: dict, progress: bool = False) -> dict:
    """Rows ``surrogate_finetuned_elbow_<N>``: the ``--checkpoint`` surrogate fine-tuned (``fit_on_tosses``) on the same
    N elbow training tosses as ``analytic_identified_elbow_<N>``, scored on the same test tosses, each with ``paired``:
    the row minus MuJoCo identified on the same N (the acceptance at N = 16), minus the cube surrogate and minus the
    cube-identified row, per metric, over the same test episodes."""
    from ..model.checkpoint import load_checkpoint

    fs = cfg.get("few_shot") or {}
    sc = surrogate_settings(cfg)
    if checkpoint is None or "overall" not in (models.get("surrogate") or {}) or not sc["enabled"]:
        return {}
    release, card = load_checkpoint(checkpoint)
    margin = float(card.get("data", {}).get("margin_m", DEFAULT_MARGIN))
    sim, pool, rows = cfg["simulation"], sp["pool"], {}
    for n in fs.get("sizes", []):
        k = len(pool) if n == "all" else int(n)
        if k > len(pool) or k < 1:
            continue
        train = [pool_by_id[i] for i in pool[:k]]
        seen, fit_on = fitting_tosses(train, cfg, "surrogate")
        fitted, info, text = fit_on_tosses(release, seen, sc, substeps=sim["substeps"], init_frames=sim["init_frames"],
                                           margin=margin, seed=k, progress=progress)
        preds, counts = predict_groups(fitted, test, substeps=sim["substeps"], init_frames=sim["init_frames"],
                                       margin=margin)
        m = scored(scorer, preds)
        row = {"description": text, "method": "gradient", "checkpoint": str(checkpoint), "fit": info,
               "law": fitted.prior("surface").to_json(), "train_size": k, "fit_on": fit_on,
               "train_free_flight_starts": flight_starts(train),
               "trained_on": "cube, then elbow (gradient)", "stepper": counts,
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
                words.append(f"{signed_interval(d['mean'], d['ci95'])}{unit}")
        if words:
            out.append(f"Few-shot, N = {k}: the fine-tuned surrogate ({row.get('method', 'search')}) minus MuJoCo "
                       f"identified on the same {k} elbow tosses, paired: " + ", ".join(words) + ".")
    return " ".join(out)
