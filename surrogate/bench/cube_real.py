"""Suite ``cube-real``: real cube tosses, whole-toss rollouts from the first recorded state.

Protocol (as in the cube-toss literature): a fixed seeded split holds out ``n_test`` tosses;
training sets of 8 ... 256 tosses are nested prefixes of the shuffled rest. Every model
starts from the same first-state estimate (``analytic.initial_free_state``), rolls out the
whole toss at ``substeps`` MuJoCo steps per frame, and is scored on every tracked frame.

``--test-data`` replaces the test split by one or several capture datasets (``testsets``);
with several, every row also has metrics per dataset (``per_set``) besides those per object.

The rows follow ``rows`` (predictor -> scorer -> ledger row). Tasks (``parallel``): batches of
tosses (``predictors.toss_chunks``) for every model's rollouts, and batches of each
identification generation's candidates.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from ..metrics import box_penetration, paired_difference
from ..parallel import Executor
from ..splits import suite_split
from .analytic import TossSet, simulate_tosses
from .evaluate import aggregate, ensemble_mean_score, episode_errors, per_object, score_episode, spread_coverage
from .identify import identify
from .predictors import learned_for, object_scene, predict_analytic, toss_chunks
from .rows import NOT_GIVEN, Scorer, analytic_rows, learned_row, nominal_params, scored
from .testsets import as_paths, data_block, require_kind
from .toss_data import load_tosses, seen_recordings, test_tosses

logger = logging.getLogger(__name__)

TEXT = {"nominal": "MuJoCo analytic contact with the object's nominal friction and MuJoCo's default solref/solimp, pyramidal cone",
        "randomized": "ensemble of {n} MuJoCo models randomized around the identified values (friction, solref, solimp width, mass)"}


def _penetration(pred, ep):
    geo = ep.object.geometry
    if geo.get("kind") != "box":
        return None
    return box_penetration(pred, geo["half_extents"], ep.environment.height)


def ensemble_coverage(member_preds: list[dict], episodes) -> float:
    """Fraction of tracked frames where the true position lies within the ensemble's spread
    (``evaluate.spread_coverage``)."""
    inside, total = 0, 0
    for e in episodes:
        i, t = spread_coverage(np.stack([mp[e.episode_id][:, :3] for mp in member_preds]), e.object_pose[:, :3],
                               e.object_pose_valid)
        inside, total = inside + i, total + t
    return inside / max(total, 1)


def toss_scorer(test: list, cfg: dict, set_of: dict | None = None) -> Scorer:
    """The scorer of toss predictions {episode id: [T, 7]} on ``test``; ``set_of`` {episode id: test
    set} adds metrics per test set."""
    m = cfg["metrics"]
    h, seed = m["horizons_s"], m.get("bootstrap_seed", 0)

    def score(preds):
        out = []
        for e in test:
            p = preds[e.episode_id][: e.num_frames]
            s = score_episode(p, e, size=e.object.size, horizons=h, divergence=m["divergence"], penetration=_penetration(p, e),
                              max_error_m=m.get("max_error_m"))
            if set_of:
                s["set"] = set_of[e.episode_id]
            out.append(s)
        return out

    def metrics(scores):
        out = {"overall": aggregate(scores, horizons=h, seed=seed), "per_object": per_object(scores, horizons=h, seed=seed)}
        if set_of:
            out["per_set"] = {n: aggregate([s for s in scores if s["set"] == n], horizons=h, seed=seed)
                              for n in dict.fromkeys(set_of.values())}
        return {**out, "per_episode": scores}

    def ensemble(member_scores):
        return [ensemble_mean_score([ms[i] for ms in member_scores]) for i in range(len(test))]

    return Scorer(score, metrics, ensemble, lambda members: ensemble_coverage(members, test))


# ----------------------------------------------------------------------------- predictors (tasks)

def _analytic_task(common: dict, item) -> list[dict]:
    params, chunk = item
    return predict_analytic(params, chunk, substeps=common["substeps"], init_frames=common["init_frames"],
                            threads=common["threads"])


def simulator(ex: Executor, test: list, sim: dict):
    """The suite's analytic predictor ``simulate(params_for, name) -> members`` (``rows``), one task per
    batch of tosses."""
    chunks = toss_chunks(test)
    common = {"substeps": sim["substeps"], "init_frames": sim["init_frames"], "threads": ex.threads}

    def simulate(params_for, name):
        items = [(params_for(c[0]), c) for c in chunks]  # a batch holds one object: its parameters hold for all
        parts = ex.map(_analytic_task, items, common=common, desc=f"{name} rollouts", unit="batch")
        members = [dict() for _ in items[0][0]]
        for part in parts:
            for k, preds in enumerate(part):
                members[k].update(preds)
        return members

    return simulate


def _learned_task(common: dict, chunk) -> tuple[dict, dict]:
    learned, _ = learned_for(common["checkpoint"])
    return learned.predict(common["checkpoint"], chunk, substeps=common["substeps"], init_frames=common["init_frames"],
                           progress=False)


def learned_predict(ex: Executor, checkpoint, test: list, sim: dict) -> tuple[dict, dict]:
    """({episode id: [T, 7]}, card) of a learned checkpoint (its card's class picks the predictor)."""
    learned_for(checkpoint)  # an unknown class fails here, before any task
    common = {"checkpoint": str(checkpoint), "substeps": sim["substeps"], "init_frames": sim["init_frames"]}
    parts = ex.map(_learned_task, toss_chunks(test), common=common, desc=f"learned rollouts ({Path(checkpoint).name})",
                   unit="batch")
    preds = {}
    for p, _ in parts:
        preds.update(p)
    return preds, parts[0][1]


# ----------------------------------------------------------------------------- rows

def toss_stability(train: list, cfg: dict, *, threads: int = 2):
    """(``stable(params) -> [P] bool``, timestep s): which parameter sets roll out every training toss of
    ``train`` without blowing up (``evaluate.episode_errors``, the suite's ``metrics.max_error_m``): the randomized
    ensemble's stability pass (``identify.stable_ensemble``), on the tosses the identified values were fitted on."""
    sim, cap = cfg["simulation"], cfg["metrics"].get("max_error_m") or 1.0
    scene = object_scene(train[0], substeps=sim["substeps"], mode="analytic")
    tosses = TossSet.from_episodes(train, substeps=sim["substeps"], k=sim["init_frames"])

    def stable(params):
        pred = simulate_tosses(scene, params, tosses, threads=threads)
        return [all(episode_errors(pred[p, i, :n], ep, cap)["blew_up_at"] is None
                    for i, (ep, n) in enumerate(zip(tosses.episodes, tosses.n_frames))) for p in range(len(params))]

    stable.episodes = len(train)
    return stable, float(scene.model.opt.timestep)


def given_training(checkpoint, by_id: dict, test_ids: set, *, data: dict | None = None) -> list | None:
    """The training tosses of the ``--checkpoint`` surrogate (its card's ``data.train_episodes``) that this
    suite has and does not test on, or None (no checkpoint, or a card naming none of them): the identified
    baseline is fitted on the same tosses, so the verdict compares like with like. With ``data`` (this suite's
    dataset: ``name``, ``hash``), only where the card's ``data.sha256`` is this dataset's: ids name other tosses in
    another dataset, even of the same name (dair_pll's copies of the cube tosses are numbered otherwise than
    ContactNets' own, and a rig checkpoint's grasps are 0, 1, ...); a warning then says so."""
    if checkpoint is None:
        return None
    from ..model.checkpoint import read_card

    card_data = read_card(checkpoint).get("data") or {}
    ids = [str(i) for i in card_data.get("train_episodes") or []]
    ids = [i for i in ids if i in by_id and i not in test_ids]
    if ids and data and card_data.get("sha256") != data.get("hash"):
        logger.warning("%s was trained on dataset %r (sha256 %s), not on this suite's %r (sha256 %s): its training "
                       "episodes' ids are not taken as tosses of this suite, and MuJoCo is identified on the suite's "
                       "own split", checkpoint, card_data.get("name"), str(card_data.get("sha256"))[:12],
                       data.get("name"), str(data.get("hash"))[:12])
        return None
    return ids or None


def _identified(cfg, sp, by_id, *, ex, simulate, scorer, progress, given=None):
    """(identified parameters, their row's fields, a function completing ``by_train_size`` from the
    row, text, (stable, timestep)); identification on each size in ``baselines.identified.sizes`` and, with
    ``given`` (the surrogate's own training tosses, ``given_training``), on those: the row is then the fit on
    the surrogate's data, else the largest size's."""
    ic, sim = cfg["baselines"]["identified"], cfg["simulation"]
    jobs = [(str(s), list(sp["train"][int(s)])) for s in ic["sizes"] if int(s) in sp["train"]]
    if given:
        jobs = [(k, ids) for k, ids in jobs if int(k) != len(given)] + [(str(len(given)), list(given))]
        jobs.sort(key=lambda j: (int(j[0]), j[1] is given))
    fits = []
    for k, ids in jobs:
        if len(ids) > ic["max_episodes"]:
            ids = list(np.random.default_rng(int(k)).choice(ids, ic["max_episodes"], replace=False))
        train = [by_id[i] for i in ids]
        scene = object_scene(train[0], substeps=sim["substeps"], mode="analytic")
        params, info = identify(scene, TossSet.from_episodes(train, substeps=sim["substeps"], k=sim["init_frames"]),
                                train[0].object.size, cones=tuple(ic["cones"]), maxiter=ic["maxiter"],
                                popsize=ic["popsize"], seed=int(k), progress=progress, ex=ex)
        fits.append((k, params, info, len(ids), train))
    if not fits:
        return None
    row = next((f for f in fits if given and f[0] == str(len(given))), fits[-1])
    by_size = {k: {"params": p.to_json(), "identification": info, "identified_on": n} for k, p, info, n, _ in fits}
    if given:
        by_size[row[0]]["on"] = "the surrogate's own training tosses (its card's data.train_episodes)"
    for k, p, _, _, _ in fits:  # the row's own figures are filled in by ``complete``
        if k != row[0]:
            m = scored(scorer, simulate(lambda e, p=p: [p], f"identified on {k}")[0])
            by_size[k]["overall"], by_size[k][_PER_EPISODE] = m["overall"], m["per_episode"]
    k, params, info, n, train = row
    info = {**info, "identified_on": n, "train_size": int(k)}

    def complete(r):
        by_size[k]["overall"], by_size[k][_PER_EPISODE] = r["overall"], r["per_episode"]

    what = "the surrogate's own" if given else "the suite's"
    text = ("MuJoCo analytic contact, friction/solref/solimp and cone identified by differential evolution on "
            + (f"{n} of {what} {k} training tosses" if n < int(k) else f"{what} {k} training tosses"))
    return params, {"identification": info, "train_size": int(k), "by_train_size": by_size,
                    "same_data_as_surrogate": bool(given)}, text, complete, \
        toss_stability(train, cfg, threads=ex.threads)


_PER_EPISODE = "_per_episode"  # per-size episode scores, kept only until ``paired_by_train_size`` has used them


def paired_by_train_size(models: dict) -> None:
    """Each learned row's ``by_train_size[N]`` gains ``paired_minus_identified``: its per-episode position and rotation
    errors minus those of MuJoCo identified at the same size N, paired over the same test episodes (``metrics.
    paired_difference``: mean and 95 % bootstrap interval; negative, the learned row is lower), so that a
    data-efficiency curve is compared size by size in one run. The per-episode scores are then dropped."""
    ident = (models.get("analytic_identified") or {}).get("by_train_size") or {}
    own = next((k for k, v in ident.items() if v.get("on")), None)  # MuJoCo identified on a checkpoint's own tosses
    for name, m in models.items():
        if name.startswith("analytic") or not m.get("by_train_size"):
            continue
        for k, v in m["by_train_size"].items():  # the checkpoint given on the command line ("given") against ``own``
            ref = (ident.get(own if k == "given" else k) or {}).get(_PER_EPISODE)
            if ref is not None and v.get(_PER_EPISODE) is not None:
                v["paired_minus_identified"] = {key: paired_difference(ref, v[_PER_EPISODE], key)
                                                for key in ("pos_pct_size", "rot_deg")}
    for m in models.values():
        for v in (m.get("by_train_size") or {}).values():
            v.pop(_PER_EPISODE, None)


def _learned(ckpts: dict, test, cfg, *, scorer, ex, seen_by) -> dict:
    """A model row of learned checkpoints {train size or "given": path}: scores per size, the verdict's at
    the one given on the command line, else at the largest training size."""
    by_size, main = {}, {}
    for key, path in ckpts.items():
        preds, card = learned_predict(ex, path, test, cfg["simulation"])
        m = scored(scorer, preds)
        # A checkpoint trained on another split may have seen some test episodes: say how many.
        data = card.get("data", {}) or {}
        trained_on = {str(i) for i in data.get("train_episodes", [])}
        # everything that shaped it (fitted on, or selected its epochs and corrections on): the clean sweep's count
        seen = trained_on | {str(i) for i in data.get("val_episodes", [])}
        overlap = seen_by(trained_on)
        if overlap:
            logger.warning("checkpoint %s was trained on %d of the %d test episodes", path, len(overlap), len(test))
        # Where the data-efficiency curve puts it: the size it was trained on (the card's count for ``given``).
        size = int(key) if key.isdigit() else (len(trained_on) or None)
        by_size[key] = {"checkpoint": str(path), "train_size": size,
                        "card_data": {k: v for k, v in card.get("data", {}).items() if not k.endswith("episodes")},
                        "test_episodes_seen_in_training": overlap, "episodes_seen": len(seen), "overall": m["overall"],
                        _PER_EPISODE: m["per_episode"]}
        main[key] = (path, card, m)
    key = "given" if "given" in by_size else max(by_size, key=lambda k: int(k) if k.isdigit() else -1)
    path, card, m = main[key]
    structure = (card.get("model", {}).get("class") or "").rsplit(".", 1)[-1]
    learned, _ = learned_for(path)
    return {**learned_row(description=learned.description.format(structure=structure), checkpoint=path, card=card,
                          seen=by_size[key]["test_episodes_seen_in_training"], metrics=m, train_size=by_size[key]["train_size"]),
            "by_train_size": by_size}


def _learned_rows(cfg, checkpoint, test, *, scorer, ex, seen_by) -> dict:
    """The surrogate row (``--checkpoint``, ``surrogate.checkpoints``) and further learned rows (``surrogate.rows``,
    e.g. the fitted constant law alone)."""
    rows = {"surrogate": {str(k): v for k, v in (cfg.get("surrogate", {}).get("checkpoints") or {}).items()}}
    if checkpoint is not None:
        rows["surrogate"]["given"] = str(checkpoint)
    for name, by_size in (cfg.get("surrogate", {}).get("rows") or {}).items():
        rows[str(name)] = {str(k): v for k, v in (by_size or {}).items()}
    models = {name: _learned(ckpts, test, cfg, scorer=scorer, ex=ex, seen_by=seen_by)
              for name, ckpts in rows.items() if ckpts}
    if not rows["surrogate"]:
        models["surrogate"] = dict(NOT_GIVEN)
    return models


# ----------------------------------------------------------------------------- run

def suite_test_episodes(cfg, sp, by_id, test_data, cache_dir):
    """(test episodes, the ledger's ``data.test_data`` or None, {episode key: test set} or None)."""
    if not as_paths(test_data):
        return [by_id[i] for i in sp["test"]], None, None
    suite, held_out = cfg.get("suite", "cube-real"), set(sp["test"])
    return test_tosses(test_data, cache_dir=cache_dir, min_frames=int(cfg["data"].get("min_frames", 2)),
                       check=lambda tds, _: require_kind(tds, "tosses", suite=suite),
                       seen=[e for i, e in by_id.items() if i not in held_out],
                       seen_why=f"one of {suite}'s own tosses outside its test split, which its rows are trained, "
                                "identified and selected on")


def _seen_by(test, by_id):
    """A function of a checkpoint's card's training ids (the suite's source tosses) -> the test tosses whose
    recordings it was trained on (``toss_data.seen_recordings``, which knows a toss exported again in another
    frame). By recording, not id: on ``--test-data`` another dataset may number its tosses alike (dair_pll's cube
    tosses do: ids alone had reported 19 of 105 such tosses as trained on, none of which was), and the shared cube
    tosses hold 19 recordings stored twice under two ids, one pair across the suite's test split and the release's
    training tosses."""
    def seen(trained_on: set) -> list:
        hits = seen_recordings(test, [by_id[i] for i in sorted(trained_on) if i in by_id])
        return sorted(e.episode_id for e, hit in zip(test, hits) if hit)
    return seen


def run(cfg: dict, *, cache_dir: Path, checkpoint=None, test_data=None, progress: bool = True,
        ex: Executor | None = None) -> dict:
    """Run the suite; returns the ledger's ``data``, ``split`` and ``models`` parts."""
    t0 = time.time()
    ex = ex or Executor(progress=progress)
    ds = load_tosses(cfg["data"]["source"], cache_dir=cache_dir, progress=progress)
    eps, sp = suite_split(ds.episodes, cfg["data"], cfg["data"]["train_sizes"])
    by_id = {e.episode_id: e for e in eps}
    test, test_info, set_of = suite_test_episodes(cfg, sp, by_id, test_data, cache_dir)
    data_info = data_block(ds, int(cfg["data"].get("min_frames", 2)))
    if test_info is not None:
        data_info["test_data"] = test_info
    scorer = toss_scorer(test, cfg, set_of)
    simulate = simulator(ex, test, cfg["simulation"])
    seen_by = _seen_by(test, by_id)
    # the surrogate's own training tosses: the identified baseline is fitted on them (like with like), with
    # --test-data too (as elbow-real does; they lie outside the split's test tosses, so they count as seen and no
    # test toss is one of them); until the forty-fifth session the split's own 64 were fitted there instead
    given = given_training(checkpoint, by_id, set(sp["test"]), data=data_info)
    ident = _identified(cfg, sp, by_id, ex=ex, simulate=simulate, scorer=scorer, progress=progress, given=given)
    models = analytic_rows(cfg["baselines"], simulate=simulate, scorer=scorer,
                           text={**TEXT, "identified": ident[2] if ident else ""},
                           nominal_json=nominal_params(test[0], cfg["baselines"]["nominal"]).to_json(),
                           identified=ident[:2] if ident else None, stable=ident[4][0] if ident else None,
                           timestep=ident[4][1] if ident else 0.0)
    if ident:
        ident[3](models["analytic_identified"])
    models.update(_learned_rows(cfg, checkpoint, test, scorer=scorer, ex=ex, seen_by=seen_by))
    paired_by_train_size(models)
    split = {k: v for k, v in sp.items() if k != "pool"}
    if set_of:
        split["sets"] = {n: [k for k, s in set_of.items() if s == n] for n in dict.fromkeys(set_of.values())}
    return {"data": data_info, "split": split, "models": models, "wall_s": time.time() - t0}
