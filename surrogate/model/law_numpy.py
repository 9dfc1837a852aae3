"""The stepper's numpy view of a ``ContactLawGNN``: the law's parameters and linearized terms at E contacts in SI units,
without torch calls, whose per-call overhead would be most of a small step (``sim.law_solve``, ``sim.law_kernel``).

A mixin of ``model.contact_law.ContactLawGNN``, which it reads: its log-parameters (``log_stiffness``, ...), ``units``,
``exponent``, ``slip_eps``, ``stribeck``, ``presliding`` and ``spin`` and their per-group switches, and
``spin_columns``; ``tests/test_contact_law.py`` and ``tests/test_spin_friction.py`` hold it to the torch terms the twin
trains through (``ContactLawGNN.law_terms``).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .law import point_law


class NumpyLaw:
    """The numpy path of ``ContactLawGNN`` (see the module docstring)."""

    def numpy_law_terms(self, depth, vn, speed, moving, *, length: float, mass: float, gravity: float, dt: float,
                        with_spring: bool = False, params=None):
        """``(f0, a, b, mu, eps)`` [E] (``mu`` [E, 3] with ``stribeck``) of the law, in numpy (float64): what
        ``law_terms`` gives, without its torch calls (whose per-call overhead would be most of a small step): the
        parameters of ``numpy_law_parameters`` at the contacts (``law.point_law``). ``with_spring``: also the normal
        force ``fn`` [E] (``point_law``) and the presliding stiffness ``kz`` [E] (N/m; zero for a group without a
        spring), which ``presliding.with_presliding`` needs.

        Args:
          depth, vn, speed: [E] penetration (m), normal and tangential relative speed (m/s).
          moving, length, mass, gravity, params: as ``numpy_law_parameters``.
          dt: the physics step (s).
        """
        k, c, mu, eps, kz = self.numpy_law_parameters(moving, length=length, mass=mass, gravity=gravity, params=params)
        f0, a, b, fn = point_law(depth, vn, speed, k=k, p=self.exponent, c=c, mu=mu, eps=eps, dt=dt)
        if not with_spring:
            return f0, a, b, mu, eps
        return f0, a, b, mu, eps, fn, kz

    def numpy_law_parameters(self, moving, *, length: float, mass: float, gravity: float, params=None):
        """``(k, c, mu, eps, kz)``: the law's parameters at E contacts in SI units, numpy (float64): stiffness k [E]
        (N / m^p), damping c [E] (s / m), friction mu [E] (``mu`` [E, 3] (mu_k, r, v_s) with ``stribeck``), the slip
        regularization eps (m / s, a scalar) and the presliding stiffness kz [E] (N / m; zero without the spring).
        The hybrid stepper takes this path for every law: a constant law (no network) needs no graph at all; a
        network's per-contact parameters come in ``params``.

        Args:
          moving: [E] bool, the other side is a moving body (prior group ``body``) rather than a static surface.
          length, mass, gravity: the object's size (m), mass (kg) and |g| (m/s^2): the ``weight`` units.
          params: [E, 3] (k, c, mu), then k_z with the spring and (mu_spin, mu_roll) with ``spin``, in the prior's
            units: ``law_parameters`` of this model's network (numpy); None: the constant law, which a model with
            corrections does not have.
        """
        if self.corrections and params is None:
            raise ValueError("numpy_law_terms of a model with a network needs its law_parameters (params)")
        group = moving.astype(np.int64)
        per = self._group_parameters()[:, group]
        if params is not None:  # the network's: k, c, mu (and k_z, already zero for a group without a spring)
            per = np.concatenate([params[:, :3].T, per[3:-1] if self.presliding else per[3:],
                                  params[:, 3:4].T if self.presliding else per[:0]])
        k, c, mu = per[:3]
        p = self.exponent
        L, V, F0 = (1.0, 1.0, 1.0) if self.units == "si" else (length, math.sqrt(max(gravity, 1e-6) * length), mass * max(gravity, 1e-6))
        if self.stribeck:  # [E, 3] (mu_k, r, v_s): law.friction_coefficient
            mu = np.stack([mu, per[3], per[4] * V], axis=-1)
        if self.presliding:
            kz = np.where(self.presliding_on.numpy()[group], per[-1] * F0 / L, 0.0)
        else:
            kz = np.zeros(len(group))
        return k * F0 / L ** p, c / V, mu, self.slip_eps * V, kz

    def numpy_spin_parameters(self, moving, *, length: float, params=None):
        """``(mu_spin [E], mu_roll [E])`` of a model with ``spin``, in SI (m; numpy): the torsional and rolling
        friction at E contacts (0 for a term off in the contact's group). Their regularization is the law's slip
        regularization over the object's size, ``eps / length`` (``eps`` of ``numpy_law_parameters``). Arguments as
        ``numpy_law_parameters``."""
        if params is not None:  # the network's columns, zero already where a term is off
            i, j = self.spin_columns
            mu_s, mu_r = params[:, i], params[:, j]
        else:
            with torch.no_grad():
                v = (self.log_spin.double().exp() * self.spin_on).numpy()  # float64, as law_parameters
            group = moving.astype(np.int64)
            mu_s, mu_r = v[0, group], v[1, group]
        L = 1.0 if self.units == "si" else length
        return mu_s * L, mu_r * L

    def _group_parameters(self):
        """[P, 2] the global parameters (exp of the log-parameters: k, c, mu, then r, v_s with ``stribeck`` and k_z
        with ``presliding``) per (surface, body) group, numpy; the same array until a parameter changes (an
        optimizer step or an in-place edit bumps the tensor's version counter)."""
        globals_ = (self.log_stiffness, self.log_damping, self.log_friction) + \
            ((self.log_static_friction, self.log_stribeck_speed) if self.stribeck else ()) + \
            ((self.log_presliding,) if self.presliding else ())
        version = tuple((id(t), t._version) for t in globals_)
        if getattr(self, "_constant_cache", (None,))[0] != version:
            with torch.no_grad():
                self._constant_cache = (version, np.exp(np.stack([t.detach().double().numpy() for t in globals_])))
        return self._constant_cache[1]

    def numpy_law_table(self, moving, *, length: float, mass: float, gravity: float, params=None):
        """``(table [G, 7], rows [E], eps)``: the law's parameters at E contacts for the compiled step
        (``sim.law_kernel``): contact e's are row ``rows[e]`` of ``table``, ``(k, c, mu_k, r, v_s, mu_spin, mu_roll)``
        in SI units (``r`` = 1: Coulomb; ``mu_spin``, ``mu_roll`` 0 without ``spin``); eps the slip regularization
        (m / s). The constant law (``params`` None): G = 2 rows, the (surface, body) groups, the same array while
        neither the parameters nor the object change; a network's (``params`` [E, 3+]): one row per contact.
        Arguments as ``numpy_law_parameters``."""
        rows = moving.astype(np.int64) if params is None else np.arange(len(params))
        if params is None:
            per = self._group_parameters()
            key = (length, mass, gravity, (id(self.log_spin), self.log_spin._version) if self.spin else None)
            cache = getattr(self, "_table_cache", None)
            if cache is not None and cache[0] is per and cache[1] == key:
                return cache[2], rows, cache[3]
            moving = np.array([False, True])
        k, c, mu, eps, _ = self.numpy_law_parameters(moving, length=length, mass=mass, gravity=gravity, params=params)
        mu = mu if np.ndim(mu) == 2 else np.stack([mu, np.ones_like(mu), np.ones_like(mu)], axis=-1)
        spin = np.zeros((len(k), 2))
        if self.spin:
            spin[:, 0], spin[:, 1] = self.numpy_spin_parameters(moving, length=length, params=params)
        table = np.ascontiguousarray(np.concatenate([k[:, None], c[:, None], mu, spin], axis=1), dtype=np.float64)
        if params is None:
            self._table_cache = (per, key, table, float(eps))
        return table, rows, float(eps)
