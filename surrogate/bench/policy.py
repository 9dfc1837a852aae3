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
from ..metrics import summarize
from ..parallel import Executor
from .analytic import AnalyticParams, apply_params
from .rows import NOT_GIVEN


def _objects(spec: str):
    from ..rig.generate import load_objects

    return load_objects(expand_env(str(spec), key="data.objects"))[0]


def _rates(results: list[dict], seed: int) -> dict:
    succ = np.concatenate([r["success"] for r in results]).astype(float)
    lifted = np.concatenate([r["lifted"] for r in results])
    slip = np.concatenate([r["slipped"] for r in results]).astype(float)
    rise = np.concatenate([r["final_rise_m"] for r in results])
    return {"episodes": int(len(succ)), "success_rate": float(succ.mean()),
            "slip_rate": float(slip[lifted].mean()) if lifted.any() else None,
            "lifted": int(lifted.sum()),
            "success": summarize(list(succ), seed=seed), "final_rise_m": summarize(list(rise), seed=seed)}


def _identified_params(path) -> AnalyticParams | None:
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
    per_obj, results, stats, skipped = {}, [], {"fallbacks": 0, "ood_edges": 0, "contacts": 0}, {}
    for obj, run in zip(objs, runs):
        if "skipped" in run:
            skipped[obj.name] = run["skipped"]
            continue
        res = run["result"]
        results.append(res)
        per_obj[obj.name] = _rates([res], cfg.get("bootstrap_seed", 0))
        for k in stats:
            stats[k] += int(res["stepper"][k])
    if not results:
        raise ConfigError("no object could be grasped by the scripted policy", key="data.objects")
    return {"overall": _rates(results, cfg.get("bootstrap_seed", 0)), "per_object": per_obj, "stepper": stats,
            "skipped_objects": skipped}


def run(cfg: dict, *, cache_dir: Path, checkpoint=None, test_data=None, progress: bool = True,
        ex: Executor | None = None) -> dict:
    """Run the suite: every model's rollouts, one task per object on ``ex``'s backend."""
    t0 = time.time()
    ex = ex or Executor(progress=progress)
    if test_data:
        raise ConfigError("the policy suite runs the policy in simulation; it takes no --test-data", key="test_data")
    objs = _objects(cfg["data"]["objects"])[: cfg["data"].get("max_objects") or None]
    models = {"analytic_nominal": {"description": "MuJoCo analytic contact, the scene's nominal parameters",
                                   **_run_model(objs, cfg=cfg, contact="analytic", ex=ex, label="analytic")}}
    ident = _identified_params(cfg["baselines"].get("identified", {}).get("ledger"))
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


def verdict(models: dict, *, max_gap: float) -> dict:
    """Supported when the surrogate's success and slip rates are within ``max_gap`` of analytic's."""
    s, a = models.get("surrogate", {}), models.get("analytic_nominal", {})
    if "overall" not in s or "overall" not in a:
        return {"verdict": "not tested", "detail": "surrogate not evaluated"}
    so, ao = s["overall"], a["overall"]
    gaps = {"success_rate": so["success_rate"] - ao["success_rate"]}
    if so["slip_rate"] is not None and ao["slip_rate"] is not None:
        gaps["slip_rate"] = so["slip_rate"] - ao["slip_rate"]
    ok = all(abs(g) <= max_gap for g in gaps.values())
    txt = ", ".join(f"{k} {so[k]:.2f} vs {ao[k]:.2f} (gap {g:+.2f})" for k, g in gaps.items())
    return {"verdict": "supported" if ok else "falsified",
            "detail": f"surrogate vs analytic over {so['episodes']} rollouts: {txt}; "
                      + ("within" if ok else "outside") + f" the +-{max_gap:g} agreement target",
            "targets": [{"metric": k, "baseline": "analytic_nominal", "surrogate": so[k], "baseline_value": ao[k],
                         "gap": g, "max_gap": max_gap, "met": abs(g) <= max_gap} for k, g in gaps.items()]}
