"""The two-stage rollout fit of a contact law (``train.py fit`` with ``model.kind: law``).

0. Optionally (``stages.grid``), start the prior from the best point of a grid of its global parameters,
   scored by whole-episode rollouts of the *training* episodes: the rollout error is rough in the
   friction coefficient (cube tosses: 0.12 / 0.15 / 0.2 give 30 / 15 / 30 % of the width), so gradient
   descent from a poor start stays in its basin.
1. Fit the prior (the constant law's global parameters) on rollout windows; keep the epoch with
   the best whole-episode validation score.
2. Train the network's bounded corrections on top (prior frozen); keep the best epoch. Where the training layer
   chooses the law's pad friction by closed-loop replays (``select_law``), it does so before this stage, so that
   the network is trained and validated on top of the law it will be used with.
3. Compare both on the same validation episodes (paired, per episode, with a bootstrap interval)
   and keep the corrections only if they help (the interval of the score difference lies below
   zero); otherwise the release is the fitted constant law. Both rows go into the card. Where the training layer's
   closed-loop stage runs (``training.closed_loop.closed_loop_stage``: grasps, the hand actuated as in the
   benchmark), it decides again on replays, so the trained network is returned either way.

A stage stops early after ``stages.<stage>.patience`` validated epochs without a better score (null: never).
"""

from __future__ import annotations

import itertools
import math
import time
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from ..errors import ConfigError
from ..metrics import below_zero, paired_difference
from ..model.contact_law import GROUPS, ContactLawGNN
from .defaults import GRID_KEYS, LOSS_DEFAULTS, STAGE_DEFAULTS
from .lightning import RolloutData, RolloutLightning, validate_chunk
from .objective import stepper_scores, window_loss


def _trainer(out: Path, name: str, epochs: int, trainer_cfg: dict, patience: int | None = None):
    import lightning as L
    from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

    from .loggers import lr_monitor, run_loggers

    ckpt = ModelCheckpoint(dirpath=out / "checkpoints" / name, monitor="val_score", mode="min", save_top_k=1,
                           filename="best")
    # last.ckpt after every validated epoch, improved or not: Lightning's save_last on the monitored checkpoint
    # writes it only when a better epoch is saved, and a resume from it ran the unimproved epochs again
    last = ModelCheckpoint(dirpath=out / "checkpoints" / name, monitor=None, save_top_k=1, filename="last",
                           enable_version_counter=False)
    kw = {k: v for k, v in trainer_cfg.items() if k not in ("max_epochs", "early_stopping_patience")}
    kw.setdefault("gradient_clip_val", 1.0)
    callbacks = [ckpt, last, lr_monitor()]
    check_patience(patience, stage=name)
    if patience is not None:
        callbacks.append(EarlyStopping(monitor="val_score", mode="min", patience=int(patience)))
    trainer = L.Trainer(default_root_dir=str(out), max_epochs=int(epochs), callbacks=callbacks, num_sanity_val_steps=0,
                        reload_dataloaders_every_n_epochs=1, logger=run_loggers(out, f"_{name}"), **kw)
    return trainer, ckpt


def check_patience(patience, *, stage: str) -> None:
    """``stages.<stage>.patience``: null (every epoch runs) or a whole number of validated epochs, 1 or more. The one
    rule of it: ``_trainer`` applies it, and the config check (``training.setup.check_fit_rules``) before any work,
    as the type check passes over a key whose default is null."""
    if patience is not None and not (isinstance(patience, int) and not isinstance(patience, bool) and patience >= 1):
        raise ConfigError(f"must be a whole number of validated epochs, 1 or more, or null (no early stopping), "
                          f"got {patience!r}", key=f"stages.{stage}.patience")


def _positive(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf


def check_grid(grid: dict, *, stribeck: bool) -> None:
    """``stages.grid`` (its defaults filled in) as ``grid_prior`` scans it: ``group`` one of ``GROUPS``, each of
    ``GRID_KEYS`` a list of numbers above 0, finite (its logarithm is set; empty or null: off), ``static_friction``
    and ``stribeck_speed`` only with ``stribeck`` (``model.stribeck``: a Coulomb law has neither), ``max_episodes`` a
    whole number 1 or more, or null. The one rule of the grid: ``grid_prior`` applies it, and the config check
    (``training.setup.check_fit_rules``) before any captures are read. A refusal about a combination lists its keys
    in the error's ``keys``, so that the config check names the command line where either was set there."""
    if grid.get("group") not in GROUPS:
        raise ConfigError(f"must be one of {list(GROUPS)} (the prior group the grid scans), got {grid.get('group')!r}",
                          key="stages.grid.group")
    for k in GRID_KEYS:
        values = grid.get(k)
        if values is not None and not (isinstance(values, list) and all(_positive(v) for v in values)):
            raise ConfigError(f"must be a list of numbers above 0, finite, in the prior's units ([]: not scanned), "
                              f"got {values!r}", key=f"stages.grid.{k}")
    used = [k for k in ("static_friction", "stribeck_speed") if grid.get(k)]
    if used and not stribeck:
        raise ConfigError(f"stages.grid.{used[0]} = {grid[used[0]]} with model.stribeck false: a Coulomb law has no "
                          f"static / kinetic friction ratio or Stribeck speed to scan; set model.stribeck=true, or "
                          f"stages.grid.{used[0]}=[]", key=f"stages.grid.{used[0]}",
                          keys=(f"stages.grid.{used[0]}", "model.stribeck"))
    cap = grid.get("max_episodes")
    if cap is not None and not (isinstance(cap, int) and not isinstance(cap, bool) and cap >= 1):
        raise ConfigError(f"must be a whole number of training episodes, 1 or more, or null (all of them), got {cap!r}",
                          key="stages.grid.max_episodes")


def _fit(trainer, module, dm, ckpt, resume: bool) -> None:
    """``trainer.fit``, from the stage's ``last.ckpt`` when resuming and it is there (Lightning writes it atomically
    at the end of every validated epoch: weights, optimizer, schedule, the module's validation history, and the
    trainer's epoch, which seeds the data's order, so a resumed stage continues as an uninterrupted one would)."""
    last = Path(ckpt.dirpath) / "last.ckpt"
    trainer.fit(module, datamodule=dm, ckpt_path=str(last) if resume and last.is_file() else None)


def _load_best(module: RolloutLightning, ckpt, fallback_rows: list[dict]) -> list[dict]:
    """Load the best epoch's weights; returns that epoch's per-episode validation scores (recorded when it
    was validated, so the validation episodes are not rolled out again)."""
    if not ckpt.best_model_path or not module.val_history:
        return fallback_rows
    state = torch.load(ckpt.best_model_path, map_location="cpu", weights_only=True)["state_dict"]
    module.model.load_state_dict({k[len("model."):]: v for k, v in state.items() if k.startswith("model.")})
    best = min(module.val_history, key=lambda h: h["score"])
    return module.val_rows[best["epoch"]]


def validate(model: ContactLawGNN, dm: RolloutData) -> list[dict]:
    """Per-episode whole-rollout scores of ``model`` on the validation episodes."""
    model.eval()
    return [r for chunk in dm.val_items for r in validate_chunk(model, dm, chunk)]


@torch.no_grad()
def accumulate_normalizers(model: ContactLawGNN, dm: RolloutData) -> None:
    """Fill the model's input normalizers (the statistics of its training inputs, which the stepper's
    out-of-range check reads) by rolling the training windows out once in train mode, without gradients;
    the law's parameters do not change. A no-op once they hold statistics."""
    if float(model.edge_norm.count) > 0:
        return
    model.train()
    for windows in dm.train_items(0):
        if model.edge_norm.accumulations >= model.edge_norm.max_accumulations:
            break
        window_loss(dm.twins, model, windows, substeps=dm.cfg["substeps"], rot_weight=0.0)
    model.eval()


def grid_prior(model: ContactLawGNN, dm: RolloutData, grid: dict, rot_w: float) -> dict:
    """Score every combination of ``grid``'s values of one prior group (``grid["group"]``: surface or body;
    ``stiffness``, ``damping``, ``friction``: lists, in the prior's units; an empty list keeps the current
    value) by whole-episode rollouts of the training episodes (the first ``grid["max_episodes"]`` of them, when set),
    and set the best in ``model``. The rollouts are
    the hybrid stepper's (``objective.stepper_scores``, scored as validation and the benchmarks score; the twin
    gives the same trajectories, ``tests/test_contact_law.py``, at about 3x the cost without gradients).
    Returns {"best": {...}, "rows": [every candidate's values and summary]}."""
    check_grid(grid, stribeck=bool(getattr(model, "stribeck", False)))
    names = [k for k in GRID_KEYS if grid[k]]
    gi = GROUPS.index(grid["group"])
    by_id = {e.episode_id: e for chunk in dm.train_episode_items for _, e in chunk}
    episodes = [by_id[i] for i in dm.train_ids[: grid.get("max_episodes") or None]]  # the training order
    held = [e.episode_id for e in episodes if e.joint_pos is not None]
    if held:
        raise ConfigError(f"stages.grid scores free-object tosses; episode {held[0]} has a hand (grasps: the closed-loop "
                          "stage selects the pad friction by replays)", key="stages.grid")
    rows = []
    combos = list(itertools.product(*(grid[k] for k in names)))
    for combo in tqdm(combos, desc="prior grid", unit="law", disable=len(combos) < 4):
        with torch.no_grad():
            for k, v in zip(names, combo):
                getattr(model, f"log_{k}")[gi] = math.log(float(v))
        scores = stepper_scores(model.eval(), episodes, dm.capture.meta, margin=dm.cfg["margin"],
                                substeps=dm.cfg["substeps"], init_frames=dm.cfg["init_frames"])
        rows.append({**{k: float(v) for k, v in zip(names, combo)}, **score_summary(scores, rot_w)})
    best = min(rows, key=lambda r: r["score"])
    with torch.no_grad():
        for k in names:
            getattr(model, f"log_{k}")[gi] = math.log(best[k])
    return {"group": grid["group"], "best": best, "rows": rows}


def score_summary(rows: list[dict], rot_w: float) -> dict:
    pos = np.array([r["pos_pct"] for r in rows])
    rot = np.array([r["rot_deg"] for r in rows])
    return {"n": len(rows), "pos_pct_mean": float(pos.mean()), "pos_pct_median": float(np.median(pos)),
            "rot_deg_mean": float(rot.mean()), "rot_deg_median": float(np.median(rot)),
            "score": float(pos.mean() + rot_w * rot.mean())}


def _selected_law(select_law, law: ContactLawGNN, rows: list[dict], dm: RolloutData, prior: dict, rot_w: float):
    """The law the corrections are trained on and compared with: ``select_law(law, dm)`` (the training layer's
    closed-loop choice of the pad friction) and the validation rows of what it returns (``law`` and ``rows`` where it
    returns ``law`` or is None); a chosen law's parameters and validation summary go into the card's ``prior``
    metrics (``law``, ``selected``)."""
    chosen = law if select_law is None else select_law(law, dm)
    if chosen is law:
        return law, rows
    rows = validate(chosen, dm)
    prior.update(law={grp: chosen.prior(grp).to_json() for grp in ("surface", "body")},
                 selected=score_summary(rows, rot_w))
    return chosen, rows


def _seeded_module(seed: int, *args, **kw) -> RolloutLightning:
    """A ``RolloutLightning`` whose network starts from weights drawn from ``seed`` alone, not from what the run drew
    before it (a resumed prior stage drew otherwise)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return RolloutLightning(*args, **kw)


def fit_law(cfg: dict, *, out: Path, ready=None, select_law=None) -> dict:
    """Run both stages; returns {model (the release), data module, metrics for the card}. With ``cfg["ckpt_path"]``
    ``last`` each stage resumes from its own ``<out>/checkpoints/<stage>/last.ckpt`` where there is one (the grid and
    the initial validation, deterministic, are computed again). ``ready()`` is called once the captures are read and
    validated, before any training; ``select_law``, where corrections are trained: see ``_selected_law``."""
    model_cfg = {k: v for k, v in cfg["model"].items() if k != "kind"}
    bad = sorted(set(cfg.get("loss", {})) - set(LOSS_DEFAULTS))
    if bad:
        raise ConfigError(f"unknown loss keys {bad}; known: {sorted(LOSS_DEFAULTS)}", key=f"loss.{bad[0]}")
    loss = {**LOSS_DEFAULTS, **cfg.get("loss", {})}
    stages = {k: {**STAGE_DEFAULTS[k], **(cfg.get("stages", {}).get(k) or {})} for k in STAGE_DEFAULTS}
    unknown = sorted(set(cfg.get("stages", {})) - set(STAGE_DEFAULTS))
    if unknown:
        raise ConfigError(f"unknown stages {unknown}; known: {sorted(STAGE_DEFAULTS)}", key=f"stages.{unknown[0]}")
    resume = cfg.get("ckpt_path") == "last"
    dm = RolloutData(**cfg["data"])
    t0 = time.time()
    dm.setup()
    if ready is not None:
        ready()
    metrics = {"setup_s": time.time() - t0, "train_episodes": len(dm.train_ids), "val_episodes": len(dm.val_ids),
               "train_windows": dm.n_windows, "window_frames": dm.cfg["window_frames"]}
    rot_w = float(loss["rot_weight_val"])

    # -- stage 1: the prior ------------------------------------------------------------------
    t1 = time.time()
    def sched(st):
        return {"lr": st["lr"], "final_lr_fraction": st["final_lr_fraction"], "total_steps": st["epochs"] * dm.steps_per_epoch()}

    m1 = RolloutLightning({**model_cfg, "corrections": False}, stage="prior", loss=loss, data=dm, **sched(stages["prior"]))
    if any(stages["grid"][k] for k in GRID_KEYS):
        t = time.time()
        metrics["grid"] = {**grid_prior(m1.model, dm, stages["grid"], rot_w), "wall_s": time.time() - t}
    init_rows = validate(m1.model, dm)
    tr, ck = _trainer(out, "prior", stages["prior"]["epochs"], cfg.get("trainer", {}), stages["prior"]["patience"])
    prior_rows = init_rows
    if stages["prior"]["epochs"] > 0:
        init_state = {k: v.clone() for k, v in m1.model.state_dict().items()}
        _fit(tr, m1, dm, ck, resume)
        prior_rows = _load_best(m1, ck, init_rows)
        if score_summary(prior_rows, rot_w)["score"] > score_summary(init_rows, rot_w)["score"]:
            # no epoch beat the initial law on whole validation episodes: keep it (normalizer statistics
            # from training are kept, they describe the training inputs)
            m1.model.load_state_dict({**m1.model.state_dict(), **{k: v for k, v in init_state.items() if k.startswith("log_")}})
            prior_rows = init_rows
    metrics["prior"] = {"initial": score_summary(init_rows, rot_w), "fitted": score_summary(prior_rows, rot_w),
                        "law": {grp: m1.model.prior(grp).to_json() for grp in ("surface", "body")}, "history": m1.val_history, "wall_s": time.time() - t1}
    release, rows = m1.model, prior_rows
    network, network_rows = None, None

    # -- stage 2: the network's corrections ----------------------------------------------------
    if model_cfg.get("corrections", True) and stages["corrections"]["epochs"] > 0:
        t2 = time.time()
        m1.model, prior_rows = _selected_law(select_law, m1.model, prior_rows, dm, metrics["prior"], rot_w)
        release, rows = m1.model, prior_rows  # the law at the pad friction it is used at: what the network corrects
        m2 = _seeded_module(cfg.get("seed", 0), {**model_cfg, "corrections": True}, stage="corrections", loss=loss,
                            data=dm, **sched(stages["corrections"]))
        m2.model.load_state_dict(m1.model.state_dict(), strict=False)  # fitted prior and normalizers
        tr2, ck2 = _trainer(out, "corrections", stages["corrections"]["epochs"], cfg.get("trainer", {}),
                            stages["corrections"]["patience"])
        _fit(tr2, m2, dm, ck2, resume)
        corr_rows = _load_best(m2, ck2, prior_rows)
        for r in corr_rows + prior_rows:
            r["score"] = r["pos_pct"] + rot_w * r["rot_deg"]
        diff = {k: paired_difference(prior_rows, corr_rows, k, by="object") for k in ("score", "pos_pct", "rot_deg")}
        helps = below_zero(diff["score"])  # over enough units: one episode's interval is a point
        metrics["corrections"] = {"fitted": score_summary(corr_rows, rot_w), "paired_minus_prior": diff, "kept": bool(helps),
                                  "history": m2.val_history, "wall_s": time.time() - t2}
        network, network_rows = m2.model, corr_rows
        if helps:
            release, rows = m2.model, corr_rows
    metrics["release"] = {"structure": "law+corrections" if release.corrections else "law", **score_summary(rows, rot_w)}
    accumulate_normalizers(m1.model, dm)
    accumulate_normalizers(release, dm)
    release.eval()
    # the trained network is returned even where the twin's paired rule did not keep it: the closed-loop stage
    # (training.run) decides again on the benchmark's own replays when it runs
    return {"model": release, "prior_model": m1.model.eval(), "data": dm, "metrics": metrics, "val_rows": rows,
            "prior_val_rows": prior_rows, "network_model": None if network is None else network.eval(),
            "network_val_rows": network_rows}
