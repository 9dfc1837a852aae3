"""Before any work: a training set-up that cannot validate, or cannot write its results, is refused naming the key.

``check_setup`` (at config time, from ``keys.check_values``): ``data.val_fraction`` in (0, 1), the episode caps
positive integers, the closed-loop stage's friction scales, the model's sizes, bounds and cap (``check_model``), and
``out_dir`` / ``export.*`` folders that are folders (not files) and writable (the nearest existing parent, for one to
be made); ``check_fit_rules`` (at config time too): the fit's own rules of the split, the hands, the prior grid and
early stopping. ``check_split`` (at fit time, once the dataset is there): the
split of the dataset's episode count leaves at least one training and one validation episode. Without them a
run exported the untrained prior with exit 0 ("no training batches"), or a card of all-NaN metrics, or failed
with a traceback only after training.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

from ..config import SET_SOURCE
from ..errors import ConfigError

OUTPUT_KEYS = ("out_dir", "export.dir", "export.prior_dir", "export.network_dir")  # export.release_dir: with --release (run.export_dir)


def _get(cfg: dict, dotted: str):
    node = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


# the least value of a key (by its leaf name) of the training configs; POSITIVE: above 0
MIN_VALUE = {"threads": 1, "seed": 0, "split_seed": 0, "substeps": 1, "window_frames": 0, "window_stride": 0,
             "init_frames": 1, "batch_size": 1, "detach_every": 0, "val_min": 0, "epochs": 0, "episodes": 0,
             "margin": 0, "rot_weight": 0, "rot_weight_val": 0, "force_weight": 0, "noise_std": 0, "weight_decay": 0}
POSITIVE = {"lr", "final_lr_fraction", "decision_horizon_s"}


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_setup(cfg: dict, *, file=None, where=None) -> None:
    """Refuse, naming the key, a validation fraction outside (0, 1), a non-positive episode cap, an output path
    that is a file or cannot be written. ``where(key)``: where that key's value came from (default ``file``)."""
    where = where or (lambda key: file)
    data = cfg.get("data") or {}
    vf = data.get("val_fraction")
    if vf is not None and not (_number(vf) and 0 < vf < 1):
        raise ConfigError(f"data.val_fraction must be a number in (0, 1) (the share of episodes held out for "
                          f"validation: 0 validates on nothing, 1 trains on nothing), got {vf!r}",
                          file=where("data.val_fraction"), key="data.val_fraction")
    for key in ("max_val_episodes", "max_train_episodes", "max_episodes"):
        v = data.get(key)
        if v is not None and not (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
            raise ConfigError(f"data.{key} must be a positive integer or null, got {v!r}", file=where(f"data.{key}"),
                              key=f"data.{key}")
    for key in OUTPUT_KEYS:
        check_output_dir(_get(cfg, key), key=key, file=where(key))
    loop = "stages.closed_loop."
    check_reference(_get(cfg, loop + "reference"), file=where(loop + "reference"))
    closed_loop = _get(cfg, "stages.closed_loop")
    if isinstance(closed_loop, dict) and "friction_scales" in closed_loop:  # null too: no default replaces it
        check_friction_scales(closed_loop["friction_scales"], file=where(loop + "friction_scales"))
    # the decision data themselves are checked when training starts (check_decision_data)
    check_decision_horizon(_get(cfg, loop + "decision_horizon_s"), file=where(loop + "decision_horizon_s"))
    from ..bench.command_delay import check_setting

    check_setting(_get(cfg, loop + "command_delay"), key=loop + "command_delay", file=where(loop + "command_delay"))


def check_types(cfg: dict, reference: dict, *, where, prefix: str = "") -> None:
    """A number where ``reference`` (the defaults) holds a number (finite), a whole number where it holds one, a flag
    where it holds a flag, within ``MIN_VALUE`` / ``POSITIVE``: refused naming the key before any work, where a wrong
    value would otherwise stop the run with a traceback after its data had loaded (``stages.prior.epochs=abc``,
    ``data.batch_size=0``, ``stages.corrections.lr=.nan``), or be accepted (``loss.force_weight=.nan``)."""
    for name, default in reference.items():
        key, value = prefix + name, (cfg or {}).get(name) if isinstance(cfg, dict) else None
        if isinstance(default, dict):
            check_types(value, default, where=where, prefix=key + ".")
            continue
        if value is None or default is None or isinstance(default, (str, list, tuple)):  # tuple: model.bounds
            continue
        if isinstance(default, bool):
            ok, what = isinstance(value, bool), "true or false"
        elif isinstance(default, int):
            ok, what = isinstance(value, int) and not isinstance(value, bool), "a whole number"
        else:
            ok, what = _number(value), "a number"
        if ok and not math.isfinite(value):
            ok, what = False, f"{what}, finite"
        elif ok and name in POSITIVE and not value > 0:
            ok, what = False, f"{what} above 0"
        elif ok and name in MIN_VALUE and value < MIN_VALUE[name]:
            ok, what = False, f"{what}, {MIN_VALUE[name]} or more"
        if not ok:
            raise ConfigError(f"must be {what}, got {value!r}", file=where(key), key=key)


def check_fit_rules(cfg: dict, kind: str, *, where) -> None:
    """The fit's own rules of keys the type check passes over (their defaults null, a string or lists), before any
    work: ``data.bench_split`` and ``data.val_split`` (``learn.episodes.check_split_keys``), and with ``model.kind:
    law`` ``data.hand`` / ``data.val_hand`` (``learn.lightning.check_hands``), ``stages.grid``
    (``learn.fit.check_grid``) and ``stages.<stage>.patience`` (``learn.fit.check_patience``). Each is the function the
    fit calls, so the two cannot disagree; the fit alone had refused them, after its captures had loaded
    (``stages.prior.patience=0``, ``stages.grid.static_friction`` without ``model.stribeck``)."""
    from ..learn.episodes import check_split_keys

    data = cfg.get("data") or {}
    _named(check_split_keys, data, where=where)
    if kind != "law":
        return
    from ..learn.defaults import STAGE_DEFAULTS
    from ..learn.fit import check_grid, check_patience
    from ..learn.lightning import check_hands

    _named(check_hands, data, where=where)
    stages = cfg.get("stages") or {}
    grid = {**STAGE_DEFAULTS["grid"], **(stages.get("grid") or {})}
    _named(check_grid, grid, stribeck=bool((cfg.get("model") or {}).get("stribeck", False)), where=where)
    for stage in ("prior", "corrections"):
        _named(check_patience, (stages.get(stage) or {}).get("patience"), stage=stage, where=where)


def _named(check, *args, where, **kw) -> None:
    """``check(*args, **kw)``, its ConfigError naming where its key came from (``where(key)``): the command line where
    that set any of the keys a refused combination lists (the error's ``keys``)."""
    try:
        check(*args, **kw)
    except ConfigError as e:
        sources = [where(k) for k in e.keys or (e.location.field,)]
        raise ConfigError(e.reason, file=SET_SOURCE if SET_SOURCE in sources else sources[0],
                          key=e.location.field) from None


def model_ranges(kind: str) -> dict:
    """``{model key: (lo, hi, lo_excluded, what)}`` of the keys ``check_model`` checks: what the model's constructor
    needs (a width, message-passing steps and layers per MLP of 1 or more, friction re-linearizations 0 or more, the
    log-bounds of the corrections and the friction cap above 0: they bound ``exp`` and ``log`` of the law), up to the
    checkpoint loader's bounds (``model.checkpoint.INT_BOUNDS``...): a run must not export what cannot be loaded.
    ``members``: 1, as the law fit's stages build one network each (``surrogate ensemble`` combines trained ones)."""
    from ..model.checkpoint import GNS_INT_BOUNDS, INT_BOUNDS, LAW_INT_BOUNDS

    ints = {**INT_BOUNDS, **(LAW_INT_BOUNDS if kind == "law" else GNS_INT_BOUNDS)}
    out = {k: (lo, hi, False, f"a whole number in [{lo}, {hi}]") for k, (lo, hi) in ints.items()}
    if kind == "law":
        out["members"] = (1, 1, False, "1 (training builds one network; `surrogate ensemble` combines trained ones)")
        out["bounds"] = (0, 10, True, "3 numbers in (0, 10] (the log-bounds of the corrections of k, c, mu)")
        out["mu_max"] = (0, 10, True, "a number in (0, 10] (the friction coefficient's cap)")
        out["presliding_bound"] = (0, 10, True, "a number in (0, 10] (the log-bound of the presliding spring's "
                                                "correction)")
    else:
        out["floor_clip"] = (0, 100, True, "a number in (0, 100]")
    return out


def _within(v, lo, hi, lo_excluded: bool) -> bool:
    return _number(v) and math.isfinite(v) and (v > lo if lo_excluded else v >= lo) and v <= hi


def check_model(model, kind: str, *, where) -> None:
    """Each of the model's sizes, bounds and caps within ``model_ranges`` (their types: ``check_types``), refused naming
    the key before any work: ``model.hidden=0``, ``model.steps=0`` or a negative ``model.mu_max`` had started the run,
    which then failed with a traceback building or training the model."""
    if not isinstance(model, dict):
        return
    for name, (lo, hi, lo_excluded, what) in model_ranges(kind).items():
        v = model.get(name)
        if v is None:
            continue
        if name == "bounds":
            ok = isinstance(v, (list, tuple)) and len(v) == 3 and all(_within(x, lo, hi, lo_excluded) for x in v)
        else:
            ok = _within(v, lo, hi, lo_excluded)
        if not ok:
            raise ConfigError(f"must be {what}, got {v!r}", file=where(f"model.{name}"), key=f"model.{name}")


def check_friction_scales(scales, *, file=None) -> None:
    """``stages.closed_loop.friction_scales`` is a non-empty list of positive, finite numbers (the scales of the fitted
    pad friction the closed-loop stage replays): ``[-1]`` had failed with a traceback at that stage, after training."""
    ok = isinstance(scales, list) and scales and all(_within(s, 0, math.inf, True) for s in scales)
    if not ok:
        raise ConfigError(f"must be a non-empty list of numbers above 0, finite (scales of the fitted pad friction; "
                          f"[1.0]: the fitted value alone), got {scales!r}", file=file,
                          key="stages.closed_loop.friction_scales")


def check_reference(path, *, file=None) -> None:
    """``stages.closed_loop.reference`` (a checkpoint replayed beside the run's models) is a readable checkpoint:
    checked before training starts, not when the closed-loop stage reaches it an hour later."""
    if not path:
        return
    from ..model.checkpoint import CheckpointError, is_end_to_end, read_card

    key = "stages.closed_loop.reference"
    try:
        card = read_card(path)
    except (CheckpointError, OSError) as e:
        raise ConfigError(f"not a readable checkpoint: {e}", file=file, key=key) from None
    if is_end_to_end(card):
        raise ConfigError(f"{path} is the end-to-end peer: closed-loop replays need a contact model (a law "
                          "checkpoint) for the hybrid stepper", file=file, key=key)


def check_decision_horizon(horizon_s, *, file=None) -> None:
    """``stages.closed_loop.decision_horizon_s`` is a positive number of seconds (or null: 1 s)."""
    if horizon_s is not None and not (_number(horizon_s) and horizon_s > 0):
        raise ConfigError(f"stages.closed_loop.decision_horizon_s must be a positive number of seconds, got {horizon_s!r}",
                          file=file, key="stages.closed_loop.decision_horizon_s")


def check_decision_data(path, *, train_root=None, file=None) -> None:
    """``stages.closed_loop.decision_data`` is a capture dataset of grasps with a recorded hand, of objects that the
    training data (``train_root``, where readable) does not hold: checked as training starts (``run.fit``), not an
    hour later, and not when a config is only loaded (``--print-config`` of a recipe whose data is not made yet)."""
    if not path:
        return
    from ..capture.reader import read_metadata
    from ..capture.schema import FEATURE_KEYS
    from ..errors import SurrogateError

    key = "stages.closed_loop.decision_data"  # the metadata only: a dataset of thousands of grasps is read in training
    try:
        info, meta = read_metadata(path)
    except (SurrogateError, OSError) as e:
        raise ConfigError(f"not a readable capture dataset: {e}", file=file, key=key) from None
    if FEATURE_KEYS["joint_pos"] not in info["features"]:
        raise ConfigError(f"{path}: no episode records a hand (the decision replays the recorded hand commands)",
                          file=file, key=key)
    try:
        trained = {e["object"] for e in read_metadata(train_root)[1]["episodes"]} if train_root else set()
    except (SurrogateError, OSError, KeyError, TypeError):
        trained = set()  # the training data's own check names what is wrong with it
    shared = sorted(trained & {e.get("object") for e in meta.get("episodes") or []})
    if shared:
        raise ConfigError(f"{path}: {len(shared)} of its objects are in the training data ({', '.join(shared[:4])}"
                          f"{', ...' if len(shared) > 4 else ''}): the decision is about objects the training never "
                          "saw", file=file, key=key)


def check_output_dir(path, *, key: str, file=None) -> None:
    """``path`` (a folder to write, maybe not there yet) is not a file and can be written: refused naming ``key``."""
    if not path:
        return
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{p} is a file, not a folder: choose another {key}", file=file, key=key)
    probe = p
    while not probe.exists():  # the nearest existing parent is where the folder would be made
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"{p} cannot be made: {probe} is a file", file=file, key=key)
    try:  # a real probe, not os.access: root passes every permission check but not a read-only filesystem
        os.rmdir(tempfile.mkdtemp(prefix=".surrogate-write-probe.", dir=probe))
    except OSError as e:
        raise ConfigError(f"{p} cannot be written: {probe}: {e.strerror or e}", file=file, key=key) from None


def episode_count(root) -> int | None:
    """The dataset's episode count from ``meta/info.json`` (``total_episodes``), or None if it does not say."""
    try:
        n = json.loads((Path(root) / "meta" / "info.json").read_text()).get("total_episodes")
    except (OSError, ValueError, AttributeError):
        return None
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def check_split(cfg: dict, kind: str) -> None:
    """The whole-episode validation of the law fit and the end-to-end peer needs at least one validation and one
    training episode: refuse, naming ``data.val_fraction``, a split of the dataset's episodes that leaves none
    (the split is ``learn.episodes.split_episodes``: round(val_fraction x N) held out, none of a single episode)."""
    data = cfg.get("data") or {}
    if kind not in ("law", "gns") or data.get("bench_split"):
        return  # a suite's split: its pool sizes are checked by the suite's split itself
    n = episode_count(data.get("root"))
    if n is None:
        return
    if data.get("max_episodes"):
        n = min(n, int(data["max_episodes"]))
    vf = float(data.get("val_fraction", 0.2))
    n_val = int(round(vf * n)) if n > 1 else 0
    where = f"data.val_fraction={vf:g} of the {n} episode(s) of {data.get('root')}"
    if n_val == 0:
        raise ConfigError(f"{where} holds out no validation episode; training validates on whole held-out "
                          f"episodes: raise data.val_fraction or use a dataset of more episodes", key="data.val_fraction")
    if n_val >= n:
        raise ConfigError(f"{where} leaves no training episode: lower data.val_fraction", key="data.val_fraction")
