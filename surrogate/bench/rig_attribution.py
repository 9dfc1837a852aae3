"""Gap attribution of ``rig-grasp`` (``attribution``): which of the rig's effects a model's error comes from.

Each effect the suite's rig has on is switched off in turn (a *variant*); small train and test sets of every variant
are generated with the same seeds, so a variant's test grasps are the all-on rig's grasps (same objects, scripts and
recorder noise: ``rig.simulate`` draws each purpose from its own generator) with that one effect gone. On each:

- nominal MuJoCo, and MuJoCo identified on the variant's training grasps (``attribution.identified``; ``false``:
  not identified, for rigs where nominal is the best analytic model and the identification only costs time);
- the learned models (the suite's ``surrogate`` and its ``surrogate.rows``), trained on the all-on rig and not
  retrained, replayed with the hand latency identified from the variant's training grasps;
- the variant's own recordings scored against the all-on recordings of the same grasps: the effect's size, how far
  the effect alone moves the object (``effect_size``).

Paired per grasp against the all-on variant, resampling objects (``metrics.paired_difference``): a model whose
error falls by an interval below zero when an effect is off has that much of its error from the effect, one it does
not capture (``paired``); and for each further learned row, how its gain over the suite's ``surrogate`` (its
law, say) changes with the effect off (``gain_off_minus_on``: below zero, the gain was partly that effect's).
"""

from __future__ import annotations

import logging

import numpy as np

from ..capture import read_dataset
from ..metrics import paired_difference
from ..parallel import Executor
from .command_delay import command_delay
from .replay import prepare_replay, simulate_replay_qpos
from .rig_data import generated_dataset, thresholds
from .rig_grasp import identify_on_training_grasps, surrogate_replays
from .rig_scoring import EpisodeScorer, scene_qpos
from .rows import nominal_params

logger = logging.getLogger(__name__)


def attribution_effects(effects, rig: dict) -> list[str]:
    """The effects to switch off in turn: a list as given, or for ``"all"`` the effects the suite's rig (``rig``:
    ``rig_settings``) has on; switching off an effect that is off would only rerun the all-on rig."""
    from ..rig.config import load_rig_config
    from .gap import variants

    if effects != "all":
        return list(effects)
    return [e for e in variants(load_rig_config(rig["config"], rig["overrides"])).values() if e]


def _scores(scores: list[dict], episodes, h: str) -> list[dict]:
    """Per-grasp rows ``{"id", "object", "at", "episode"}`` (position % of size at the horizon ``h`` and over the
    episode) of ``scores`` [one per episode of ``episodes``]: what the paired comparisons read."""
    return [{"id": ep.episode_id, "object": ep.object.name, "at": s["horizon_pos_pct_size"][h],
             "episode": s["pos_pct_size"]} for ep, s in zip(episodes, scores)]


def _means(rows: list[dict], h: str) -> dict:
    """The mean position error of per-grasp ``rows`` over the episode and at the horizon ``h``."""
    at = [r["at"] for r in rows if r["at"] is not None]
    return {"pos_pct_size": float(np.mean([r["episode"] for r in rows])),
            f"pos_pct_size_at_{h}s": float(np.mean(at)) if at else None}


def _summary(rows: list[dict], scores: list[dict], h: str) -> dict:
    """The means the ledger's rows have always carried, of per-grasp ``rows`` and their full ``scores``."""
    return {**_means(rows, h), "rot_deg": float(np.mean([s["rot_deg"] for s in scores])),
            "unstable": int(sum(bool(s["unstable"]) for s in scores))}


def _variant(ex: Executor, name: str, off, cfg, *, rig, cache_dir, workers, progress, learned) -> tuple[dict, dict, list]:
    """(the ledger row of the variant with effect ``off`` switched off (None: all on), {model: per-grasp rows}, the
    scorers of its test grasps [one per episode, each holding its replay and recording])."""
    ac, sim = cfg["attribution"], cfg["simulation"]
    h = f"{float(cfg['acceptance']['horizon_s']):g}"
    vrig = dict(rig)
    vrig["overrides"] = list(rig.get("overrides", ())) + ([f"effects.{off}.enabled=false"] if off else [])
    vrig["duration"] = ac.get("duration", rig.get("duration"))
    tr = generated_dataset({"objects": ac["train_objects"], "episodes": ac["train_episodes"], "seed": ac["seed"]},
                           rig=vrig, cache_dir=cache_dir, workers=workers, progress=progress, label=f"attr-train-{name}")
    te = generated_dataset({"objects": ac["test_objects"], "episodes": ac["test_episodes"], "seed": ac["seed"] + 1},
                           rig=vrig, cache_dir=cache_dir, workers=workers, progress=progress, label=f"attr-test-{name}")
    tds, eds = read_dataset(tr), read_dataset(te)
    thr = thresholds(rig)
    scorers = [EpisodeScorer(prepare_replay(ep, eds.meta, substeps=sim["substeps"], margin=sim["margin"]), cfg, thr)
               for ep in eds.episodes]
    plists = {"nominal": lambda sc: [nominal_params(sc.replay.episode, cfg["baselines"]["nominal"])]}
    row = {"variant": name, "effect_off": off}
    ident = ac.get("identified", {})
    if ident is False:  # not identified: the rows keep their keys, empty
        row.update(identified=None, fit_loss=None, identified_pos_pct_size=None, **{f"identified_pos_pct_size_at_{h}s": None},
                   identified_rot_deg=None, identified_unstable=None)
        ids = [e.episode_id for e in tds.episodes]
    else:
        sub = {**cfg, "baselines": {**cfg["baselines"], "identified": {**cfg["baselines"]["identified"], **ident}}}
        params, info = identify_on_training_grasps(ex, tds, [], sub, sim=sim, progress=progress, seed=int(ac["seed"]),
                                                   label=f"attr-{name}")
        row.update(identified=params.to_json(), fit_loss=info["loss"])
        plists["identified"] = lambda sc: [params]
        ids = info["episode_ids"]
    per = {}
    for label, plist in plists.items():
        scores = [sc.score(simulate_replay_qpos(sc.replay, plist(sc))[0]) for sc in scorers]
        per[label] = _scores(scores, eds.episodes, h)
        row.update({f"{label}_{k}": v for k, v in _summary(per[label], scores, h).items()})
    row["learned"] = {}
    row["command_delay_s"] = delay = command_delay(ex, cfg, tds, ids, sim=sim)["delay_s"] if learned else 0.0
    for lname, (path, net, card) in (learned or {}).items():
        test = [(f"attr-{name}/{ep.episode_id}", ep, eds.meta) for ep in eds.episodes]
        margin = float(((card or {}).get("data") or {}).get("margin_m", sim["margin"]))  # the model's own, as in its row
        preds, _ = surrogate_replays(ex, path, net, test, {**sim, "surrogate_margin": margin, "command_delay_s": delay})
        scores = [sc.score(preds[k][0]) for sc, (k, _, _) in zip(scorers, test)]
        per[lname] = _scores(scores, eds.episodes, h)
        row["learned"][lname] = _summary(per[lname], scores, h)
    return row, per, scorers


def _effect_size(base: list, variant: list, h: str) -> list[dict]:
    """Per grasp: the variant's recorded poses scored against the all-on recording of the same grasp, i.e. how far
    the switched-off effect alone moves the object. ``base``, ``variant``: the scorers of the all-on and the
    variant's test grasps (``_variant``), in the same order."""
    scores = []
    for sc, vsc in zip(base, variant):
        ep, vep = sc.replay.episode, vsc.replay.episode
        if ep.object.name != vep.object.name or ep.num_frames != vep.num_frames:
            raise ValueError(f"attribution: grasp {vep.episode_id} of the variant is not the all-on rig's grasp "
                             f"{ep.episode_id} ({vep.object.name} against {ep.object.name}): the seeds no longer pair")
        scores.append(sc.score(scene_qpos(sc.replay, vep.object_pose, vep.joint_pos)))
    return _scores(scores, [sc.replay.episode for sc in base], h)


def _paired(base: list[dict], off: list[dict], by) -> dict:
    """Off minus all on, paired per grasp: at the horizon and over the episode."""
    return {"at_horizon": paired_difference(base, off, "at", by=by), "episode": paired_difference(base, off, "episode", by=by)}


def _gain(per: dict, ref: str, name: str) -> list[dict]:
    """Per grasp: ``ref``'s error minus ``name``'s (the learned row's gain over the suite's surrogate)."""
    mine = {r["id"]: r for r in per[name]}
    out = []
    for r in per[ref]:
        m = mine[r["id"]]
        at = None if r["at"] is None or m["at"] is None else r["at"] - m["at"]
        out.append({"id": r["id"], "object": r["object"], "at": at, "episode": r["episode"] - m["episode"]})
    return out


def attribution(cfg, *, rig, cache_dir, workers, progress, ex: Executor | None = None, learned=None) -> dict:
    """Nominal and identified MuJoCo, the ``learned`` models ({name: (checkpoint, model, card)}) and the rig's own
    recordings with each rig effect switched off in turn (module docstring).

    Returns {"rows": [{variant, effect_off, nominal/identified position error (% size, mean and at the acceptance
    horizon), share of the all-on residual removed, learned: {name: the same of that model}, and for each variant
    but all-on: effect_size, paired: {model: {at_horizon, episode: off minus all-on}}, gain_off_minus_on: {row: the
    same of its gain over ``surrogate``}}], "settings": {...}}.
    """
    ex = ex or Executor(progress=progress)
    ac = cfg["attribution"]
    by = cfg["metrics"].get("paired_by")
    h = f"{float(cfg['acceptance']['horizon_s']):g}"
    effects = attribution_effects(ac.get("effects", "all"), rig)
    rows, base, base_scorers = [], None, None
    for name, off in [("all_on", None)] + [(f"without_{e}", e) for e in effects]:
        row, per, scorers = _variant(ex, name, off, cfg, rig=rig, cache_dir=cache_dir, workers=workers,
                                     progress=progress, learned=learned)
        if base is None:
            base, base_scorers = per, scorers
        else:
            row["effect_size"] = _means(_effect_size(base_scorers, scorers, h), h)
            row["paired"] = {m: _paired(base[m], per[m], by) for m in per}
            row["gain_off_minus_on"] = {m: _paired(_gain(base, "surrogate", m), _gain(per, "surrogate", m), by)
                                        for m in (learned or {}) if m != "surrogate" and "surrogate" in per}
        rows.append(row)
        logger.info("attribution %s: nominal %.1f %% of size", name, row["nominal_pos_pct_size"])
    b = rows[0]["identified_pos_pct_size"]  # the share of the all-on residual each effect removes
    for row in rows:
        row["residual_removed_pct"] = None if row["effect_off"] is None or not b or row["identified_pos_pct_size"] is None \
            else 100.0 * (b - row["identified_pos_pct_size"]) / b
        for lname, lr in row["learned"].items():
            lbase = rows[0]["learned"][lname]["pos_pct_size"]
            lr["residual_removed_pct"] = None if row["effect_off"] is None or lbase <= 0 else \
                100.0 * (lbase - lr["pos_pct_size"]) / lbase
    return {"rows": rows, "settings": {k: v for k, v in ac.items() if k != "enabled"}}
