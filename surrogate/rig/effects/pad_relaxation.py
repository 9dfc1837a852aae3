"""Viscoelastic pad relaxation: under a constant squeeze the pad's force decays, so grips loosen.

Physical basis
--------------
Silicone and urethane fingertips, like the human finger pad, are viscoelastic: held at a
constant indentation their force relaxes by a few tens of percent over tenths of a second
to seconds (stress-relaxation tests of soft fingertips fitted with Fung's quasi-linear
viscoelastic model: Tiezzi and Kao 2007, "Modeling of viscoelastic contacts and evolution
of limit surface for robotic contact interface", IEEE Trans. Robotics 23(2):206-217; the
human finger pad: Pawluk and Howe 1999, "Dynamic lumped element response of the human
fingerpad", J. Biomech. Eng. 121(2):178-183). The rig uses the standard linear solid
(one Prony term) on the pad's elastic force ``Fe`` (the Hunt-Crossley spring of
``compliant_pads`` or the stiff point):

    F = Fe - q,   dq/dt = (g1 * Fe - q) / tau

so a step squeeze gives ``F(t) = Fe * (1 - g1 * (1 - exp(-t / tau)))``: the instantaneous
force ``Fe``, relaxing to ``(1 - g1) Fe``. ``g1 ~ U(fraction_min, fraction_max)`` and
``tau ~ U(time_min, time_max)`` (log-uniform) are drawn per episode. The relaxed part
``q`` is spread over the pad's cells in proportion to their force (each cell's spring is
scaled by ``1 - q / Fe``, clipped to [0, 1]). A force-limited servo answers a softer pad
by closing further; a stiff or position-held finger loosens, and a pad that was pressed
harder a moment ago pushes less than the same indentation reached fresh. MuJoCo's
solref/solimp contact has no memory.

Stability: ``q`` is advanced once per physics step after the solve by the exact
exponential update for a constant input over the step,
``q <- q + (1 - exp(-dt / tau)) (g1 Fe - q)``, which is unconditionally stable (the
factor lies in (0, 1) for any step) and exact for a held squeeze; within a step ``q`` is
a constant of the semi-implicit solve.

When disabled: ``F = Fe`` (elastic, no memory).
"""

from __future__ import annotations

import math

import numpy as np

NAME = "pad_relaxation"
DOC = "viscoelastic pads (standard linear solid): a held squeeze relaxes by g1 with time constant tau; off: elastic"
PARAMS = {
    "fraction_min": {"kind": "float", "default": 0.15, "range": (0.0, 0.9), "unit": "1",
                     "doc": "smallest relaxed fraction g1 of the force (drawn per episode)"},
    "fraction_max": {"kind": "float", "default": 0.35, "range": (0.0, 0.9), "unit": "1",
                     "doc": "largest relaxed fraction g1"},
    "time_min": {"kind": "float", "default": 0.3, "range": (0.01, 30.0), "unit": "s",
                 "doc": "shortest relaxation time constant tau (log-uniform)"},
    "time_max": {"kind": "float", "default": 2.0, "range": (0.01, 30.0), "unit": "s",
                 "doc": "longest relaxation time constant tau"},
}


def draw(params: dict, rng: np.random.Generator) -> dict:
    """The episode's hidden values: {"fraction": g1, "time_s": tau}."""
    g1 = float(rng.uniform(params["fraction_min"], params["fraction_max"]))
    tau = float(np.exp(rng.uniform(np.log(params["time_min"]), np.log(params["time_max"]))))
    return {"fraction": g1, "time_s": tau}


def relax_step(q, elastic, *, fraction: float, time_s: float, dt: float) -> np.ndarray:
    """The relaxed force ``q`` (N) after one step of ``dt`` s with elastic force ``elastic`` (N) held over it."""
    k = 1.0 - math.exp(-dt / time_s)
    q = np.asarray(q, dtype=float)
    return q + k * (fraction * np.asarray(elastic, dtype=float) - q)


def stiffness_scale(q, elastic) -> np.ndarray:
    """Factor ``F / Fe = 1 - q / Fe`` in [0, 1] (1 where the pad carries no elastic force)."""
    elastic = np.asarray(elastic, dtype=float)
    r = np.maximum(1.0 - np.asarray(q, dtype=float) / np.maximum(elastic, 1e-300), 0.0)
    return np.where(elastic > 0.0, np.minimum(r, 1.0), 1.0)
