"""Domain randomization of a learned contact law: copies of a ``ContactLawGNN`` with its global parameters drawn
around its own.

What practitioners do with MuJoCo's analytic contact (``bench.identify.randomized_ensemble``: friction, solref's
time constant and damping ratio, the object's mass, each in a range around identified values) they can do with the
learned law: draw each member's friction, stiffness and damping around the fitted ones. The draws scale the law's
global (per group) log-parameters, so a network's bounded corrections, which multiply them, ride on top unchanged
(up to the friction's cap ``mu_max``): every member keeps the law's structure (passive, zero force at separation) and
only its operating point moves.

Ranges (multiplicative, the member's value over the law's; log-uniform for ``friction`` and ``stiffness``, uniform
for ``damping``, as ``randomized_ensemble`` draws its counterparts):

- ``friction``: the Coulomb (kinetic) coefficient of every group, the pads' and the table's, together (a static /
  kinetic law keeps its ratio, so its static coefficient moves with it), and the torsion it limits: the patch law's
  torque is ``mu f_n e`` at most, so it follows by itself; the point law's torsional length ``mu_spin``
  (``(3 pi / 16) mu a`` for a soft finger) is scaled with it; rolling resistance, which is not friction, is not;
- ``stiffness``: the normal law's k, every group;
- ``damping``: the Hunt-Crossley damping c (s / m; it sets the restitution, ``e ~ 1 - 2/3 c v``, whatever k is).
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch

RANGES = {"friction": (0.7, 1.3), "stiffness": (0.25, 4.0), "damping": (0.7, 1.3)}
LOG_UNIFORM = ("friction", "stiffness")


def law_ranges(ranges: dict | None = None) -> dict:
    """``RANGES`` updated with ``ranges`` ({name: (lo, hi)}), checked: known names, 0 < lo <= hi, finite."""
    out = dict(RANGES)
    for k, v in (ranges or {}).items():
        if k not in RANGES:
            raise ValueError(f"unknown law randomization range {k!r}: expected one of {sorted(RANGES)}")
        lo, hi = (float(x) for x in v)
        if not (0.0 < lo <= hi and math.isfinite(hi)):
            raise ValueError(f"law randomization range {k!r} must be 0 < lo <= hi, finite: got {list(v)}")
        out[k] = (lo, hi)
    return out


def draw_scales(rng: np.random.Generator, ranges: dict | None = None) -> dict:
    """{friction, stiffness, damping}: one member's scales, drawn from ``law_ranges(ranges)``."""
    r = law_ranges(ranges)
    return {k: float(np.exp(rng.uniform(math.log(lo), math.log(hi)))) if k in LOG_UNIFORM else float(rng.uniform(lo, hi))
            for k, (lo, hi) in r.items()}


def scaled_law(model, scales: dict):
    """A copy of ``model`` (a ``ContactLawGNN``, in eval mode) whose global friction, stiffness and damping are
    ``scales`` x its own (``{friction, stiffness, damping}``, each optional; every group alike). ``model`` is not
    changed."""
    out = copy.deepcopy(model).eval()
    with torch.no_grad():
        for name, param in (("friction", out.log_friction), ("stiffness", out.log_stiffness),
                            ("damping", out.log_damping)):
            s = float(scales.get(name, 1.0))
            if not (s > 0 and math.isfinite(s)):
                raise ValueError(f"scale {name!r} must be a positive number, got {s!r}")
            param += math.log(s)
        if out.spin and not out.ellipse:  # the point law's torsion is a friction: (3 pi / 16) mu a
            out.log_spin[0] += math.log(float(scales.get("friction", 1.0)))
    return out


def randomized_laws(model, *, n: int, seed: int = 0, ranges: dict | None = None) -> list[tuple[object, dict]]:
    """``n`` members ``(law, scales)``: copies of ``model`` with scales drawn by ``draw_scales`` from a generator
    seeded with ``seed`` (the same seed, the same members)."""
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    rng = np.random.default_rng(int(seed))
    out = []
    for _ in range(int(n)):
        s = draw_scales(rng, ranges)
        out.append((scaled_law(model, s), s))
    return out
