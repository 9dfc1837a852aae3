"""A soft pad's contact points as one patch: where the patch law (``law.patch_law``) acts."""

from __future__ import annotations

import numpy as np


def patch_centres(pos: np.ndarray, depth: np.ndarray, pair: np.ndarray, on: np.ndarray, p: float) -> np.ndarray:
    """[E, 3] contact points with the pushing points (``depth`` > 0) of each ``pair`` [E] (a key per object body and
    other body in an environment) whose ``on`` [E] is set moved to their centre weighted by ``depth^p`` (where the
    law's elastic forces act together); the others unchanged. A soft pad touches a surface in one patch, which MuJoCo
    samples at several points: their friction at the points' spread would resist a turn about the normal as a rigid
    patch does, the patch law's torsion (``law.patch_law``) does so instead."""
    idx = np.flatnonzero(on & (depth > 0))
    if len(idx) < 2:
        return pos
    keys, inv = np.unique(pair[idx], return_inverse=True)
    if len(keys) == len(idx):  # one point per pair: nothing to move
        return pos
    w = depth[idx] ** p
    total = np.bincount(inv, w)
    centre = np.stack([np.bincount(inv, w * pos[idx, i]) for i in range(3)], axis=1) / total[:, None]
    out = pos.copy()
    out[idx] = centre[inv]
    return out
