"""Model keys that are each in range but that the law's constructor refuses together, refused before any work.

``ContactLawGNN`` (and ``LawPrior.from_json``, which it calls) refuses three combinations of its arguments: a surface
and a body prior in different units (or exponents, or slip regularizations), a static / kinetic friction ratio other
than 1 without ``stribeck``, and ``friction_ellipse`` without a torsional friction in either prior. A config holding
one passed the key, type and range checks and failed only once its captures had loaded, when the fit built the model.

``check_model_combination`` builds the model the run would build when the config is loaded, so the verdict is the
constructor's own (its rules are not copied here, and a rule added there is enforced here at once); only the wording
is this module's: a refusal becomes a ConfigError naming the keys, their values and what to set instead. A refusal
whose wording this module does not know still stops the run before any work, with the constructor's message.
"""

from __future__ import annotations

from ..config import SET_SOURCE
from ..errors import ConfigError

# the network's sizes change none of the constructor's rules (their ranges are checked on their own): the smallest
# network makes the check cost a millisecond whatever model.hidden and model.steps the run asks for
_TINY = {"hidden": 1, "steps": 1, "mlp_layers": 1}
PRIORS = ("prior", "prior_body")


def check_model_combination(model, *, file=None, where=None) -> None:
    """Build the law ``model`` (the config's ``model`` section, less ``kind``) describes, tiny; a refusal of the
    constructor is raised as a ConfigError naming the keys it is about and where they came from (``where(key)``,
    default ``file``: the command line where any of them was set there). Call it after the single keys' checks
    (``setup.check_model``, ``keys.check_prior_values``), so that what is left is a combination."""
    if not isinstance(model, dict):
        return
    import torch

    from ..model.contact_law import ContactLawGNN

    where = where or (lambda key: file)
    args = {k: v for k, v in model.items() if k != "kind"}
    try:
        with torch.random.fork_rng(devices=[]):  # the network's initial weights draw from the generator: not the run's
            ContactLawGNN(**{**args, **_TINY})
    except (ValueError, TypeError) as e:
        keys, text = explain(str(e), model)
        sources = [where(k) for k in keys]
        key = next((k for k, s in zip(keys, sources) if s == SET_SOURCE), keys[0])  # the one the command line set
        raise ConfigError(text, file=SET_SOURCE if SET_SOURCE in sources else file, key=key) from None


def explain(message: str, model: dict) -> tuple[list[str], str]:
    """(the keys, one line naming them, their values and what to set instead) of the constructor's refusal
    ``message`` of ``model``; keys ``["model"]`` and the constructor's own words for a refusal not known here."""
    for phrase, how in _KNOWN:
        if phrase in message:
            return how(model)
    return ["model"], f"the law's constructor refuses this model: {message}"


def _priors(model: dict):
    """The (surface, body) ``LawPrior`` as the constructor reads them: no ``prior_body`` is the surface prior."""
    from ..model.law import LawPrior

    ps = LawPrior.from_json(model.get("prior") or {})
    return ps, LawPrior.from_json(model["prior_body"]) if model.get("prior_body") is not None else ps


def _fmt(v) -> str:
    """A value as ``--set`` takes it (YAML): true, 0.4, si."""
    if isinstance(v, bool):
        return str(v).lower()
    return f"{v:g}" if isinstance(v, float) else str(v)


def _shown(model: dict, key: str, value) -> str:
    """``model.<key> = value``, saying where a value the config does not hold comes from."""
    *head, name = key.split(".")
    node = model.get(head[0]) if head else model
    if isinstance(node, dict) and name in node:
        how = ""
    elif head == ["prior_body"] and model.get("prior_body") is None:
        how = " (no model.prior_body: the prior's)"
    else:
        how = " (the default)"
    return f"model.{key} = {_fmt(value)}{how}"


def _shared_units(model: dict) -> tuple[list[str], str]:
    ps, pb = _priors(model)
    names = [n for n in ("units", "exponent", "slip_eps") if getattr(ps, n) != getattr(pb, n)]
    values = "; ".join(f"{_shown(model, f'prior.{n}', getattr(ps, n))}, "
                       f"{_shown(model, f'prior_body.{n}', getattr(pb, n))}" for n in names)
    to_body = ", ".join(f"model.prior_body.{n}={_fmt(getattr(ps, n))}" for n in names)
    to_surface = ", ".join(f"model.prior.{n}={_fmt(getattr(pb, n))}" for n in names)
    numbers = " (a prior's stiffness, damping and speeds are in its units: give them in the new ones)" \
        if "units" in names else ""
    return ([f"model.{k}.{n}" for n in names for k in PRIORS],
            f"{values}: the surface and body priors must share units, exponent and slip_eps (the model holds one of "
            f"each for both contact groups); set {to_body}, or {to_surface}{numbers}")


def _static_friction(model: dict) -> tuple[list[str], str]:
    ps, pb = _priors(model)
    given = [("prior", ps)] + ([("prior_body", pb)] if model.get("prior_body") is not None else [])
    off = [(k, p.static_friction) for k, p in given if p.static_friction != 1.0]
    values = ", ".join(_shown(model, f"{k}.static_friction", v) for k, v in off)
    coulomb = " and ".join(f"model.{k}.static_friction=1" for k, _ in off)
    return (["model.stribeck", *(f"model.{k}.static_friction" for k, _ in off)],
            f"{_shown(model, 'stribeck', bool(model.get('stribeck', False)))} with {values}: a static / kinetic "
            f"friction ratio other than 1 is a static/kinetic (Stribeck) friction law, which the model fits only with "
            f"model.stribeck=true; set model.stribeck=true, or {coulomb} (Coulomb friction)")


def _ellipse(model: dict) -> tuple[list[str], str]:
    ps, pb = _priors(model)
    values = " and ".join(_shown(model, f"{k}.torsional_friction", p.torsional_friction)
                          for k, p in zip(PRIORS, (ps, pb)))
    return (["model.friction_ellipse", "model.prior_body.torsional_friction", "model.prior.torsional_friction"],
            f"{_shown(model, 'friction_ellipse', True)} with {values}: the friction ellipse joins a patch's friction "
            f"and torsion, and its torsional_friction is the patch's length e; set model.prior_body.torsional_friction "
            f"above 0 (the pads' group; m with units si, object sizes with units weight), or "
            f"model.friction_ellipse=false")


# a phrase of each constructor refusal (``ContactLawGNN.__init__``) this module words; tests/test_training_checks.py
# holds every one of them to its wording, so a reworded refusal is found there
_KNOWN = (("must share units, exponent and slip_eps", _shared_units),
          ("static_friction other than 1 needs stribeck", _static_friction),
          ("friction_ellipse needs a torsional_friction", _ellipse))
