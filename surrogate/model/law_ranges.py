"""Physical ranges of the contact law's parameters (``law.LawPrior``), checked wherever a law enters.

A law can be well formed (positive, finite numbers) and still absurd: a stiffness of 1e-35 lets the object
sink through the table, a damping of 1e26 makes the step's linear solve singular, a friction of 1e6 glues
everything. Such a law is refused, naming the parameter, its value and its range, when a checkpoint loads
(``checkpoint.load_checkpoint``), when training is configured with a prior (``training.keys``) and on
every exported law (``checkpoint.export_checkpoint``). The ranges are wide (orders of magnitude around
every material the project has met); each has its reason beside it, and ``docs/reliability.md`` lists them.

Units: ``weight`` (stiffness in F0 / L^p, damping in 1 / V, speeds in V; F0 the object's weight, L its
size, V = sqrt(|g| L)) or ``si`` (N / m^p, s / m, m / s); see ``law.LawPrior``.
"""

from __future__ import annotations

import math

from ..errors import SurrogateError

# {parameter: {units: (lo, hi)}} or {parameter: (lo, hi)} for both units, with the reason of each bound.
RANGES = {
    # weight units: k = 1 sinks the object by its own size L under its own weight (delta / L = k^(-1/p)),
    # so below 1 it falls through the surface; above 1e9 the rest penetration is under L / 1e6, far below any
    # measurement, and the step's linear solve loses its digits. si: 10 N/m^p sinks a 1 N load by ~5 cm
    # (p = 1.5), softer than any pad; 1e12 is above steel-on-steel Hertz contact (~1e10 for a 1 cm sphere).
    "stiffness": {"weight": (1.0, 1e9), "si": (10.0, 1e12)},
    # Hertz contact has p = 1.5, a linear spring 1; conforming contacts reach ~2.5. Above 3 the force
    # vanishes for small penetrations and explodes for large ones (exponent 60 was a typo, not a material).
    "exponent": (1.0, 3.0),
    # Hunt-Crossley restitution e ~ 1 - 1.5 c v: c = 1e3 makes every impact faster than 1e-3 (V or m/s)
    # perfectly plastic, already beyond real contact, and larger values make the step's solve singular.
    # Above 0 but tiny is nearly elastic, which is physical.
    "damping": (1e-6, 1e3),
    # Friction coefficients of dry contact lie in ~[0.01 (ice), 3 (clean rubber)]; the network's corrections
    # are clamped at ``mu_max`` (<= 10), and the constant law must not exceed that either.
    "friction": (1e-3, 10.0),
    # The regularization speed of friction: above 0.1 (V or m/s) every slow slide is viscous, not Coulomb;
    # below 1e-7 the regularized friction is a step the solve cannot resolve in float64 at the rates we step.
    "slip_eps": (1e-7, 0.1),
    # Static / kinetic ratio: 1 is Coulomb, < 1 friction that strengthens with slip speed (the cube: 0.4);
    # outside [0.1, 10] the coefficient at rest differs from the sliding one by more than any measured surface.
    "static_friction": (0.1, 10.0),
    # Stribeck speed (V or m/s): the slip speed of the transition; below 1e-6 it is below the slip
    # regularization, above 10 no contact in the data ever slides fast enough to reach the kinetic value.
    "stribeck_speed": (1e-6, 10.0),
    # Torsional and rolling friction: the largest torque per newton of normal force, a length (0: off). A soft finger's
    # is 3 pi / 16 mu a, a fraction of its patch radius a (mm); at or above the object's size L (weight units), or
    # 0.1 m (si), the torque exceeds what a patch on the object could transmit.
    "torsional_friction": {"weight": (0.0, 1.0), "si": (0.0, 0.1)},
    "rolling_friction": {"weight": (0.0, 1.0), "si": (0.0, 0.1)},
}


class LawRangeError(SurrogateError, ValueError):
    """A law parameter outside its physical range; ``key`` is the parameter's dotted name."""

    def __init__(self, message: str, *, key: str):
        self.key = key
        super().__init__(message)


def bounds(name: str, units: str = "weight") -> tuple[float, float]:
    """(lo, hi) of the parameter ``name`` in ``units``."""
    r = RANGES[name]
    return r[units] if isinstance(r, dict) else r


def range_problems(prior: dict, *, mu_max: float | None = None, prefix: str = "prior") -> list[tuple[str, str]]:
    """[(dotted key, what is wrong)] of a law prior mapping (``LawPrior.to_json`` fields; missing ones are the
    defaults and not checked); empty when every parameter is in range. ``mu_max``: the model's friction cap, the
    upper bound of the (kinetic and static) friction coefficient."""
    units = prior.get("units", "weight")
    units = units if units in ("weight", "si") else "weight"
    out = []
    for name in RANGES:
        if name not in prior:
            continue
        v = prior[name]
        lo, hi = bounds(name, units)
        if name == "friction" and mu_max is not None:
            hi = min(hi, float(mu_max))
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and lo <= v <= hi
        if not ok:
            unit = f" ({units} units)" if isinstance(RANGES[name], dict) else ""
            cap = " (mu_max)" if name == "friction" and mu_max is not None and hi == float(mu_max) else ""
            out.append((f"{prefix}.{name}", f"{prefix}.{name} = {_num(v)} is outside its physical range "
                                            f"[{_num(lo)}, {_num(hi)}]{cap}{unit}"))
    r, mu = prior.get("static_friction"), prior.get("friction")
    if mu_max is not None and _finite(r) and _finite(mu) and r * mu > float(mu_max) * (1 + 1e-6):
        out.append((f"{prefix}.static_friction", f"{prefix}.static_friction * friction = {_num(r * mu)} (the "
                                                 f"coefficient at rest) exceeds mu_max = {_num(mu_max)}"))
    return out


def check_prior(prior: dict, *, mu_max: float | None = None, prefix: str = "prior", where: str = "") -> None:
    """Raise ``LawRangeError`` naming the first parameter out of range (``where``: the file or source, as a
    message prefix); every other problem is listed in the same message."""
    probs = range_problems(prior, mu_max=mu_max, prefix=prefix)
    if probs:
        head = f"{where}: " if where else ""
        raise LawRangeError(head + "; ".join(p for _, p in probs) + " (ranges and their reasons: "
                            "surrogate.model.law_ranges, docs/reliability.md)", key=probs[0][0])


def check_model(model, *, where: str = "") -> None:
    """Check the fitted laws of a ``ContactLawGNN`` (both contact groups, from its weights) against the ranges."""
    for group, prefix in (("surface", "prior"), ("body", "prior_body")):
        check_prior(model.prior(group).to_json(), mu_max=model.mu_max, prefix=prefix, where=where)


def clamp_friction(model) -> bool:
    """Clamp the constant law's friction coefficients (both groups) at the model's ``mu_max``, as the network's
    corrections are; returns whether anything changed. The training run calls it before exporting."""
    import torch

    cap = math.log(model.mu_max)
    with torch.no_grad():
        over = bool((model.log_friction > cap).any())
        if over:
            model.log_friction.clamp_(max=cap)
    return over


def mismatch(card_prior: dict, weights_prior: dict, *, rel: float = 1e-4) -> list[str]:
    """The parameters where a card's prior and the one its weights hold differ by more than ``rel``."""
    out = []
    for k, w in weights_prior.items():
        c = card_prior.get(k)
        if k == "units" or not (_finite(c) and _finite(w)):
            continue
        if abs(c - w) > rel * max(abs(c), abs(w)):
            out.append(f"{k}: card {_num(c)}, weights {_num(w)}")
    return out


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _num(v) -> str:
    return f"{float(v):.6g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else repr(v)
