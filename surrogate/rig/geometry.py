"""The capture rig's own contact geometry: convex pieces as face planes, penetrations along a
direction, the points of an object that can touch the table, small 3-vector helpers, and the
contact patches the rig's law produces (``Patch``).

MuJoCo's detected contacts are not used by the rig (``surrogate.rig.physics``): a pad cell's
penetration is the distance along the pad normal back to the object surface, from the object's
convex pieces as face planes ``n_i . x <= b_i``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import trimesh

from surrogate.objects.asset import ObjectAsset
from surrogate.rig.effects import compliant_pads
from surrogate.scenes.hands import PAD_HALF


def hull_planes(mesh: trimesh.Trimesh) -> tuple[np.ndarray, np.ndarray]:
    """Face planes of a convex piece: (normals [F, 3] unit, outward; offsets [F]) with ``n . x <= b`` inside.

    Coplanar triangles are merged (a box has 6 planes, not 12).
    """
    hull = mesh.convex_hull
    n = np.asarray(hull.face_normals, dtype=float)
    b = np.einsum("ij,ij->i", n, np.asarray(hull.triangles)[:, 0, :])
    key = np.round(np.c_[n, b * 1e3], 6)
    _, idx = np.unique(key, axis=0, return_index=True)
    idx = np.sort(idx)
    return n[idx].copy(), b[idx].copy()


def penetration_along(points: np.ndarray, direction: np.ndarray, planes, *, centre=None,
                      radius: float | None = None) -> np.ndarray:
    """[n] depth of each point inside the object, measured along ``-direction`` (0 outside).

    The depth of a point ``x`` inside convex piece ``{n_i . y <= b_i}`` is the
    distance from ``x`` along ``-direction`` to the piece's boundary:
    ``min over faces with n_i . (-direction) > 0 of (b_i - n_i . x) / (n_i . (-direction))``;
    the union of pieces takes the deepest. ``direction`` is the pad normal (from
    the pad into the object), so this is the compression of a pad cell.

    Args:
      points: [n, 3] object frame (m).
      direction: [3] unit, object frame.
      planes: [(normals [F, 3], offsets [F])] per convex piece.
      centre, radius: optional culling: all points lie within ``radius`` of ``centre``.
    """
    depth = np.zeros(len(points))
    back = -np.asarray(direction, dtype=float)
    for n, b in planes:
        if centre is not None:
            sc = n @ centre - b
            if sc.max() > radius:
                continue  # every point is outside one face of this piece
            keep = sc > -radius
            if not keep.any():
                continue
            n, b = n[keep], b[keep]
        s = points @ n.T - b
        inside = s.max(axis=1) < 0.0
        if not inside.any():
            continue
        proj = n @ back
        ok = proj > 1e-9
        if not ok.any():
            continue
        t = (-s[inside][:, ok] / proj[ok]).min(axis=1)
        d = np.zeros(len(points))
        d[inside] = t
        depth = np.maximum(depth, d)
    return depth


def penetration_batch(points: np.ndarray, directions: np.ndarray, centres: np.ndarray, planes,
                      pad_radius: float, max_depth: float) -> np.ndarray:
    """``penetration_along`` for k pads at once, saturating at ``max_depth``.

    Faces farther than ``pad_radius + max_depth`` from every pad are culled first;
    that is exact for depths below ``max_depth`` (the exit point of a cell lies
    within ``pad_radius + depth`` of its pad's centre), and the depth saturates at
    ``max_depth`` (the rig uses the pad thickness: a pad cannot compress further).

    Args:
      points: [k, c, 3] pad cells (object frame). directions: [k, 3] pad normals (object frame).
      centres: [k, 3] pad face centres; every cell of pad i is within ``pad_radius`` of ``centres[i]``.
      planes: [(normals [F, 3], offsets [F])] per convex piece.
    Returns:
      [k, c] depth along the pad normal (0 outside), at most ``max_depth``.
    """
    radius = pad_radius + max_depth
    k, c, _ = points.shape
    flat = points.reshape(k * c, 3)
    depth = np.zeros((k, c))
    for n, b in planes:
        sc = centres @ n.T - b  # [k, F]
        pad_ok = sc.max(axis=1) <= radius  # else all of that pad's cells are outside this piece
        if not pad_ok.any():
            continue
        if len(b) > 16:  # cull faces farther than the pad radius from every pad
            keep = ((sc > -radius) & pad_ok[:, None]).any(axis=0)
            n, b = n[keep], b[keep]
        s = (flat @ n.T - b).reshape(k, c, len(b))
        inside = (s.max(axis=2) < 0.0) & pad_ok[:, None]
        if not inside.any():
            continue
        proj = -(directions @ n.T)  # [k, F]
        ok = proj > 1e-9
        t = np.where(ok[:, None, :], -s / np.where(ok, proj, 1.0)[:, None, :], np.inf).min(axis=2)
        depth = np.maximum(depth, np.where(inside, np.minimum(t, max_depth), 0.0))
    return depth


def support_points(obj: ObjectAsset, samples_per_piece: int) -> np.ndarray:
    """[n, 3] object-frame points that can touch the table: hull vertices and even surface samples."""
    pts = []
    for i, piece in enumerate(obj.pieces):
        hull = piece.convex_hull
        pts.append(np.asarray(hull.vertices, dtype=float))
        if samples_per_piece > 0:
            s, _ = trimesh.sample.sample_surface_even(hull, samples_per_piece, seed=1234 + i)
            pts.append(np.asarray(s, dtype=float))
    return np.unique(np.round(np.concatenate(pts), 9), axis=0)


def skew3(v) -> np.ndarray:
    """[3] -> [3, 3] cross-product matrix ([v]x u = v x u)."""
    x, y, z = float(v[0]), float(v[1]), float(v[2])
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])

EYE_I = np.arange(3)


def cross3(a, b) -> np.ndarray:
    """a x b for two 3-vectors (np.cross is slow on tiny arrays)."""
    a0, a1, a2 = float(a[0]), float(a[1]), float(a[2])
    b0, b1, b2 = float(b[0]), float(b[1]), float(b[2])
    return np.array([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0])


@dataclass
class Patch:
    """One contact patch of the last step (world frame).

    Attributes:
      role: ``pad`` or ``table``.
      index: pad index in ``hand.pad_geom_names`` (-1 for the table).
      centre: [3] m, the reference point of the patch wrench.
      force, torque: [3] N, N m: wrench on the object about ``centre``.
      points: [n, 3] m object-frame surface points in contact.
      point_forces: [n, 3] N per point on the object (world frame; computed on first access).
    """

    role: str
    index: int
    centre: np.ndarray
    force: np.ndarray
    torque: np.ndarray
    all_points: np.ndarray
    _point_forces: np.ndarray | None = None
    _lazy: tuple | None = None

    def _forces_all(self) -> np.ndarray:
        if self._point_forces is None:
            xi, r, f0, a, b, n, active = self._lazy
            v = xi[:3] + r @ skew3(xi[3:]).T  # end-of-step relative velocity per point
            vn = v @ n
            f = f0[:, None] * n - a[:, None] * v - (b * vn)[:, None] * n
            self._point_forces = f[active]
            self._active = active
        return self._point_forces

    @property
    def point_forces(self) -> np.ndarray:
        return self._forces_all()

    @property
    def points(self) -> np.ndarray:
        self._forces_all()
        return self.all_points[self._active]


def pad_frames(m, d, hand, grid: int) -> list[dict]:
    """Per pad of ``hand`` (a ``HandInfo``) in model ``m`` / data ``d``: geom, body and site ids, the face normal and
    face centre in the pad geom's frame (the side facing the hand's base, so the grip's inward side) and its ``grid``
    x ``grid`` lattice (``compliant_pads.pad_grid``)."""
    base_xy = d.xpos[m.body(hand.base_body).id][:2]
    pads = []
    for gname, site in zip(hand.pad_geom_names, hand.pad_site_names):
        g = m.geom(gname).id
        R = d.geom_xmat[g].reshape(3, 3)
        towards = np.r_[base_xy - d.geom_xpos[g][:2], 0.0]
        sign = 1.0 if R[:, 0] @ towards > 0 else -1.0
        pads.append({
            "geom": g, "body": int(m.geom_bodyid[g]), "site": m.site(site).id,
            "normal": np.array([sign, 0.0, 0.0]),
            "face": np.array([sign * PAD_HALF[0], 0.0, 0.0]),
            "grid": compliant_pads.pad_grid(PAD_HALF, grid, sign),
        })
    return pads
