"""The passive contact law: Hunt-Crossley normal force and regularized Coulomb friction (with, optionally, torsional
and rolling friction: ``spin_law``), solved semi-implicitly so that it is stable and dissipative at the simulator's
timestep.

One implementation, used by the learned contact model (torch, ``surrogate.model.contact_law``) inside the
hybrid stepper and by the differentiable twin the model is trained through (``surrogate.sim.twin``); the
capture rig has laws of its own (``surrogate/rig/``) and shares only the solver (``surrogate.semi_implicit``).

Per contact point, with penetration ``delta >= 0``, the relative velocity ``v`` of the object's
material point over the other body's (``v_n = v . n`` > 0 separating, ``v_t`` its tangential part)::

    f_n = [k delta^p (1 - c v_n)]_+                      Hunt-Crossley: a spring on penetration with
                                                         damping that vanishes with it (no force at
                                                         separation, no sticky pull: f_n >= 0)
    F_t = -mu f_n v_t / sqrt(|v_t|^2 + eps^2)            regularized Coulomb: |F_t| < mu f_n, F_t . v_t <= 0

**Semi-implicit step.** The steep friction slope (mu f_n / eps) and the stiff spring are
unstable with explicit forces. The law is therefore linearized around the current state,
``F(v') = f0 n - a v' - b (v'.n) n`` with ``f0 = k delta^p``, ``a = mu f_n / sqrt(|v_t|^2 + eps^2)``
(tangential damping) and ``b = c k delta^p + dt p k delta^(p-1) - a`` (Hunt-Crossley damping plus
the backward-Euler term of the spring), and evaluated at the *end-of-step* velocity ``v'``,
which is solved for together with the body's motion (``point_law`` gives ``f0, a, b``;
``joint_solve.solve_joint`` does the solve, for the stepper's bodies and the twin's free object). The
solved friction can shrink a point's slip but never reverse it within a step, and
``F_t . v_t' = -a |v_t'|^2 <= 0``: friction only dissipates. ``K = a I + b n n^T`` is positive
semi-definite, so the solve is always well posed.

Units: functions here take SI values; the learned model hands them parameters built from
nondimensional ones (``LawPrior``: k in ``F0 / L^p``, c in ``1 / V``, eps in ``V``, with
F0 = m |g|, V = sqrt(|g| L)), so the learned core never sees units.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch


def _where(cond, x, y):
    """``where`` for numpy arrays and torch tensors alike."""
    if isinstance(cond, torch.Tensor):
        return torch.where(cond, x, y)
    return np.where(cond, x, y)


def _exp(x):
    return torch.exp(x) if isinstance(x, torch.Tensor) else np.exp(x)


def friction_coefficient(mu, speed2):
    """The friction coefficient at squared slip speed ``speed2`` (numpy or torch; shapes broadcast).

    ``mu``: [...] a Coulomb coefficient (returned as is), or [..., 3] ``(mu_k, r, v_s)``, a static/kinetic
    (Stribeck) law ``mu_k (1 + (r - 1) exp(-|v_t|^2 / v_s^2))``: ``r mu_k`` at rest (the static coefficient,
    ``r`` = static / kinetic), ``mu_k`` sliding well above ``v_s`` (m/s). Positive for every slip speed, so the
    friction ``-mu f_n v_t / sqrt(|v_t|^2 + eps^2)`` still opposes the slip: the law stays passive for any
    ``r > 0``. The one definition of the coefficient for ``point_law`` and the iterated solves
    (``joint_solve.solve_joint``), so the twin and the hybrid stepper share it.
    """
    if mu is None or np.ndim(mu) < 2:
        return mu
    mk, r, vs = mu[..., 0], mu[..., 1], mu[..., 2]
    return mk * (1.0 + (r - 1.0) * _exp(-speed2 / (vs * vs)))


def point_law(depth, vn, speed, *, k, p, c, mu, eps, dt):
    """The linearized law at contact points (numpy or torch; shapes broadcast).

    Args:
      depth: [n] penetration (m); <= 0 means separated (no force).
      vn: [n] normal relative velocity (m/s, positive separating).
      speed: [n] tangential slip speed |v_t| (m/s).
      k, p, c, mu: stiffness (N/m^p), exponent, Hunt-Crossley damping (s/m), friction coefficient;
        per point or scalars (``mu`` [n, 3]: a static/kinetic law, ``friction_coefficient``).
      eps: slip regularization (m/s).  dt: step (s).
    Returns:
      (f0, a, b, fn) each [n]: elastic normal force, tangential and extra normal damping
      (N s/m) of ``F(v') = f0 n - a v' - b (v'.n) n``, and the normal force at the current
      velocity. All zero where the point is separated or being pulled apart faster than the
      damping allows (``f_n`` would be negative).
    """
    on = depth > 0
    ds = _where(on, depth, depth * 0 + 1.0)  # a safe base: no inf/NaN gradient of delta^(p-1) at 0
    elastic = k * ds ** p * on
    fn = elastic * (1.0 - c * vn)
    active = fn > 0
    fn = fn * active
    f0 = elastic * active
    a = friction_coefficient(mu, speed * speed) * fn / (speed * speed + eps * eps) ** 0.5
    b = (c * elastic + dt * p * k * ds ** (p - 1.0)) * active - a
    return f0, a, b, fn


def spin_law(fn, w_n, w_t2, *, mu_spin, mu_roll, eps_w):
    """The linearized torsional and rolling friction of contacts (numpy or torch; shapes broadcast).

    A contact's patch resists spinning about its normal and rolling about its tangents (MuJoCo's ``condim`` 4 and 6):
    with ``w`` the relative angular velocity of the object over the other body (``w_n = w . n``, ``w_t`` its
    tangential part)::

        T = -mu_spin f_n w_n n / sqrt(w_n^2 + eps_w^2) - mu_roll f_n w_t / sqrt(|w_t|^2 + eps_w^2)

    regularized Coulomb laws whose largest torques are ``mu_spin f_n`` (torsion: ``3 pi / 16 mu a`` for a soft
    finger's Hertzian patch of radius ``a``) and ``mu_roll f_n``. Linearized as the tangential friction is, the torque at the
    end-of-step angular velocity is ``T(w') = -(a_w I + b_w n n^T) w'``, whose eigenvalues ``a_w`` (rolling) and
    ``a_w + b_w`` (torsion) are >= 0: ``T . w' <= 0``, the torques only dissipate, for any coefficients >= 0.

    Args:
      fn: [E] the normal force (N, >= 0; zero at separation: no torque).  w_n: [E] (rad/s).  w_t2: [E] |w_t|^2.
      mu_spin, mu_roll: [E] or scalars, lengths (m): torsional and rolling friction.  eps_w: regularization (rad/s).
    Returns:
      (a_w, b_w) [E] (N m s/rad).
    """
    a_roll = mu_roll * fn / (w_t2 + eps_w * eps_w) ** 0.5
    a_spin = mu_spin * fn / (w_n * w_n + eps_w * eps_w) ** 0.5
    return a_roll, a_spin - a_roll


def patch_law(fn, mu, speed2, w_n, w_t2, *, e, mu_roll, eps, eps_w):
    """Friction and torsion of a contact patch on one elliptic limit, linearized (numpy or torch; shapes broadcast).

    A soft fingertip's patch that carries a tangential load has less left to resist a turn about its normal, and one
    that turns slides more easily: its friction force and torsional moment share one limit surface, close to the
    ellipse ``(|F_t| / mu f_n)^2 + (T_n / (mu f_n e))^2 <= 1`` (Howe & Cutkosky 1996; ``e`` a length, ~0.6 of a
    uniform patch's radius, ``3 pi / 16`` of a Hertzian one's). Regularized as the point law's friction is, with
    ``s = sqrt(|v_t|^2 + e^2 w_n^2 + eps^2)``::

        F_t = -mu f_n v_t / s        T_n = -mu f_n e^2 w_n / s        (and rolling, as ``spin_law``)

    so a turn under no tangential load meets ``mu f_n e``, a grip carrying its object near ``mu f_n`` almost none; with
    ``e = 0`` the point law's friction exactly. Linearized as ``point_law`` and ``spin_law`` are: ``F_t = -a v_t``,
    ``T = -(a_w I + b_w n n^T) w`` with ``a, a_w, a_w + b_w >= 0``: both only dissipate.

    Args:
      fn: [E] normal force (N, >= 0).  mu: [E] (or [E, 3], ``friction_coefficient``).  speed2: [E] |v_t|^2.
      w_n: [E] spin about the normal (rad/s).  w_t2: [E] |w_t|^2.  e: [E] or scalar, the patch's length (m; 0 off).
      mu_roll: [E] or scalar (m).  eps: slip regularization (m/s).  eps_w: angular regularization (rad/s).
    Returns:
      (a, a_w, b_w) [E]: the tangential damping (replaces ``point_law``'s ``a``) and the angular row's terms.
    """
    limit = friction_coefficient(mu, speed2) * fn / (speed2 + e * e * w_n * w_n + eps * eps) ** 0.5
    a_roll = mu_roll * fn / (w_t2 + eps_w * eps_w) ** 0.5
    return limit, a_roll, limit * e * e - a_roll


def spin_slip(w, n):
    """``(w_n [E], |w_t|^2 [E])`` of relative angular velocities ``w`` [E, 3] about unit normals ``n`` [E, 3]."""
    w_n = (w * n).sum(-1)
    w_t = w - w_n[..., None] * n
    return w_n, (w_t * w_t).sum(-1)


UNITS = ("weight", "si")
OPTIONAL_TERMS = ("presliding_stiffness", "torsional_friction", "rolling_friction")  # 0: the term is off


@dataclass
class LawPrior:
    """Global parameters of the law: the constant law a network corrects.

    stiffness: k.  exponent: p.  damping: c.  friction: mu (kinetic).  slip_eps: eps.
    presliding_stiffness: k_z, the tangential presliding spring (``presliding_force``; 0: off, the default):
    F0 / L in ``weight`` units, N / m in ``si``.
    torsional_friction, rolling_friction: mu_spin and mu_roll of ``spin_law``, the largest torque about the normal and
    about the tangents per newton of normal force: lengths, L in ``weight`` units, m in ``si`` (0: off, the default).
    static_friction: r, static / kinetic coefficient; stribeck_speed: v_s, the slip speed over which the
    coefficient goes from r mu at rest to mu (``friction_coefficient``; used by models built with
    ``stribeck=True``; r = 1 is Coulomb, r < 1 friction that strengthens with the slip speed).
    units: ``weight``: k in F0 / L^p, c in 1 / V, eps and v_s in V (F0 = m |g| the object's weight, L its size,
    V = sqrt(|g| L)): the law scales with the object, right for one object on a surface;
    ``si``: k in N / m^p, c in s / m, eps and v_s in m / s: a material's law, the same for every object
    (fingertip pads squeeze light and heavy objects with the same grip force).
    """

    stiffness: float = 300.0
    exponent: float = 1.5
    damping: float = 1.0
    friction: float = 0.3
    slip_eps: float = 1e-3
    static_friction: float = 1.0
    stribeck_speed: float = 1e-2
    presliding_stiffness: float = 0.0
    torsional_friction: float = 0.0
    rolling_friction: float = 0.0
    units: str = "weight"

    def to_json(self) -> dict:
        # the optional terms only when on: the cards of every law without them read as before
        d = {k: float(v) for k, v in asdict(self).items() if k != "units" and not (k in OPTIONAL_TERMS and v == 0.0)}
        d["units"] = self.units
        return d

    @classmethod
    def from_json(cls, d: dict) -> LawPrior:
        known = set(cls.__dataclass_fields__)
        bad = sorted(set(d) - known)
        if bad:
            raise ValueError(f"unknown law prior keys {bad}; known: {sorted(known)}")
        units = d.get("units", "weight")
        if units not in UNITS:
            raise ValueError(f"law prior units must be one of {UNITS}, got {units!r}")
        try:
            out = cls(**{k: float(v) for k, v in d.items() if k != "units"}, units=units)
        except (TypeError, ValueError):
            raise ValueError(f"law prior values must be numbers, got {d!r}") from None
        for name in ("stiffness", "exponent", "damping", "friction", "slip_eps", "static_friction", "stribeck_speed"):
            v = getattr(out, name)
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"law prior {name} must be positive and finite, got {v!r}")
        for name in OPTIONAL_TERMS:
            v = getattr(out, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"law prior {name} must be >= 0 and finite, got {v!r}")
        return out


def contact_velocities(J: np.ndarray, v: np.ndarray, counts: np.ndarray, env: np.ndarray | None = None) -> np.ndarray:
    """[E, 3] ``J_e v_env(e)`` for contacts in consecutive rows per environment (``J`` [E, 3, nv], ``v`` [B, nv],
    ``counts`` [B]): one [3C, nv] product per environment when every environment has C contacts, else one per
    contact (``env`` [E], the environment of each row; derived from ``counts`` when not given)."""
    C = int(counts[0]) if len(counts) else 0
    if C and (counts == C).all():
        B, nv = v.shape
        return (J.reshape(B, 3 * C, nv) @ v[..., None]).reshape(-1, 3)
    env = np.repeat(np.arange(len(counts)), counts) if env is None else env
    return (J @ v[env][..., None])[..., 0]


# (a outer b) [..., 9] @ _LEVI_CIVITA = a x b
_LEVI_CIVITA = np.zeros((3, 3, 3))
_LEVI_CIVITA[0, 1, 2] = _LEVI_CIVITA[1, 2, 0] = _LEVI_CIVITA[2, 0, 1] = 1.0
_LEVI_CIVITA[0, 2, 1] = _LEVI_CIVITA[2, 1, 0] = _LEVI_CIVITA[1, 0, 2] = -1.0
_LEVI_CIVITA = np.ascontiguousarray(_LEVI_CIVITA.transpose(1, 2, 0).reshape(9, 3))


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[..., 3] x [..., 3] -> [..., 3] (numpy, shapes broadcast; ``np.cross`` costs ~30 us a call on the stepper's
    small arrays). Small arrays (a batch of one: a dozen rows) as two numpy calls, the outer product and one
    matmul with the Levi-Civita tensor (each entry still ``a1 b2 - a2 b1`` rounded once: the same bits), ~2x
    faster there; larger ones component-wise, where the matmul's 9-wide products are the slower."""
    if a.size <= 192 and b.size <= 192:
        o = a[..., :, None] * b[..., None, :]
        return o.reshape(*o.shape[:-2], 9) @ _LEVI_CIVITA
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)
