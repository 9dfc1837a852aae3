"""One training run: the law path (contact model v2, ``model.kind: law``, the default: ``surrogate.learn``) or
the end-to-end peer (``model.kind: gns``, a baseline: ``surrogate.baselines.gns_fit``).

Every run writes its resolved config (defaults filled in) to ``<out_dir>/run_config.json`` (the law path once its
captures are read and validated, and again when it ends). A law run resumed with ``ckpt_path: last`` whose ``data``,
``model``, ``loss`` or ``stages`` section differs from that file is refused before any work, with a ConfigError
naming every differing key (``data.split_seed: 0 -> 1``): the resumed weights were trained on the old split and
settings, and the card would name validation episodes that were trained on. ``resume_changed: true`` resumes anyway
(the file then records the new config); the ``trainer``, ``export`` and other sections may change freely. A resume
whose stage checkpoint cannot be read is refused before any work too, naming the file (``check_resume_checkpoints``),
and ``surrogate train`` refuses a new run (no ``ckpt_path``) into an ``out_dir`` that holds a run (``check_new_run``).

The trained model is exported as safetensors + JSON card to ``export.dir`` (the CLI sets it: default
``<out_dir>/export``); with ``--release`` to ``export.release_dir`` (a release under ``checkpoints/``), never
over an existing one without ``--overwrite``. TensorBoard and CSV logs go under ``out_dir``
(``surrogate.learn.loggers``: the learning rate of every step, no placeholder ``hp_metric``).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from ..errors import ConfigError
from ..paths import is_release, portable_path, portable_paths  # cards carry no machine paths
from .closed_loop import closed_loop_stage, select_law
from .config import PATH_KEYS, kind_of, resolved_config
from .dataset import require_dataset, require_decision_data
from .ddp import run_lock
from .setup import check_output_dir, check_split

logger = logging.getLogger(__name__)
RUN_CONFIG = "run_config.json"  # in out_dir: the resolved config of the run, checked on resume
RESUME_SECTIONS = ("data", "model", "loss", "stages")  # a resume (ckpt_path: last) must not change these
DATA_HASH = "data_sha256"  # in the run config: the captures' content hash (capture.dataset_hash), checked on resume
RESULT = "result.json"  # in out_dir: the run's summary, written by the command line (training.cli)
LAW_STAGES = ("prior", "corrections")  # the law fit's Lightning stages: <out_dir>/checkpoints/<stage>/last.ckpt


def export_dir(cfg: dict, *, release: bool = False, overwrite: bool = False, check: bool = True) -> str:
    """Where the trained model goes: ``export.dir`` if set, else ``<out_dir>/export``; with ``release``,
    ``export.release_dir`` — refused (unless ``check`` is false), before any training, if a release is there
    and ``overwrite`` is not given."""
    ex = cfg["export"]
    if not release:
        return str(ex.get("dir") or Path(cfg["out_dir"]) / "export")
    target = ex.get("release_dir")
    if not target:
        raise ConfigError("--release needs export.release_dir in the config", key="export.release_dir")
    if check and (Path(target) / "card.json").exists() and not overwrite:
        raise ConfigError(f"{target} holds a released checkpoint; pass --overwrite to replace it", key="export.release_dir")
    if check:
        check_output_dir(target, key="export.release_dir")
    return str(target)


def check_exports(cfg: dict, *, release: bool = False, overwrite: bool = False) -> None:
    """Before any training, every folder the run will export to (``export.dir``, ``prior_dir``, ``network_dir``):
    one holding other files than a checkpoint is refused (it had been found only at the export, after the
    training); one holding a checkpoint that is not the run's own (outside ``out_dir``) needs ``--overwrite``; and a
    release folder is written only with ``--release`` (``export.dir=checkpoints/rig_default`` had replaced the
    shipped release without it; so had any other release, ``paths.is_release``). The export folders are distinct and
    none is ``out_dir`` (its own lock would have refused the export after the training, and two exports into one
    folder left the last one there under the others' names)."""
    from ..model.checkpoint import check_export_folder

    releases = {Path(cfg["export"]["release_dir"]).resolve()} if cfg["export"].get("release_dir") else set()
    own = Path(cfg["out_dir"]).resolve()
    taken = {own: "out_dir"}
    for key in ("dir", "prior_dir", "network_dir"):
        path = cfg["export"].get(key)
        if path and Path(path).resolve() in taken:
            raise ConfigError(f"{path} is also {taken[Path(path).resolve()]}: each export needs its own folder",
                              key=f"export.{key}")
        if path:
            taken[Path(path).resolve()] = f"export.{key}"
        if not path or not Path(path).exists():
            continue
        p = Path(path).resolve()
        if (p in releases or is_release(p)) and not (release and key == "dir"):
            what = "the release folder (export.release_dir)" if p in releases else f"a release (checkpoints/{p.name})"
            raise ConfigError(f"{path} is {what}: write it with --release, into export.release_dir",
                              key=f"export.{key}")
        check_output_dir(path, key=f"export.{key}")
        check_export_folder(Path(path))
        if (p / "card.json").exists() and own not in p.parents and not overwrite:
            raise ConfigError(f"{path} holds a checkpoint this run did not write (it is outside out_dir); pass "
                              f"--overwrite to replace it, or choose another export.{key}", key=f"export.{key}")


def _leaves(value, prefix: str) -> dict:
    """{dotted key: value} of the leaves of nested mappings (lists are leaves)."""
    if isinstance(value, dict) and value:
        out = {}
        for k, v in value.items():
            out.update(_leaves(v, f"{prefix}.{k}"))
        return out
    return {prefix: value}


_UNSET = object()


def _show(value) -> str:
    return "(unset)" if value is _UNSET else value if isinstance(value, str) else json.dumps(value)


def check_resume(cfg: dict, resolved: dict) -> None:
    """With ``ckpt_path`` set and ``<out_dir>/run_config.json`` present: refuse a resume whose data, model, loss
    or stages section differs from the run's, naming every differing key, unless ``resume_changed`` is true. The
    run's file is resolved the same way first (a file written before a default was recorded compares equal)."""
    path = Path(cfg["out_dir"]) / RUN_CONFIG
    if not cfg.get("ckpt_path") or cfg.get("resume_changed") or not path.is_file():
        return
    try:
        old = json.loads(path.read_text())
        if not isinstance(old, dict):
            raise ValueError("not a JSON object")
        was_hash = old.pop(DATA_HASH, None)
        old = resolved_config(old)
    except (OSError, ValueError) as e:
        raise ConfigError(f"unreadable run config ({e}); cannot check that the resume keeps the run's config: "
                          f"pass --set resume_changed=true to resume anyway", file=path) from None
    diffs = []
    for sec in RESUME_SECTIONS:
        was, now = _leaves(old.get(sec, {}), sec), _leaves(resolved.get(sec, {}), sec)
        for k in sorted(set(was) | set(now)):
            a, b = was.get(k, _UNSET), now.get(k, _UNSET)
            if a != b:
                diffs.append((k, f"{k}: {_show(a)} -> {_show(b)}"))
    if not diffs and was_hash and Path(cfg["data"]["root"]).is_dir():
        from ..capture import dataset_hash

        now_hash = dataset_hash(cfg["data"]["root"])
        if now_hash != was_hash:  # the same folder, other captures (regenerated, edited): the card would name them
            diffs.append(("data.root", f"the captures in data.root: sha256 {was_hash[:12]} -> {now_hash[:12]}"))
    if diffs:
        raise ConfigError(f"resuming (ckpt_path={cfg['ckpt_path']}) under another config than the run's: "
                          f"{'; '.join(d for _, d in diffs)}. The resumed weights were trained under the run's "
                          f"config (its split: the card would name validation episodes that were trained on); "
                          f"use another out_dir for a new run, or pass --set resume_changed=true to resume anyway",
                          file=path, key=diffs[0][0])


def check_new_run(cfg: dict) -> None:
    """A new run (no ``ckpt_path``) into an ``out_dir`` that holds a run (its run config or summary) is refused before
    any work: it replaced that run's ``result.json``, ``run_config.json``, checkpoints and export, which this command
    did not create. A resume (``ckpt_path: last``) continues the run in its own folder."""
    if cfg.get("ckpt_path"):
        return
    out = Path(cfg["out_dir"])
    found = [name for name in (RESULT, RUN_CONFIG) if (out / name).is_file()]
    if not found:
        return
    resume = "resume it with --set ckpt_path=last, " if kind_of(cfg) == "law" else ""
    raise ConfigError(f"{out} holds a run ({' and '.join(found)}) that a new run would replace: {resume}choose "
                      "another out_dir, or delete that folder to train there afresh", key="out_dir")


def _read_checkpoint(path: Path) -> dict:
    """A Lightning checkpoint, loaded as Lightning loads it (``weights_only``), or a ConfigError naming it."""
    import torch

    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        why = None if isinstance(ckpt, dict) and "state_dict" in ckpt else "not a Lightning checkpoint"
    except Exception as e:  # torch raises unpickling, zip-reader, EOF and OS errors for a cut or foreign file
        first = (str(e).split(". ")[0].splitlines() or [""])[0][:120]  # torch's first sentence: one line
        ckpt, why = None, f"{type(e).__name__}: {first}" if first else type(e).__name__
    if why:
        raise ConfigError(f"the resume checkpoint cannot be read ({why}): it was cut short or is not a checkpoint; "
                          f"delete it (with the rest of {path.parent}: that stage then trains again from its start) or "
                          "start without ckpt_path, in another out_dir", file=path, key="ckpt_path")
    return ckpt


def check_resume_checkpoints(cfg: dict) -> None:
    """With ``ckpt_path: last``, every checkpoint a resumed stage reads (its ``last.ckpt``, and the best epoch's it
    reloads when the stage ends) is read before any work: a truncated or garbled ``last.ckpt`` had ended the run in
    torch's unpickling traceback once its data had loaded."""
    if cfg.get("ckpt_path") != "last":
        return
    for stage in LAW_STAGES:
        last = Path(cfg["out_dir"]) / "checkpoints" / stage / "last.ckpt"
        if not last.is_file():
            continue  # that stage starts from its beginning
        for state in _read_checkpoint(last).get("callbacks", {}).values():
            best = state.get("best_model_path") if isinstance(state, dict) else None
            if best and Path(best).is_file() and Path(best) != last:  # the unmonitored callback's is last.ckpt
                _read_checkpoint(Path(best))


def _lightning_config_errors():
    from lightning.fabric.utilities.exceptions import MisconfigurationException

    return MisconfigurationException


def fit(cfg: dict) -> dict:
    """Train under the loaded config ``cfg`` (``load_config``); returns the run's summary."""
    kind = kind_of(cfg)
    require_dataset(cfg)
    require_decision_data(cfg)
    check_split(cfg, kind)  # before any work: a split without validation (or training) episodes
    # one run per out_dir (its logs, run config and export): a second is refused, not silently lost; the ranks
    # Lightning's DDP starts for this run are not (training.ddp)
    with run_lock(cfg["out_dir"]) as lock:
        try:
            if kind == "gns":  # the end-to-end peer (a baseline, no MuJoCo): surrogate.baselines.gns_fit
                from ..atomic import write_json_atomic
                from ..baselines.gns_fit import fit_gns

                if lock is None:  # a DDP child trains its rank; the parent exports and records the run
                    return fit_gns({**cfg, "export": {**cfg["export"], "dir": None}})
                out = fit_gns(cfg)
                write_json_atomic(Path(cfg["out_dir"]) / RUN_CONFIG, resolved_config(cfg))
                return out
            return fit_law(cfg)
        except _lightning_config_errors() as e:  # e.g. accelerator gpu on a machine without one
            raise ConfigError(f"Lightning refused the trainer settings: {e}", key="trainer") from None


def fit_law(cfg: dict) -> dict:
    """Contact model v2: the passive law fitted on rollouts, then the network's corrections (``surrogate.learn.fit``)."""
    import lightning as L
    import torch

    from ..atomic import write_json_atomic
    from ..capture import dataset_hash
    from ..learn.fit import fit_law as run
    from ..model import law_ranges
    from ..model.checkpoint import export_checkpoint
    from ..model.contact_law import GROUPS
    from ..sim.contact_scope import contact_groups_of

    resolved = resolved_config(cfg)
    check_resume(cfg, resolved)  # before any work: a resume under a changed config is refused
    check_resume_checkpoints(cfg)  # and one from a checkpoint that cannot be read
    torch.set_num_threads(int(cfg.get("threads", 1)))
    L.seed_everything(int(cfg["seed"]), workers=True)
    t0 = time.time()
    # the captures are valid: this is a run; its config is recorded for the check of a resume
    out_dir = Path(cfg["out_dir"])
    law_choice: dict = {}  # the closed-loop stage's choice of the law's pad friction, made before the corrections
    # with the data's own hash: a resume on other captures under the same config is refused too (check_resume)
    data_hash = {}  # the captures' hash, once: recorded in the run config when they are read, and in the card

    def ready():
        data_hash["sha256"] = dataset_hash(cfg["data"]["root"])
        write_json_atomic(out_dir / RUN_CONFIG, {**resolved, DATA_HASH: data_hash["sha256"]})

    res = run(cfg, out=out_dir, ready=ready,
              select_law=lambda law, dm: select_law(cfg, law, dm, law_choice))
    dm, metrics = res["data"], res["metrics"]
    closed_loop_stage(cfg, res, law_choice)
    metrics["train_wall_s"] = time.time() - t0
    out = {"train_wall_s": metrics["train_wall_s"], "release": metrics["release"],
           "prior": {k: metrics["prior"][k] for k in ("initial", "fitted", "law")}}
    if "corrections" in metrics:
        out["corrections"] = {k: metrics["corrections"][k] for k in ("fitted", "paired_minus_prior", "kept")}
    if "closed_loop" in metrics:
        out["closed_loop"] = {k: v for k, v in metrics["closed_loop"].items()
                              if k not in ("per_episode", "episodes", "network", "reference")}
        if "network" in metrics["closed_loop"]:
            out["closed_loop"]["network"] = {k: v for k, v in metrics["closed_loop"]["network"].items() if k != "per_episode"}
    if "ablation" in metrics:
        out["ablation"] = metrics["ablation"]
    c = dm.cfg
    data = {"name": dm.capture.meta.name, "root": portable_path(c["root"]), "sha256": data_hash["sha256"],
            "train_episodes": dm.train_ids, "val_episodes": dm.val_ids, "split_seed": c["split_seed"],
            "bench_split": c["bench_split"], "margin_m": c["margin"], "substeps": c["substeps"],
            "windows": {"frames": c["window_frames"], "stride": c["window_stride"], "count": dm.n_windows},
            "initial_state": "frame 0: ballistic / constant-rate fit over the first frames (as the benchmarks); "
                             "later windows: Savitzky-Golay smoothed pose",
            "contact_groups": contact_groups_of(dm.capture.meta, units={g: res["model"].prior(g).units for g in GROUPS})}
    for m in {id(res["model"]): res["model"], id(res["prior_model"]): res["prior_model"]}.values():
        if law_ranges.clamp_friction(m):  # the constant law obeys mu_max, as the network's corrections do
            metrics["release"]["friction_clamped_at_mu_max"] = m.mu_max
    if cfg["export"].get("dir"):
        export_checkpoint(res["model"], cfg["export"]["dir"], data=data,
                          training={"config": portable_paths(cfg, PATH_KEYS), "metrics": metrics, "val_per_episode": res["val_rows"]})
        out["exported"] = str(cfg["export"]["dir"])
    if cfg["export"].get("prior_dir"):  # the fitted constant law alone: its own row in the benchmarks
        export_checkpoint(res["prior_model"], cfg["export"]["prior_dir"], data=data,
                          training={"config": portable_paths(cfg, PATH_KEYS),
                                    "metrics": {k: metrics[k] for k in ("prior", "train_wall_s")},
                                    "val_per_episode": res["prior_val_rows"], "role": "the fitted prior law of the release"})
        out["exported_prior"] = str(cfg["export"]["prior_dir"])
    if cfg["export"].get("network_dir") and res.get("network_model") is not None:
        # the trained network whether or not it ships: the ablation's own row in the benchmarks (surrogate.rows)
        net = res.get("network_selected") or res["network_model"]  # at its closed-loop pad friction where that ran
        export_checkpoint(net, cfg["export"]["network_dir"], data=data,
                          training={"config": portable_paths(cfg, PATH_KEYS), "metrics": metrics,
                                    "val_per_episode": res["network_val_rows"], "role": "the trained network of the run "
                                    "(its pad friction chosen by the closed-loop stage where it ran); shipped only if "
                                    "training.metrics.release.structure says law+corrections"})
        out["exported_network"] = str(cfg["export"]["network_dir"])
    write_json_atomic(Path(cfg["out_dir"]) / RUN_CONFIG, {**resolved_config(cfg), DATA_HASH: data["sha256"]})
    return out
