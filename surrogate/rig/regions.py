"""Contact-region annotations: a Voronoi partition of an object's surface by seed points, and which
regions are touched at each frame."""

from __future__ import annotations

import numpy as np

_SEED_CACHE: dict = {}


def contact_region_seeds(obj, n_regions: int, *, n_samples: int = 4096) -> np.ndarray:
    """[R, 3] seed points (body frame, m) partitioning ``obj``'s surface into R Voronoi regions.

    Farthest-point sampling over ``n_samples`` surface samples, started at the sample
    farthest from the centre of mass; deterministic for an object (fixed sampling seed),
    so every episode of an object shares its regions. Cached per (name, source, R).
    """
    import trimesh

    key = (obj.name, obj.source, int(n_regions), int(n_samples))
    if key not in _SEED_CACHE:
        pts, _ = trimesh.sample.sample_surface(obj.combined_mesh(), n_samples, seed=0)
        pts = np.asarray(pts, dtype=float)
        chosen = [int(np.argmax(np.linalg.norm(pts, axis=1)))]
        dmin = np.linalg.norm(pts - pts[chosen[0]], axis=1)
        for _ in range(1, min(int(n_regions), len(pts))):
            chosen.append(int(np.argmax(dmin)))
            dmin = np.minimum(dmin, np.linalg.norm(pts - pts[chosen[-1]], axis=1))
        _SEED_CACHE[key] = pts[chosen]
    return _SEED_CACHE[key].copy()


def annotate_regions(contact_points: list, seeds: np.ndarray) -> np.ndarray:
    """[T, R] float (0/1): region r is 1 at frame n when a point of ``contact_points[n]`` ([P_n, 3],
    object frame, m) is nearer seed r than any other seed."""
    seeds = np.asarray(seeds, dtype=float)
    out = np.zeros((len(contact_points), len(seeds)), dtype=np.float32)
    for n, pts in enumerate(contact_points):
        pts = np.asarray(pts, dtype=float).reshape(-1, 3)
        if len(pts):
            nearest = np.argmin(np.linalg.norm(pts[:, None, :] - seeds[None], axis=2), axis=1)
            out[n, nearest] = 1.0
    return out
