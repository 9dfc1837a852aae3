"""Suite ``policy``: the scripted grasp policy on held-out objects, under analytic and learned contact.

The Gymnasium grasp environment (``ContactSurrogate/GripperGrasp-v0``, ``HandGrasp-v0`` or ``JacoGrasp-v0``) runs
``policies.ScriptedGraspPolicy`` closed loop on every object of the suite's split, ``poses``
randomized object poses each (one batched vector env per object), once with MuJoCo's analytic
contact (nominal parameters, and the identified ones when a ``rig-grasp`` ledger is given) and
once with the surrogate owning the contacts. Success (lifted and held) and slip rates (among
lifted) per model and per object go to the ledger; the gap of each to the analytic rows says
how differently a policy would be judged under learned contact. Tasks (``parallel``): one per
model and object.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import numpy as np

from ..config import expand_env
from ..errors import ConfigError
from ..metrics import MIN_PAIRED_UNITS, paired_difference, signed_interval, summarize
from ..parallel import Executor
from .analytic import AnalyticParams, apply_params
from .grasp_outcome import pooled_gap, pooled_rate
from .ledger import outcome, overall_verdict
from .rows import NOT_GIVEN


def load_suite_objects(spec: str) -> list:
    """The objects a suite's ``data.objects`` (or ``data.tune_objects``) names.

    Args:
      spec: a split name or a folder of meshes/URDFs (``${VAR}`` expanded; an unset variable is a ConfigError
        naming ``data.objects``).
    Returns:
      [ObjectAsset] (``rig.generate.load_objects``).
    """
    from ..rig.generate import load_objects

    return load_objects(expand_env(str(spec), key="data.objects"))[0]


def by_object_summary(per_obj: dict, *, seed: int = 0) -> dict:
    """``metrics.summarize`` of every object's rollout values ({object: [value per rollout]}), the mean's 95 %
    interval resampling objects, each with all its rollouts (``metrics.paired_difference``'s cluster bootstrap,
    against zero): the poses of one object share its grip and its outcome, so resampling rollouts one by one counts
    one object's luck as many draws. There the median's interval (over rollouts) is left out (None). With one object,
    or one rollout per object, the intervals are ``summarize``'s."""
    rows = [{"id": f"{o}/{i}", "v": float(v), "object": str(o)} for o, vs in per_obj.items() for i, v in enumerate(vs)]
    out = summarize([r["v"] for r in rows], seed=seed)
    p = paired_difference([{"id": r["id"], "v": 0.0} for r in rows], rows, "v", by="object", seed=seed)
    if p.get("units"):
        out["mean_ci95"], out["median_ci95"] = p["ci95"], None
    return out


def rollout_rates(results: list[dict], seed: int, names: list[str] | None = None) -> dict:
    """Rates of ``policies.rollout`` results, one result per object (``names``: theirs; the intervals resample
    objects, ``by_object_summary``).

    Args:
      results: one per object, each with "success", "lifted", "slipped" [N] bool and "final_rise_m" [N] float over
        its N rollouts.
      seed: the bootstrap's seed; names: the objects' names (default "0", "1", ...).
    Returns:
      {"episodes": rollouts in all, "success_rate", "slip_rate" (among lifted rollouts; None where none lifted),
      "lifted": count, "success" and "final_rise_m": ``by_object_summary`` of the per-rollout values}.
    """
    names = names or [str(i) for i in range(len(results))]
    succ = np.concatenate([r["success"] for r in results]).astype(float)
    lifted = np.concatenate([r["lifted"] for r in results])
    slip = np.concatenate([r["slipped"] for r in results]).astype(float)
    return {"episodes": int(len(succ)), "success_rate": float(succ.mean()),
            "slip_rate": float(slip[lifted].mean()) if lifted.any() else None,
            "lifted": int(lifted.sum()),
            "success": by_object_summary({n: r["success"] for n, r in zip(names, results)}, seed=seed),
            "final_rise_m": by_object_summary({n: r["final_rise_m"] for n, r in zip(names, results)}, seed=seed)}


def identified_params(path) -> AnalyticParams | None:
    """The analytic parameters a ``rig-grasp`` ledger identified (``models.analytic_identified.params``), None without
    a path (``baselines.identified.ledger``); a ConfigError where the file or its params are missing."""
    if not path:
        return None
    p = Path(expand_env(str(path), key="baselines.identified.ledger"))
    if not p.is_file():
        raise ConfigError(f"{p} not found: give the ledger.json of a rig-grasp run", key="baselines.identified.ledger")
    led = json.loads(p.read_text())
    m = led.get("models", {}).get("analytic_identified", {})
    if "params" not in m:
        raise ConfigError(f"{p}: models.analytic_identified.params missing", key="baselines.identified.ledger")
    return AnalyticParams.from_json(m["params"])


def _rollout_task(common: dict, obj) -> dict:
    """One object's batched rollouts: {"result": ``policies.rollout``'s} or {"skipped": why it cannot be grasped}."""
    from ..envs import GraspVectorEnv
    from ..model.checkpoint import load_checkpoint
    from ..parallel import task_cache
    from ..policies import GraspParams, ScriptedGraspPolicy, rollout
    from ..rig.scripts import UngraspableObject

    d, ckpt = common["data"], common["checkpoint"]
    model = None if ckpt is None else task_cache(common["token"], ("model", ckpt), lambda: load_checkpoint(ckpt)[0])
    venv = GraspVectorEnv(int(d["poses"]), copies=False, hand=d["hand"], object=obj, contact=common["contact"], contact_model=model,
                          max_episode_steps=None)
    if common["params"] is not None:
        apply_params(venv.task.model, venv.task.scene, common["params"])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return {"result": rollout(venv, ScriptedGraspPolicy(venv.task, GraspParams()), seed=int(d["seed"]),
                                      duration=float(d["duration"]))}
    except UngraspableObject as e:
        return {"skipped": str(e)}


def _run_model(objs, *, cfg, contact, ex, checkpoint=None, params=None, label=""):
    """One model's rates overall and per object: a task per object (``_rollout_task``)."""
    common = {"token": ex.token, "data": cfg["data"], "contact": contact, "checkpoint": checkpoint, "params": params}
    runs = ex.map(_rollout_task, objs, common=common, desc=f"policy rollouts ({label})", unit="object")
    per_obj, results, names, stats, skipped = {}, [], [], {"fallbacks": 0, "ood_edges": 0, "contacts": 0}, {}
    for obj, run in zip(objs, runs):
        if "skipped" in run:
            skipped[obj.name] = run["skipped"]
            continue
        res = run["result"]
        results.append(res)
        names.append(obj.name)
        per_obj[obj.name] = rollout_rates([res], cfg.get("bootstrap_seed", 0), [obj.name])
        for k in stats:
            stats[k] += int(res["stepper"][k])
    if not results:
        raise ConfigError("no object could be grasped by the scripted policy", key="data.objects")
    return {"overall": rollout_rates(results, cfg.get("bootstrap_seed", 0), names), "per_object": per_obj,
            "stepper": stats, "skipped_objects": skipped}


def run(cfg: dict, *, cache_dir: Path, checkpoint=None, test_data=None, progress: bool = True,
        ex: Executor | None = None) -> dict:
    """Run the suite: every model's rollouts, one task per object on ``ex``'s backend."""
    t0 = time.time()
    ex = ex or Executor(progress=progress)
    if test_data:
        raise ConfigError("the policy suite runs the policy in simulation; it takes no --test-data", key="test_data")
    objs = load_suite_objects(cfg["data"]["objects"])[: cfg["data"].get("max_objects") or None]
    models = {"analytic_nominal": {"description": "MuJoCo analytic contact, the scene's nominal parameters",
                                   **_run_model(objs, cfg=cfg, contact="analytic", ex=ex, label="analytic")}}
    ident = identified_params(cfg["baselines"].get("identified", {}).get("ledger"))
    if ident is not None:
        models["analytic_identified"] = {"description": "MuJoCo analytic contact with the parameters a rig-grasp run identified",
                                         "params": ident.to_json(),
                                         **_run_model(objs, cfg=cfg, contact="analytic", params=ident, ex=ex, label="identified")}
    else:
        models["analytic_identified"] = {"status": "not evaluated",
                                         "reason": "no rig-grasp ledger given (baselines.identified.ledger)"}
    models["surrogate"] = dict(NOT_GIVEN)
    if checkpoint is not None:
        from ..model.checkpoint import load_checkpoint

        net, card = load_checkpoint(checkpoint)
        ex.share(("model", str(checkpoint)), net)
        models["surrogate"] = {"description": "graph-network contact surrogate inside MuJoCo (hybrid stepper)",
                               "checkpoint": str(checkpoint), "card": {k: card.get(k) for k in ("weights_sha256", "training", "model")},
                               **_run_model(objs, cfg=cfg, contact="surrogate", checkpoint=str(checkpoint), ex=ex,
                                            label="surrogate")}
    return {"data": {"name": str(cfg["data"]["objects"]), "episodes": models["analytic_nominal"]["overall"]["episodes"],
                     "hash": "", "objects": [o.name for o in objs]},
            "models": models, "wall_s": time.time() - t0}


RATE_KEYS = {"success_rate": "success", "slip_rate": "slip"}  # verdict metric -> ``pooled_gap``'s key


def _counts(o: dict) -> dict:
    """Counts of an ``outcome_metrics`` entry (what ``grasp_outcome.pooled_gap`` adds over objects), from its episodes,
    lifted count and rates, so that any policy ledger's rows give them."""
    n, nl, sr, lr = int(o["episodes"]), int(o.get("lifted") or 0), o.get("success_rate"), o.get("slip_rate")
    return {"episodes": n, "successes": 0 if sr is None else round(sr * n), "lifted": nl,
            "slipped": 0 if lr is None or not nl else round(lr * nl)}


def rate_target(s: dict, b: dict, metric: str, baseline: str, *, max_gap: float, seed: int = 0,
                n_boot: int = 1000) -> dict:
    """One equivalence target: the surrogate's pooled ``metric`` (``success_rate``, or ``slip_rate`` among lifted)
    minus ``baseline``'s over the objects both rolled out, with ``grasp_outcome.pooled_gap``'s 95 % interval
    (objects resampled, each with both models' rollouts of it: paired by object). ``outcome`` (``ledger.outcome``
    against each bound): ``met`` when the interval lies inside +-``max_gap``, ``missed`` when it lies wholly outside,
    a ``tie`` when it contains a bound; ``not evaluable`` (with ``why``) when the gap has no interval. Over fewer than
    ``metrics.MIN_PAIRED_UNITS`` objects agreement is never met (a tie at best, ``too_few_objects``): their interval
    says nothing about objects, and where their paired outcomes all agree it is zero wide."""
    sp, bp = s.get("per_object") or {}, b.get("per_object") or {}
    per = {o: {"sim": _counts(sp[o]), "rig": _counts(bp[o])} for o in sorted(set(sp) & set(bp))}
    sv, bv = (pooled_rate(list(per.values()), side, RATE_KEYS[metric]) for side in ("sim", "rig"))
    t = {"metric": metric, "baseline": baseline, "objects": len(per),
         "episodes": sum(v["sim"]["episodes"] for v in per.values())}
    g = pooled_gap(per, RATE_KEYS[metric], seed=seed, n_boot=n_boot) if per else {"ci95": None}
    if g["ci95"] is None:
        why = ("the models share no object's rollouts" if not per else "the surrogate lifted nothing" if sv is None
               else f"{baseline} lifted nothing" if bv is None else "no resample of objects gives a gap")
        return {**t, "outcome": "not evaluable", "why": why}
    lo, hi = g["ci95"]
    upper = outcome({"n": t["episodes"], "ci95": [lo - max_gap, hi - max_gap]}, False)  # met: below +max_gap
    lower = outcome({"n": t["episodes"], "ci95": [-hi - max_gap, -lo - max_gap]}, False)  # met: above -max_gap
    out = "missed" if "missed" in (upper, lower) else "met" if upper == lower == "met" else "tie"
    if out == "met" and len(per) < MIN_PAIRED_UNITS:
        out, t["too_few_objects"] = "tie", MIN_PAIRED_UNITS
    return {**t, "surrogate": sv, "baseline_value": bv, "gap": g["gap"], "gap_ci95": g["ci95"], "boot_n": g["boot_n"],
            "max_gap": max_gap, "met": out == "met", "outcome": out}


def decide(targets: list[dict], not_evaluable: list[dict]) -> str:
    """``ledger.overall_verdict`` of the decided targets (a miss falsifies, else a tie is a tie), except that it is
    ``not tested`` where it would say supported while a target could not be evaluated: a hypothesis is never
    supported on a target nobody decided."""
    v = overall_verdict(targets) if targets else "not tested"
    return "not tested" if v == "supported" and not_evaluable else v


def _target_words(t: dict) -> str:
    if t["outcome"] == "not evaluable":
        return f"{t['metric']} against {t['baseline']} not evaluable ({t['why']})"
    how = {"met": f"inside +-{t['max_gap']:g}", "missed": f"wholly outside +-{t['max_gap']:g}",
           "tie": f"a tie: the interval reaches past +-{t['max_gap']:g}"}[t["outcome"]]
    if t.get("too_few_objects"):
        how = (f"a tie: inside +-{t['max_gap']:g}, but {t['objects']} objects are too few to call agreement "
               f"(< {t['too_few_objects']})")
    return (f"{t['metric']} {t['surrogate']:.2f} vs {t['baseline_value']:.2f}, gap "
            f"{signed_interval(t['gap'], t['gap_ci95'])}: {how}")


def verdict(models: dict, *, max_gap: float, seed: int = 0, n_boot: int = 1000) -> dict:
    """Agreement of the surrogate with ``analytic_nominal``, the suite's one baseline ("the analytic one" of its
    hypothesis: the contact the environment runs by default; every verdict the suite has quoted is against it): two
    equivalence targets, success rate and slip rate among lifted (``rate_target``: each gap's 95 % interval over
    objects inside +-``max_gap``), the verdict by ``decide``. A target that cannot be evaluated is listed in
    ``not_evaluable``, never dropped. ``analytic_identified``, where evaluated, gets the same gaps in the detail,
    reported, not deciding."""
    s, a = models.get("surrogate", {}), models.get("analytic_nominal", {})
    if "overall" not in s or "overall" not in a:
        return {"verdict": "not tested", "detail": "surrogate not evaluated"}
    ts = [rate_target(s, a, k, "analytic_nominal", max_gap=max_gap, seed=seed, n_boot=n_boot) for k in RATE_KEYS]
    targets = [t for t in ts if t["outcome"] != "not evaluable"]
    missing = [t for t in ts if t["outcome"] == "not evaluable"]
    v = decide(targets, missing)
    i = models.get("analytic_identified") or {}
    ident = [rate_target(s, i, k, "analytic_identified", max_gap=max_gap, seed=seed, n_boot=n_boot)
             for k in RATE_KEYS] if "overall" in i else []
    detail = (f"Surrogate against analytic_nominal (the suite's one baseline) over {s['overall']['episodes']} "
              f"rollouts, {ts[0]['objects']} objects rolled out under both; 95 % intervals resampling objects: "
              + "; ".join(map(_target_words, ts))
              + (" (the verdict is not supported on a target it could not evaluate)" if missing else "")
              + (". Reported, not deciding, against analytic_identified: " + "; ".join(map(_target_words, ident))
                 if ident else ""))
    return {"verdict": v, "detail": detail, "targets": targets, **({"not_evaluable": missing} if missing else {})}
