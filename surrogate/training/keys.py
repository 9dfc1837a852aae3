"""The keys a training config may hold, per training path, and the check that refuses any other.

Every section is checked: ``data``, ``model``, ``loss``, ``optim``/``stages`` against the defaults and
signatures of the code that reads them, ``trainer`` against ``lightning.Trainer``'s signature, ``export``
and the top level against what the training entry point reads. A misspelt key stops the run before any
work with a ``ConfigError`` naming the key, the file (or ``--set``) and the close matches; a key that
exists but means nothing on this path (``trainer.max_epochs`` with ``model.kind: law``) says why.

A spec is a mapping ``key -> rule``: ``None`` (any value), a mapping (a nested section, checked the same
way; ``null`` allowed), or a string (the key is refused, with this reason).
"""

from __future__ import annotations

import difflib
import inspect

from ..config import SET_SOURCE, get_dotted
from ..errors import ConfigError

KINDS = ("law", "gns")  # model.kind: contact model v2 (surrogate.learn), or the end-to-end peer (surrogate.baselines)

_BY_TRAINING = "set by the training entry point (logs and checkpoints go under out_dir)"
_LAW_EPOCHS = "with model.kind: law the epochs are stages.prior.epochs and stages.corrections.epochs"
_LAW_FIT = "set by the law fit (surrogate.learn.fit)"
TRAINER_RESERVED = {
    "gns": {"default_root_dir": _BY_TRAINING, "logger": _BY_TRAINING, "callbacks": _BY_TRAINING,
            "num_sanity_val_steps": "the end-to-end peer's validation rolls whole episodes out; it runs after training epochs only",
            "max_steps": "the end-to-end peer trains trainer.max_epochs epochs (its learning-rate schedule spans them)"},
    "law": {"default_root_dir": _BY_TRAINING, "logger": _BY_TRAINING, "callbacks": _BY_TRAINING,
            "max_epochs": _LAW_EPOCHS, "num_sanity_val_steps": _LAW_FIT, "reload_dataloaders_every_n_epochs": _LAW_FIT,
            "early_stopping_patience": "with model.kind: law early stopping is stages.prior.patience and stages.corrections.patience"},
}


def _leaves(names) -> dict:
    return {k: None for k in names}


def _init_args(cls) -> list[str]:
    """Keyword arguments of ``cls.__init__`` (a model class or lightning.Trainer)."""
    return [n for n, p in inspect.signature(cls.__init__).parameters.items()
            if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def trainer_spec(kind: str) -> dict:
    """``trainer`` keys: lightning.Trainer's arguments (less those the training code sets itself)."""
    import lightning as L

    spec = _leaves(_init_args(L.Trainer))
    spec.update(TRAINER_RESERVED[kind])
    return spec


def gns_spec() -> dict:
    """The key spec of ``model.kind: gns`` (the end-to-end peer)."""
    from ..baselines.gns import GNSNet
    from ..baselines.gns_defaults import DATA_DEFAULTS, LOSS_DEFAULTS, OPTIM_DEFAULTS

    return {"seed": None, "out_dir": None, "threads": None,
            "data": {**_leaves(DATA_DEFAULTS), "bench_split": {"suite": None, "size": None, "validation": None}},
            "model": {**_leaves(_init_args(GNSNet)), "kind": None}, "loss": _leaves(LOSS_DEFAULTS),
            "optim": _leaves(OPTIM_DEFAULTS), "trainer": trainer_spec("gns"),
            "export": {"dir": None, "release_dir": None,
                       "eval_rollouts": "the end-to-end peer scores whole validation episodes every validation epoch",
                       "prior_dir": "only the law fit (model.kind: law) has a prior law to export",
                       "network_dir": "only the law fit (model.kind: law) trains a network of corrections to export"},
            "stages": "training stages belong to model.kind: law; the end-to-end peer trains one stage (optim, trainer)",
            "ckpt_path": "the end-to-end peer does not resume from a Lightning checkpoint (model.kind: gns)",
            "preset": "presets are the law fit's defaults for a kind of captures (model.kind: law)",
            "resume_changed": "the end-to-end peer does not resume (model.kind: gns)"}


def spec_for(kind: str) -> dict:
    """The full key spec of a config whose ``model.kind`` is ``kind``."""
    if kind == "law":
        from ..learn.defaults import DATA_DEFAULTS, LOSS_DEFAULTS, STAGE_DEFAULTS
        from ..model.contact_law import ContactLawGNN
        from ..model.law import LawPrior

        prior = _leaves(LawPrior.__dataclass_fields__)
        model = {**_leaves(_init_args(ContactLawGNN)), "kind": None, "prior": prior, "prior_body": prior}
        data = {**_leaves(DATA_DEFAULTS), "bench_split": {"suite": None, "size": None, "validation": None}}
        return {"preset": None, "seed": None, "out_dir": None, "threads": None, "data": data, "model": model,
                "loss": _leaves(LOSS_DEFAULTS), "stages": {k: _leaves(v) for k, v in STAGE_DEFAULTS.items()},
                "trainer": trainer_spec(kind),
                "export": {"dir": None, "release_dir": None, "prior_dir": None, "network_dir": None,
                           "eval_rollouts": "the law fit scores whole validation episodes every epoch"},
                "optim": "with model.kind: law the learning rates are stages.prior.lr and stages.corrections.lr",
                "ckpt_path": None,
                "resume_changed": None}
    return gns_spec()


def _unknown(key: str, dotted: str, spec: dict, *, file, where: str) -> ConfigError:
    close = difflib.get_close_matches(key, list(spec), n=3, cutoff=0.6)
    hint = ""
    if close:
        names = [f"'{where}.{c}'" if where else f"'{c}'" for c in close]
        hint = f"; did you mean {' or '.join(names)}?"
        if isinstance(spec[close[0]], str):
            hint += f" ({close[0]}: {spec[close[0]]})"
    if where == "trainer":
        import lightning

        known = f"not an argument of lightning.Trainer {lightning.__version__}"
    else:
        known = f"known keys of {where or 'the top level'}: {sorted(k for k, v in spec.items() if not isinstance(v, str))}"
    return ConfigError(f"unknown key ({known}){hint}", file=file, key=dotted)


def check_section(cfg, spec: dict, *, file=None, where: str = "") -> None:
    """Refuse every key of ``cfg`` that ``spec`` does not allow, naming it (``where`` is the dotted prefix)."""
    if cfg is None:
        return
    if not isinstance(cfg, dict):
        raise ConfigError(f"must be a mapping, got {type(cfg).__name__}", file=file, key=where or None)
    for key, value in cfg.items():
        dotted = f"{where}.{key}" if where else str(key)
        if key not in spec:
            raise _unknown(str(key), dotted, spec, file=file, where=where)
        rule = spec[key]
        if isinstance(rule, str):
            raise ConfigError(f"not a key of this training path: {rule}", file=file, key=dotted)
        if isinstance(rule, dict):
            check_section(value, rule, file=file, where=dotted)


def preset_defaults(name, *, file=None) -> dict:
    """The defaults of the preset ``name`` (``learn.defaults.PRESETS``), refusing an unknown one by name."""
    from ..learn.defaults import PRESETS

    if not isinstance(name, str) or name not in PRESETS:
        close = difflib.get_close_matches(str(name), list(PRESETS), n=1, cutoff=0.5)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise ConfigError(f"unknown preset {name!r}{hint} (known: {sorted(PRESETS)})", file=file, key="preset")
    return PRESETS[name]


def check_kind(kind, *, file=None) -> str:
    """``model.kind`` must be one of ``KINDS``."""
    if kind == "gnn":
        raise ConfigError("model.kind: gnn (the v1 raw-force network) is no longer supported; train contact model v2 "
                          "with model.kind: law (configs/train/cube_tosses.yaml, rig_default.yaml)",
                          file=file, key="model.kind")
    if kind not in KINDS:
        close = difflib.get_close_matches(str(kind), KINDS, n=1, cutoff=0.5)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise ConfigError(f"unknown model kind {kind!r}{hint} (known: {list(KINDS)})", file=file, key="model.kind")
    return kind


def _init_defaults(cls) -> dict:
    """The defaults of ``cls.__init__``'s keyword arguments (a model's: ``hidden=32`` is a whole number)."""
    return {n: p.default for n, p in inspect.signature(cls.__init__).parameters.items()
            if n != "self" and p.default is not inspect.Parameter.empty}


def type_reference(kind: str) -> dict:
    """The defaults whose types a config's values must have (``setup.check_types``); the model's: its constructor's."""
    if kind == "law":
        from ..learn.defaults import DATA_DEFAULTS, LOSS_DEFAULTS, STAGE_DEFAULTS
        from ..model.contact_law import ContactLawGNN

        return {"seed": 0, "threads": 1, "data": DATA_DEFAULTS, "loss": LOSS_DEFAULTS, "stages": STAGE_DEFAULTS,
                "model": _init_defaults(ContactLawGNN)}
    from ..baselines.gns import GNSNet
    from ..baselines.gns_defaults import DATA_DEFAULTS, LOSS_DEFAULTS, OPTIM_DEFAULTS

    return {"seed": 0, "threads": 1, "data": DATA_DEFAULTS, "loss": LOSS_DEFAULTS, "optim": OPTIM_DEFAULTS,
            "model": _init_defaults(GNSNet)}


def check_values(cfg: dict, kind: str, *, file=None, given=None) -> None:
    """Values the key check cannot see: numbers where the defaults hold numbers; the split, the hands, the prior grid
    and early stopping as the fit's own rules take them (``setup.check_fit_rules``); the law fit runs on the CPU only
    and in one process (``check_processes``), and resumes from its stages' last epoch; the model's sizes, bounds and
    cap in their ranges; a law prior inside its physical ranges (``model.law_ranges``); model keys the law's
    constructor refuses together (``combinations``); a validation split that can validate; output folders that can be
    written. ``given``: the keys set on the command line, whose errors name it rather than ``file``."""
    from .combinations import check_model_combination
    from .setup import check_fit_rules, check_model, check_setup, check_types

    def where(key: str):  # a key the command line set, to null too (``friction_scales=null``), names it
        *head, last = key.split(".")
        node = get_dotted(given, ".".join(head)) if head and given is not None else given
        return SET_SOURCE if isinstance(node, dict) and last in node else file

    if kind == "law" and cfg.get("ckpt_path") not in (None, "last"):
        raise ConfigError(f"ckpt_path {cfg['ckpt_path']!r}: model.kind: law resumes with ckpt_path: last (each stage "
                          "from its own out_dir/checkpoints/<stage>/last.ckpt)", file=where("ckpt_path"),
                          key="ckpt_path")
    acc = cfg.get("trainer", {}).get("accelerator", "cpu")
    if kind == "law" and acc != "cpu":
        raise ConfigError(f"accelerator {acc!r}: model.kind: law trains on the CPU (the differentiable twin and its "
                          "rollout windows live there); use accelerator cpu",
                          file=where("trainer.accelerator"), key="trainer.accelerator")
    check_processes(cfg, kind, where=where)
    check_setup(cfg, where=where)  # its messages first: they say what the value means (val_fraction in (0, 1))
    check_types(cfg, type_reference(kind), where=where)
    check_fit_rules(cfg, kind, where=where)  # keys whose defaults are null or strings, which check_types passes over
    check_model(cfg.get("model"), kind, where=where)  # model.mu_max first: the priors' friction is checked against it
    if kind == "law":
        check_prior_values(cfg.get("model") or {}, file=file, where=where)
        # each key is good on its own: the keys the model's constructor refuses together (after its data had loaded)
        check_model_combination(cfg.get("model"), file=file, where=where)


def check_processes(cfg: dict, kind: str, *, where) -> None:
    """``model.kind: law`` trains in one process: ``trainer.devices`` other than 1 (or ``auto``: 1 on the CPU) or
    ``trainer.num_nodes`` other than 1 (Lightning's DDP) is refused before any work. Its whole-episode validation (the
    epoch kept, whether the corrections ship), the closed-loop stage and the export run outside Lightning's loops, in
    every DDP rank: each rank scored its own share of the validation episodes, unsynced, and the ranks' exports
    collided on the export folder's lock, failing the run after training (``--devices 2`` on the CPU did)."""
    if kind != "law":
        return
    trainer = cfg.get("trainer") or {}
    for key, value in (("devices", trainer.get("devices", 1)), ("num_nodes", trainer.get("num_nodes", 1))):
        if value not in ((1, "1", "auto") if key == "devices" else (1, "1")):
            raise ConfigError(f"{key} {value!r}: model.kind: law trains in one process (its whole-episode "
                              "validation, closed-loop stage and export are not split across DDP ranks: each rank "
                              "would score its own share of the validation episodes and export on its own); use "
                              f"{key} 1 (more CPU threads: the top-level threads key)", file=where(f"trainer.{key}"),
                              key=f"trainer.{key}")


def check_prior_values(model: dict, *, file=None, where=None) -> None:
    """Refuse a configured ``model.prior`` / ``model.prior_body`` outside the law's physical ranges, naming the key
    and where it came from (``where(key)``, default ``file``): a friction above ``model.mu_max`` names the command line
    where either was set there. Units and the presliding spring (which the ranges do not hold) as ``LawPrior`` needs
    them: one of its units, a stiffness 0 (off) or more."""
    from ..model.law import UNITS
    from ..model.law_ranges import check_prior

    where = where or (lambda key: file)
    mu_max = model.get("mu_max", 2.0)
    mu_max = float(mu_max) if isinstance(mu_max, (int, float)) and not isinstance(mu_max, bool) else None
    for key in ("prior", "prior_body"):
        prior = model.get(key)
        if not isinstance(prior, dict):
            continue
        units, k_z = prior.get("units", "weight"), prior.get("presliding_stiffness", 0.0)
        if units not in UNITS:
            raise ConfigError(f"must be one of {list(UNITS)}, got {units!r}", file=where(f"model.{key}.units"),
                              key=f"model.{key}.units")
        if not (isinstance(k_z, (int, float)) and not isinstance(k_z, bool) and 0 <= k_z < float("inf")):
            raise ConfigError(f"must be a number 0 (off) or more, finite, got {k_z!r}",
                              file=where(f"model.{key}.presliding_stiffness"), key=f"model.{key}.presliding_stiffness")
        for cap in (None, mu_max):  # the prior's own ranges, then its friction under the cap
            try:
                check_prior(prior, mu_max=cap, prefix=f"model.{key}")
            except ValueError as e:
                bad = getattr(e, "key", f"model.{key}")
                named = (where(bad), where("model.mu_max")) if cap is not None else (where(bad),)
                why = f"; model.mu_max = {cap:g} caps it" if cap is not None else ""
                raise ConfigError(f"{e}{why}", file=SET_SOURCE if SET_SOURCE in named else file, key=bad) from None
