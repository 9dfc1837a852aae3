"""Compliant fingertip pads: a distributed contact patch instead of a rigid point.

Physical basis
--------------
Real fingertip pads are a few millimetres of elastomer (silicone, urethane,
Shore 20-60 A). Under a grasp they deform into a contact *patch*: the pressure
is spread over the pad face, the patch grows with load, and its centre of
pressure (the effective contact point) moves by millimetres when the load or
the object's tilt changes; a patch also resists twisting (distributed friction)
and rocking. A rigid point contact (MuJoCo's analytic model with any solref /
solimp) has none of that.

The rig models the pad as an elastic foundation (Winkler bed of independent
springs along the pad normal) sampled on a ``grid x grid`` lattice of cells over
the 2 cm x 2 cm pad face. For every cell centre ``x`` on the undeformed face the
penetration into the object is the distance, along the pad normal, from ``x``
back to the object surface; it is computed from the object's convex pieces
(each a set of face planes ``n_i . x <= b_i``; ``x`` is inside a piece when
``max_i(n_i . x - b_i) < 0``, the union of pieces takes the deepest; a cell's
compression saturates at the 5 mm pad thickness). Each cell pushes along the pad
normal with the nonlinear Hunt-Crossley law

    f = k_cell * delta**p * (1 + c * d(delta)/dt),   f >= 0,
    k_cell = stiffness / grid**2

so ``stiffness`` is the force law of the whole face pressed flat
(``F = stiffness * delta**p``), independent of the grid resolution.
``p = 1.5`` is the Hertzian exponent of a soft layer; ``c`` (s/m) is Hunt and
Crossley's damping (c ~ 3 (1 - e) / (2 v) for restitution ``e`` at impact speed
``v``: rubber e ~ 0.5 at 0.1 m/s gives c ~ 7).

Defaults: 10 N pressed flat compresses the pad ~0.7 mm
(``5e5 * 0.0007**1.5 = 9.3 N``), a line or corner contact several mm, which is
what 2-3 mm thick silicone pads do.

When disabled
-------------
A single stiff point contact at the deepest point of the pad face (a smooth
arg-max over the same lattice, so ties on a flat face give their centroid), with
the rig's own law ``f = point_stiffness * delta * (1 + point_damping * rate)``
(``physics`` section). No patch, no torsional friction, no shift of the contact
point under load.
"""

from __future__ import annotations

import numpy as np

NAME = "compliant_pads"
DOC = "fingertip pads as elastic contact patches (grid of Hunt-Crossley springs); off: one stiff point"
PARAMS = {
    "grid": {"kind": "int", "default": 6, "range": (3, 9), "unit": "cells per side",
             "doc": "lattice resolution over the 2 x 2 cm pad face"},
    "stiffness": {"kind": "float", "default": 5.0e5, "range": (1.0e4, 1.0e7), "unit": "N/m^p",
                  "doc": "whole-face force law F = stiffness * delta^p when pressed flat"},
    "exponent": {"kind": "float", "default": 1.5, "range": (1.0, 2.0), "unit": "1",
                 "doc": "Hunt-Crossley exponent p (1.5: Hertzian soft layer)"},
    "damping": {"kind": "float", "default": 5.0, "range": (0.0, 50.0), "unit": "s/m",
                "doc": "Hunt-Crossley damping c"},
}

# Width (m) of the smooth arg-max that picks the deepest point of the rigid pad.
_DEEPEST_SOFTNESS = 1.0e-4


def pad_grid(half_extents, grid: int, face_sign: float) -> np.ndarray:
    """[grid*grid, 3] cell centres on the pad face (pad geom frame, m).

    The pad is a box with half-sizes ``half_extents`` (x = thickness); the face
    touching objects is at ``x = face_sign * half_x``.
    """
    hx, hy, hz = (float(v) for v in half_extents)
    u = (np.arange(grid) + 0.5) / grid * 2.0 - 1.0
    yy, zz = np.meshgrid(u * hy, u * hz, indexing="ij")
    return np.stack([np.full(yy.size, face_sign * hx), yy.ravel(), zz.ravel()], axis=1)


def hunt_crossley(depth: np.ndarray, rate: np.ndarray, *, stiffness: float, exponent: float,
                  damping: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hunt-Crossley normal force per point.

    Args:
      depth: [n] m penetration (>= 0 where in contact).
      rate: [n] m/s d(depth)/dt.
    Returns:
      (force [n] N clipped >= 0, elastic [n] N = k delta^p, tangent [n] N/m = d(elastic)/d(delta)).
    """
    d = np.maximum(depth, 0.0)
    elastic = stiffness * d ** exponent
    tangent = exponent * stiffness * d ** (exponent - 1.0) if exponent != 1.0 else np.full_like(d, stiffness)
    force = np.maximum(elastic * (1.0 + damping * rate), 0.0)
    return force, elastic, tangent


def deepest_point_weights(depth: np.ndarray) -> np.ndarray:
    """[n] weights (sum 1) of a smooth arg-max of ``depth``: the rigid pad's single contact point."""
    w = np.exp((depth - depth.max()) / _DEEPEST_SOFTNESS)
    return w / w.sum()


def patch_forces(points_obj: np.ndarray, normal_obj: np.ndarray, planes, params: dict | None,
                 *, point_stiffness: float = 5.0e4) -> dict:
    """Static pad law (no motion): per-cell forces of a pad pressed into an object.

    A plain-numpy evaluation used by tests and docs/rig.md: the simulation uses the
    same functions inside ``surrogate.rig.physics`` with velocities.

    Args:
      points_obj: [n, 3] pad cell centres in the object frame (m).
      normal_obj: [3] unit pad normal (from the pad into the object), object frame.
      planes: list of (normals [F, 3], offsets [F]) per convex piece (object frame).
      params: the effect's parameters, or None for the disabled (rigid point) law.
    Returns:
      {"force": [n] N, "depth": [n] m, "centre": [3] force-weighted centroid (object frame),
       "total": N}.
    """
    from surrogate.rig.geometry import penetration_along

    depth = penetration_along(points_obj, normal_obj, planes)
    if params is None:
        force = np.zeros_like(depth)
        if (depth > 0).any():
            w = deepest_point_weights(depth)
            force = w * point_stiffness * depth.max()
    else:
        k = params["stiffness"] / params["grid"] ** 2
        force, _, _ = hunt_crossley(depth, np.zeros_like(depth), stiffness=k, exponent=params["exponent"],
                                    damping=params["damping"])
    total = float(force.sum())
    centre = (force[:, None] * points_obj).sum(0) / total if total > 0 else np.full(3, np.nan)
    return {"force": force, "depth": depth, "centre": centre, "total": total}
