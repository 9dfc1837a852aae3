"""Suite ``elbow-real``: a real object never seen in training, the DAIR Lab's two-link "elbow" tosses.

Every cube-trained row is trained or identified on the real CUBE tosses only and predicts the elbow's: nominal
MuJoCo (the URDF's friction 0.3, MuJoCo's defaults), MuJoCo identified on the cube (``cube-real``'s training split
and budget), randomized around it (its stability pass on those cube tosses), and the released cube surrogate.
Then the few-shot rows: MuJoCo identified on N elbow training tosses (``few_shot.sizes``; ``all`` = the whole
training split), each with paired differences against the cube-identified row and against the previous N; fitted on
each toss's window around its first floor impact where ``few_shot.identified.fit_on: impacts`` (``elbow_fewshot``).

Protocol: the elbow dataset's seeded split holds out ``data.n_test`` tosses (``--test-data`` replaces them by
other elbow datasets: hidden tosses are scored there; nothing here is tuned to the shared 61; a test toss whose
recording is one of the split's other tosses, which the few-shot rows train on, is left out and named). A toss
that does not start in free flight (``estimate.free_flight_start``: its first frames accelerate away from gravity,
as if still held) is scored, and a few-shot training toss fitted on, from the frame where free flight starts (the
training tosses from the thirty-fifth session on; before, from their first frame); every model starts from the same
first-state estimate there (base pose by ``initial_free_state``, joint angles and rates by ``initial_joint_state``)
and rolls out the rest of the toss. Scores: the first (tracked) link's position in % of its size and rotation (the
ledger's ``pos_pct_size`` / ``rot_deg``), the joint-angle error beside them (``joint_deg``), per link (``links``),
horizons and first divergence (pose or joint).

The surrogate row is the ``--checkpoint`` contact model in the hybrid stepper, owning the floor contacts of every
link (``sim.link_graph``), all test tosses stepped as one batch. The few-shot surrogate rows
``surrogate_finetuned_elbow_<N>`` (``elbow_fewshot``): the release fine-tuned on the same N elbow tosses as MuJoCo's
few-shot identification, by gradient through the articulated twin (``sim.twin_links``), the best step chosen by
whole-toss stepper rollouts of those tosses; paired against identified MuJoCo at the same N.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from ..capture import dataset_hash
from ..errors import ConfigError
from ..estimate import FREE_FLIGHT_MAX_START, free_flight_start
from ..importers.floor_check import episode_warnings
from ..metrics import paired_difference
from ..parallel import Executor
from ..scenes.from_capture import scene_key
from ..splits import suite_split
from .analytic import TossSet
from .cube_real import given_training, simulator, toss_scorer, toss_stability
from .elbow_fewshot import (
    few_shot_detail,
    finetuned_rows,
    fitting_tosses,
    flight_starts,
    link_rollout,
    surrogate_settings,
)
from .identify import identify
from .ledger import suite_verdict
from .predictors import object_scene
from .rows import analytic_rows, nominal_params, scored
from .testsets import as_paths, data_block
from .toss_data import load_tosses, test_tosses
from .toss_windows import toss_stretch

logger = logging.getLogger(__name__)

TEXT = {"nominal": "MuJoCo analytic contact with the URDF's nominal friction and MuJoCo's default solref/solimp, "
                   "pyramidal cone",
        "randomized": "ensemble of {n} MuJoCo models randomized around the values identified on the cube"}


def from_free_flight(ep, est: dict):
    """``ep`` from its free-flight start (``free_flight_start``) on (all of it for a clean start); the start frame is
    kept in ``labels["free_flight_start"]``, and ``labels["no_free_flight"]`` is True where no window of the frames
    searched was free flight (the toss is then scored from its first frame, which may still be in the hand)."""
    s = int(est["start"])
    return toss_stretch(ep, s, labels={"free_flight_start": s, "start_accel_dev_ms2": est["accel_dev0"],
                                       "no_free_flight": not est["free"]})


def _articulated(tds, kept) -> None:
    """``elbow-real``'s requirement of a test dataset: tosses of an articulated object."""
    if kept[0].object_joint_pos is None:
        raise ConfigError("needs tosses of an articulated object (object_joint_pos; import with --urdf)",
                          file=tds.root, key="test_data")


def articulated_tests(cfg, elbow_eps, sp, test_data, cache_dir):
    """(test episodes from their free-flight start, the ledger's ``data.test_data`` or None, {key: set} or None)."""
    if not as_paths(test_data):
        by_id = {e.episode_id: e for e in elbow_eps}
        raw, info, set_of = [by_id[i] for i in sp["test"]], None, None
    else:
        held_out = set(sp["test"])
        raw, info, set_of = test_tosses(test_data, cache_dir=cache_dir, min_frames=int(cfg["data"].get("min_frames", 2)),
                                        urdf=cfg["data"]["urdf"], check=_articulated,
                                        seen=[e for e in elbow_eps if e.episode_id not in held_out],
                                        seen_why="one of the suite's own elbow tosses outside its test split, which "
                                                 "the few-shot rows are identified and fine-tuned on")
    return from_flight_start(raw, cfg), info, set_of


def from_flight_start(episodes, cfg: dict) -> list:
    """``episodes`` each from the frame its free flight starts (``free_flight_start`` with the suite's
    ``free_flight`` settings): how the suite scores its test tosses and trains its few-shot rows."""
    ff = cfg.get("free_flight", {})
    kw = {"window": int(ff.get("window", 7)), "tol": float(ff.get("tol_ms2", 6.0)),
          "max_start": int(ff.get("max_start", FREE_FLIGHT_MAX_START))}
    return [from_free_flight(e, free_flight_start(e, **kw)) for e in episodes]


def identify_on(episodes, cfg, ic, *, ex, progress, seed: int):
    """(MuJoCo's contact parameters identified on ``episodes``, the identification's info) with ``ic``'s budget."""
    sim = cfg["simulation"]
    scene = object_scene(episodes[0], substeps=sim["substeps"], mode="analytic")
    tosses = TossSet.from_episodes(episodes, substeps=sim["substeps"], k=sim["init_frames"])
    return identify(scene, tosses, episodes[0].object.size, cones=tuple(ic["cones"]), maxiter=ic["maxiter"],
                    popsize=ic["popsize"], seed=seed, progress=progress, ex=ex)


def _cube_identified(cfg, *, cache_dir, ex, progress, checkpoint=None):
    """(parameters identified on the cube's training tosses, the row's fields, the cube tosses they were fitted on):
    the ``--checkpoint`` surrogate's own cube training tosses (its card's, as ``cube-real`` does: like with like),
    else ``cube.train_size`` of cube-real's split."""
    cc = cfg["cube"]
    cube = load_tosses(cc["source"], cache_dir=cache_dir, progress=progress, key="cube.source")
    eps, sp = suite_split(cube.episodes, cc, [int(cc["train_size"])])
    by_id = {e.episode_id: e for e in eps}
    cube_hash = dataset_hash(cube.root)
    given = given_training(checkpoint, by_id, set(sp["test"]), data={"name": cube.meta.name, "hash": cube_hash})
    ids = list(given or sp["train"][int(cc["train_size"])])
    ic = cfg["baselines"]["identified"]
    if len(ids) > ic["max_episodes"]:
        ids = list(np.random.default_rng(int(cc["train_size"])).choice(ids, ic["max_episodes"], replace=False))
    train = [by_id[i] for i in ids]
    params, info = identify_on(train, cfg, ic, ex=ex, progress=progress, seed=int(cc["train_size"]))
    extra = {"identification": {**info, "identified_on": len(train), "object": "contactnets_cube"},
             "train_size": len(given or ids), "trained_on": "cube", "cube_data_hash": cube_hash,
             "same_data_as_surrogate": bool(given)}
    return params, extra, train


def few_shot_identification(cfg: dict) -> dict:
    """The few-shot rows' identification settings: ``baselines.identified`` with ``few_shot.identified`` over it."""
    return {**cfg["baselines"]["identified"], **((cfg.get("few_shot") or {}).get("identified") or {})}


def _few_shot(cfg, pool_by_id, sp, *, simulate, scorer, ex, progress, refs: dict) -> dict:
    """Rows ``analytic_identified_elbow_<N>``: MuJoCo identified on N elbow training tosses, each with ``paired``: the
    row minus each reference (``refs`` {name: row}: the cube-identified row, the cube surrogate) and minus the
    previous N's row, per metric, over the same test episodes."""
    fs = cfg.get("few_shot") or {}
    rows, prev = {}, None
    pool = sp["pool"]
    for n in fs.get("sizes", []):
        k = len(pool) if n == "all" else int(n)
        if k > len(pool) or k < 1:
            continue
        train = [pool_by_id[i] for i in pool[:k]]
        seen, fit_on = fitting_tosses(train, cfg, "identified")
        params, info = identify_on(seen, cfg, few_shot_identification(cfg), ex=ex, progress=progress, seed=k)
        m = scored(scorer, simulate(lambda e, p=params: [p], f"identified on {k} elbow tosses")[0])
        what = " (each toss's window around its first impact)" if fit_on["fit_on"] == "impacts" else ""
        row = {"description": f"MuJoCo analytic contact identified on {k} elbow training tosses{what} (few-shot)",
               "params": params.to_json(), "identification": {**info, "identified_on": len(seen)}, "train_size": k,
               "fit_on": fit_on,
               "train_free_flight_starts": flight_starts(train), "trained_on": "elbow", **m}
        against = {**{n: r for n, r in refs.items() if "per_episode" in r}, **({prev[0]: prev[1]} if prev else {})}
        row["paired"] = [{"metric": key, "vs": name, **paired_difference(ref["per_episode"], m["per_episode"], key)}
                         for name, ref in against.items() for key in ("pos_pct_size", "rot_deg", "joint_deg")]
        rows[f"analytic_identified_elbow_{k}"] = row
        prev = (f"analytic_identified_elbow_{k}", m)
    return rows


def surrogate_predict(checkpoint, episodes, *, substeps: int, init_frames: int) -> tuple[dict, dict, dict]:
    """({episode id: [T, 7 + J] base pose and joints}, card, the stepper's counts): ``episodes`` rolled out together
    (one batch of MjData, one contact-model call per physics step) with the checkpoint's contact model owning the
    floor contacts of every link (``sim.link_graph``), from the suite's first-state estimate."""
    from ..model.checkpoint import load_checkpoint
    from .predictors import DEFAULT_MARGIN

    model, card = load_checkpoint(checkpoint)
    margin = float(card.get("data", {}).get("margin_m", DEFAULT_MARGIN))
    scene = object_scene(episodes[0], substeps=substeps, mode="external", margin=margin)
    out, counts = link_rollout(model, scene, TossSet.from_episodes(episodes, substeps=substeps, k=init_frames))
    return {e.episode_id: out[i, :e.num_frames] for i, e in enumerate(episodes)}, card, counts


def _surrogate_row(checkpoint, test, cfg, scorer) -> dict:
    """The released cube surrogate predicting the elbow (its card's contact model in the hybrid stepper)."""
    from .predictors import learned_for
    from .rows import learned_row

    if checkpoint is None:
        return {"status": "not evaluated", "reason": "no --checkpoint given"}
    learned, structure = learned_for(checkpoint)
    if learned.predict.__name__ != "surrogate_predict":  # an end-to-end peer has no contact model to put in MuJoCo
        return {"status": "not evaluated", "reason": f"{structure} is not a contact model for the hybrid stepper"}
    sim = cfg["simulation"]
    preds = {}
    groups = {}
    for e in test:
        groups.setdefault(scene_key(e), []).append(e)
    card, counts = {}, {}
    for group in groups.values():
        p, card, c = surrogate_predict(checkpoint, group, substeps=sim["substeps"], init_frames=sim["init_frames"])
        preds.update(p)
        counts = {k: counts.get(k, 0) + v for k, v in c.items()}
    return learned_row(description=f"the released cube surrogate, learned contact inside MuJoCo (hybrid stepper, every "
                                   f"link's floor contacts): {structure}", checkpoint=checkpoint, card=card, seen=[],
                       metrics=scored(scorer, preds), trained_on="cube", stepper=counts,
                       train_size=len((card.get("data") or {}).get("train_episodes") or []) or None)


def run(cfg: dict, *, cache_dir: Path, checkpoint=None, test_data=None, progress: bool = True,
        ex: Executor | None = None) -> dict:
    """Run the suite; returns the ledger's ``data``, ``split`` and ``models`` parts."""
    t0 = time.time()
    surrogate_settings(cfg)  # a misspelt few-shot key fails here, not after the identifications
    ex = ex or Executor(progress=progress)
    ds = load_tosses(cfg["data"]["source"], cache_dir=cache_dir, urdf=cfg["data"]["urdf"], progress=progress)
    eps, sp = suite_split(ds.episodes, cfg["data"], [])
    test, test_info, set_of = articulated_tests(cfg, eps, sp, test_data, cache_dir)
    starts = {e.episode_id: e.labels["free_flight_start"] for e in test}
    data_info = {**data_block(ds, int(cfg["data"].get("min_frames", 2))),
                 "free_flight_starts": {k: v for k, v in starts.items() if v},
                 "not_free_at_start": sum(1 for v in starts.values() if v)}
    if test_info is not None:
        data_info["test_data"] = test_info
    held = [e.episode_id for e in test if e.labels["no_free_flight"]]
    if held:  # scored from a first frame that may still be in the hand: every row alike, but not a toss's start
        data_info["no_free_flight"] = held
        searched = cfg.get("free_flight", {}).get("max_start", FREE_FLIGHT_MAX_START)
        logger.warning("elbow-real: no free flight found within free_flight.max_start=%s frames of %d test toss(es), "
                       "scored from their first frame: %s", searched, len(held), ", ".join(map(str, held)))
    floor = episode_warnings(test)
    if floor:  # the URDF is not the tossed object's: every row is scored against another object than the one tossed
        data_info["floor_warnings"] = floor
        for w in floor:
            logger.warning("elbow-real test tosses: %s", w)
    scorer = toss_scorer(test, cfg, set_of)
    simulate = simulator(ex, test, cfg["simulation"])
    params, extra, cube_train = _cube_identified(cfg, cache_dir=cache_dir, ex=ex, progress=progress, checkpoint=checkpoint)
    stable, timestep = toss_stability(cube_train, cfg, threads=ex.threads)
    text = {**TEXT, "identified": f"MuJoCo analytic contact, friction/solref/solimp and cone identified by differential "
                                  f"evolution on {len(cube_train)} real CUBE tosses (never the elbow)"}
    models = analytic_rows(cfg["baselines"], simulate=simulate, scorer=scorer, text=text,
                           nominal_json=nominal_params(test[0], cfg["baselines"]["nominal"]).to_json(),
                           identified=(params, extra), stable=stable, timestep=timestep)
    models["surrogate"] = _surrogate_row(checkpoint, test, cfg, scorer)
    # few-shot rows train on the split's pool, with --test-data too: a test toss that is one of the pool's recordings
    # was left out of the test set (articulated_tests); each pool toss from where its free flight starts, as the test
    # tosses are scored (a toss whose first frames are still held would otherwise start its rollouts in the hand)
    pool = set(sp["pool"])
    by_id = {e.episode_id: e for e in from_flight_start([e for e in eps if e.episode_id in pool], cfg)}
    models.update(_few_shot(cfg, by_id, sp, simulate=simulate, scorer=scorer, ex=ex, progress=progress,
                            refs={n: models[n] for n in ("analytic_identified", "surrogate")}))
    models.update(finetuned_rows(cfg, by_id, sp, checkpoint=checkpoint, test=test, scorer=scorer, models=models,
                                 progress=progress))
    split = {k: v for k, v in sp.items() if k != "pool"} | {"pool_size": len(sp["pool"])}
    result = suite_verdict(cfg, models)
    few = few_shot_detail(models)
    if few:
        result = {**result, "detail": result["detail"].rstrip(". ") + ". " + few}
    return {"data": data_info, "split": split, "models": models, "result": result, "wall_s": time.time() - t0}
