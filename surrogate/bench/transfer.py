"""Suite ``transfer``: a grasp policy tuned in simulation, deployed on the capture rig (the stand-in for hardware).

The policy is ``policies.ScriptedGraspPolicy`` with three tunable parameters: the grip force (N, the hand's
fingertip force bound), the closing time (s, the closing speed) and the lift speed (m/s). It is tuned by a
grid search (``policy.grid``; score: success rate minus ``policy.slip_penalty`` times the slipped fraction minus
``policy.force_cost`` per N of grip force, so each source picks the gentlest grip that works in its simulator;
over ``data.tune_poses`` poses of each ``data.tune_objects`` object) under four sources:

* ``analytic_nominal``: MuJoCo's analytic contact with the scene's nominal parameters;
* ``analytic_randomized``: MuJoCo randomized (``identify.randomized_ensemble``, the benchmarks' ranges,
  ``baselines.randomized``) around the identified values of a ``rig-grasp`` ledger
  (``baselines.identified.ledger``) or, without one, around the nominal ones (the row says which);
  a candidate's score is its mean over the ensemble's members;
* ``surrogate``: the hybrid stepper with the learned contact (the checkpoint; default ``rig_default``);
* ``surrogate_randomized`` (with ``baselines.randomized.learned``, on by default): the hybrid stepper randomized
  around the learned law as MuJoCo is around its centre, with the same ensemble size, seed and ranges
  (``model.randomize``: friction as friction, solref's time constant as the law's stiffness, the damping ratio's
  range as its damping's, the object's mass as is; ``learned_ranges``); a candidate's score is its mean over the
  members.

Each source's best policy is then rolled out on the held-out objects (``data.objects``: at most ``data.max_objects``
of those the hand can grasp, ``transfer_objects.deployable``; ``data.poses`` poses each) in its own simulator and
on the rig (``bench.rig_env.RigGraspVectorEnv``) from the same reset states (the same seeds). Outcomes come from the
one outcome definition (``rig.scripts.episode_labels``, through ``policies.rollout``) on both sides. The ledger's
``transfer`` rows (``transfer_rows``) hold sim and rig success and slip rates, ``success_gap`` and ``slip_gap`` (sim
minus rig) with 95 % bootstrap intervals over held-out objects, and the first divergence between the sim and rig
traces of the same rollouts
(``bench.transfer_trace``).
"""

from __future__ import annotations

import itertools
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..metrics import signed_interval
from .analytic import AnalyticParams, apply_params, set_mass_scale
from .grasp_outcome import pooled_gap, pooled_rate, pooled_rate_gap
from .identify import ensemble_ranges, randomized_ensemble
from .ledger import outcome
from .policy import by_object_summary, decide, identified_params, load_suite_objects
from .resample import unit_bootstrap
from .transfer_objects import deployable, rig_grasp_refusal, spread
from .transfer_trace import Tape, first_divergence, rates

SOURCES = ("analytic_nominal", "analytic_randomized", "surrogate", "surrogate_randomized")
DESCRIPTIONS = {
    "analytic_nominal": "policy tuned under MuJoCo analytic contact, nominal parameters",
    "analytic_randomized": "policy tuned under MuJoCo analytic contact randomized around {anchor} values",
    "surrogate": "policy tuned under the hybrid stepper (learned contact inside MuJoCo)",
    "surrogate_randomized": "policy tuned under the hybrid stepper randomized around the learned law (the same "
                            "ensemble size, seed and ranges as MuJoCo's)",
}


@dataclass(frozen=True)
class LearnedVariant:
    """One member of the randomized learned contact: a scaled copy of the law, its scales ({friction, stiffness,
    damping}) and the object's mass scale."""

    model: object
    scales: dict
    mass_scale: float = 1.0


def learned_ranges(ranges: dict) -> dict:
    """The learned law's ranges equivalent to an analytic ensemble's (``identify.ensemble_ranges``): ``friction`` as
    friction; solref's time constant x[lo, hi] as the law's stiffness x[1 / hi^2, 1 / lo^2] (a contact's time
    constant goes as 1 / sqrt(k)); the damping ratio's range as the damping's; ``mass_scale`` as is. The solimp width
    has no counterpart in the law and the latency none in these rollouts."""
    lo, hi = ranges["timeconst"]
    return {"friction": tuple(ranges["friction"]), "stiffness": (1.0 / hi ** 2, 1.0 / lo ** 2),
            "damping": tuple(ranges["dampratio"]), "mass_scale": tuple(ranges["mass_scale"])}


def learned_ensemble(model, *, n: int, seed: int, ranges: dict) -> list[LearnedVariant]:
    """``n`` members around ``model``: ``model.randomize.randomized_laws`` with ``learned_ranges(ranges)`` and, from a
    generator of its own (the same seed), each member's mass scale (uniform, as ``randomized_ensemble`` draws it)."""
    from ..model.randomize import randomized_laws

    r = learned_ranges(ranges)
    laws = randomized_laws(model, n=n, seed=seed, ranges={k: r[k] for k in ("friction", "stiffness", "damping")})
    rng = np.random.default_rng([int(seed), 0x3A55])
    return [LearnedVariant(law, sc, float(rng.uniform(*r["mass_scale"]))) for law, sc in laws]


def _candidates(grid: dict) -> list[dict]:
    keys = ("grip_force", "close_time", "lift_speed")
    for k in keys:
        if not grid.get(k):
            raise ConfigError("needs a non-empty list", key=f"policy.grid.{k}")
    return [dict(zip(keys, map(float, v))) for v in itertools.product(*(grid[k] for k in keys))]


def sim_rollout(obj, cand: dict, variant, *, d: dict, poses: int, seed: int, model, tape: bool = False):
    """``policies.rollout`` of candidate ``cand`` on ``poses`` copies of ``obj`` in one simulator ``variant``
    (None: nominal analytic; an ``AnalyticParams``; ``"surrogate"``: ``model``; a ``LearnedVariant``). Returns
    (result, Tape or None)."""
    from ..envs import GraspVectorEnv
    from ..policies import GraspParams, ScriptedGraspPolicy, rollout

    learned = variant == "surrogate" or isinstance(variant, LearnedVariant)
    law = variant.model if isinstance(variant, LearnedVariant) else model
    venv = GraspVectorEnv(poses, copies=False, hand=d["hand"], object=obj, contact="surrogate" if learned else "analytic",
                          contact_model=law if learned else None, grip_force=cand["grip_force"], max_episode_steps=None)
    if isinstance(variant, AnalyticParams):
        apply_params(venv.task.model, venv.task.scene, variant)
    elif isinstance(variant, LearnedVariant):
        set_mass_scale(venv.task.model, venv.task.scene, variant.mass_scale)
    pol = ScriptedGraspPolicy(venv.task, GraspParams(lift_speed=cand["lift_speed"]), close=cand["close_time"])
    rec = Tape(venv.task) if tape else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = rollout(venv, pol, seed=seed, duration=float(d["duration"]), record=rec)
    return res, rec, pol


def rig_rollout(obj, cand: dict, *, d: dict, rig_cfg, poses: int, seed: int):
    from ..policies import GraspParams, ScriptedGraspPolicy, rollout
    from .rig_env import RigGraspVectorEnv

    venv = RigGraspVectorEnv(poses, object=obj, hand=d["hand"], rig_config=rig_cfg, duration=float(d["duration"]),
                             grip_force=cand["grip_force"])
    pol = ScriptedGraspPolicy(venv.task, GraspParams(lift_speed=cand["lift_speed"]), close=cand["close_time"])
    rec = Tape(venv.task)
    res = rollout(venv, pol, seed=seed, duration=float(d["duration"]), record=rec)
    return res, rec, pol, venv


def _tune(source: str, variants: list, objs, cands, *, d: dict, model, penalty: float, force_cost: float, log) -> dict:
    """Grid search of one source: every candidate on every tuning object under every variant."""
    from ..rig.scripts import UngraspableObject

    table = []
    for c in cands:
        succ, slip, ret = [], [], []
        for obj in objs:
            for v in variants:
                try:
                    res, _, _ = sim_rollout(obj, c, v, d=d, poses=int(d["tune_poses"]), seed=int(d["seed"]),
                                             model=model)
                except UngraspableObject:
                    continue
                succ += list(res["success"])
                slip += list(res["slipped"])
                ret += list(res["return"])
        if not succ:
            raise ConfigError("no tuning object can be grasped by the hand", key="data.tune_objects")
        score = float(np.mean(succ) - penalty * np.mean(slip) - force_cost * c["grip_force"])
        table.append({**c, "score": score, "success_rate": float(np.mean(succ)),
                      "slipped_fraction": float(np.mean(slip)), "mean_return": float(np.mean(ret)),
                      "episodes": len(succ)})
        log(f"tune {source}: {c} score {score:.2f}")
    best = max(table, key=lambda r: (r["score"], r["mean_return"]))
    return {"best": {k: best[k] for k in ("grip_force", "close_time", "lift_speed")}, "grid": table}


def deploy_seed(d: dict) -> int:
    """The reset seed of the deployment on held-out objects (copy i: this + i), apart from the tuning's."""
    return int(d["seed"]) + 10_000


def _deploy(source: str, variants: list, best: dict, objs, *, d: dict, model, rig_cfg, thr: dict) -> dict:
    """The tuned policy on the held-out objects: in its sims (every variant) and on the rig, same seeds."""
    from ..rig.scripts import UngraspableObject

    seed, poses = deploy_seed(d), int(d["poses"])
    per_obj, divs, skipped = {}, [], {}
    for obj in objs:
        try:
            rig_res, rig_tape, pol, _ = rig_rollout(obj, best, d=d, rig_cfg=rig_cfg, poses=poses, seed=seed)
        except UngraspableObject as e:
            skipped[obj.name] = str(e)
            continue
        sims = [sim_rollout(obj, best, v, d=d, poses=poses, seed=seed, model=model, tape=(k == 0))
                for k, v in enumerate(variants)]
        per_obj[obj.name] = {"sim": rates([s[0] for s in sims]), "rig": rates([rig_res])}
        sim_tape = sims[0][1]
        for i in range(poses):
            divs.append({"object": obj.name, "pose": i, **first_divergence(
                sim_tape, rig_tape, i, hold_start=float(pol.hold_start[i]), control_dt=rig_tape.task.control_dt,
                thr=thr)})
    return {"per_object": per_obj, "divergence": divs, "skipped": skipped}


def _row(source: str, tuned: dict, dep: dict, *, ranges, seed: int, n_boot: int) -> dict:
    """One ledger row: sim and rig rates, gaps with intervals over held-out objects, first divergences."""
    po = dep["per_object"]
    sim = rates_of(po, "sim")
    rig = rates_of(po, "rig")
    gaps = {k: pooled_gap(po, k, seed=seed, n_boot=n_boot) for k in ("success", "slip")}
    kinds = [x["kind"] for x in dep["divergence"] if x["kind"]]
    steps = [x["step"] for x in dep["divergence"] if x["step"] is not None]
    return {"source": source, "tuned": tuned["best"], "randomization_ranges": ranges,
            "sim_success_rate": sim["success_rate"], "sim_slip_rate": sim["slip_rate"],
            "rig_success_rate": rig["success_rate"], "rig_slip_rate": rig["slip_rate"],
            "success_gap": gaps["success"]["gap"], "success_gap_ci95": gaps["success"]["ci95"],
            "slip_gap": gaps["slip"]["gap"], "slip_gap_ci95": gaps["slip"]["ci95"],
            "episodes": rig["episodes"], "objects": len(po),
            "first_divergence": {"median_step": float(np.median(steps)) if steps else None,
                                 "earliest_step": int(min(steps)) if steps else None,
                                 "kinds": {k: kinds.count(k) for k in sorted(set(kinds))},
                                 "never": sum(x["kind"] is None for x in dep["divergence"]),
                                 "per_rollout": dep["divergence"]},
            "per_object": {k: {"sim": v["sim"], "rig": v["rig"]} for k, v in po.items()},
            "skipped_objects": dep["skipped"]}


def rates_of(per_obj: dict, side: str) -> dict:
    """Counts and ``grasp_outcome.pooled_rate`` rates over objects of one side (``sim`` or ``rig``)."""
    vals = list(per_obj.values())
    return {"episodes": sum(v[side]["episodes"] for v in vals), "successes": sum(v[side]["successes"] for v in vals),
            **{f"{k}_rate": pooled_rate(vals, side, k) for k in ("success", "slip")}}


def run(cfg: dict, *, cache_dir: Path, checkpoint=None, test_data=None, progress: bool = True, ex=None) -> dict:
    """Tune under each source, deploy on the rig, build the ledger's models and ``transfer`` rows."""
    from ..model.checkpoint import load_checkpoint
    from ..paths import release_checkpoint
    from ..rig.config import load_rig_config

    t0 = time.time()
    if test_data:
        raise ConfigError("the transfer suite deploys on the rig; it takes no --test-data", key="test_data")
    d, pc, bl = cfg["data"], cfg["policy"], cfg["baselines"]
    log = print if progress else (lambda *_: None)
    rig_cfg = load_rig_config(cfg["rig"].get("config"), cfg["rig"].get("overrides") or ())
    tune_objs = spread(load_suite_objects(d["tune_objects"]), d.get("max_tune_objects"))
    def refusal(obj):
        return rig_grasp_refusal(obj, d=d, rig_cfg=rig_cfg, poses=int(d["poses"]), seed=deploy_seed(d))

    objs, not_graspable = deployable(load_suite_objects(d["objects"]), d.get("max_objects"), refusal)
    if not objs:
        raise ConfigError("the hand can grasp none of the held-out objects", key="data.objects")
    if {o.name for o in tune_objs} & {o.name for o in objs}:
        raise ConfigError("tuning and held-out objects overlap", key="data.tune_objects")
    ckpt = str(checkpoint) if checkpoint is not None else str(release_checkpoint("rig_default"))
    model = load_checkpoint(ckpt)[0]
    ident = identified_params(bl.get("identified", {}).get("ledger"))
    rc = bl["randomized"]
    ranges = {k: list(v) for k, v in ensemble_ranges(rc.get("ranges")).items()}

    def ensemble(obj):
        centre = ident or AnalyticParams(friction=float(obj.friction or 0.8))
        return randomized_ensemble(centre, n=int(rc["n"]), seed=int(rc["seed"]), ranges=rc.get("ranges"))

    learned = rc.get("learned", True)
    if not isinstance(learned, bool):
        raise ConfigError(f"must be true or false, got {learned!r}", key="baselines.randomized.learned")
    members = learned_ensemble(model, n=int(rc["n"]), seed=int(rc["seed"]), ranges=ranges) if learned else []
    cands = _candidates(pc["grid"])
    thr, seed = cfg["divergence"], int(cfg.get("bootstrap_seed", 0))
    models, rows = {}, []
    for source in (s for s in SOURCES if learned or s != "surrogate_randomized"):
        def variants(obj, source=source):
            fixed = {"analytic_nominal": [None], "surrogate": ["surrogate"], "surrogate_randomized": members}
            return fixed.get(source) or ensemble(obj)

        tuned = _tune_per_object(source, variants, tune_objs, cands, d=d, model=model,
                                 penalty=float(pc["slip_penalty"]), force_cost=float(pc.get("force_cost", 0.0)),
                                 log=log)
        dep = _deploy_per_object(source, variants, tuned["best"], objs, d=d, model=model, rig_cfg=rig_cfg, thr=thr)
        dep["skipped"] = {**not_graspable, **dep["skipped"]}
        rng = {"analytic_randomized": ranges,
               "surrogate_randomized": {k: list(v) for k, v in learned_ranges(ranges).items()}}.get(source)
        row = _row(source, tuned, dep, ranges=rng, seed=seed, n_boot=int(cfg["n_boot"]))
        row["tuning"] = tuned["grid"]
        if source == "surrogate_randomized":
            row["anchor"] = "the learned law (the checkpoint)"
            row["members"] = [{**m.scales, "mass_scale": m.mass_scale} for m in members]
        if source == "analytic_randomized":
            row["anchor"] = "identified (rig-grasp ledger)" if ident else "nominal (no identified ledger given)"
            if ident:
                row["anchor_params"] = ident.to_json()
        rows.append(row)
        desc = DESCRIPTIONS[source].format(anchor="identified" if ident else "nominal")
        sim = rates_of(dep["per_object"], "sim")
        models[source] = {"description": desc + " (sim rates on held-out objects)",
                          "overall": {"episodes": sim["episodes"], "success_rate": sim["success_rate"],
                                      "slip_rate": sim["slip_rate"], "success": by_object_summary(
                                          {o: [1.0] * v["sim"]["successes"] + [0.0] * (v["sim"]["episodes"] - v["sim"]
                                           ["successes"]) for o, v in dep["per_object"].items()}, seed=seed)},
                          "per_object": {k: {"episodes": v["sim"]["episodes"], "success_rate": v["sim"]["success_rate"],
                                             "slip_rate": v["sim"]["slip_rate"]} for k, v in dep["per_object"].items()}}
        if source.startswith("surrogate"):
            models[source]["checkpoint"] = ckpt
        log(f"{source}: tuned {tuned['best']}; success_gap {row['success_gap']}, slip_gap {row['slip_gap']}")
    return {"data": {"name": str(d["objects"]), "episodes": rows[0]["episodes"], "hash": "",
                     "objects": [o.name for o in objs], "tune_objects": [o.name for o in tune_objs],
                     "not_graspable": not_graspable},
            "models": models, "transfer": rows, "result": verdict(rows, seed=seed, n_boot=int(cfg["n_boot"])),
            "wall_s": time.time() - t0}


def _tune_per_object(source, variants, objs, cands, **kw) -> dict:
    """``_tune`` with the variants of each object (the randomized ensemble is anchored per object)."""
    if source != "analytic_randomized":
        return _tune(source, variants(None), objs, cands, **kw)
    table = None
    for obj in objs:
        try:
            part = _tune(source, variants(obj), [obj], cands, **kw)["grid"]
        except ConfigError:  # this object cannot be grasped by the hand: skipped, as the other sources skip it
            continue
        if table is None:
            table = [dict(r) for r in part]
            continue
        for r, p in zip(table, part):
            for k in ("score", "success_rate", "slipped_fraction", "mean_return"):
                r[k] = (r[k] * r["episodes"] + p[k] * p["episodes"]) / (r["episodes"] + p["episodes"])
            r["episodes"] += p["episodes"]
    best = max(table, key=lambda r: (r["score"], r["mean_return"]))
    return {"best": {k: best[k] for k in ("grip_force", "close_time", "lift_speed")}, "grid": table}


def _deploy_per_object(source, variants, best, objs, **kw) -> dict:
    out = {"per_object": {}, "divergence": [], "skipped": {}}
    for obj in objs:
        part = _deploy(source, variants(obj), best, [obj], **kw)
        out["per_object"].update(part["per_object"])
        out["divergence"] += part["divergence"]
        out["skipped"].update(part["skipped"])
    return out


def verdict(rows: list[dict], *, seed: int = 0, n_boot: int = 1000) -> dict:
    """``compare`` of the surrogate-tuned policy with the randomized-tuned one; with a ``surrogate_randomized`` row,
    ``randomized`` holds the same comparison of the policy tuned under the randomized learned contact."""
    out = compare(rows, "surrogate", seed=seed, n_boot=n_boot)
    if any(r["source"] == "surrogate_randomized" for r in rows):
        out["randomized"] = compare(rows, "surrogate_randomized", seed=seed, n_boot=n_boot)
    return out


def abs_gap_difference(s_po: dict, r_po: dict, key: str, *, seed: int = 0, n_boot: int = 1000) -> dict:
    """|gap| of one row minus |gap| of another (``grasp_outcome.pooled_rate_gap``, sim minus rig pooled ``key`` rate;
    ``s_po``, ``r_po``: the rows' ``per_object``) with ``pooled_gap``'s 95 % interval resampling objects
    (``resample.unit_bootstrap``), paired: each resampled object brings both rows' rollouts of it (the objects both
    deployed on; each row's own, resampled apart, where they share none). {n: objects, mean, ci95[, units, by]}; a
    resample without a gap is left out."""
    shared = sorted(set(s_po) & set(r_po))
    sa, ra = (shared, shared) if shared else (sorted(s_po), sorted(r_po))

    def diff(si, ri):
        g = pooled_rate_gap([s_po[sa[j]] for j in si], key), pooled_rate_gap([r_po[ra[j]] for j in ri], key)
        return None if None in g else abs(g[0]) - abs(g[1])

    d = diff(range(len(sa)), range(len(ra))) if sa and ra else None
    if d is None:
        return {"n": 0, "mean": None, "ci95": None}
    sizes, stat = ((len(sa),), lambda i: diff(i, i)) if shared else ((len(sa), len(ra)), diff)
    ci = unit_bootstrap(sizes, stat, seed=seed, n_boot=n_boot)["ci95"]
    return {"n": len(sa), "mean": float(d), "ci95": ci, **({"units": len(sa), "by": "object"} if shared else {})}


def compare(rows: list[dict], source: str, *, seed: int = 0, n_boot: int = 1000) -> dict:
    """{verdict, detail, targets[, not_evaluable]}: whether the policy tuned under ``source`` has smaller |success_gap|
    and |slip_gap| than the one tuned under randomized MuJoCo, each decided (``ledger.outcome``) on the interval of
    |gap| - randomized |gap| (``abs_gap_difference``): below zero met, above missed, containing zero a tie; a gap
    undefined on a side is not evaluable, and the verdict (``policy.decide``) is never supported on it."""
    by = {r["source"]: r for r in rows}
    s, r = by.get(source), by.get("analytic_randomized")
    if s is None or r is None:
        return {"verdict": "not tested", "detail": f"no {source} or randomized row"}
    targets, missing, words = [], [], []
    for k in ("success_gap", "slip_gap"):
        p = abs_gap_difference(s.get("per_object") or {}, r.get("per_object") or {}, k.split("_")[0], seed=seed,
                               n_boot=n_boot)
        if s[k] is None or r[k] is None or not p["ci95"]:
            missing.append({"metric": k, "baseline": "analytic_randomized", "outcome": "not evaluable",
                            "why": "no lifted episodes on one side" if s[k] is None or r[k] is None else
                            "no per-object rates to resample"})
            words.append(f"{k} not evaluable ({missing[-1]['why']})")
            continue
        o = outcome(p, False)
        words.append(f"{k} {source} {_ci(s[k], s[k + '_ci95'])} vs randomized {_ci(r[k], r[k + '_ci95'])}, |gap| "
                     f"difference {signed_interval(p['mean'], p['ci95'])} over {p['n']} objects: "
                     + {"met": "smaller", "missed": "larger", "tie": "a tie (the interval contains zero)"}[o])
        targets.append({"metric": k, "baseline": "analytic_randomized", "surrogate": abs(s[k]),
                        "baseline_value": abs(r[k]), "met": o == "met", "outcome": o, "paired": p})
    v = decide(targets, missing)
    return {"verdict": v,
            "detail": f"sim-to-rig gaps over {s['objects']} held-out objects ({s['episodes']} rig rollouts), 95 % "
                      "intervals resampling objects: " + "; ".join(words)
                      + ("" if v == "supported" else f"; the {source}-tuned policy is not shown to transfer better"),
            "targets": targets, **({"not_evaluable": missing} if missing else {})}


def _ci(g: float, ci) -> str:
    return f"{g:+.2f}" + (f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "")
