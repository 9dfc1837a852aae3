"""Presliding (bristle, LuGre) friction: a sticking pad creeps elastically before it slips.

Physical basis
--------------
Before gross slip a soft pad deforms in shear and its contact slips partially from the
edge inward, so a tangential load below breakaway moves the object by a fraction of a
millimetre to a millimetre relative to the finger, springs back when unloaded, and the
stick-to-slip transition is gradual (fingertips: André, Lefèvre and Thonnard 2009,
"A continuous measure of fingertip friction during precision grip", J. Neurosci. Methods
179:224-229; Delhaye, Lefèvre and Thonnard 2014, "Dynamics of fingertip contact during the
onset of tangential slip", J. R. Soc. Interface 11:20140698). The LuGre model (Canudas de
Wit, Olsson, Åström and Lischinsky 1995, "A new model for control of systems with
friction", IEEE Trans. Automatic Control 40(3):419-425) captures this with a bristle
deflection ``z`` per contact:

    dz/dt = v - sigma0 |v| z / g(v),   f = -(sigma0 z + sigma1 dz/dt)

with ``g(v) = mu(v) N`` the sliding friction (``stribeck_friction``, ``friction_map``,
``load_dependent_friction``). The rig sets ``sigma0 = g / z_b``: ``z_b`` is the presliding
displacement at breakaway (drawn per episode, ``breakaway_min .. breakaway_max``:
0.2-1 mm, the partial-slip range measured on finger pads), so ``dz/dt = v - |v| z / z_b``
and a quasi-static load ``F < g`` moves the pad by ``x = -z_b ln(1 - F / g)`` (then it
sticks), ``F >= g`` slides; ``sigma1 = g * damping_time / z_b``. One bristle per pad,
in the pad's tangent plane (stored in the pad frame, so it turns with the finger), on the
slip of the patch centre. MuJoCo's contact sticks with a soft constraint (solref) whose
tangential compliance does not depend on the load or show the ``ln`` presliding curve.

Stability: per step the bristle is advanced by backward Euler in the end-of-step
velocity ``v'`` with the ``|v|`` factor at this step's velocity,
``z' = alpha (z + dt v')``, ``alpha = 1 / (1 + dt |v| / z_b)``, so the force is affine in
``v'``: ``f = c z - K v'`` with ``K = alpha (sigma0 dt + sigma1)`` and
``c = -(sigma0 alpha + sigma1 (alpha - 1) / dt)``. That enters the semi-implicit
contact solve of ``surrogate.rig.physics`` as a damping and a constant force, like the
backward-Euler pad spring: stable for any stiffness at the rig's step (``0 < alpha <= 1``,
``|z'| <= z_b`` is kept by clipping).

When disabled: the regularized Coulomb law (creep at speed ``eps F / g`` under any
tangential load, no bounded presliding).
"""

from __future__ import annotations

import math

import numpy as np

NAME = "presliding_friction"
DOC = "LuGre bristle presliding: a sticking pad creeps up to z_b (0.2-1 mm) before gross slip; off: regularized Coulomb"
PARAMS = {
    "breakaway_min": {"kind": "float", "default": 0.0002, "range": (1.0e-5, 0.005), "unit": "m",
                      "doc": "smallest presliding displacement at breakaway z_b (drawn per episode)"},
    "breakaway_max": {"kind": "float", "default": 0.001, "range": (1.0e-5, 0.005), "unit": "m",
                      "doc": "largest presliding displacement at breakaway z_b"},
    "damping_time": {"kind": "float", "default": 0.002, "range": (0.0, 0.05), "unit": "s",
                     "doc": "bristle damping sigma1 = g * damping_time / z_b"},
}


def draw(params: dict, rng: np.random.Generator) -> dict:
    """The episode's hidden value: {"breakaway_m": z_b}."""
    return {"breakaway_m": float(rng.uniform(params["breakaway_min"], params["breakaway_max"]))}


def bristle_terms(speed, g, *, breakaway_m: float, damping_time: float, dt: float):
    """The bristle's force as an affine function of the end-of-step slip velocity: ``f = c z - K v'``.

    Plain arithmetic: floats (the rig's per-pad loop) or arrays broadcast alike.

    Args:
      speed: this step's slip speed (m/s).  g: sliding friction mu N (N).
    Returns:
      (c N/m: ``f0 = c z`` for the deflection ``z`` (m), K N s/m, alpha (for ``bristle_update``)).
    """
    alpha = 1.0 / (1.0 + dt * speed / breakaway_m)
    sigma0 = g / breakaway_m
    sigma1 = sigma0 * damping_time
    return -(sigma0 * alpha + sigma1 * (alpha - 1.0) / dt), alpha * (sigma0 * dt + sigma1), alpha


def bristle_update(z, v_new, alpha: float, *, breakaway_m: float, dt: float) -> list:
    """The deflection after the step, ``alpha (z + dt v')``, kept within ``z_b`` (3 floats in, a list of 3 out)."""
    z = [alpha * (zi + dt * vi) for zi, vi in zip(z, v_new)]
    norm = math.sqrt(z[0] * z[0] + z[1] * z[1] + z[2] * z[2])
    return [zi * (breakaway_m / norm) for zi in z] if norm > breakaway_m else z
