"""Quaternion helpers, the one implementation: unit quaternions (w, x, y, z), rotation vectors in rad.

``quat_mul`` and ``quat_to_mat`` take numpy arrays or torch tensors (the differentiable twin and the
training losses use them on tensors); the others are numpy. The rotation angle between two
orientations is ``surrogate.metrics.geodesic_deg`` (the one pose error).

Shapes: [..., 4] quaternions, [..., 3] rotation vectors, [..., 3, 3] rotation matrices.
"""

from __future__ import annotations

import numpy as np


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def _stack(parts, like, axis: int):
    if _is_torch(like):
        import torch

        return torch.stack(parts, axis)
    return np.stack(parts, axis=axis)


def quat_mul(a, b):
    """Hamilton product a (x) b of [..., 4] quaternions (numpy or torch)."""
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return _stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                   aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], a, -1)


def quat_conj(q: np.ndarray) -> np.ndarray:
    """The conjugate (the inverse of a unit quaternion)."""
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def quat_to_mat(q):
    """[..., 3, 3] rotation matrices of unit quaternions (numpy or torch)."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    rows = [[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]]
    return _stack([_stack(r, q, -1) for r in rows], q, -2)


def quat_exp(v: np.ndarray) -> np.ndarray:
    """[..., 3] rotation vectors (rad) -> [..., 4] unit quaternions."""
    angle = np.linalg.norm(v, axis=-1, keepdims=True)
    # sin(a/2)/a -> 1/2 as a -> 0; the Taylor term keeps tiny angles exact.
    k = np.where(angle > 1e-8, np.sin(angle / 2) / np.maximum(angle, 1e-300), 0.5 - angle**2 / 48)
    return np.concatenate([np.cos(angle / 2), v * k], axis=-1)


def quat_log(q: np.ndarray) -> np.ndarray:
    """[..., 4] unit quaternions -> [..., 3] rotation vectors (rad), the shortest (angle in [0, pi])."""
    q = q * np.where(q[..., :1] < 0, -1.0, 1.0)
    s = np.linalg.norm(q[..., 1:], axis=-1, keepdims=True)
    angle = 2 * np.arctan2(s, q[..., :1])
    k = np.where(s > 1e-12, angle / np.maximum(s, 1e-300), 2.0)
    return q[..., 1:] * k


quat_from_rotvec = quat_exp  # the names the rig's recorder uses
rotvec_from_quat = quat_log
