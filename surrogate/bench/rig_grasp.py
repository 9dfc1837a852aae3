"""Suite ``rig-grasp``: recorded grasps of objects the surrogate never saw, replayed open loop.

Every test episode is a capture-rig grasp (or any capture dataset with a hand, via
``--test-data``). Each model replays the recorded commands from the first recorded state in
MuJoCo's scene of the episode and is scored against the recorded object poses:

- ``analytic_nominal``: the object's nominal friction, MuJoCo's default solref/solimp;
- ``analytic_identified``: friction, solref, solimp, cone, mass and actuator latency fitted by
  differential evolution to replays of training episodes (never test episodes);
- ``analytic_randomized``: an ensemble randomized around the identified values;
- ``surrogate``: the checkpoint's contact network owning the pad, table and ground pairs
  (hybrid stepper).

Test sets are named (``data.test_sets``): episodes of training-split objects (new grasps,
in distribution), held-out families, and mesh files. The acceptance compares models on the
held-out sets (``acceptance.sets``) at ``acceptance.horizon_s`` after the first contact.
Horizons count from the start of the script's ``close`` phase (when the pads reach the
object), because nothing moves the object before it.

Gap attribution (``attribution``) regenerates small train and test sets with each rig
effect switched off in turn, identifies MuJoCo on each, and reports how much of the analytic
residual each effect accounts for.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ..capture import dataset_hash, read_dataset
from ..config import expand_env
from ..errors import ConfigError
from ..paths import project_root
from .analytic import AnalyticParams
from .evaluate import aggregate, ensemble_mean_score, per_object, score_episode, spread_coverage
from .grasp_outcome import agreement, outcome_series, predicted_labels, rates
from .identify import randomized_ensemble
from .replay import (analytic_pad_forces, identify_replays, joint_qpos_columns, prepare_replay, simulate_replay_qpos,
                     replay_with_model, simulate_replay_states)

# Bump when the rig's output for the same config and seed changes, so cached test sets are regenerated.
RIG_FORMAT = 2


# ----------------------------------------------------------------------------- data

def _resolve(path) -> Path:
    p = Path(expand_env(str(path), key="data"))
    return p if p.is_absolute() else (project_root() / p)  # the checkout, installed: the current folder


def generated_dataset(spec: dict, *, rig: dict, cache_dir: Path, workers: int, progress: bool, label: str) -> Path | str:
    """A rig-generated capture dataset for ``spec`` ({objects, episodes, seed}), cached by content.

    Returns the dataset folder, or a string saying why the set is unavailable (e.g. a mesh
    folder that is absent on this machine).
    """
    from ..rig.generate import generate, load_config
    from ..rig.recorder import config_hash as rig_config_hash

    objects = str(spec["objects"])
    if "/" in objects or "$" in objects:
        folder = _resolve(objects)
        if not folder.is_dir():
            return f"object folder {folder} not found"
        objects = str(folder)
    cfg = load_config(rig.get("config"), rig.get("overrides", ()))
    key = {"rig": rig_config_hash(cfg), "objects": objects, "episodes": int(spec["episodes"]), "seed": int(spec["seed"]),
           "hand": rig["hand"], "duration": rig.get("duration"), "format": RIG_FORMAT}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    out = Path(cache_dir) / f"rig-{label}-{digest}"
    if not (out / "meta" / "contact.json").exists():
        generate(cfg, objects=objects, episodes=int(spec["episodes"]), out=out, workers=workers, seed=int(spec["seed"]),
                 hand=rig["hand"], duration=rig.get("duration"), progress=progress, overwrite=True)
    return out


def _train_dataset(cfg, *, card, rig, cache_dir, workers, progress):
    """The training captures: the checkpoint's own (if on disk), else ``data.train``."""
    root = (card or {}).get("data", {}).get("root")
    if root and (_resolve(root) / "meta" / "contact.json").exists():
        return read_dataset(_resolve(root)), [str(i) for i in card["data"].get("train_episodes", [])]
    spec = cfg["data"]["train"]
    if isinstance(spec, str):
        path = _resolve(spec)
        if not (path / "meta" / "contact.json").exists():
            raise ConfigError(f"training captures {path} not found: generate them with `surrogate rig generate` "
                              "or give data.train as {objects, episodes, seed}", key="data.train")
    else:
        path = generated_dataset(spec, rig=rig, cache_dir=cache_dir, workers=workers, progress=progress, label="train")
        if isinstance(path, str):
            raise ConfigError(f"training captures unavailable: {path}", key="data.train")
    return read_dataset(path), []


def _origin(ep, which: str) -> float:
    """Seconds after the first frame at which horizons start (``close``: the script's close phase)."""
    if which == "start":
        return 0.0
    phases = ((ep.provenance.generator or {}).get("script") or {}).get("phases") or {}
    if which not in phases:
        return 0.0
    return float(phases[which][0])


def _recorded_qpos(replay) -> np.ndarray:
    """[F, nq] the recorded episode as scene ``qpos``: measured hand joints and object pose."""
    import mujoco

    ep, m = replay.episode, replay.scene.model
    d = mujoco.MjData(m)
    mujoco.mj_setState(m, d, replay.init_state, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    q = np.tile(d.qpos, (ep.num_frames, 1))
    a = replay.scene.object_qpos_adr
    q[:, a:a + 7] = ep.object_pose
    if ep.joint_pos is not None:
        for c, adr in joint_qpos_columns(m, replay.joint_names):
            q[:, adr] = ep.joint_pos[:, c]
    return q


# ----------------------------------------------------------------------------- scoring

def _lift_mismatch_s(pred_z, true_z, dt: float, thr: float) -> np.ndarray:
    """[F] seconds so far during which one trajectory is lifted (rise > thr) and the other is not."""
    a = (pred_z - pred_z[0]) > thr
    b = (true_z - true_z[0]) > thr
    return np.cumsum(a != b) * dt


class _Scorer:
    """Scores predicted replays of one episode (pose, horizons, divergence signals, outcome labels)."""

    def __init__(self, replay, cfg, thresholds):
        self.replay, self.cfg, self.thr = replay, cfg, thresholds
        ep = replay.episode
        self.origin = _origin(ep, cfg["metrics"].get("horizon_origin", "close"))
        self.true_q = _recorded_qpos(replay)
        self.has_hand = replay.scene.hand is not None
        self.true_series = outcome_series(replay.scene, self.true_q) if self.has_hand else None
        self.dt = 1.0 / float(ep.provenance.capture_rate_hz)

    def force_error(self, pad_force: np.ndarray | None) -> np.ndarray | None:
        """[F] the largest sensed pad's force error against the recording, in object weights (None without
        sensors or predicted forces)."""
        r, ep = self.replay, self.replay.episode
        if pad_force is None or not r.sensors or ep.wrench is None:
            return None
        cols = [c for c, _, _ in r.sensors]
        weight = ep.object.mass * float(np.linalg.norm(ep.environment.gravity))
        n = min(len(pad_force), ep.num_frames)
        return np.linalg.norm(pad_force[:n] - ep.wrench[:n, cols, :3], axis=-1).max(axis=1) / weight

    def score(self, qpos: np.ndarray, pad_force: np.ndarray | None = None) -> dict:
        r, ep, m = self.replay, self.replay.episode, self.cfg["metrics"]
        a = r.scene.object_qpos_adr
        pose = qpos[:, a:a + 7]
        extra, labels = {}, None
        force_err = self.force_error(pad_force)
        if force_err is not None:
            extra["pad_force"] = (force_err, m["divergence"].get("pad_force_weights", 1.0))
        if self.has_hand:
            s = outcome_series(r.scene, qpos)
            slip = np.linalg.norm(s["rel_pos"] - self.true_series["rel_pos"], axis=1)
            extra["grip_slip"] = (slip, m["divergence"].get("slip_m", 0.005))
            extra["timing"] = (_lift_mismatch_s(pose[:, 2], ep.object_pose[:, 2], self.dt, self.thr["lift_threshold"]),
                               m["divergence"].get("timing_s", 0.1))
            labels = predicted_labels(r.scene, qpos, ep, self.thr, series=s)
        sc = score_episode(pose, ep, size=ep.object.size, horizons=m["horizons_s"], divergence=m["divergence"],
                           origin=self.origin, extra_series=extra, max_error_m=m.get("max_error_m"))
        sc["outcome"] = labels
        sc["pad_force_weights"] = None if force_err is None else float(force_err.mean())
        return sc


def _mean_scores(member_scores: list[list[dict]]) -> list[dict]:
    """Per episode: the ensemble's expected error (``evaluate.ensemble_mean_score``), the median
    divergence time, each member's outcome and the fraction of members that blew up."""
    out = []
    for i in range(len(member_scores[0])):
        rows = [ms[i] for ms in member_scores]
        s = ensemble_mean_score(rows)
        times = [r["divergence_time_s"] for r in rows if r["divergence_time_s"] is not None]
        s["divergence_time_s"] = float(np.median(times)) if times else None
        s["outcome_members"] = [r["outcome"] for r in rows]
        s["unstable"] = float(np.mean([bool(r["unstable"]) for r in rows]))
        out.append(s)
    return out


def _outcome_rates(scores: list[dict]) -> dict:
    """Rates over episodes; an ensemble's rate is the mean over its members."""
    if scores and "outcome_members" in scores[0]:
        K = len(scores[0]["outcome_members"])
        per = [rates([s["outcome_members"][k] for s in scores]) for k in range(K)]
        out = {}
        for key in ("success_rate", "slip_rate", "drop_rate"):
            vals = [p[key] for p in per if p[key] is not None]
            out[key] = float(np.mean(vals)) if vals else None
        out["episodes"] = per[0]["episodes"]
        out["lifted"] = float(np.mean([p["lifted"] for p in per]))
        return out
    return rates([s["outcome"] for s in scores])


def _metrics(scores: list[dict], sets: dict, target_sets: list, cfg, true_labels: dict) -> dict:
    h = cfg["metrics"]["horizons_s"]
    seed = cfg["metrics"].get("bootstrap_seed", 0)
    target = [s for s in scores if s["set"] in target_sets]

    def block(rows):
        agg = aggregate(rows, horizons=h, seed=seed)
        r = _outcome_rates(rows)
        agg["success_rate"], agg["slip_rate"], agg["drop_rate"] = r["success_rate"], r["slip_rate"], r.get("drop_rate")
        if rows and "outcome_members" not in rows[0]:
            agg["outcome_agreement"] = agreement([s["outcome"] for s in rows], [true_labels[s["id"]] for s in rows])
        return agg

    return {"overall": block(target) if target else block(scores),
            "per_set": {name: block([s for s in scores if s["set"] == name]) for name in sets},
            "per_object": per_object(target or scores, horizons=h, seed=seed),
            "per_episode": [{k: v for k, v in s.items() if k != "outcome_members"} for s in scores]}


def _force_traces(models: dict, replays: dict, traces: dict) -> dict:
    """{median, worst: {episode, t [F], recorded [F, S], models {name: [F, S]}, sensors}}: the sensed pads'
    normal force (site x, N) of the episodes with the median and the largest pad force error of the
    surrogate (of identified MuJoCo without a surrogate); every second frame."""
    ref = "surrogate" if "per_episode" in models.get("surrogate", {}) else "analytic_identified"
    rows = [s for s in models[ref]["per_episode"] if s.get("pad_force_weights") is not None and s["id"] in traces]
    if not rows:
        return {}
    rows.sort(key=lambda s: s["pad_force_weights"])
    out = {}
    for which, s in (("median", rows[len(rows) // 2]), ("worst", rows[-1])):
        r = replays[s["id"]]
        ep = r.episode
        cols = [c for c, _, _ in r.sensors]
        out[which] = {"episode": s["id"], "object": ep.object.name, "error_weights": s["pad_force_weights"], "model": ref,
                      "t": (ep.timestamps[::2] - ep.timestamps[0]).round(4).tolist(),
                      "sensors": [r.scene.model.site(site).name for _, site, _ in r.sensors],
                      "recorded": np.asarray(ep.wrench[::2][:, cols, 0]).round(4).tolist(),
                      "models": {k: np.asarray(v[::2]).round(4).tolist() for k, v in traces[s["id"]].items()}}
    return out


# ----------------------------------------------------------------------------- models

def _nominal(ep, nom) -> AnalyticParams:
    mu = ep.object.friction if nom["friction"] == "object" else float(nom["friction"])
    return AnalyticParams(friction=float(mu if mu is not None else 0.8), solref=tuple(nom["solref"]),
                          solimp=tuple(nom["solimp"]), cone=nom["cone"])


def _identify(train_ds, train_ids, cfg, *, sim, progress, seed):
    ic = cfg["baselines"]["identified"]
    wanted = set(train_ids)
    eps = [e for e in train_ds.episodes if not wanted or e.episode_id in wanted]
    rng = np.random.default_rng(seed)
    pick = sorted(rng.choice(len(eps), size=min(int(ic["episodes"]), len(eps)), replace=False))
    replays = [prepare_replay(eps[i], train_ds.meta, substeps=sim["substeps"], margin=sim["margin"]) for i in pick]
    params, info = identify_replays(replays, cones=tuple(ic["cones"]), fit_mass=bool(ic.get("fit_mass", True)),
                                    fit_delay=bool(ic.get("fit_delay", True)), maxiter=int(ic["maxiter"]),
                                    popsize=int(ic["popsize"]), seed=seed, progress=progress, what="identify on training grasps")
    info["episode_ids"] = [eps[i].episode_id for i in pick]
    info["pool"] = len(eps)  # training captures the subsample was drawn from
    return params, info


def _surrogate_qpos(model, test, sim, progress) -> tuple[dict, dict]:
    out, totals = {}, {"fallbacks": 0, "ood_env_steps": 0, "env_steps": 0, "bad_force_events": 0}
    for set_name, ep, meta in tqdm(test, desc="surrogate replays", unit="episode", disable=not progress):
        r, q, f, st = replay_with_model(ep, meta, model, substeps=sim["substeps"], margin=sim["surrogate_margin"],
                                        forces=True)
        out[f"{set_name}/{ep.episode_id}"] = (r, q, f)
        for k in totals:
            totals[k] += int(st[k])
    return out, totals


# ----------------------------------------------------------------------------- attribution

def attribution(cfg, *, rig, cache_dir, workers, progress) -> dict:
    """Residual of identified (and nominal) MuJoCo with each rig effect switched off in turn.

    Returns {"rows": [{variant, effect_off, nominal/identified position error (% size, mean and
    at the acceptance horizon), share of the all-on residual removed}], "settings": {...}}.
    """
    from ..rig.config import effect_names

    ac = cfg["attribution"]
    effects = effect_names() if ac.get("effects", "all") == "all" else list(ac["effects"])
    sim = cfg["simulation"]
    h = f"{float(cfg['acceptance']['horizon_s']):g}"
    thr = _thresholds(rig)
    rows = []
    variants = [("all_on", None)] + [(f"without_{e}", e) for e in effects]
    for name, off in variants:
        vrig = dict(rig)
        vrig["overrides"] = list(rig.get("overrides", ())) + ([f"effects.{off}.enabled=false"] if off else [])
        vrig["duration"] = ac.get("duration", rig.get("duration"))
        tr = generated_dataset({"objects": ac["train_objects"], "episodes": ac["train_episodes"], "seed": ac["seed"]},
                               rig=vrig, cache_dir=cache_dir, workers=workers, progress=progress, label=f"attr-train-{name}")
        te = generated_dataset({"objects": ac["test_objects"], "episodes": ac["test_episodes"], "seed": ac["seed"] + 1},
                               rig=vrig, cache_dir=cache_dir, workers=workers, progress=progress, label=f"attr-test-{name}")
        tds, eds = read_dataset(tr), read_dataset(te)
        sub = dict(cfg)
        sub["baselines"] = {**cfg["baselines"], "identified": {**cfg["baselines"]["identified"], **ac["identified"]}}
        params, info = _identify(tds, [], sub, sim=sim, progress=progress, seed=int(ac["seed"]))
        row = {"variant": name, "effect_off": off, "identified": params.to_json(), "fit_loss": info["loss"]}
        scorers = [_Scorer(prepare_replay(ep, eds.meta, substeps=sim["substeps"], margin=sim["margin"]), cfg, thr)
                   for ep in eds.episodes]
        for label, plist in (("nominal", None), ("identified", [params])):
            scores = [sc.score(simulate_replay_qpos(sc.replay, plist or [_nominal(sc.replay.episode, cfg["baselines"]["nominal"])])[0])
                      for sc in scorers]
            row[f"{label}_pos_pct_size"] = float(np.mean([s["pos_pct_size"] for s in scores]))
            at = [s["horizon_pos_pct_size"][h] for s in scores if s["horizon_pos_pct_size"][h] is not None]
            row[f"{label}_pos_pct_size_at_{h}s"] = float(np.mean(at)) if at else None
            row[f"{label}_rot_deg"] = float(np.mean([s["rot_deg"] for s in scores]))
            row[f"{label}_unstable"] = int(sum(bool(s["unstable"]) for s in scores))
        rows.append(row)
        if progress:
            print(f"attribution {name}: identified {row['identified_pos_pct_size']:.1f} % of size, "
                  f"nominal {row['nominal_pos_pct_size']:.1f} %", flush=True)
    base = rows[0]["identified_pos_pct_size"]
    for row in rows:
        row["residual_removed_pct"] = None if row["effect_off"] is None or base <= 0 else \
            100.0 * (base - row["identified_pos_pct_size"]) / base
    return {"rows": rows, "settings": {k: v for k, v in ac.items() if k != "enabled"}}


# ----------------------------------------------------------------------------- run

def _thresholds(rig) -> dict:
    from ..rig.generate import load_config

    s = load_config(rig.get("config"), rig.get("overrides", ()))["script"]
    return {k: float(s[k]) for k in ("lift_threshold", "slip_threshold", "slip_angle_threshold")}


def _load_sets(cfg, *, test_data, rig, cache_dir, workers, progress):
    sets, skipped = {}, {}
    if test_data is not None:
        ds = read_dataset(test_data)
        return {"test_data": ds}, {}
    for name, spec in cfg["data"]["test_sets"].items():
        path = generated_dataset(spec, rig=rig, cache_dir=cache_dir, workers=workers, progress=progress, label=name)
        if isinstance(path, str):
            skipped[name] = path
            print(f"test set {name} skipped: {path}")
            continue
        sets[name] = read_dataset(path)
    return sets, skipped


def run(cfg: dict, *, cache_dir: Path, checkpoint=None, test_data=None, progress: bool = True) -> dict:
    t0 = time.time()
    rig = {"config": cfg["data"].get("rig_config"), "overrides": cfg["data"].get("rig_overrides", []),
           "hand": cfg["data"].get("hand", "parallel_jaw"), "duration": cfg["data"].get("duration")}
    workers = int(cfg.get("workers", 2))
    sim = dict(cfg["simulation"])
    model, card = None, None
    if checkpoint is not None:
        from ..model.checkpoint import load_checkpoint

        model, card = load_checkpoint(checkpoint)
    sim["surrogate_margin"] = float(((card or {}).get("data") or {}).get("margin_m", sim["margin"]))
    sets, skipped = _load_sets(cfg, test_data=test_data, rig=rig, cache_dir=cache_dir, workers=workers, progress=progress)
    target_sets = [s for s in cfg["acceptance"]["sets"] if s in sets] or list(sets)
    test = [(name, e, ds.meta) for name, ds in sets.items() for e in ds.episodes]
    if not test:
        raise ConfigError("no test episodes: every test set was skipped", key="data.test_sets")
    thr = _thresholds(rig)
    # Episode ids are unique within a dataset only: key by "set/id".
    key = lambda name, e: f"{name}/{e.episode_id}"  # noqa: E731
    true_labels = {key(n, e): (e.labels or None) for n, e, _ in test}
    set_of = {key(n, e): n for n, e, _ in test}

    replays = {}
    scorers = {}
    for name, e, meta in tqdm(test, desc="prepare replays", unit="episode", disable=not progress):
        r = prepare_replay(e, meta, substeps=sim["substeps"], margin=sim["margin"])
        replays[key(name, e)] = r
        scorers[key(name, e)] = _Scorer(r, cfg, thr)

    def scored(eid, qpos, pad_force=None):
        s = scorers[eid].score(qpos, pad_force)
        s["id"], s["set"] = eid, set_of[eid]
        return s

    traces = {}  # per episode {model: [F, S] normal pad force}: the report plots the median and worst

    def analytic(eid, r, params: list, name: str):
        """[(qpos [F, nq], pad forces [F, S, 3])] per parameter set; keeps the mean normal trace as ``name``."""
        ms, states = simulate_replay_states(r, params)
        out = [(st[:, 1:1 + ms[0].nq], analytic_pad_forces(r, mk, st, p)) for mk, st, p in zip(ms, states, params)]
        if r.sensors:
            traces.setdefault(eid, {})[name] = np.mean([f[:, :, 0] for _, f in out], axis=0)
        return out

    models = {}
    nom = cfg["baselines"]["nominal"]
    scores = [scored(eid, *analytic(eid, r, [_nominal(r.episode, nom)], "analytic_nominal")[0]) for eid, r in replays.items()]
    models["analytic_nominal"] = {"description": "MuJoCo analytic contact with the object's nominal friction and MuJoCo's default solref/solimp, pyramidal cone, no actuator latency",
                                  "params": {k: v for k, v in _nominal(test[0][1], nom).to_json().items() if k != "friction"}
                                  | {"friction": nom["friction"]},
                                  **_metrics(scores, sets, target_sets, cfg, true_labels)}

    train_ds, train_ids = _train_dataset(cfg, card=card, rig=rig, cache_dir=cache_dir, workers=workers, progress=progress)
    # Test sets are generated with their own seeds; an identical recording in the training set would be a leak.
    train_keys = {(e.object.name, json.dumps((e.provenance.generator or {}).get("seed"))) for e in train_ds.episodes}
    overlap = sorted(k for k, r in replays.items()
                     if (r.episode.object.name, json.dumps((r.episode.provenance.generator or {}).get("seed"))) in train_keys)
    params, info = _identify(train_ds, train_ids, cfg, sim=sim, progress=progress, seed=int(cfg["baselines"]["identified"].get("seed", 0)))
    scores = [scored(eid, *analytic(eid, r, [params], "analytic_identified")[0]) for eid, r in replays.items()]
    models["analytic_identified"] = {
        "description": f"MuJoCo analytic contact, friction/solref/solimp/cone, mass and actuator latency identified by differential evolution on {info['episodes']} training grasps",
        "params": params.to_json(), "identification": info, **_metrics(scores, sets, target_sets, cfg, true_labels)}

    rc = cfg["baselines"]["randomized"]
    members = randomized_ensemble(params, n=int(rc["n"]), seed=int(rc.get("seed", 0)), ranges=rc.get("ranges"))
    member_scores = [[] for _ in members]
    inside = total = 0
    for eid, r in tqdm(replays.items(), desc="randomized ensemble", unit="episode", disable=not progress):
        runs = analytic(eid, r, members, "analytic_randomized")
        for k, (qk, fk) in enumerate(runs):
            member_scores[k].append(scored(eid, qk, fk))
        q = np.stack([qk for qk, _ in runs])
        a = r.scene.object_qpos_adr
        i, t = spread_coverage(q[:, :, a:a + 3], r.episode.object_pose[:, :3], r.episode.object_pose_valid)
        inside, total = inside + i, total + t
    models["analytic_randomized"] = {
        "description": f"ensemble of {len(members)} MuJoCo models randomized around the identified values (friction, solref, solimp width, mass, actuator latency)",
        "ensemble": {"n": len(members), "anchor": "analytic_identified", "members": [m.to_json() for m in members],
                     "truth_within_spread": inside / max(total, 1)},
        **_metrics(_mean_scores(member_scores), sets, target_sets, cfg, true_labels)}

    if model is not None:
        preds, st = _surrogate_qpos(model, test, sim, progress)
        scores = [scored(eid, preds[eid][1], preds[eid][2]) for eid in replays]
        for eid in replays:
            if replays[eid].sensors:
                traces.setdefault(eid, {})["surrogate"] = preds[eid][2][:, :, 0]
        models["surrogate"] = {"description": "graph-network contact surrogate inside MuJoCo (hybrid stepper) owning pad, table and ground contact",
                               "checkpoint": str(checkpoint), "card": {k: card.get(k) for k in ("training", "model")},
                               "stepper": st, "test_episodes_seen_in_training": overlap,
                               **_metrics(scores, sets, target_sets, cfg, true_labels)}
    else:
        models["surrogate"] = {"status": "not evaluated", "reason": "no --checkpoint given"}

    recorded = {name: rates([true_labels[key(name, e)] for e in ds.episodes]) for name, ds in sets.items()}
    recorded["overall"] = rates([true_labels[key(n, e)] for n, e, _ in test if n in target_sets])
    out = {
        "data": {"name": train_ds.meta.name, "path": str(train_ds.root), "episodes": len(train_ds.episodes),
                 "hash": dataset_hash(train_ds.root), "real": sorted({e.provenance.real for e in train_ds.episodes}),
                 "sources": sorted({e.provenance.source for e in train_ds.episodes}),
                 "test_data": {name: {"path": str(ds.root), "episodes": len(ds.episodes), "hash": dataset_hash(ds.root),
                                      "objects": sorted({e.object.name for e in ds.episodes})} for name, ds in sets.items()},
                 "skipped_sets": skipped, "train_episodes_in_test_sets": overlap},
        "split": {"target_sets": target_sets, "sets": {n: [key(n, e) for e in ds.episodes] for n, ds in sets.items()}},
        "models": models,
        "recorded_outcomes": recorded,
    }
    out["pad_force_traces"] = _force_traces(models, replays, traces)
    if cfg.get("attribution", {}).get("enabled") and test_data is None:
        out["attribution"] = attribution(cfg, rig=rig, cache_dir=cache_dir, workers=workers, progress=progress)
    out["wall_s"] = time.time() - t0
    return out
