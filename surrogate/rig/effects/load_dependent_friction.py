"""Load-dependent friction of elastomer fingertips: the coefficient falls with the normal load.

Physical basis
--------------
Rubber-like pads obey Amontons' law poorly. Their friction is mostly adhesive, so the
friction force scales with the true contact area, and for a Hertzian elastomer contact the
area grows as ``N**(2/3)``: ``F = mu N`` with ``mu ∝ N**(-1/3)`` (Schallamach 1952, "The load
dependence of rubber friction", Proc. Phys. Soc. B 65:657). Measurements on skin and
silicone fingertips fit ``F = k N**n`` with ``n`` between about 2/3 and 1, i.e.
``mu ∝ N**(n - 1)`` with an exponent between about 0 and 1/3 (review: Derler and Gerhardt
2012, "Tribology of skin", Tribology Letters 45:1-27; Adams, Briscoe and Johnson 2007,
"Friction and lubrication of human skin", Tribology Letters 26:239-253). The rig uses

    mu(N) = mu0 * (max(N, min_load) / reference_load) ** (-gamma)

per fingertip pad, with ``N`` the pad's elastic normal load this step and ``mu0`` the
local coefficient (``friction_map`` or the object's nominal) measured at ``reference_load``;
``gamma ~ U(exponent_min, exponent_max)`` is drawn per episode (pads differ, wear, are
clean or dusty). ``min_load`` stops the coefficient rising without bound at grazing
contact (the power law is fitted above ~0.1 N). The table contact keeps ``mu0``.
A MuJoCo pair has one constant coefficient, whatever the grip force.

Stability: the coefficient is evaluated from this step's elastic load (before the
semi-implicit solve) and enters the solve as a constant, like ``friction_map``'s, so the
scheme of ``surrogate.rig.physics`` is unchanged.

When disabled: ``mu = mu0`` at every load.
"""

from __future__ import annotations

import numpy as np

NAME = "load_dependent_friction"
DOC = "pad friction falls with load as a power law mu0 (N/N0)^-gamma (Hertzian elastomer); off: constant mu"
PARAMS = {
    "exponent_min": {"kind": "float", "default": 0.1, "range": (0.0, 0.4), "unit": "1",
                     "doc": "lowest gamma of mu ∝ N^-gamma (drawn per episode; 1/3: Hertz, Schallamach 1952)"},
    "exponent_max": {"kind": "float", "default": 0.3, "range": (0.0, 0.4), "unit": "1",
                     "doc": "highest gamma"},
    "reference_load": {"kind": "float", "default": 1.0, "range": (0.1, 10.0), "unit": "N",
                       "doc": "load at which the local coefficient mu0 holds"},
    "min_load": {"kind": "float", "default": 0.1, "range": (0.01, 1.0), "unit": "N",
                 "doc": "below this load the coefficient stops rising"},
}


def draw(params: dict, rng: np.random.Generator) -> dict:
    """The episode's hidden value: {"exponent": gamma}."""
    return {"exponent": float(rng.uniform(params["exponent_min"], params["exponent_max"]))}


def friction_scale(load, *, exponent: float, reference_load: float, min_load: float) -> np.ndarray:
    """[n] factor ``mu(N) / mu0`` at normal loads ``load`` [n] N."""
    n = np.maximum(np.asarray(load, dtype=float), min_load)
    return (n / reference_load) ** (-exponent)
