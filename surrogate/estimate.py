"""The one first-state estimate of a recorded free-object episode, used by every model and suite.

Recorded velocities are backward differences of noisy tracked poses; they are never used.
Training windows, validation rollouts and every benchmark start from ``initial_free_state``
(the benchmark's protocol) so that differences come from the contact model only.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation


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
