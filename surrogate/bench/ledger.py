"""The transfer ledger: one JSON file per benchmark run, validated against a schema.

Schema: ``surrogate/bench/ledger.schema.json``, shipped with the package (documented in docs/benchmarks.md, "Ledger").
"""

from __future__ import annotations

import json
import platform
from datetime import datetime, timezone
from pathlib import Path

import jsonschema

from ..atomic import write_json_atomic
from ..metrics import paired_difference, signed_interval

SCHEMA_PATH = Path(__file__).with_name("ledger.schema.json")
LEDGER_VERSION = "1.0"


def versions() -> dict:
    import mujoco
    import numpy
    import scipy

    from .. import __version__

    v = {"contact-surrogate": __version__, "python": platform.python_version(), "numpy": numpy.__version__,
         "scipy": scipy.__version__, "mujoco": mujoco.__version__}
    try:
        import torch
        import torch_geometric

        v["torch"], v["torch_geometric"] = torch.__version__, torch_geometric.__version__
    except ImportError:
        pass
    return v


METRIC_WORDS = {"pos_pct_size": "position error, % of object size", "rot_deg": "rotation error, deg",
                "pos_m": "position error, m", "final_pos_pct_size": "final position error, % of object size",
                "success_rate": "success rate", "slip_rate": "slip rate (of lifted episodes)"}


def metric_words(key: str) -> str:
    """A ledger metric key in words: ``pos_pct_size`` -> "position error, % of object size",
    ``pos_pct_size@1s`` -> "position error 1 s after the close phase starts, % of object size" (the rig suite's
    horizons count from the start of the script's close phase, when the pads reach the object; its hypothesis
    and "Falsified if" use the same words)."""
    base, _, at = str(key).partition("@")
    words = METRIC_WORDS.get(base, base)
    if at:
        what, _, unit = words.partition(", ")
        words = f"{what} {at.removesuffix('s')} s after the close phase starts" + (f", {unit}" if unit else "")
    return words


def _value_words(metric: str, x: float) -> str:
    """``x`` with the metric's unit: "13.48 % of object size", "16.28 deg"."""
    unit = METRIC_WORDS.get(metric, "").partition(", ")[2]
    return f"{x:.2f} {unit}".rstrip()


def identification_note(models: dict) -> str:
    """What the identified baseline was actually fitted on in this run (a sentence, or "")."""
    m = models.get("analytic_identified") or {}
    if "overall" not in m:
        return ""
    bs = m.get("by_train_size") or {}
    rows = [(int(k), int(v["identified_on"])) for k, v in bs.items() if str(k).isdigit() and "identified_on" in v]
    if rows:
        rows.sort()
        parts = [f"{n} of {k}" if n < k else f"all {k}" for k, n in rows]
        sub = any(n < k for k, n in rows)
        # the size the verdict's row was fitted at: the surrogate's own training tosses where the suite has them
        # (``cube_real``: marked ``on``), else the largest (it had always named the largest)
        at = next((int(k) for k, v in bs.items() if str(k).isdigit() and v.get("on")), rows[-1][0])
        return (f"In this run MuJoCo was identified on {', '.join(parts)} training episodes"
                + (" (a seeded subsample where a training set exceeds the identification budget, "
                   "baselines.identified.max_episodes)" if sub else "")
                + (f"; the verdict compares at {at} training episodes, identified on {dict(rows)[at]}."
                   if len(rows) > 1 else "."))
    info = m.get("identification") or {}
    if "episodes" in info:
        n, pool = int(info["episodes"]), info.get("pool")
        return (f"In this run MuJoCo was identified on {n} training episodes"
                + (f" (a seeded subsample of the {int(pool)} training captures; baselines.identified.episodes)"
                   if pool and int(pool) > n else "") + ".")
    return ""


def paired(models: dict, name: str, baseline: str, value, *, sets=None, scale: float = 1.0, by: str | None = None
           ) -> dict:
    """``name`` minus ``scale`` x ``baseline`` over the test episodes both scored (``metrics.paired_difference``: mean
    and 95 % bootstrap interval; negative: ``name`` is lower). ``value(episode row) -> float | None`` picks the metric
    from a row of the models' ``per_episode``; ``sets``: only episodes of these test sets (all where none matches);
    ``by``: the episode field whose units the bootstrap resamples (the suite's ``metrics.paired_by``, e.g. object)."""
    def rows(n, k):
        eps = (models.get(n) or {}).get("per_episode") or []
        if sets and any(e.get("set") in sets for e in eps):
            eps = [e for e in eps if e.get("set") in sets]
        return [{"id": e["id"], "v": None if value(e) is None else k * value(e), **({by: e.get(by)} if by else {})}
                for e in eps]

    return paired_difference(rows(baseline, float(scale)), rows(name, 1.0), "v", by=by)


def outcome(p: dict | None, met_on_means: bool) -> str:
    """The one rule that turns a target into words: with a paired interval (``paired``, surrogate minus the
    target's bound), ``met`` when the interval lies below zero, ``missed`` above, ``tie`` when it contains zero
    (the data cannot tell the two apart: never called supported); without one, the means decide."""
    if p and p.get("n") and p.get("ci95"):
        lo, hi = p["ci95"]
        return "met" if hi < 0 else ("missed" if lo > 0 else "tie")
    return "met" if met_on_means else "missed"


def needs(p: dict | None, on_means: str) -> str:
    """The comparison ``outcome`` applies to a target, for its words (``targets[i].needs``): ``<`` where a paired
    interval decides (met only when it lies below zero: the bound itself is not met), else ``on_means``, the one
    the means are compared with (``<`` or ``<=``)."""
    return "<" if p and p.get("n") and p.get("ci95") else on_means


def overall_verdict(targets: list) -> str:
    """``falsified`` if any target was missed, else ``tie`` if any was a tie, else ``supported``."""
    outs = [t["outcome"] for t in targets]
    return "falsified" if "missed" in outs else ("tie" if "tie" in outs else "supported")


def like_with_like(models: dict) -> str:
    """One sentence: what data each side of the comparison was trained or identified on."""
    s, i = models.get("surrogate") or {}, models.get("analytic_identified") or {}
    if "overall" not in s or "overall" not in i:
        return ""
    info = i.get("identification") or {}
    n_s = s.get("train_size")
    n_i = info.get("identified_on", info.get("episodes"))
    pool = i.get("train_size") or info.get("pool")
    n_test = s["overall"].get("episodes", s["overall"].get("pos_pct_size", {}).get("n"))
    sub = f"{n_i} of" if n_i and pool and n_i < pool else "all"
    if i.get("same_data_as_surrogate"):  # the identification episodes are the surrogate's own training episodes
        pool = n_s or pool
        sub = f"{n_i} of" if n_i and pool and n_i < pool else "all"
        return (f"Compares like with like: the surrogate was trained on {n_s} training episodes and MuJoCo identified "
                f"on {sub} the same {pool}" + (" (a seeded subsample: the identification budget)" if sub != "all" else "")
                + f", both scored on the same {n_test} test episodes.")
    name = ((s.get("card") or {}).get("data") or {}).get("name")  # another dataset's episodes: say whose
    return (f"Compares unequal data: the surrogate was trained on {n_s or 'its own'} training episodes"
            + (f" of {name!r}" if name else "") + f", MuJoCo identified on {sub} {pool} training episodes of this "
            f"suite; both scored on the same {n_test} test episodes.")


def _paired_words(p: dict) -> str:
    """ "paired -1.03 [-1.74, -0.35] over 120 episodes" ("... of 24 objects, resampled by object" where the interval
    resamples units), or "" when no episode was scored by both."""
    if not p.get("n"):
        return ""
    units = f" of {p['units']} {p['by']}s, resampled by {p['by']}" if p.get("units") else ""
    return f"paired {signed_interval(p['mean'], p['ci95'])} over {p['n']} episodes{units}"


def verdict(models: dict, *, metric: str = "pos_pct_size", baseline: str = "analytic_identified", by: str | None = None
            ) -> dict:
    """The surrogate against the baselines (lower is better), three targets, all must be met, each decided by its
    paired interval (``outcome``: a tie is a tie): mean ``metric`` below ``baseline``'s; mean rotation error at most
    ``baseline``'s; mean ``metric`` below the randomized ensemble's (whether it is also below the ensemble's own 95 %
    interval is said beside it). The last two are checked where the suite evaluated those models
    (``overall_verdict``)."""
    s, b = models.get("surrogate", {}), models.get(baseline)
    if "overall" not in s or b is None or "overall" not in b:
        missing = "surrogate" if "overall" not in s else baseline
        return {"verdict": "not tested", "detail": f"{missing} was not evaluated in this run"}
    sm, bm = s["overall"][metric], b["overall"][metric]
    def ci(x):
        return f"[{x['mean_ci95'][0]:.2f}, {x['mean_ci95'][1]:.2f}]" if x.get("mean_ci95") else ""
    pp = paired(models, "surrogate", baseline, lambda e: e.get(metric), by=by)
    out = outcome(pp, sm["mean"] < bm["mean"])
    gap = {"met": f"target met by {_value_words(metric, bm['mean'] - sm['mean'])}",
           "tie": "a tie: the paired interval contains zero",
           "missed": f"target missed by {_value_words(metric, sm['mean'] - bm['mean'])} (surrogate / baseline = "
                     f"{sm['mean'] / max(bm['mean'], 1e-12):.2f}, needs < 1)"}[out]
    targets = [{"metric": metric, "baseline": baseline, "surrogate": sm["mean"], "baseline_value": bm["mean"],
                "ratio": sm["mean"] / max(bm["mean"], 1e-12), "max_ratio": 1.0, "needs": needs(pp, "<"),
                "met": out == "met", "outcome": out, "paired": pp}]
    if pp["n"]:
        gap += f"; surrogate - {baseline} {_paired_words(pp)}"
    more = []
    if "rot_deg" in s["overall"] and "rot_deg" in b["overall"]:
        sr, br = s["overall"]["rot_deg"]["mean"], b["overall"]["rot_deg"]["mean"]
        pr = paired(models, "surrogate", baseline, lambda e: e.get("rot_deg"), by=by)
        o = outcome(pr, sr <= br)
        targets.append({"metric": "rot_deg", "baseline": baseline, "surrogate": sr, "baseline_value": br,
                        "ratio": sr / max(br, 1e-12), "max_ratio": 1.0, "needs": needs(pr, "<="), "met": o == "met",
                        "outcome": o, "paired": pr})
        more.append(f"mean rotation error {sr:.2f} vs {br:.2f} deg ("
                    + {"met": "met", "tie": "a tie", "missed": f"missed by {sr - br:.2f} deg"}[o]
                    + (f"; {_paired_words(pr)}" if pr["n"] else "") + ")")
    r = models.get("analytic_randomized", {})
    if "overall" in r:
        # decided by the one rule on the paired interval, as every target (it had compared the surrogate's mean with
        # the lower end of the ensemble's own interval: no tie possible, the surrogate's spread ignored)
        rm = r["overall"][metric]
        pr = paired(models, "surrogate", "analytic_randomized", lambda e: e.get(metric), by=by)
        o = outcome(pr, sm["mean"] < rm["mean"])
        below = bool(rm.get("mean_ci95")) and sm["mean"] < rm["mean_ci95"][0]
        targets.append({"metric": metric, "baseline": "analytic_randomized", "surrogate": sm["mean"],
                        "baseline_value": rm["mean"], "ratio": sm["mean"] / max(rm["mean"], 1e-12), "max_ratio": 1.0,
                        "needs": needs(pr, "<"), "met": o == "met", "outcome": o, "paired": pr})
        more.append(f"randomized ensemble's mean {metric_words(metric).partition(',')[0]} {rm['mean']:.2f} {ci(rm)}: "
                    + {"met": "met", "tie": "a tie", "missed": "missed"}[o]
                    + f" ({_paired_words(pr) + '; ' if pr['n'] else ''}the surrogate's mean is "
                    f"{'' if below else 'not '}below the ensemble's interval)")
    like = like_with_like(models)
    return {"verdict": overall_verdict(targets),
            "detail": (f"{like} " if like else "")
                      + f"Mean {metric_words(metric)}: surrogate {sm['mean']:.2f} {ci(sm)} vs {baseline} {bm['mean']:.2f} "
                      f"{ci(bm)}: {gap} (medians {sm['median']:.2f} vs {bm['median']:.2f}; 95 % bootstrap intervals over "
                      f"{sm['n']} test episodes)" + ("; " + "; ".join(more) if more else ""),
            "comparison": like, "targets": targets}


ANALYTIC = ("analytic_nominal", "analytic_randomized", "analytic_identified")


def horizon_ratio_verdict(models: dict, *, horizon_s: float, max_ratio: float, metric: str = "pos_pct_size",
                          sets=None, by: str | None = None) -> dict:
    """Surrogate error at ``horizon_s`` (mean over the acceptance episodes, those of ``sets``) against the best
    analytic baseline's: the target is surrogate <= ``max_ratio`` x best, decided by the paired interval of
    surrogate - ``max_ratio`` x best over the same episodes (``outcome``: below zero met, containing zero a tie,
    above missed); the target also carries the plain paired difference surrogate - best."""
    h = f"{float(horizon_s):g}"

    def at(m):
        if "overall" not in m:
            return None
        return m["overall"]["horizons"][metric].get(h)

    s = at(models.get("surrogate", {}))
    base = {n: at(models[n]) for n in ANALYTIC if n in models and at(models[n]) and at(models[n])["mean"] is not None}
    if s is None or s["mean"] is None or not base:
        return {"verdict": "not tested",
                "detail": f"{'surrogate' if s is None or s['mean'] is None else 'no analytic baseline'} has no error at the {h} s horizon in this run"}
    best = min(base, key=lambda n: base[n]["mean"])
    b = base[best]
    ratio = s["mean"] / max(b["mean"], 1e-12)
    def value(e):
        return (e.get(f"horizon_{metric}") or {}).get(h)
    pb = paired(models, "surrogate", best, value, sets=sets, scale=max_ratio, by=by)
    out, op = outcome(pb, ratio <= max_ratio), needs(pb, "<=")
    def ci(x):
        return f" [{x['mean_ci95'][0]:.2f}, {x['mean_ci95'][1]:.2f}]" if x.get("mean_ci95") else ""
    bound = f"surrogate - {max_ratio:g} x {best} {_paired_words(pb)}" if pb["n"] else ""
    gap = {"met": f"target met (ratio {ratio:.2f} {op} {max_ratio:g}" + (f"; {bound}" if bound else "") + ")",
           "tie": f"a tie: ratio {ratio:.2f} against {max_ratio:g}, and the paired interval of {bound} contains zero",
           "missed": f"target missed: ratio {ratio:.2f}, needs {op} {max_ratio:g} (the surrogate's error would have to "
                     f"fall {100 * (1 - max_ratio / ratio):.0f} % to meet it"
                     + (f"; {bound}" if bound else "") + ")"}[out]
    pp = paired(models, "surrogate", best, value, sets=sets, by=by)
    if pp["n"]:
        gap += f"; surrogate - {best} {_paired_words(pp)}"
    like = like_with_like(models)
    floor = _floor(models, at, value, sets=sets, best=best, max_ratio=max_ratio, by=by)
    return {"verdict": overall_verdict([{"outcome": out}]),
            "detail": (f"{like} " if like else "")
                      + f"Mean {metric_words(f'{metric}@{h}s')}: surrogate {s['mean']:.2f}{ci(s)} vs best analytic "
                      f"({best}) {b['mean']:.2f}{ci(b)} over {s['n']} held-out episodes; {gap}"
                      + (f". {floor['words']}" if floor else ""),
            "comparison": like,
            "targets": [{"metric": f"{metric}@{h}s", "baseline": best, "surrogate": s["mean"], "baseline_value": b["mean"],
                         "ratio": ratio, "max_ratio": max_ratio, "needs": op, "met": out == "met", "outcome": out,
                         "paired": pp,
                         "paired_against_bound": pb}],
            **({"floor": {k: v for k, v in floor.items() if k != "words"}} if floor else {})}


def _floor(models: dict, at, value, *, sets, best: str, max_ratio: float, by: str | None = None) -> dict | None:
    """The target (``max_ratio`` x ``best``) against the rig's own physics (``rig_floor``), where the suite ran it:
    {row: {mean, surrogate_minus_row (paired)}, floor_row, floor_minus_target (paired: the floor row minus ``max_ratio``
    x ``best``, per episode), target_vs_floor, words}. The floor row is the central redraw (``rig_redrawn_medoid``)
    where there is one, else one redraw (``rig_redrawn``); ``target_vs_floor`` is decided by the paired interval
    (``outcome``): ``below`` (the floor is higher, the interval above zero), ``tie`` or ``above``. An estimate, not a
    bound: a model could be lucky on these episodes, and a few redraws place the centre coarsely. None without a
    redrawn row."""
    from .rig_floor import EXACT_ROW, MEDOID_ROW, ROW

    out, parts = {}, []
    for name, what in ((EXACT_ROW, "with each episode's own values (the recording's noise)"),
                       (ROW, "with them redrawn, one draw"), (MEDOID_ROW, "the central draw")):
        f = at(models.get(name, {}))
        if f is None or f["mean"] is None:
            continue
        pf = paired(models, "surrogate", name, value, sets=sets, by=by)
        out[name] = {"mean": f["mean"], "surrogate_minus_row": pf}
        parts.append(f"{what} ({name}) {f['mean']:.2f}" + (f", surrogate - {name} {_paired_words(pf)}" if pf["n"] else ""))
    row = MEDOID_ROW if MEDOID_ROW in out else ROW if ROW in out else None
    if row is None:
        return None
    target = max_ratio * at(models[best])["mean"]
    pt = paired(models, row, best, value, sets=sets, scale=max_ratio, by=by)
    # ``outcome`` of floor - target: "met" (interval below zero) is a floor under the target, "missed" one above it
    vs = {"met": "above", "tie": "tie", "missed": "below"}[outcome(pt, out[row]["mean"] < target)]
    where = {"below": "below", "tie": "not distinguishable from", "above": "above"}[vs]
    words = (f"The rig itself scores {'; '.join(parts)}. The target {target:.2f} is {where} the floor estimate "
             f"{row} {out[row]['mean']:.2f}" + (f" ({row} - {max_ratio:g} x {best} {_paired_words(pt)})" if pt["n"] else "")
             + ": what the rig's own physics scores without the hidden values (an estimate, not a bound)")
    return {**out, "floor_row": row, "target": target, "floor_minus_target": pt, "target_vs_floor": vs, "words": words}


def suite_verdict(cfg: dict, models: dict, target_sets: list | None = None) -> dict:
    """The verdict the suite's ``acceptance`` section asks for (default: beat the identified baseline); paired
    intervals resample the units of ``metrics.paired_by`` (e.g. object) where the suite names one. ``target_sets``:
    the test sets that decide it, as the run chose them (``split.target_sets``: with ``--test-data``, every given set),
    in place of the suite's ``acceptance.sets`` (a given set named like a suite set had decided the interval alone,
    while the means covered all of them)."""
    acc = cfg.get("acceptance") or {}
    by = (cfg.get("metrics") or {}).get("paired_by")
    if acc.get("kind") == "rate_gap":
        from .policy import verdict as policy_verdict

        return policy_verdict(models, max_gap=float(acc["max_gap"]))
    if acc.get("kind") == "horizon_ratio":
        return horizon_ratio_verdict(models, horizon_s=acc["horizon_s"], max_ratio=acc["max_ratio"],
                                     metric=acc.get("metric", "pos_pct_size"),
                                     sets=acc.get("sets") if target_sets is None else target_sets, by=by)
    return verdict(models, by=by)


def build_ledger(*, suite: str, cfg: dict, cfg_hash: str, run: dict, assets: dict | None = None, result: dict | None = None,
                 suite_name: str | None = None) -> dict:
    """The ledger of a suite run. ``suite`` is the suite kind (``cube-real``...), ``suite_name`` the
    name it was run under (``cube-real-small``); the hypothesis gets a sentence stating what the
    identified baseline was actually fitted on (``identification_note``)."""
    hyp = " ".join(str(cfg.get("hypothesis", "")).split())
    note = identification_note(run["models"])
    ledger = {
        "ledger_version": LEDGER_VERSION,
        "suite": suite,
        "suite_name": suite_name or suite,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "wall_s": float(run.get("wall_s", 0.0)),
        "versions": versions(),
        "config_hash": cfg_hash,
        "config": cfg,
        "data": run["data"],
        "assets": assets or {},
        "split": run.get("split", {}),
        "hypothesis": f"{hyp} {note}".strip(),
        "falsified_if": " ".join(str(cfg.get("falsified_if", "")).split()),
        "models": run["models"],
        "result": result or suite_verdict(cfg, run["models"], (run.get("split") or {}).get("target_sets")),
        "reported": cfg.get("reported", {}),
    }
    for key in ("recorded_outcomes", "command_delay", "attribution", "pad_force_traces", "execution",
                "transfer"):  # suite-specific parts
        if key in run:
            ledger[key] = run[key]
    return ledger


def validate_ledger(ledger: dict) -> None:
    """Raise jsonschema.ValidationError if ``ledger`` does not follow the schema."""
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.validate(ledger, schema)


def write_ledger(ledger: dict, out_dir: str | Path) -> Path:
    validate_ledger(ledger)
    path = Path(out_dir) / "ledger.json"
    write_json_atomic(path, ledger)
    return path
