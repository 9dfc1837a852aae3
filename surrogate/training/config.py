"""A training config: where it is found, its defaults, the path rule, the key check, the resolved form.

``--config`` takes a path, or the name of a config shipped with the package (``cube_tosses``,
``rig_default``: ``configs/train/<name>.yaml``), so training runs from any folder and from an installed
wheel.

Path rule for ``out_dir``, ``ckpt_path``, ``data.root``, ``export.dir``, ``export.release_dir``,
``export.prior_dir``, ``export.network_dir``:

- a relative path **on the command line** (``--set out_dir=runs/x``) is relative to the current folder;
- a relative path **in a config file** is relative to the project the file belongs to: for a file under
  ``<project>/configs/`` next to ``<project>/pyproject.toml`` (this repository), ``<project>``, so
  ``configs/train/cube_tosses.yaml`` reads ``<repo>/datasets/...`` and writes ``<repo>/runs/...`` from any
  folder; for any other file (a config of an installed package, your own file) the current folder;
- ``${VAR}`` is expanded first (``${SURROGATE_DATA}`` defaults to the shared data folder); ``ckpt_path``
  keywords (``last``, ``best``) are Lightning's and stay as they are.
"""

from __future__ import annotations

import copy
import difflib
import json
from pathlib import Path

from ..baselines.gns_defaults import GNS_DEFAULTS  # the defaults of each kind, one place each
from ..config import apply_overrides, expand_env, get_dotted, load_yaml, merge, set_dotted
from ..errors import ConfigError
from ..learn.defaults import LAW_DEFAULTS
from ..paths import TRAINING_PATH_KEYS as PATH_KEYS  # the path rule's keys (one list, in core)
from ..paths import config_dir
from . import keys

DEFAULTS = LAW_DEFAULTS  # the default kind's
CKPT_KEYWORDS = ("last", "best", "hpc", "registry")  # Lightning's ckpt_path keywords
TRAIN_CONFIGS = "train"  # packaged training configs: config_dir() / train / <name>.yaml


def packaged_configs() -> list[str]:
    """Names of the training configs shipped with the package."""
    return sorted(p.stem for p in (config_dir() / TRAIN_CONFIGS).glob("*.yaml"))


def find_config(name_or_path) -> Path:
    """The config file: an existing path, else a packaged config by name (``cube_tosses``) or by its path in
    the repository (``configs/train/cube_tosses.yaml``, so that spelling works from any folder)."""
    p = Path(expand_env(str(name_or_path), key="--config"))
    if p.is_file():
        return p
    rel = p.parts[1:] if p.parts and p.parts[0] == "configs" else p.parts
    candidates = [config_dir() / TRAIN_CONFIGS / f"{p.name}.yaml"] if not p.suffix and len(p.parts) == 1 else []
    if not p.is_absolute() and rel:
        candidates.append(config_dir().joinpath(*rel))
    for c in candidates:
        if c.is_file():
            return c
    known = packaged_configs()
    close = difflib.get_close_matches(p.stem, known, n=2, cutoff=0.5)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise ConfigError(f"no such config file, nor a packaged training config of that name{hint} "
                      f"(packaged: {known}, in {config_dir() / TRAIN_CONFIGS})", file=p)


def config_base(path: Path | None) -> Path:
    """The folder relative paths written in the config ``path`` resolve against (see the module docstring)."""
    if path is None:
        return Path.cwd()
    path = Path(path).resolve()
    for parent in path.parents:
        if parent.name == "configs":
            return parent.parent if (parent.parent / "pyproject.toml").is_file() else Path.cwd()
    return Path.cwd()


def resolve_paths(cfg: dict, base: Path, *, file=None) -> dict:
    """A copy of ``cfg`` with every relative path of ``PATH_KEYS`` made absolute against ``base``."""
    cfg = copy.deepcopy(cfg)
    for dotted in PATH_KEYS:
        value = get_dotted(cfg, dotted)
        if value is None or (dotted == "ckpt_path" and str(value) in CKPT_KEYWORDS):
            continue
        if not isinstance(value, (str, Path)):
            raise ConfigError(f"must be a path, got {value!r}", file=file, key=dotted)
        p = Path(expand_env(str(value), file=file, key=dotted)).expanduser()
        set_dotted(cfg, dotted, str(p if p.is_absolute() else base / p))
    return cfg


def kind_of(cfg: dict, *, file=None) -> str:
    """``model.kind`` of a (merged) config: ``law`` (default) or ``gns``."""
    model = cfg.get("model") or {}
    return keys.check_kind(model.get("kind", "law") if isinstance(model, dict) else "law", file=file)


def load_config(path=None, overrides=(), *, options: dict | None = None) -> dict:
    """The run's config: the defaults of its path, its ``preset`` (``learn.defaults.PRESETS``: the defaults of a kind of
    captures), the file (a path or a packaged name), the ``--set``
    overrides and the command-line ``options`` ({dotted key: value}, e.g. from ``--seed``), every key checked,
    every path absolute (see the module docstring)."""
    file = find_config(path) if path else None
    data = load_yaml(file) if file else {}
    over = apply_overrides({}, list(overrides or []), file=keys.SET_SOURCE)
    for dotted, value in (options or {}).items():
        over = apply_overrides(over, [f"{dotted}={json.dumps(value)}"])
    merged_view = merge(data, over)
    kind = kind_of(merged_view, file=keys.SET_SOURCE if "kind" in (over.get("model") or {}) else file)
    spec = keys.spec_for(kind)
    keys.check_section(data, spec, file=file)
    keys.check_section(over, spec, file=keys.SET_SOURCE)
    defaults = {"law": LAW_DEFAULTS, "gns": GNS_DEFAULTS}[kind]
    preset = merged_view.get("preset")
    if preset is not None:  # a kind of captures' defaults, under the file's keys (learn.defaults.PRESETS)
        given = keys.preset_defaults(preset, file=keys.SET_SOURCE if "preset" in over else file)
        defaults = merge(defaults, _without_replaced_priors(given, merged_view.get("model")))
    cfg = resolve_paths(merge(defaults, data), config_base(file), file=file)  # the file's paths: its project
    cfg = resolve_paths(merge(cfg, over), Path.cwd(), file=keys.SET_SOURCE)    # the command line's: here
    keys.check_values(cfg, kind, file=file, given=over)
    return cfg


def _without_replaced_priors(preset: dict, model) -> dict:
    """``preset`` less each law prior (``model.prior``, ``model.prior_body``) that the config gives in other ``units``:
    such a prior replaces the preset's whole (its numbers mean other things); one in the same units, or without
    ``units``, changes the preset's values key by key, in the preset's units."""
    out = copy.deepcopy(preset)
    mine = model if isinstance(model, dict) else {}
    for key in ("prior", "prior_body"):
        theirs = (out.get("model") or {}).get(key)
        ours = mine.get(key)
        if isinstance(theirs, dict) and isinstance(ours, dict) and "units" in ours and \
                ours["units"] != theirs.get("units", "weight"):
            del out["model"][key]
    return out


def _plain(obj):
    """``obj`` as JSON would store it (paths as strings, tuples as lists), for writing and comparing."""
    return json.loads(json.dumps(obj, default=str))


def _model_defaults(kind: str) -> dict:
    import inspect

    if kind == "law":
        from ..model.contact_law import ContactLawGNN as cls
    else:
        from ..baselines.gns import GNSNet as cls
    return {n: p.default for n, p in inspect.signature(cls.__init__).parameters.items()
            if n != "self" and p.default is not inspect.Parameter.empty}


def resolved_config(cfg: dict) -> dict:
    """The config with the defaults of every section the training code fills in (data, model, loss, and
    optim or stages), as written to ``<out_dir>/run_config.json`` and printed by ``--print-config``.
    Idempotent, so an older run's file resolves to the same values."""
    kind = kind_of(cfg)
    out = dict(cfg)
    model = cfg.get("model") or {}
    out["model"] = {"kind": kind, **_model_defaults(kind), **model}
    if kind == "law":
        from ..learn.defaults import DATA_DEFAULTS, LOSS_DEFAULTS, STAGE_DEFAULTS

        out["data"] = {**DATA_DEFAULTS, **(cfg.get("data") or {})}
        out["loss"] = {**LOSS_DEFAULTS, **(cfg.get("loss") or {})}
        stages = cfg.get("stages") or {}
        out["stages"] = {k: {**v, **(stages.get(k) or {})} for k, v in STAGE_DEFAULTS.items()}
        return _plain(out)
    from ..baselines.gns_defaults import DATA_DEFAULTS as GNS_DATA
    from ..baselines.gns_defaults import LOSS_DEFAULTS as GNS_LOSS
    from ..baselines.gns_defaults import OPTIM_DEFAULTS as GNS_OPTIM

    for sec, d in (("data", GNS_DATA), ("loss", GNS_LOSS), ("optim", GNS_OPTIM)):
        out[sec] = {**d, **(cfg.get(sec) or {})}
    return _plain(out)


def to_yaml(cfg: dict) -> str:
    """The resolved config as YAML (``--print-config``), read back by ``--config`` as it is (a string '1e5' quoted)."""
    from ..config import dump_yaml

    return dump_yaml(_plain(resolved_config(cfg)), sort_keys=False, default_flow_style=None)
