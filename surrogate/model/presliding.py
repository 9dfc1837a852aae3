"""The law's tangential presliding spring (contact model v3): the elastic tangential displacement of a contact
point before gross slip, as LuGre's bristles at the scale of one contact point, kept passive for any stored state.

One implementation for numpy (the hybrid stepper, ``sim.law_solve``) and torch (the twin, ``model.contact_law``);
the per-contact state it reads and writes is ``model.history.ContactState``. Shapes: E contacts; ``z`` [E, 3] in
world axes (m), ``kz`` [E] (N/m), normals ``n`` [E, 3] unit.
"""

from __future__ import annotations

import numpy as np
import torch

from .law import _where, friction_coefficient


def _sqrt(x):
    return torch.sqrt(x) if isinstance(x, torch.Tensor) else np.sqrt(x)


def _tangential(x, n):
    """[..., 3] the part of ``x`` orthogonal to the unit normals ``n`` [..., 3]."""
    return x - (x * n).sum(-1)[..., None] * n


def _limit(z, kz, force_max):
    """``z`` [E, 3] scaled down (never up) so that the spring force |kz z| <= ``force_max`` [E] (zero where
    ``force_max`` <= 0 or ``kz`` = 0: no state without a force to hold it)."""
    f = kz * _sqrt((z * z).sum(-1) + 1e-300)  # the tiny term: a finite gradient at z = 0, the same value elsewhere
    over = f > force_max
    scale = _where(over, force_max / _where(over, f, f * 0 + 1.0), f * 0 + 1.0)
    scale = _where((force_max > 0) & (kz > 0), scale, scale * 0)
    return z * scale[..., None]


def presliding_start(z, n, kz, mu, fn, speed2, k_last=None):
    """The presliding spring's displacement at the start of a step, made safe for any stored state (numpy or torch).

    The tangential presliding spring (LuGre's bristles at the scale of a contact point: the elastic tangential
    displacement before gross slip) adds ``F_z = -k_z z_end`` with ``z_end = z + dt v_t'`` (backward Euler: in the
    linear system of the step it is the elastic force ``-k_z z`` in ``w0`` and the tangential damping ``dt k_z``
    added to ``a``, ``presliding_force``). The stored ``z`` may be anything (a matched contact's, a network's
    state); before it is used it is (1) projected onto the tangent plane, (2) scaled so that its energy at this
    step's stiffness is at most the stored one, ``k_z |z|^2 <= k_last |z_stored|^2`` (a stiffer spring must not
    turn a stored displacement into more energy), (3) scaled into the friction cone ``|k_z z| <= mu(|v_t|) f_n``,
    so that it is zero at separation (``f_n = 0``). Each step only shrinks ``|z|``: the state cannot inject
    energy.

    Args:
      z: [E, 3] stored displacement (m, world axes).  n: [E, 3] unit normals.  kz: [E] stiffness (N/m).
      mu: [E] friction coefficient (or [E, 3], ``friction_coefficient``).  fn: [E] normal force (``point_law``).
      speed2: [E] squared slip speed.  k_last: [E] the stiffness ``z`` was stored with (None: ``kz``).
    Returns:
      [E, 3] the displacement the step uses.
    """
    zt = _tangential(z, n)
    if k_last is not None:  # the energy 1/2 k |z|^2 is kept, not created, when the stiffness grows
        grow = kz > k_last
        scaled = grow & (k_last > 0)  # a state stored with no stiffness holds no energy: it goes to zero
        ratio = _sqrt(_where(scaled, k_last / _where(scaled, kz, kz * 0 + 1.0), kz * 0 + 1.0))  # safe: no sqrt(0)
        zt = zt * _where(grow & ~scaled, ratio * 0, ratio)[..., None]
    return _limit(zt, kz, friction_coefficient(mu, speed2) * fn)


def presliding_force(z, kz, dt):
    """``(w_t [E, 3], a_z [E])``: the spring's elastic force ``-k_z z`` (into ``w0``) and its backward-Euler
    tangential damping ``dt k_z`` (added to ``a``, subtracted from ``b``: the normal part ``a + b`` is unchanged),
    for ``z`` from ``presliding_start``."""
    return -kz[..., None] * z, dt * kz


def presliding_end(z, u, n, kz, mu, fn_end, dt):
    """[E, 3] the displacement after the step: ``z + dt u_t`` (``u`` [E, 3] the solved end-of-step relative velocity,
    ``u_t`` its tangential part) projected onto the cone ``|k_z z| <= mu(|u_t|) f_n'`` with the solved normal force
    ``fn_end`` [E]: the energy beyond it is released (slip discards it), none is created."""
    ut = _tangential(u, n)
    fn = _where(fn_end > 0, fn_end, fn_end * 0)
    dtc = dt[..., None] if np.ndim(dt) else dt  # per contact [E] (the twin's) or a scalar
    return _limit(z + dtc * ut, kz, friction_coefficient(mu, (ut * ut).sum(-1)) * fn)


def with_presliding(f0, a, b, n, fn, mu, speed2, kz, z, k_last, dt):
    """The linearized law of ``point_law`` with the presliding spring added (numpy or torch): ``(w0 [E, 3], a [E],
    b [E], a_z [E], z [E, 3])``, the elastic force ``f0 n - k_z z``, the damping with the spring's ``a_z = dt k_z``
    (``a + a_z``, ``b - a_z``: the normal damping ``a + b`` unchanged), and the displacement the step uses
    (``presliding_start`` of the stored ``z`` [E, 3] and ``k_last`` [E] or None; ``fn`` [E] from ``point_law``).
    Where ``fn`` = 0 (separated, or pulled apart faster than the damping allows) the spring adds nothing: the force
    stays zero at separation for any state."""
    z = presliding_start(z, n, kz, mu, fn, speed2, k_last)
    w_t, a_z = presliding_force(z, _where(fn > 0, kz, kz * 0), dt)  # no spring, no damping, where nothing pushes
    return f0[..., None] * n + w_t, a + a_z, b - a_z, a_z, z


def contact_state_after(z, u, n, kz, mu, F, age, dt):
    """``(z_end [E, 3], age_end [E], fn_end [E])``: a contact's state after the step (numpy or torch), from the
    displacement the step used ``z``, the solved end-of-step relative velocity ``u`` [E, 3] and forces ``F`` [E, 3]:
    ``presliding_end``, the time under load (``age + dt`` while the solved normal force is positive, else 0) and
    that normal force (``fn_end >= 0``)."""
    fn = (F * n).sum(-1)
    fn = _where(fn > 0, fn, fn * 0)
    return presliding_end(z, u, n, kz, mu, fn, dt), _where(fn > 0, age + dt, age * 0), fn

