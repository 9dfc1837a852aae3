"""Stribeck friction: static friction above kinetic, falling with slip speed, plus a viscous term.

Physical basis
--------------
Breaking a resting contact loose takes more force than keeping it sliding
(static > kinetic friction; junction growth at rest), and the transition happens
over a characteristic slip speed (the Stribeck velocity, ~mm/s to cm/s for
elastomer on plastic); at higher speeds hysteresis losses in the elastomer add a
term growing with speed. The rig's friction coefficient at slip speed ``v`` is

    mu(v) = mu_k + (mu_s - mu_k) * exp(-(v / v_s)**2) + mu_v * v,
    mu_s = local coefficient (``friction_map``, or the object's nominal),
    mu_k = kinetic_ratio * mu_s,

and the tangential force at a contact point with normal force ``f_n`` and slip
velocity ``v_t`` is the regularized Coulomb law

    f_t = -mu(|v_t|) * f_n * v_t / sqrt(|v_t|**2 + eps**2)

with ``eps = physics.friction_regularization`` (creep below ``eps``). The
falling branch of mu(v) is a negative damping: it produces stick-slip and makes
slip, once started, run further than with constant friction. MuJoCo's contact
has one constant coefficient per pair (no speed dependence).

When disabled: plain regularized Coulomb, ``mu(v) = mu_s`` (constant).
"""

from __future__ import annotations

import numpy as np

NAME = "stribeck_friction"
DOC = "static > kinetic friction with a Stribeck speed transition and viscous term; off: constant Coulomb"
PARAMS = {
    "kinetic_ratio": {"kind": "float", "default": 0.7, "range": (0.3, 1.0), "unit": "1",
                      "doc": "mu_k / mu_s"},
    "stribeck_velocity": {"kind": "float", "default": 0.01, "range": (1.0e-4, 0.2), "unit": "m/s",
                          "doc": "slip speed v_s of the static-to-kinetic transition"},
    "viscous": {"kind": "float", "default": 0.3, "range": (0.0, 5.0), "unit": "s/m",
                "doc": "mu_v: friction coefficient increase per m/s of slip"},
}


def coefficient(mu_s: np.ndarray, speed: np.ndarray, params: dict | None) -> np.ndarray:
    """[n] friction coefficient at slip ``speed`` [n] m/s for local static coefficients ``mu_s`` [n].

    ``params`` None (effect disabled) returns ``mu_s`` (constant Coulomb). The rig's own law (Stribeck with a viscous
    term), not the learned law's coefficient (``model.law.friction_coefficient``): the rig never imports the model.
    """
    if params is None:
        return np.asarray(mu_s, dtype=float)
    mu_k = params["kinetic_ratio"] * mu_s
    return mu_k + (mu_s - mu_k) * np.exp(-(speed / params["stribeck_velocity"]) ** 2) + params["viscous"] * speed
