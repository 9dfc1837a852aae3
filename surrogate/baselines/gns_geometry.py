"""Rigid-body geometry of the end-to-end peer (``surrogate.baselines.gns``): body points, shape matching,
the vertex history implied by a first-state estimate.

Shapes: B = bodies (batch), V = points per body, T = frames. Rotations are world-from-body
matrices [.., 3, 3]; quaternions (w, x, y, z). Everything here is plain torch / numpy in float64:
shape matching runs every rollout step and its round-off accumulates.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch
from scipy.spatial.transform import Rotation

from ..errors import CaptureError


def box_points(half_extents, grid: int = 2) -> np.ndarray:
    """[V, 3] body-frame points on the surface of a box (m): a ``grid`` x ``grid`` lattice on every face.

    ``grid`` 2 gives the 8 corners; 3 adds the 12 edge midpoints and 6 face centres (26 points).
    The box is centred on the body origin (the centre of mass of a uniform box).
    """
    if int(grid) < 2:
        raise ValueError(f"grid must be >= 2 (2: the corners), got {grid}")
    h = np.asarray(half_extents, dtype=float)
    u = np.linspace(-1.0, 1.0, int(grid))
    lattice = np.stack(np.meshgrid(u, u, u, indexing="ij"), axis=-1).reshape(-1, 3)
    surface = lattice[np.abs(lattice).max(axis=1) > 1.0 - 1e-9]  # drop interior lattice points
    return surface * h


def box_symmetries(body: np.ndarray, tol: float = 1e-9) -> np.ndarray:
    """[S, 3, 3] the proper rotations among signed axis permutations that map the point set ``body`` [V, 3]
    onto itself: the 24 rotations of a cube, 8 of a square prism, 4 of a general box."""
    out = []
    for perm in itertools.permutations(range(3)):
        for signs in itertools.product((1.0, -1.0), repeat=3):
            S = np.zeros((3, 3))
            S[range(3), perm] = signs
            moved = body @ S.T
            if np.linalg.det(S) > 0 and np.abs(moved[:, None] - body[None]).max(-1).min(1).max() < tol:
                out.append(S)
    return np.stack(out)


def episode_body_points(ep, grid: int) -> np.ndarray:
    """[V, 3] body points of an episode's object; only boxes are supported (the peer's nodes are its surface)."""
    geo = ep.object.geometry or {}
    if geo.get("kind") != "box":
        raise CaptureError(f"the end-to-end peer takes box objects; this object's geometry is {geo.get('kind')!r}",
                           episode=ep.episode_id, field="object.geometry.kind")
    return box_points(geo["half_extents"], grid)


def shape_match(x: torch.Tensor, body: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The rigid motion that best maps ``body`` onto ``x`` (Kabsch / Umeyama without scale).

    Args:
      x: [B, V, 3] observed or predicted points (world).
      body: [V, 3] or [B, V, 3] body-frame points.
    Returns:
      R [B, 3, 3] (proper rotation, det +1), p [B, 3] such that x ~ body @ R^T + p in least squares.
    """
    body = body.expand_as(x)
    bc, xc = body.mean(dim=1, keepdim=True), x.mean(dim=1, keepdim=True)
    H = (body - bc).transpose(1, 2) @ (x - xc)  # [B, 3, 3] cross-covariance
    U, _, Vh = torch.linalg.svd(H)
    d = torch.sign(torch.linalg.det(Vh.transpose(1, 2) @ U.transpose(1, 2)))
    D = torch.diag_embed(torch.stack([torch.ones_like(d), torch.ones_like(d), d], dim=-1))
    R = Vh.transpose(1, 2) @ D @ U.transpose(1, 2)  # a reflection (det -1) is never returned
    p = xc[:, 0] - (R @ bc[:, 0, :, None])[..., 0]
    return R, p


def rigid_points(R: torch.Tensor, p: torch.Tensor, body: torch.Tensor) -> torch.Tensor:
    """[B, V, 3] = body points moved by (R [B, 3, 3], p [B, 3])."""
    return body.expand(R.shape[0], -1, -1) @ R.transpose(1, 2) + p[:, None, :]


def pose_points(pose: np.ndarray, body: np.ndarray) -> np.ndarray:
    """[T, V, 3] world points of body points [V, 3] at poses [T, 7] (m; quaternion w, x, y, z)."""
    R = Rotation.from_quat(pose[:, 3:7], scalar_first=True).as_matrix()
    return np.einsum("tij,vj->tvi", R, body) + pose[:, None, :3]


def poses_from_motion(R: np.ndarray, p: np.ndarray) -> np.ndarray:
    """[T, 7] poses (position, quaternion w, x, y, z) from rotations [T, 3, 3] and positions [T, 3]."""
    return np.concatenate([p, Rotation.from_matrix(R).as_quat(scalar_first=True)], axis=1)


def history_from_state(qpos: np.ndarray, qvel: np.ndarray, body: np.ndarray, *, frames: int, dt: float,
                       gravity) -> np.ndarray:
    """[frames + 1, V, 3] points at frames -frames ... 0 implied by a first-state estimate (m).

    The estimate (``surrogate.estimate.initial_free_state``) is a ballistic position fit and a
    constant body-rate rotation fit over the first recorded frames; the history the peer needs
    before frame 0 is that same free motion extrapolated backwards, so the peer starts from exactly
    the information every other model starts from.

    Args:
      qpos [7] (m, quaternion w, x, y, z), qvel [6] (linear m/s world, angular rad/s body).
    """
    t = -dt * np.arange(frames, -1, -1, dtype=float)  # -frames dt ... 0
    g = np.asarray(gravity, dtype=float)
    pos = qpos[None, :3] + np.outer(t, qvel[:3]) + 0.5 * np.outer(t * t, g)
    R = Rotation.from_quat(qpos[3:7], scalar_first=True) * Rotation.from_rotvec(np.outer(t, qvel[3:6]))
    return np.einsum("tij,vj->tvi", R.as_matrix(), body) + pos[:, None, :]
