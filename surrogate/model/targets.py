"""Training targets from captures: the object's net contact wrench by inverse dynamics.

Why smooth, and how
-------------------
Recorded velocities (where a capture has them) are backward differences of tracked poses:
differencing noisy AprilTag poses twice amplifies the noise by ~1/dt^2 and lags by half a
frame, so one-step targets built from them are mostly noise. Instead the pose
trajectory itself is smoothed with local polynomial least squares (Savitzky-Golay):

* position: for each frame i, fit c(t) ~ sum_k a_k (t - t_i)^k (k <= p) to the valid frames
  of a window of w frames around i (shifted inward at the ends); then c_i = a_0, v_i = a_1,
  a_i = 2 a_2. With uniform timestamps this is exactly ``scipy.signal.savgol_filter``;
  the explicit fit also handles tracking dropouts (``object_pose_valid``) and jitter.
* rotation, in the local tangent space at frame i: phi_ij = log(q_i^-1 q_j) (body-frame
  rotation vectors, continuous for |angle| < pi), then the same fit phi(t) ~ sum_k b_k (t-t_i)^k.
  At t_i phi = 0 and d/dt log = J_r^-1(phi) omega with J_r^-1(0) = I and
  d/dt J_r^-1 = 1/2 [omega]x, so omega_i = b_1 and alpha_i = 2 b_2 exactly (the
  omega x omega term vanishes); the smoothed orientation is q_i exp(b_0).

Default w = 9 frames (61 ms at 148 Hz), p = 3: long enough to average tracker noise of
~1 mm, short enough to keep most of an impact's impulse within one window.

Net contact wrench (Newton-Euler; gravity g is the only non-contact force on a free object)::

    F_c     = m (a - g)                                   (world, N)
    tau_c,b = I_b alpha_b + omega_b x (I_b omega_b)       (body frame, about the COM, N m)
    tau_c   = R tau_c,b                                   (world)

Contact impulse between frames k and k+1 (tosses: impacts are shorter than a frame)::

    J_k = m (v_{k+1} - v_k) - m g (t_{k+1} - t_k)
    H_k = R_{k+1} I_b omega_{k+1} - R_k I_b omega_k        (angular impulse about the COM, world)

Force/torque readings where present (fingertip sensors, ``Episode.wrench`` [T, S, 6] in the
sensor frame) are returned as they are; ``sensor_wrench_world`` rotates them to world axes.
"""

from __future__ import annotations

import numpy as np

from ..quat import quat_conj, quat_exp, quat_log, quat_mul, quat_to_mat

DEFAULT_WINDOW = 9
DEFAULT_ORDER = 3


# ---- smoothing -------------------------------------------------------------------------

def _local_fit(t, y_of, valid, window, order):
    """Per frame i: least-squares polynomial coefficients [T, order+1, D] of y_of(i, idx) vs t - t_i."""
    T = len(t)
    w = min(window, T)
    h = w // 2
    out, ok = None, np.zeros(T, dtype=bool)
    for i in range(T):
        s = min(max(i - h, 0), T - w)
        idx = np.arange(s, s + w)
        idx = idx[valid[idx]]
        if len(idx) < order + 2 or not valid[i]:
            continue
        y = y_of(i, idx)
        A = np.vander(t[idx] - t[i], order + 1, increasing=True)
        coef, *_ = np.linalg.lstsq(A, y, rcond=None)
        if out is None:
            out = np.zeros((T, order + 1, y.shape[1]))
        out[i] = coef
        ok[i] = True
    if out is None:
        out = np.zeros((T, order + 1, 3))
    return out, ok


def smooth_pose(t, pose, valid=None, *, window: int = DEFAULT_WINDOW, order: int = DEFAULT_ORDER) -> dict:
    """Savitzky-Golay smoothing of a pose trajectory (see the module docstring).

    Args:
      t: [T] s.  pose: [T, 7] position (m) + quaternion (w, x, y, z).  valid: [T] bool or None.
    Returns:
      dict of pos [T,3], vel [T,3], acc [T,3] (world), quat [T,4], omega_b [T,3], alpha_b [T,3]
      (body frame), omega [T,3] (world), ok [T] bool (False: too few valid frames around).
    """
    t = np.asarray(t, float)
    pose = np.asarray(pose, float)
    valid = np.ones(len(t), bool) if valid is None else np.asarray(valid, bool)
    order = min(order, max(1, min(window, len(t)) - 2))
    q = pose[:, 3:7] / np.linalg.norm(pose[:, 3:7], axis=1, keepdims=True)
    # make the quaternion sequence continuous (q and -q are the same rotation)
    for i in range(1, len(q)):
        if np.dot(q[i], q[i - 1]) < 0:
            q[i] = -q[i]
    cp, okp = _local_fit(t, lambda i, idx: pose[idx, :3], valid, window, order)
    cr, okr = _local_fit(t, lambda i, idx: quat_log(quat_mul(quat_conj(q[i])[None], q[idx])), valid, window, order)
    pad = lambda c, k: c[:, k] if c.shape[1] > k else np.zeros_like(c[:, 0])  # noqa: E731
    quat = quat_mul(q, quat_exp(cr[:, 0]))
    omega_b, alpha_b = pad(cr, 1), 2 * pad(cr, 2)
    R = quat_to_mat(quat)
    return dict(pos=cp[:, 0], vel=pad(cp, 1), acc=2 * pad(cp, 2), quat=quat, omega_b=omega_b, alpha_b=alpha_b,
                omega=np.einsum("tij,tj->ti", R, omega_b), ok=okp & okr)


def contact_wrench(sm: dict, mass: float, inertia_b, gravity) -> np.ndarray:
    """[T, 6] net contact force (N) and torque about the COM (N m), world axes, by inverse dynamics."""
    I = np.asarray(inertia_b, float)
    F = mass * (sm["acc"] - np.asarray(gravity, float))
    w, a = sm["omega_b"], sm["alpha_b"]
    tau_b = a @ I.T + np.cross(w, w @ I.T)
    tau = np.einsum("tij,tj->ti", quat_to_mat(sm["quat"]), tau_b)
    return np.concatenate([F, tau], axis=1)


def contact_impulse(t, sm: dict, mass: float, inertia_b, gravity) -> np.ndarray:
    """[T-1, 6] contact impulse (N s) and angular impulse about the COM (N m s) between frames, world axes."""
    I = np.asarray(inertia_b, float)
    dt = np.diff(np.asarray(t, float))[:, None]
    J = mass * np.diff(sm["vel"], axis=0) - mass * np.asarray(gravity, float) * dt
    L = np.einsum("tij,tj->ti", quat_to_mat(sm["quat"]), sm["omega_b"] @ I.T)
    return np.concatenate([J, np.diff(L, axis=0)], axis=1)


def sensor_wrench_world(wrench, sensor_quat_world) -> np.ndarray:
    """[T, S, 6] sensor-frame F/T readings rotated to world axes, given sensor orientations [T, S, 4]."""
    R = quat_to_mat(np.asarray(sensor_quat_world, float))
    w = np.asarray(wrench, float)
    return np.concatenate([np.einsum("tsij,tsj->tsi", R, w[..., :3]), np.einsum("tsij,tsj->tsi", R, w[..., 3:])], -1)
