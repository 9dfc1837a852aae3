"""Suite ``rig-grasp``: recorded grasps of objects the surrogate never saw, replayed open loop.

Every test episode is a capture-rig grasp (or any capture dataset with a hand, via
``--test-data``). Each model replays the recorded commands from the first recorded state in
MuJoCo's scene of the episode and is scored against the recorded object poses:

- ``analytic_nominal``: the object's nominal friction, MuJoCo's default solref/solimp;
- ``analytic_identified``: friction, solref, solimp, cone, mass and actuator latency fitted by
  differential evolution to replays of training episodes (never test episodes);
- ``analytic_randomized``: an ensemble randomized around the identified values;
- ``surrogate``: the checkpoint's contact network owning the pad, table and ground pairs
  (hybrid stepper); ``surrogate.rows`` ({name: checkpoint}) adds further learned rows scored on the
  same replays (a previous release: compared in one run, with paired intervals).

Test sets are named (``data.test_sets``): episodes of training-split objects (new grasps,
in distribution), held-out families, and mesh files; ``--test-data`` replaces them by one or
several capture datasets (``testsets``). The acceptance compares models on the held-out sets
(``acceptance.sets``; all sets with ``--test-data``) at ``acceptance.horizon_s`` after the first
contact. Horizons count from the start of the script's ``close`` phase (when the pads reach the
object), because nothing moves the object before it.

The rows follow ``rows`` (predictor -> scorer -> ledger row); data is ``rig_data``, scoring
``rig_scoring``. Tasks (``parallel``): one per test episode for every model's replays, one per
training episode for each identification generation (and the rig generator's episodes).

Gap attribution (``attribution``, ``rig_attribution``) regenerates small train and test sets with each rig
effect switched off in turn and reports how much of each model's error each effect accounts for.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ..capture import dataset_hash
from ..errors import ConfigError
from ..parallel import Executor, task_cache
from .command_delay import checked_simulation, command_delay
from .grasp_outcome import rates
from .identify import fit_params, loss_of
from .paired_rows import paired_minus_surrogate
from .replay import (
    analytic_pad_forces,
    prepare_replay,
    replay_errors,
    replay_with_model,
    simulate_replay,
    simulate_replay_states,
)
from .rig_data import load_sets, resolve, rig_settings, thresholds, train_dataset
from .rig_floor import floor_rows, floor_settings, recorded_truths
from .rig_scoring import EpisodeScorer, force_traces, grasp_scorer
from .rows import NOT_GIVEN, analytic_rows, learned_row, nominal_params

logger = logging.getLogger(__name__)

TEXT = {"nominal": "MuJoCo analytic contact with the object's nominal friction and MuJoCo's default solref/solimp, "
                   "pyramidal cone, no actuator latency",
        "randomized": "ensemble of {n} MuJoCo models randomized around the identified values (friction, solref, "
                      "solimp width, mass, actuator latency)"}
SURROGATE = ("graph-network contact surrogate inside MuJoCo (hybrid stepper) owning pad, table and ground contact; "
             "the recorded commands act with the suite's hand latency (the ledger's command_delay)")


# ----------------------------------------------------------------------------- tasks

def cached_replay(common: dict, key, ep, meta):
    """The analytic replay of an episode, prepared once per worker (the caller's own, locally: ``Executor.share``).

    Args:
      common: the task's shared values: "token" (the ``Executor``'s, for ``parallel.task_cache``), "substeps" and
        "margin" (``replay.prepare_replay``'s).
      key: the episode's cache key, e.g. ``("test", "SET/ID")``; one key, one replay per worker.
      ep, meta: the Episode and its dataset's DatasetMeta.
    Returns:
      the ``replay.Replay`` of ``ep`` (analytic contact).
    """
    return task_cache(common["token"], key, lambda: prepare_replay(ep, meta, substeps=common["substeps"],
                                                                   margin=common["margin"]))


def _analytic_task(common: dict, item) -> list:
    """[(qpos [F, nq], pad forces [F, S, 3])] of one test episode, per parameter set."""
    key, ep, meta, params = item
    r = cached_replay(common, ("test", key), ep, meta)
    ms, states = simulate_replay_states(r, params, threads=common["threads"])
    return [(st[:, 1:1 + ms[0].nq], analytic_pad_forces(r, mk, st, p)) for mk, st, p in zip(ms, states, params)]


def _train_errors_task(common: dict, item) -> tuple[np.ndarray, np.ndarray]:
    """([P], [P]) position and rotation errors of a generation's candidates on one training episode."""
    key, ep, meta = item
    r = cached_replay(common, key, ep, meta)
    return replay_errors(simulate_replay(r, common["params"], threads=common["threads"]), r.episode)


def _train_stable_task(common: dict, item) -> list:
    """[P] whether each candidate replays one training episode without blowing up (``evaluate.episode_errors``)."""
    from .evaluate import episode_errors

    key, ep, meta = item
    r = cached_replay(common, key, ep, meta)
    pred = simulate_replay(r, common["params"], threads=common["threads"])
    return [episode_errors(q[:r.episode.num_frames], r.episode, common["cap"])["blew_up_at"] is None for q in pred]


def replay_stability(ex: Executor, train_ds, train_ids, info: dict, cfg: dict, sim: dict):
    """``stable(params) -> [P] bool``: which parameter sets replay every checked training grasp without blowing
    up: the randomized ensemble's stability pass. Checked: the identification's episodes (``info``'s
    ``episode_ids``) and more of the surrogate's training grasps (``train_ids``; all of ``train_ds`` without
    them), up to ``baselines.randomized.check_episodes`` (default 24): a handful of grasps passes draws that
    blow up on others."""
    n = int(cfg["baselines"]["randomized"].get("check_episodes", 24))
    first = set(info["episode_ids"])
    pool = [e for e in train_ds.episodes if not train_ids or e.episode_id in set(train_ids)]
    picked = [e for e in pool if e.episode_id in first] + [e for e in pool if e.episode_id not in first]
    items = [(("identify", "train", e.episode_id), e, train_ds.meta) for e in picked[:max(n, len(first))]]
    common = {"token": ex.token, "substeps": sim["substeps"], "margin": sim["margin"], "threads": ex.threads,
              "cap": cfg["metrics"].get("max_error_m") or 1.0}

    def stable(params):
        per = ex.map(_train_stable_task, items, common={**common, "params": params}, progress=False)
        return [all(ok[p] for ok in per) for p in range(len(params))]

    stable.episodes = len(items)  # the stability pass's ledger entry says how many grasps it checked
    return stable


def _surrogate_task(common: dict, item) -> tuple:
    """(qpos [F, nq], pad forces [F, S, 3], stepper stats) of one test episode through the hybrid stepper."""
    from ..model.checkpoint import load_checkpoint

    key, ep, meta = item
    model = task_cache(common["token"], ("model", common["checkpoint"]), lambda: load_checkpoint(common["checkpoint"])[0])
    _, q, f, st = replay_with_model(ep, meta, model, substeps=common["substeps"], margin=common["margin"], forces=True,
                                    delay_s=common["delay_s"])
    return q, f, st


# ----------------------------------------------------------------------------- predictors

def simulator(ex: Executor, test: list, replays: dict, sim: dict, traces: dict):
    """The suite's analytic predictor ``simulate(params_for, name) -> members`` (``rows``), one task per
    test episode; keeps each model's pad force magnitude |F| [F, S] per sensed episode in ``traces``."""
    common = {"token": ex.token, "substeps": sim["substeps"], "margin": sim["margin"], "threads": ex.threads}

    def simulate(params_for, name):
        items = [(k, ep, meta, params_for(ep)) for k, ep, meta in test]
        runs = ex.map(_analytic_task, items, common=common, desc=f"{name} replays", unit="episode")
        for (k, _, _, _), run in zip(items, runs):
            if replays[k].sensors:
                traces.setdefault(k, {})[name] = np.mean([np.linalg.norm(f, axis=-1) for _, f in run], axis=0)
        return [{k: run[m] for (k, _, _, _), run in zip(items, runs)} for m in range(len(items[0][3]))]

    return simulate


def identify_on_training_grasps(ex: Executor, train_ds, train_ids, cfg, *, sim, progress, seed, label: str = "train"):
    """MuJoCo identified on replays of a seeded subsample of training grasps (``identify.fit_params``;
    loss: ``replay.replay_errors``), one task per episode and generation.

    Args:
      ex: the executor the replays run on.
      train_ds: the training CaptureDataset; train_ids: the episode ids to draw from (empty: all of it).
      cfg: the suite config; ``baselines.identified`` gives "episodes" (subsample size), "cones", "fit_mass",
        "fit_delay", "maxiter", "popsize".
      sim: "substeps" and "margin" of the replays.
      progress: show the search's progress bars; seed: the subsample's and the search's seed.
      label: names the replays' cache keys (``("identify", label, episode_id)``).
    Returns:
      (the identified ``AnalyticParams``, info): ``fit_params``'s info ("per_cone", "cone", "loss", "optimizer",
      "wall_s", "fit_mass", "fit_delay") plus "episodes" (how many were replayed), "episode_ids" (which) and "pool"
      (how many they were drawn from).
    """
    ic = cfg["baselines"]["identified"]
    wanted = set(train_ids)
    eps = [e for e in train_ds.episodes if not wanted or e.episode_id in wanted]
    rng = np.random.default_rng(seed)
    pick = sorted(rng.choice(len(eps), size=min(int(ic["episodes"]), len(eps)), replace=False))
    items = [(("identify", label, eps[i].episode_id), eps[i], train_ds.meta) for i in pick]
    common = {"token": ex.token, "substeps": sim["substeps"], "margin": sim["margin"], "threads": ex.threads}

    def evaluate(params):
        errs = ex.map(_train_errors_task, items, common={**common, "params": params}, progress=False)
        return loss_of(np.stack([p for p, _ in errs], axis=1), np.stack([r for _, r in errs], axis=1))

    params, info = fit_params(evaluate, cones=tuple(ic["cones"]), fit_mass=bool(ic.get("fit_mass", True)),
                              fit_delay=bool(ic.get("fit_delay", True)), maxiter=int(ic["maxiter"]),
                              popsize=int(ic["popsize"]), seed=seed, progress=progress, what="identify on training grasps")
    info["episodes"] = len(items)
    info["episode_ids"] = [eps[i].episode_id for i in pick]
    info["pool"] = len(eps)  # training captures the subsample was drawn from
    return params, info


def surrogate_replays(ex: Executor, checkpoint, model, test: list, sim: dict) -> tuple[dict, dict]:
    """The checkpoint's replays of the test episodes through the hybrid stepper, one task per episode.

    Args:
      ex: the executor; ``model`` (the loaded network of the file ``checkpoint``) is shared with its workers.
      test: [(``SET/ID`` key, Episode, DatasetMeta)].
      sim: "substeps", "surrogate_margin" (the model's contact margin, m) and "command_delay_s".
    Returns:
      ({``SET/ID``: (qpos [F, nq], pad forces [F, S, 3])}, stepper stats summed over the episodes: {"fallbacks",
      "ood_env_steps", "env_steps", "bad_force_events"}).
    """
    ex.share(("model", str(checkpoint)), model)
    common = {"token": ex.token, "checkpoint": str(checkpoint), "substeps": sim["substeps"],
              "margin": sim["surrogate_margin"], "delay_s": sim["command_delay_s"]}
    runs = ex.map(_surrogate_task, [(k, ep, meta) for k, ep, meta in test], common=common, desc="surrogate replays",
                  unit="episode")
    totals = {"fallbacks": 0, "ood_env_steps": 0, "env_steps": 0, "bad_force_events": 0}
    for _, _, st in runs:
        for k in totals:
            totals[k] += int(st[k])
    return {k: (q, f) for (k, _, _), (q, f, _) in zip(test, runs)}, totals


def _learned_row(ex: Executor, name: str, path, model, card, *, test, sim, scorer, replays, traces, seen) -> dict:
    """The ledger row of one learned model (``surrogate`` or a ``surrogate.rows`` entry), scored on the suite's
    replays; its pad forces join ``traces`` for the force plot."""
    preds, st = surrogate_replays(ex, path, model, test, sim)
    for k, (_, f) in preds.items():
        if replays[k].sensors:
            traces.setdefault(k, {})[name] = np.linalg.norm(f, axis=-1)
    return learned_row(description=SURROGATE, checkpoint=path, card=card, seen=seen,
                       metrics=scorer.metrics(scorer.score(preds)), stepper=st,
                       train_size=len((card.get("data") or {}).get("train_episodes") or []) or None)


# ----------------------------------------------------------------------------- run

def _test_leaks(train_ds, replays: dict) -> list:
    """Test episodes recorded with the same object and generator seed as a training episode (a leak: test sets
    are generated with their own seeds)."""
    train_keys = {(e.object.name, json.dumps((e.provenance.generator or {}).get("seed"))) for e in train_ds.episodes}
    return sorted(k for k, r in replays.items()
                  if (r.episode.object.name, json.dumps((r.episode.provenance.generator or {}).get("seed"))) in train_keys)


def acceptance_sets(cfg, sets: dict, test_data) -> list[str]:
    """The test sets whose episodes decide the verdict: the suite's ``acceptance.sets``; with ``--test-data``, which
    replaces the suite's sets, all of the given ones, whatever their folders are called (one named like a suite set,
    ``meshes``, had alone decided the verdict over the others)."""
    if test_data:
        return list(sets)
    return [s for s in cfg["acceptance"]["sets"] if s in sets] or list(sets)


def _row_leaks(cfg, card, train_ds, overlap: list, replays: dict, **data) -> list:
    """``_test_leaks`` for a further learned row (``surrogate.rows``): against its own training captures where its
    card names others than the suite's."""
    root = (card.get("data") or {}).get("root")
    if not root or resolve(root) == Path(train_ds.root).resolve():
        return overlap
    own, _ = train_dataset(cfg, card=card, **data)
    return _test_leaks(own, replays)


def _data_info(train_ds, sets: dict, skipped: dict, overlap: list) -> dict:
    other = sorted({str(ds.meta.hand_name) for ds in sets.values()} - {str(train_ds.meta.hand_name)})
    if other:  # e.g. a suite's default training captures against --test-data of another robot: say so
        logger.warning("MuJoCo and the learned rows' hand latency are identified on grasps by hand %r, the test "
                       "sets are grasps by %s", train_ds.meta.hand_name, other)
    return {"name": train_ds.meta.name, "path": str(train_ds.root), "episodes": len(train_ds.episodes),
            "hash": dataset_hash(train_ds.root), "real": sorted({e.provenance.real for e in train_ds.episodes}),
            "sources": sorted({e.provenance.source for e in train_ds.episodes}), "hand": train_ds.meta.hand_name,
            "test_data": {name: {"path": str(ds.root), "episodes": len(ds.episodes), "hash": dataset_hash(ds.root),
                                 "objects": sorted({e.object.name for e in ds.episodes}), "hand": ds.meta.hand_name,
                                 **({"skipped": list(ds.skipped)} if ds.skipped else {})} for name, ds in sets.items()},
            "skipped_sets": skipped, "train_episodes_in_test_sets": overlap}


def run(cfg: dict, *, cache_dir: Path, checkpoint=None, test_data=None, progress: bool = True,
        ex: Executor | None = None) -> dict:
    """Run the suite; returns the ledger's ``data``, ``split``, ``models`` and rig-grasp parts."""
    t0 = time.time()
    ex = ex or Executor(progress=progress)
    rig = rig_settings(cfg, backend="ray" if ex.backend == "ray" else "process")
    workers, sim = int(cfg.get("workers", 2)), checked_simulation(cfg["simulation"])  # a bad setting fails now
    from ..model.checkpoint import load_checkpoint

    model, card = load_checkpoint(checkpoint) if checkpoint is not None else (None, None)
    sim["surrogate_margin"] = float(((card or {}).get("data") or {}).get("margin_m", sim["margin"]))
    # the training captures first: where they cannot be found, say so before minutes of test-set generation
    train_ds, train_ids = train_dataset(cfg, card=card, rig=rig, cache_dir=cache_dir, workers=workers,
                                        progress=progress, checkpoint=checkpoint)
    sets, skipped = load_sets(cfg, test_data=test_data, rig=rig, cache_dir=cache_dir, workers=workers, progress=progress)
    target_sets = acceptance_sets(cfg, sets, test_data)
    # Episode ids are unique within a dataset only: key by "set/id".
    test = [(f"{name}/{e.episode_id}", e, ds.meta) for name, ds in sets.items() for e in ds.episodes]
    if not test:
        raise ConfigError("no test episodes: every test set was skipped", key="data.test_sets")
    set_of = {k: k.split("/", 1)[0] for k, _, _ in test}
    true_labels = {k: (e.labels or None) for k, e, _ in test}
    replays, scorers, thr = {}, {}, thresholds(rig)
    for k, e, meta in tqdm(test, desc="prepare replays", unit="episode", disable=not progress):
        replays[k] = prepare_replay(e, meta, substeps=sim["substeps"], margin=sim["margin"])
        scorers[k] = EpisodeScorer(replays[k], cfg, thr)
        ex.share(("test", k), replays[k])
    scorer = grasp_scorer(scorers, set_of=set_of, sets=sets, target_sets=target_sets, cfg=cfg, true_labels=true_labels)
    traces = {}  # per episode {model: [F, S] normal pad force}: the report plots the median and worst

    overlap = _test_leaks(train_ds, replays)
    params, info = identify_on_training_grasps(ex, train_ds, train_ids, cfg, sim=sim, progress=progress,
                                               seed=int(cfg["baselines"]["identified"].get("seed", 0)))
    sim["command_delay_s"] = (delay := command_delay(ex, cfg, train_ds, info["episode_ids"], sim=sim))["delay_s"]
    nom = cfg["baselines"]["nominal"]
    text = {**TEXT, "identified": "MuJoCo analytic contact, friction/solref/solimp/cone, mass and actuator latency identified "
                                  f"by differential evolution on {info['episodes']} training grasps"}
    models = analytic_rows(cfg["baselines"], simulate=simulator(ex, test, replays, sim, traces), scorer=scorer, text=text,
                           nominal_json={k: v for k, v in nominal_params(test[0][1], nom).to_json().items() if k != "friction"}
                           | {"friction": nom["friction"]}, identified=(params, {"identification": info,
                                                                               "same_data_as_surrogate": bool(train_ids)}),
                           stable=replay_stability(ex, train_ds, train_ids, info, cfg, sim),
                           timestep=float(replays[test[0][0]].scene.model.opt.timestep))
    models["surrogate"] = dict(NOT_GIVEN)
    learned = {"surrogate": (checkpoint, model, card)} if model is not None else {}
    for name, path in ((cfg.get("surrogate") or {}).get("rows") or {}).items():  # e.g. the previous release
        learned[str(name)] = (path, *load_checkpoint(path))
    for name, (path, net, c) in learned.items():
        seen = overlap if name == "surrogate" else _row_leaks(cfg, c, train_ds, overlap, replays, rig=rig,
                                                                 cache_dir=cache_dir, workers=workers, progress=progress,
                                                                 checkpoint=path)
        models[name] = _learned_row(ex, name, path, net, c, test=test, sim=sim, scorer=scorer, replays=replays,
                                    traces=traces, seen=seen)
    redraws, by_source = floor_settings(cfg)
    if redraws:
        models.update(floor_rows(ex, test, rig=rig, redraws=redraws, sim=sim, scorer=scorer, replays=replays,
                                 by_source=by_source, truths=recorded_truths(sets)))
    for name, paired in paired_minus_surrogate(models, sets=target_sets, horizon_s=cfg["acceptance"]["horizon_s"],
                                               by=cfg["metrics"].get("paired_by")).items():
        models[name]["paired_minus_surrogate"] = paired

    recorded = {name: rates([true_labels[f"{name}/{e.episode_id}"] for e in ds.episodes]) for name, ds in sets.items()}
    recorded["overall"] = rates([true_labels[k] for k, _, _ in test if set_of[k] in target_sets])
    out = {"data": _data_info(train_ds, sets, skipped, overlap),
           "split": {"target_sets": target_sets, "sets": {n: [f"{n}/{e.episode_id}" for e in ds.episodes] for n, ds in sets.items()}},
           "models": models, "recorded_outcomes": recorded, "command_delay": delay}
    out["pad_force_traces"] = force_traces(models, replays, traces)
    if cfg.get("attribution", {}).get("enabled") and not test_data:
        from .rig_attribution import attribution  # it replays with this module's identification and learned rows

        out["attribution"] = attribution(cfg, rig=rig, cache_dir=cache_dir, workers=workers, progress=progress, ex=ex,
                                         learned=learned)
    out["wall_s"] = time.time() - t0
    return out
