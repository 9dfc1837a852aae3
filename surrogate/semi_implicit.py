"""The semi-implicit contact solve: a numerical solver shared by the capture rig and the learned law.

No constitutive law lives here: the caller linearizes its own law at this step's state into a
damping ``K`` and elastic forces ``w0`` (the rig: ``rig.contact_law``; the learned model:
``model.law.point_law``), and this module returns the forces that law gives at the end-of-step
velocity. Sharing the linear algebra does not share the physics: the rig's contact laws are its own
(``surrogate/rig/``, which never imports ``surrogate.model``; ``tests/test_rig_independence.py``).
"""

from __future__ import annotations

import numpy as np


def semi_implicit_solve(K, W, w0, xi_free, dt):
    """Contact forces at the end-of-step velocity (numpy; [..., n] / [..., n, n], batched over leading axes):
    ``F`` solving
    ``(I + dt K W) F = w0 - K xi_free``.

    ``K`` [n, n]: block-diagonal damping of the linearized law (per point ``a I + b n n^T``, or a
    patch's 6x6 sum); ``W`` [n, n]: the contacts' mobility ``J M^-1 J^T``; ``w0`` [n]: the elastic
    forces ``f0 n``; ``xi_free`` [n]: the contact velocities at the end of the step without contact
    forces. Used by the capture rig (patch wrenches) and by the hybrid stepper (point forces).
    """
    A = dt * K @ W
    n = A.shape[-1]
    A.reshape(*A.shape[:-2], n * n)[..., :: n + 1] += 1.0
    rhs = w0 - (K @ xi_free[..., None])[..., 0]
    return np.linalg.solve(A, rhs[..., None])[..., 0]
