"""The one first-state estimate of a recorded free-object episode, used by every model and suite.

Recorded velocities are backward differences of noisy tracked poses; they are never used.
Training windows, validation rollouts and every benchmark start from ``initial_free_state``
(the benchmark's protocol) so that differences come from the contact model only.

Training windows that start later in an episode start from ``smooth_pose``: the pose trajectory smoothed
with local polynomial least squares (Savitzky-Golay). Differencing noisy tracked poses amplifies the noise
by ~1/dt per derivative and lags by half a frame; instead, for each frame i

* position: fit c(t) ~ sum_k a_k (t - t_i)^k (k <= p) to the valid frames of a window of w frames around i
  (shifted inward at the ends); then c_i = a_0, v_i = a_1, a_i = 2 a_2 (with uniform timestamps exactly
  ``scipy.signal.savgol_filter``; the explicit fit also handles tracking dropouts and jitter);
* rotation, in the local tangent space at frame i: phi_ij = log(q_i^-1 q_j) (body-frame rotation vectors),
  the same fit phi(t) ~ sum_k b_k (t - t_i)^k; at t_i, omega_i = b_1 and alpha_i = 2 b_2 exactly, and the
  smoothed orientation is q_i exp(b_0).

Default w = 9 frames (61 ms at 148 Hz), p = 3: long enough to average tracker noise of ~1 mm, short enough
to keep most of an impact's impulse within one window.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation

from .quat import quat_conj, quat_exp, quat_log, quat_mul, quat_to_mat


def initial_free_state(ep, *, k: int = 5, gravity=None) -> tuple[np.ndarray, np.ndarray]:
    """Position, orientation and velocity at the first frame, estimated from the first ``k`` poses.

    Recorded velocities are backward differences of noisy tracked poses; instead the
    position is fitted with a ballistic parabola (gravity known) and the rotation with a
    constant body rate over the first ``k`` frames (the object is in free flight there in
    tosses; for objects at rest the fit returns ~zero velocity).

    Returns:
      qpos [7] (m, w x y z quaternion) and qvel [6] (linear m/s world, angular rad/s body),
      MuJoCo's free-joint layout.
    """
    k = int(min(k, ep.num_frames))
    t = ep.timestamps[:k] - ep.timestamps[0]
    p = ep.object_pose[:k, :3]
    g = np.asarray(ep.environment.gravity if gravity is None else gravity, dtype=float)
    # p(t) = p0 + v0 t + g t^2 / 2  ->  least squares for p0, v0 per axis.
    A = np.stack([np.ones_like(t), t], axis=1)
    coef, *_ = np.linalg.lstsq(A, p - 0.5 * np.outer(t**2, g), rcond=None)
    p0, v0 = coef[0], coef[1]
    R = Rotation.from_quat(ep.object_pose[:k, 3:7], scalar_first=True)
    rel = (R[0].inv() * R).as_rotvec()  # body-frame rotation vectors relative to frame 0
    # rel(t) ~ r0 + w t: fitting an intercept absorbs the noise of frame 0 itself.
    coef_r, *_ = np.linalg.lstsq(A, rel, rcond=None)
    q0 = (R[0] * Rotation.from_rotvec(coef_r[0])).as_quat(scalar_first=True)
    w_body = coef_r[1]
    return np.concatenate([p0, q0]), np.concatenate([v0, w_body])


FREE_FLIGHT_WINDOW = 7  # frames of the acceleration fit that tells free flight from a hand still acting
FREE_FLIGHT_TOL = 6.0  # m/s^2: a fitted acceleration farther than this from gravity is not free flight
FREE_FLIGHT_MAX_START = 20  # frames searched for the start of free flight


def free_flight_start(ep, *, window: int = FREE_FLIGHT_WINDOW, tol: float = FREE_FLIGHT_TOL,
                      max_start: int = FREE_FLIGHT_MAX_START, gravity=None) -> dict:
    """The first frame from which a toss is in free flight, and how far its first frames are from it.

    A toss that does not start in free flight (the first frames still accelerate, as if held, or the tracker
    settles) is detected by fitting a parabola (unconstrained acceleration) to the positions of each window of
    ``window`` frames from frame s = 0, 1, ...: the first s whose fitted acceleration is within ``tol`` m/s^2 of
    gravity starts free flight. Tracked poses of ~1 mm noise give ~1-4 m/s^2 on clean starts.

    Returns:
      {"start": frame (0 for a clean start; 0 too when no window within ``max_start`` frames is free flight),
       "accel_dev0": |a - g| of the first window (m/s^2), "free": whether a free-flight window was found}.
    """
    g = np.asarray(ep.environment.gravity if gravity is None else gravity, dtype=float)
    t, p = ep.timestamps, ep.object_pose[:, :3]
    dev = []
    for s in range(0, max(1, min(max_start, ep.num_frames - window) + 1)):
        idx = np.arange(s, min(s + window, ep.num_frames))
        if len(idx) < 4:
            break
        A = np.vander(t[idx] - t[idx[0]], 3, increasing=True)
        c, *_ = np.linalg.lstsq(A, p[idx], rcond=None)
        dev.append(float(np.linalg.norm(2.0 * c[2] - g)))
        if dev[-1] <= tol:
            return {"start": s, "accel_dev0": dev[0], "free": True}
    return {"start": 0, "accel_dev0": dev[0] if dev else float("nan"), "free": False}


def initial_state(ep, *, k: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """The first-state estimate of any object, in the rollout API's layout (``sim.rollout.object_states``): qpos
    [7 + J], qvel [6 + J], the base link's (``initial_free_state``) then, for an articulated object
    (``object_joint_pos``), its J joints' (``initial_joint_state``); J = 0 for a rigid object."""
    q, v = initial_free_state(ep, k=k)
    if getattr(ep, "object_joint_pos", None) is None:
        return q, v
    jq, jv = initial_joint_state(ep, k=k)
    return np.concatenate([q, jq]), np.concatenate([v, jv])


def initial_joint_state(ep, *, k: int = 5, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """An articulated object's joint coordinates and rates at frame ``start``: a line fitted to the (unwrapped)
    recorded joint positions of frames ``start .. start + k - 1`` (recorded rates are differences: not used).

    Returns:
      q [J] (rad or m, wrapped as recorded near frame ``start``), qd [J].
    """
    k = int(min(k, ep.num_frames - start))
    t = ep.timestamps[start:start + k] - ep.timestamps[start]
    q = np.unwrap(np.asarray(ep.object_joint_pos[start:start + k], float), axis=0)
    A = np.stack([np.ones_like(t), t], axis=1)
    coef, *_ = np.linalg.lstsq(A, q, rcond=None)
    return coef[0], coef[1]


DEFAULT_WINDOW = 9
DEFAULT_ORDER = 3


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
