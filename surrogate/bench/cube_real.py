"""Suite ``cube-real``: real cube tosses, whole-toss rollouts from the first recorded state.

Protocol (as in the cube-toss literature): a fixed seeded split holds out ``n_test`` tosses;
training sets of 8 ... 256 tosses are nested prefixes of the shuffled rest. Every model
starts from the same first-state estimate (``analytic.initial_free_state``), rolls out the
whole toss at ``substeps`` MuJoCo steps per frame, and is scored on every tracked frame.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..capture import dataset_hash, read_dataset
from ..config import expand_env
from ..splits import suite_split
from .analytic import AnalyticParams, TossSet, simulate_tosses
from .evaluate import aggregate, ensemble_mean_score, per_object, score_episode, spread_coverage
from .identify import identify, randomized_ensemble
from .metrics import box_penetration
from .predictors import object_scene, surrogate_predict


def load_episodes(source: str | Path, *, cache_dir: Path, progress: bool = True):
    """Episodes of a capture dataset, or of a raw ContactNets folder (imported once into ``cache_dir``)."""
    src = Path(expand_env(str(source), key="data.source"))
    if (src / "meta" / "contact.json").exists():
        ds = read_dataset(src)
    else:
        from ..importers.contactnets import import_contactnets

        target = cache_dir / src.name
        if not (target / "meta" / "contact.json").exists():
            import_contactnets(src, target, overwrite=True, progress=progress)
        ds = read_dataset(target)
    return ds


def _penetration(pred, ep):
    geo = ep.object.geometry
    if geo.get("kind") != "box":
        return None
    return box_penetration(pred, geo["half_extents"], ep.environment.height)


def _score_all(preds: dict, episodes, cfg) -> list:
    m = cfg["metrics"]
    return [score_episode(preds[e.episode_id][: e.num_frames], e, size=e.object.size, horizons=m["horizons_s"],
                          divergence=m["divergence"], penetration=_penetration(preds[e.episode_id][: e.num_frames], e))
            for e in episodes]


def predict_analytic(params: list[AnalyticParams], episodes, *, substeps: int, init_frames: int) -> list[dict]:
    """Predictions of each parameter set: a list (per set) of {episode_id: [T, 7]}."""
    out = [dict() for _ in params]
    by_obj = {}
    for e in episodes:
        by_obj.setdefault((e.object.name, e.provenance.capture_rate_hz), []).append(e)
    for group in by_obj.values():
        scene = object_scene(group[0], substeps=substeps, mode="analytic")
        tosses = TossSet.from_episodes(group, substeps=substeps, k=init_frames)
        pred = simulate_tosses(scene, params, tosses)
        for p in range(len(params)):
            for i, e in enumerate(group):
                out[p][e.episode_id] = pred[p, i, : e.num_frames]
    return out


def _metrics(scores, cfg):
    h = cfg["metrics"]["horizons_s"]
    seed = cfg["metrics"].get("bootstrap_seed", 0)
    return {"overall": aggregate(scores, horizons=h, seed=seed), "per_object": per_object(scores, horizons=h, seed=seed),
            "per_episode": scores}


def ensemble_coverage(member_preds: list[dict], episodes) -> float:
    """Fraction of tracked frames where the true position lies within the ensemble's spread
    (``evaluate.spread_coverage``)."""
    inside, total = 0, 0
    for e in episodes:
        i, t = spread_coverage(np.stack([mp[e.episode_id][:, :3] for mp in member_preds]), e.object_pose[:, :3],
                               e.object_pose_valid)
        inside, total = inside + i, total + t
    return inside / max(total, 1)


def _learned_row(ckpts: dict, test, cfg, *, progress: bool) -> dict:
    """A model row of learned checkpoints {train size or "given": path}: scores per size, the verdict's at
    the one given on the command line, else at the largest training size."""
    sim = cfg["simulation"]
    by_size, main = {}, {}
    for key, path in ckpts.items():
        p, card = surrogate_predict(path, test, substeps=sim["substeps"], init_frames=sim["init_frames"], progress=progress)
        scores = _score_all(p, test, cfg)
        # A checkpoint trained on another split may have seen some test episodes: say how many.
        trained_on = {str(i) for i in (card.get("data", {}) or {}).get("train_episodes", [])}
        overlap = sorted(trained_on & {e.episode_id for e in test})
        if overlap:
            print(f"warning: checkpoint {path} was trained on {len(overlap)} of the {len(test)} test episodes")
        # Where the data-efficiency curve puts it: the size it was trained on (the card's count for ``given``).
        size = int(key) if key.isdigit() else (len(trained_on) or None)
        by_size[key] = {"checkpoint": str(path), "train_size": size,
                        "card_data": {k: v for k, v in card.get("data", {}).items() if not k.endswith("episodes")},
                        "test_episodes_seen_in_training": overlap,
                        "overall": aggregate(scores, horizons=cfg["metrics"]["horizons_s"])}
        main[key] = (path, card, scores)
    key = "given" if "given" in by_size else max(by_size, key=lambda k: int(k) if k.isdigit() else -1)
    path, card, scores = main[key]
    structure = (card.get("model", {}).get("class") or "").rsplit(".", 1)[-1]
    return {"description": card.get("model", {}).get("description") or f"learned contact inside MuJoCo (hybrid stepper): {structure}",
            "checkpoint": str(path), "card": {k: card.get(k) for k in ("training", "model")},
            "test_episodes_seen_in_training": by_size[key]["test_episodes_seen_in_training"],
            **_metrics(scores, cfg), "by_train_size": by_size}


def run(cfg: dict, *, cache_dir: Path, checkpoint=None, test_data=None, progress: bool = True) -> dict:
    """Run the suite; returns the ledger's ``data``, ``split`` and ``models`` parts."""
    t0 = time.time()
    ds = load_episodes(cfg["data"]["source"], cache_dir=cache_dir, progress=progress)
    eps, sp = suite_split(ds.episodes, cfg["data"], cfg["data"]["train_sizes"])
    by_id = {e.episode_id: e for e in eps}
    test = [by_id[i] for i in sp["test"]]
    data_info = {"name": ds.meta.name, "path": str(ds.root), "episodes": len(eps), "real": sorted({e.provenance.real for e in eps}),
                 "sources": sorted({e.provenance.source for e in eps}), "hash": dataset_hash(ds.root)}
    if test_data is not None:
        tds = read_dataset(test_data)
        test = [e for e in tds.episodes if e.num_frames >= cfg["data"].get("min_frames", 2)]
        data_info["test_data"] = {"name": tds.meta.name, "path": str(tds.root), "episodes": len(test), "hash": dataset_hash(tds.root)}
    sim = cfg["simulation"]
    models = {}

    # -- nominal ------------------------------------------------------------------
    nom = cfg["baselines"]["nominal"]
    def nominal_for(e):
        mu = e.object.friction if nom["friction"] == "object" else float(nom["friction"])
        return AnalyticParams(friction=float(mu if mu is not None else 0.8), solref=tuple(nom["solref"]),
                              solimp=tuple(nom["solimp"]), cone=nom["cone"])
    preds = {}
    for obj in sorted({e.object.name for e in test}):
        group = [e for e in test if e.object.name == obj]
        preds.update(predict_analytic([nominal_for(group[0])], group, substeps=sim["substeps"], init_frames=sim["init_frames"])[0])
    models["analytic_nominal"] = {"description": "MuJoCo analytic contact with the object's nominal friction and MuJoCo's default solref/solimp, pyramidal cone",
                                  "params": nominal_for(test[0]).to_json(), **_metrics(_score_all(preds, test, cfg), cfg)}

    # -- identified, per training size ------------------------------------------------
    ident_cfg = cfg["baselines"]["identified"]
    by_size, best = {}, None
    for k in [s for s in ident_cfg["sizes"] if int(s) in sp["train"]]:
        ids = sp["train"][int(k)]
        if len(ids) > ident_cfg["max_episodes"]:
            ids = list(np.random.default_rng(k).choice(ids, ident_cfg["max_episodes"], replace=False))
        train = [by_id[i] for i in ids]
        scene = object_scene(train[0], substeps=sim["substeps"], mode="analytic")
        params, info = identify(scene, TossSet.from_episodes(train, substeps=sim["substeps"], k=sim["init_frames"]),
                                train[0].object.size, cones=tuple(ident_cfg["cones"]), maxiter=ident_cfg["maxiter"],
                                popsize=ident_cfg["popsize"], seed=int(k), progress=progress)
        p = predict_analytic([params], test, substeps=sim["substeps"], init_frames=sim["init_frames"])[0]
        scores = _score_all(p, test, cfg)
        by_size[str(k)] = {"params": params.to_json(), "identification": info, "identified_on": len(ids),
                           "overall": aggregate(scores, horizons=cfg["metrics"]["horizons_s"])}
        best = (k, params, info, scores)
    if best is not None:
        k, params, info, scores = best
        models["analytic_identified"] = {
            "description": f"MuJoCo analytic contact, friction/solref/solimp and cone identified by differential evolution on {k} training tosses",
            "params": params.to_json(), "identification": info, "train_size": int(k), **_metrics(scores, cfg),
            "by_train_size": by_size,
        }

        # -- randomized ensemble anchored on the identified values ------------------------
        rcfg = cfg["baselines"]["randomized"]
        members = randomized_ensemble(params, n=rcfg["n"], seed=rcfg["seed"], ranges=rcfg.get("ranges"))
        mpreds = predict_analytic(members, test, substeps=sim["substeps"], init_frames=sim["init_frames"])
        member_scores = [_score_all(mp, test, cfg) for mp in mpreds]
        # Per episode: the ensemble's expected error (mean over members of each scalar).
        mean_scores = [ensemble_mean_score([ms[i] for ms in member_scores]) for i in range(len(test))]
        models["analytic_randomized"] = {
            "description": f"ensemble of {len(members)} MuJoCo models randomized around the identified values (friction, solref, solimp width, mass)",
            "ensemble": {"n": len(members), "anchor": "analytic_identified", "members": [m.to_json() for m in members],
                         "truth_within_spread": ensemble_coverage(mpreds, test)},
            **_metrics(mean_scores, cfg),
        }

    # -- surrogate, and further learned rows (e.g. the fitted constant law alone) -------------
    rows = {"surrogate": {str(k): v for k, v in (cfg.get("surrogate", {}).get("checkpoints") or {}).items()}}
    if checkpoint is not None:
        rows["surrogate"]["given"] = str(checkpoint)
    for name, by_size in (cfg.get("surrogate", {}).get("rows") or {}).items():
        rows[str(name)] = {str(k): v for k, v in (by_size or {}).items()}
    for name, ckpts in rows.items():
        if ckpts:
            models[name] = _learned_row(ckpts, test, cfg, progress=progress)
    if not rows["surrogate"]:
        models["surrogate"] = {"status": "not evaluated", "reason": "no --checkpoint given"}
    return {"data": data_info, "split": {k: v for k, v in sp.items() if k != "pool"}, "models": models, "wall_s": time.time() - t0}
