"""A fingertip pad's contacts as one soft patch: MuJoCo's points drawn in towards their centre.

``GraphBuilder.build(..., patch_radius=r)`` (the stepper's and the twin's graphs) moves the points with
``contract_patches``; a contact model says its radius as ``patch_radius`` (``ContactLawGNN(patch_radius=...)``).
"""

from __future__ import annotations

import numpy as np


def patch_radius(contact_model) -> float | None:
    """The ``patch_radius`` (m) a contact model's graphs are built with (``build``); None for models without one."""
    return getattr(contact_model, "patch_radius", None)


def contract_patches(pos: np.ndarray, normal: np.ndarray, dist: np.ndarray, group: np.ndarray, radius: float) -> np.ndarray:
    """[C, 3] contact positions with the points of each patch drawn in towards their centre.

    MuJoCo gives a flat face pressed on a pad several points at the corners of the overlap (a 2 cm pad: lever arms of
    ~14 mm about its centre), so a law applied at each point resists the object's twist about the pad normal as a rigid
    face would; a soft fingertip's patch has a radius of a few mm, and twists (Xydas and Kao 1999). Here every point's
    offset from its patch centre, within the plane of its normal, is capped at ``radius`` (m; 0: the patch acts at its
    centre), its depth and normal unchanged. The law then acts at the moved points, for its normal force too: the
    patch's resistance to a twist about the normal *and* to a tilt of the object against the pad both have arms of at
    most ``radius`` (the depth is still MuJoCo's, measured where the point was). The centre is the mean of the patch's
    points weighted by penetration, so a point starting to penetrate shifts it gradually; when none penetrates (all
    within the margin) it is the plain mean.

    Args: ``pos`` [C, 3], ``normal`` [C, 3] unit, ``dist`` [C] (negative: penetration), ``group`` [C] int: the patch of
    each contact (-1: not a patch, left where it is).
    """
    sel = np.flatnonzero(group >= 0)
    if len(sel) == 0:
        return pos
    _, g = np.unique(group[sel], return_inverse=True)
    w = np.maximum(-dist[sel], 0.0)
    total = np.bincount(g, weights=w)
    w = np.where(total[g] > 0, w, 1.0)  # a patch with no penetration: the plain mean
    centre = np.stack([np.bincount(g, weights=w * pos[sel, k]) for k in range(3)], 1) / np.bincount(g, weights=w)[:, None]
    d = pos[sel] - centre[g]
    n = normal[sel]
    d_n = (d * n).sum(1, keepdims=True) * n
    d_t = d - d_n
    r = np.linalg.norm(d_t, axis=1, keepdims=True)
    out = pos.copy()
    out[sel] = centre[g] + d_n + d_t * np.minimum(1.0, radius / np.maximum(r, 1e-300))
    return out
