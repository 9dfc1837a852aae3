"""The closed-loop stage of a rig training run (``stages.closed_loop``): the law's pad friction chosen by replays
of validation grasps with the hand actuated (before the network is trained on it: ``select_law``), the network's
likewise, and which of the two ships, decided on those replays or on grasps of objects the training never saw
(``decision_data``, ``rig-grasp``'s scorer); the card's ablation rows."""

from __future__ import annotations

import logging
import time

import numpy as np

from ..metrics import MIN_PAIRED_UNITS, below_zero
from ..paths import portable_path

logger = logging.getLogger(__name__)


def closed_loop_episodes(cfg: dict, dm) -> tuple[dict, list]:
    """The closed-loop stage's settings (``STAGE_DEFAULTS`` filled in) and its validation episodes with a hand (the
    first ``stages.closed_loop.episodes`` of them; none where that is 0)."""
    from ..learn.defaults import STAGE_DEFAULTS

    st = {**STAGE_DEFAULTS["closed_loop"], **((cfg.get("stages") or {}).get("closed_loop") or {})}
    n = int(st["episodes"])
    by_id = {e.episode_id: e for e in dm.capture.episodes}
    return st, [by_id[i] for i in dm.val_ids if by_id[i].joint_pos is not None][:n] if n > 0 else []


def replay_settings(cfg: dict, st: dict, dm) -> tuple[dict, dict]:
    """The closed-loop replays' arguments of ``law_selection.select_pad_friction`` (friction scales, substeps, margin,
    rotation weight, the hand's latency ``delay_s``) and that latency's record (``hand_latency``)."""
    from ..learn.defaults import LOSS_DEFAULTS

    rot_w = float({**LOSS_DEFAULTS, **cfg.get("loss", {})}["rot_weight_val"])
    by_id = {e.episode_id: e for e in dm.capture.episodes}
    delay = hand_latency(st, [by_id[i] for i in dm.train_ids], dm)
    return dict(scales=st["friction_scales"], substeps=int(dm.cfg["substeps"]), margin=float(dm.cfg["margin"]),
                rot_weight=rot_w, delay_s=delay["delay_s"]), delay


def friction_episodes(st: dict, dm, eps: list) -> tuple[list, object, dict]:
    """What the pad friction is chosen on: ``(episodes, meta, select_pad_friction's scoring arguments)``. With
    ``decision_data`` its grasps (objects the training never saw) by ``rig-grasp``'s verdict, the position error
    ``decision_horizon_s`` after the close starts, as the network is decided; else the validation episodes ``eps``
    by the validation score. (24 validation grasps chose a pad friction that the 240 decision grasps score worse,
    twice: docs/contact-model.md, twentieth and twenty-fifth sessions.)"""
    if not st.get("decision_data"):
        return eps, dm.capture.meta, {}
    from ..capture import read_dataset

    ds = read_dataset(st["decision_data"])
    return ([e for e in ds.episodes if e.joint_pos is not None], ds.meta,
            {"horizon_s": float(st.get("decision_horizon_s") or 1.0)})


def choose_law(cfg: dict, st: dict, law, dm, eps: list) -> dict:
    """The law's pad friction chosen by closed-loop replays (``law_selection.select_pad_friction``) of ``eps`` or
    of the decision data (``friction_episodes``): {kw (the replays' arguments), delay (the latency's record),
    selection, replays (``friction_episodes``' triple, which the network's selection reuses), wall_s}."""
    from ..bench.law_selection import select_pad_friction

    t0 = time.time()
    kw, delay = replay_settings(cfg, st, dm)
    on, meta, by = friction_episodes(st, dm, eps)
    sel = select_pad_friction(law, on, meta, **kw, **by)
    return {"kw": kw, "delay": delay, "selection": sel, "replays": (on, meta, by), "wall_s": time.time() - t0}


def select_law(cfg: dict, law, dm, out: dict):
    """``learn.fit``'s ``select_law``: the fitted law at the pad friction the closed-loop stage chooses for it
    (``choose_law``), before the network's corrections are trained on top of it, so that the network is trained and
    validated with the law it is used with. The choice goes into ``out`` (``closed_loop_stage`` reuses it); ``law``
    itself where the stage does not run."""
    st, eps = closed_loop_episodes(cfg, dm)
    if not eps:
        return law
    out.update(choose_law(cfg, st, law, dm, eps))
    return out["selection"]["model"]


def closed_loop_stage(cfg: dict, res: dict, law_choice: dict | None = None) -> None:
    """``stages.closed_loop``: choose the pad friction of the fitted law by closed-loop replays of validation
    episodes (``surrogate.bench.law_selection``; ``law_choice``: as ``select_law`` chose it before the corrections),
    and of the trained network likewise where there is one; the network is the release only if its replays beat the
    law's by a paired interval below zero (the benchmark's own replays decide, not the kinematic twin). Updates
    ``res`` (model; the prior model becomes the law at its selected friction) and records both selections, the
    paired comparison and the ablation rows in ``res["metrics"]``."""
    from ..learn.fit import score_summary

    dm = res["data"]
    st, eps = closed_loop_episodes(cfg, dm)
    if int(st["episodes"]) <= 0:
        if st.get("decision_data"):
            _decision_unused(res, "stages.closed_loop.episodes is 0: there is no closed-loop stage")
        return
    from ..bench.law_selection import select_pad_friction
    from ..metrics import paired_difference

    if not eps:
        res["metrics"]["closed_loop"] = {"skipped": "no validation episode has a hand"}
        if st.get("decision_data"):
            _decision_unused(res, "no validation episode has a hand: there is no closed-loop stage")
        return
    # chosen before the corrections were trained on it (select_law), else now
    choice = law_choice if law_choice else choose_law(cfg, st, res["prior_model"], dm, eps)
    kw, delay, sel = choice["kw"], choice["delay"], choice["selection"]
    t0 = time.time() - choice["wall_s"]
    cl = {k: sel[k] for k in ("scale", "friction", "candidates", "n", "paired_minus_fitted")} | {"command_delay": delay}
    res["prior_model"] = res["model"] = sel["model"]
    on, meta, by = choice["replays"]
    cl.update(episodes=[str(e.episode_id) for e in on], per_episode=sel["per_episode"], friction=sel["friction"])
    if by:
        cl["chosen_on"] = "decision data: rig-grasp's position error at the decision horizon"
    if st.get("reference"):
        cl["reference"] = reference_replays(st["reference"], on, meta, sel["per_episode"], kw, by)
    structure, pad_friction = "law", sel["friction"]
    net = res.get("network_model")
    if net is not None:
        nsel = select_pad_friction(net, on, meta, **kw, **by)
        diff = paired_difference(sel["per_episode"], nsel["per_episode"], "score", by="object")
        kept = below_zero(diff)
        res["network_selected"] = nsel["model"]
        cl["network"] = {**{k: nsel[k] for k in ("scale", "friction", "candidates", "paired_minus_fitted")},
                         "paired_minus_law": diff, "per_episode": nsel["per_episode"]}
        if st.get("decision_data"):  # decided on the grasps of objects the training never saw, as the benchmark scores
            known = {"law": sel["per_episode"], "network": nsel["per_episode"]} if by else None  # scored already
            cl["network"]["decision"] = dec = network_decision(st, sel["model"], nsel["model"], kw, known)
            kept = dec["kept"]
        if "reference" in cl:  # and never a release that does not beat the previous one on the same replays
            cl["network"]["paired_minus_reference"] = ref_diff = paired_difference(
                cl["reference"]["per_episode"], nsel["per_episode"], "score", by="object")
            kept = kept and (bool(st.get("decision_data")) or below_zero(ref_diff))  # decision data: its own rule
        cl["network"]["kept"] = bool(kept)
        if kept:
            res["model"], res["val_rows"] = nsel["model"], res["network_val_rows"]
            structure, pad_friction = "law+corrections", nsel["friction"]
        else:
            res["val_rows"] = res["prior_val_rows"]
    cl["wall_s"] = time.time() - t0
    res["metrics"]["closed_loop"] = cl
    if net is None and st.get("decision_data"):
        _decision_unused(res, "no network was trained (model.corrections off): the law ships")
    res["metrics"]["release"].update(structure=structure, pad_friction=pad_friction,
                                     kept_by="law only" if net is None else "decision data's replays (rig-grasp's "
                                     "scorer)" if st.get("decision_data") else "closed-loop replays")
    res["metrics"]["ablation"] = rows = ablation_rows(res["metrics"], history=bool(cfg["model"].get("history")),
                                                      val_hand=res["data"].val_hand)
    # the release's whole-episode validation summary (the twin or the closed loop: data.val_hand), and its replay score
    res["metrics"]["release"].update(**score_summary(res["val_rows"], kw["rot_weight"]),
                                     replay_score=(rows[-1] if structure != "law" else rows[0])["replay_score"])


def hand_latency(st: dict, train_eps: list, dm) -> dict:
    """``stages.closed_loop.command_delay``: the hand's latency its replays delay the commands by, as ``rig-grasp``
    replays the learned rows (``bench.command_delay``): ``identify`` on the first 8 training episodes with hand
    joints and commands (0 where there are none), a number of seconds, or 0."""
    from ..bench.command_delay import command_delay
    from ..parallel import Executor

    ids = [e.episode_id for e in train_eps if e.joint_pos is not None and e.joint_cmd is not None][:8]
    sim = {"command_delay": st.get("command_delay"), "substeps": int(dm.cfg["substeps"]),
           "margin": float(dm.cfg["margin"])}
    return command_delay(Executor(progress=False), {}, dm.capture, ids, sim=sim)


def network_decision(st: dict, law, network, kw: dict, known: dict | None = None) -> dict:
    """``stages.closed_loop.decision_data``: the law and the network (each at its selected pad friction) replayed on
    that dataset's grasps with a hand and scored by ``rig-grasp``'s scorer (``law_selection.benchmark_scores``). The
    network is kept if its position error ``decision_horizon_s`` after the close starts is below the law's by a paired
    interval (resampling objects) below zero, and over the episode not above it; with ``stages.closed_loop.reference``
    (the previous release) also below that checkpoint's at the horizon. Returns {data, sha256, n, horizon_s,
    paired_minus_law_at_horizon, paired_minus_law_episode, law_at_horizon, network_at_horizon, kept}, with a
    reference also paired_minus_reference_at_horizon and reference_at_horizon. ``known``: {law, network} rows the
    friction grid already scored on these grasps at the selected frictions (``friction_episodes``): not replayed."""
    from ..bench.law_selection import benchmark_scores
    from ..capture import dataset_hash, read_dataset
    from ..metrics import paired_difference, replacement_refusals

    ds = read_dataset(st["decision_data"])
    eps = [e for e in ds.episodes if e.joint_pos is not None]
    h = float(st.get("decision_horizon_s") or 1.0)
    args = dict(substeps=kw["substeps"], margin=kw["margin"], horizon_s=h, delay_s=kw["delay_s"])
    models = [("law", law), ("network", network)]
    if st.get("reference"):
        from ..model.checkpoint import load_checkpoint

        models.append(("reference", load_checkpoint(st["reference"])[0]))
    rows = dict(known or {})
    for name, m in models:
        if name not in rows:
            rows[name] = benchmark_scores(m, eps, ds.meta, desc=f"decision replays ({name})", **args)
    at = paired_difference(rows["law"], rows["network"], "at_horizon", by="object")
    whole = paired_difference(rows["law"], rows["network"], "pos_pct", by="object")

    def mean(name):
        vals = [r["at_horizon"] for r in rows[name] if r["at_horizon"] is not None]
        return float(np.mean(vals)) if vals else None

    objects = len({r["object"] for r in rows["law"] if r["at_horizon"] is not None})
    out = {"data": portable_path(st["decision_data"]), "sha256": dataset_hash(st["decision_data"]), "n": len(eps),
           "horizon_s": h, "paired_minus_law_at_horizon": at, "paired_minus_law_episode": whole,
           "law_at_horizon": mean("law"), "network_at_horizon": mean("network"),
           "kept": not replacement_refusals(at, whole, units=objects)}
    if objects < MIN_PAIRED_UNITS:  # a few objects' interval says nothing about objects (one grasp's is a point)
        out["reason"] = (f"{objects} objects' grasps last {h:g} s after the close starts, fewer than "
                         f"{MIN_PAIRED_UNITS}: too few to decide, the law ships")
        logger.warning("stages.closed_loop.decision_data: %s", out["reason"])
    if "reference" in rows:  # never a release that does not beat the previous one on the same grasps
        out["paired_minus_reference_at_horizon"] = ref = paired_difference(rows["reference"], rows["network"],
                                                                           "at_horizon", by="object")
        out["reference_at_horizon"] = mean("reference")
        out["kept"] = out["kept"] and below_zero(ref)
    return out


def _decision_unused(res: dict, why: str) -> None:
    """``stages.closed_loop.decision_data`` was given and decided nothing: the card and the log say why."""
    res["metrics"].setdefault("closed_loop", {})["decision_unused"] = why
    logger.warning("stages.closed_loop.decision_data decided nothing: %s", why)


def reference_replays(path, episodes, meta, law_rows: list[dict], kw: dict, by: dict | None = None) -> dict:
    """``stages.closed_loop.reference``: another checkpoint (e.g. the previous release) replayed on the same
    episodes at its own pad friction and scored as the law's friction was chosen (``by``: ``friction_episodes``),
    paired against this run's law, so that the card compares models across runs on the same replays:
    {checkpoint, weights_sha256 (a release this run replaces keeps its name), pad_friction, replay_score,
    replay_paired_minus_law, per_episode}."""
    from ..bench.law_selection import mean_score, scored_replays
    from ..metrics import paired_difference
    from ..model.checkpoint import load_checkpoint

    model, card = load_checkpoint(path)
    rows = scored_replays(model, episodes, meta, substeps=kw["substeps"], margin=kw["margin"],
                          rot_weight=kw["rot_weight"], delay_s=kw["delay_s"], **(by or {}))
    return {"checkpoint": portable_path(path), "weights_sha256": card["weights_sha256"], "pad_friction": model.prior("body").friction,
            "replay_score": mean_score(rows),
            "replay_paired_minus_law": paired_difference(law_rows, rows, "score", by="object"), "per_episode": rows}


def ablation_rows(metrics: dict, *, history: bool = False, val_hand: str = "kinematic") -> list[dict]:
    """The card's ablation: each trained model on the same validation episodes, by the training's validation (whole
    episodes; ``val_hand`` kinematic: the twin, actuated: the stepper in closed loop) and by closed-loop replays
    (actuated hand, the benchmark's replays) at its selected pad friction."""
    from ..bench.law_selection import mean_score as mean

    cl = metrics.get("closed_loop", {})
    law = metrics["prior"].get("selected") or metrics["prior"]["fitted"]  # at the friction the network was trained on
    rows = [{"row": "law", "val_hand": val_hand, "val_score": law["score"],
             "replay_score": mean(cl.get("per_episode")), "pad_friction": cl.get("friction")}]
    if "reference" in cl:  # a checkpoint of another run (the previous release), replayed on the same episodes
        ref = cl["reference"]
        rows.append({"row": f"reference {ref['checkpoint']}", "replay_score": ref["replay_score"],
                     "replay_paired_minus_law": ref["replay_paired_minus_law"], "pad_friction": ref["pad_friction"]})
    if "corrections" in metrics:
        net = cl.get("network", {})
        rows.append({"row": "network with history" if history else "network without history",
                     "val_hand": val_hand, "val_score": metrics["corrections"]["fitted"]["score"],
                     "val_paired_minus_law": metrics["corrections"]["paired_minus_prior"]["score"],
                     "replay_score": mean(net.get("per_episode")), "replay_paired_minus_law": net.get("paired_minus_law"),
                     "pad_friction": net.get("friction"), "kept": net.get("kept")})
    return rows
