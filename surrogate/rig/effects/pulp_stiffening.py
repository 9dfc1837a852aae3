"""Fingertip-pulp stiffening: an exponential normal law with a Kelvin-Voigt rate term (rig v3 pads).

Physical basis
--------------
Quasi-static compression of the human fingertip pulp is not a power law: its force grows
exponentially with indentation, ``f = (b / m) (exp(m delta) - 1)``, soft at first touch (initial
stiffness ``b``) and stiffening by ``e`` every ``1 / m`` of further compression (Serina, Mote and
Rempel 1997, "Force response of the fingertip pulp to repeated compression - effects of loading rate,
loading angle and anthropometry", J. Biomech. 30(10):1035-1040; the same elastic function inside a
quasi-linear viscoelastic fingerpad model: Pawluk and Howe 1999, "Dynamic lumped element response of
the human fingerpad", J. Biomech. Eng. 121(2):178-183). Their pulp fits are of order ``b`` a few
tenths of N/mm and ``m`` about 1 per mm; elastomer fingertip pads of robot hands follow the same curve,
stiffer (Shore 20-60 A). The rig's default pad is such an elastomer: ``b = 2 N/mm, m = 2 /mm`` over the
whole 2 x 2 cm face, i.e. 1 N at 0.35 mm, 12 N at 1.3 mm (the Hunt-Crossley pad of rig v1:
0.16 mm and 0.83 mm).

Rate dependence, of its own form: the pulp is stiffer the faster it is loaded (Serina et al. 1997
measured it between loading rates). The rig gives the spring a Kelvin-Voigt dashpot with a constant
retardation time ``zeta``, i.e. a damping proportional to the *tangent stiffness*::

    f = [ fe(delta) + zeta fe'(delta) d(delta)/dt ]_+ ,   fe = (b/m)(exp(m delta) - 1),  fe' = b exp(m delta)

(the Hunt-Crossley law ``k delta^p (1 + c rate)`` of the learned law and of rig v1 damps in
proportion to the *force*; this one damps ``zeta b`` at first touch and grows like the tangent).
The slow part of the pad's viscoelasticity is ``pad_relaxation`` (a standard linear solid on ``fe``).

Per cell of ``compliant_pads``'s lattice the law is the face's divided by ``grid**2`` (``b``
per cell, ``m`` unchanged), so ``stiffness`` is the law of the face pressed flat whatever the grid;
with ``compliant_pads`` off the single stiff point carries the whole face's law.

Linearization (``rig.contact_law``): ``f0 = fe``, normal damping ``zeta fe' + dt fe'`` (the dashpot plus
the spring's backward-Euler term of the semi-implicit solve), so the solve stays implicit in both.

Parameter ranges (config): ``stiffness`` b 100 - 1e5 N/m (0.1 - 100 N/mm), ``stiffening`` m 200 - 1e4 1/m
(0.2 - 10 per mm), ``damping_time`` zeta 0 - 0.05 s.

When disabled: the pads' Hunt-Crossley law of ``compliant_pads`` (rig v1 and v2).
"""

from __future__ import annotations

import numpy as np

NAME = "pulp_stiffening"
DOC = ("pads: exponential pulp law f = (b/m)(exp(m delta) - 1) with a Kelvin-Voigt dashpot (Serina et al. 1997); "
       "off: Hunt-Crossley pads")
PARAMS = {
    "stiffness": {"kind": "float", "default": 2000.0, "range": (100.0, 1.0e5), "unit": "N/m",
                  "doc": "initial stiffness b of the whole face (pulp fits: a few hundred N/m; elastomer: stiffer)"},
    "stiffening": {"kind": "float", "default": 2000.0, "range": (200.0, 1.0e4), "unit": "1/m",
                   "doc": "exponential stiffening rate m: the tangent stiffness grows by e every 1/m of compression"},
    "damping_time": {"kind": "float", "default": 0.005, "range": (0.0, 0.05), "unit": "s",
                     "doc": "Kelvin-Voigt retardation time zeta: damping = zeta x tangent stiffness"},
}


def elastic_force(depth, *, stiffness: float, stiffening: float):
    """[n] N: ``(b / m)(exp(m delta) - 1)`` for penetrations ``depth`` [n] m (0 where ``depth <= 0``)."""
    d = np.maximum(np.asarray(depth, dtype=float), 0.0)
    return stiffness / stiffening * np.expm1(stiffening * d)


def force(depth, rate, *, stiffness: float, stiffening: float, damping_time: float):
    """[n] N: the pad law at penetration ``depth`` [n] m and compression rate ``rate`` [n] m/s, clipped >= 0."""
    d = np.maximum(np.asarray(depth, dtype=float), 0.0)
    tangent = stiffness * np.exp(stiffening * d)
    f = elastic_force(d, stiffness=stiffness, stiffening=stiffening) + damping_time * tangent * np.asarray(rate)
    return np.where(np.asarray(depth) > 0.0, np.maximum(f, 0.0), 0.0)
