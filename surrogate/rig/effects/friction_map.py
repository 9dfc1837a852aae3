"""Friction map: the friction coefficient varies smoothly over the object's surface.

Physical basis
--------------
Real objects are not uniform: handled regions are polished or greasy, others
dusty, worn, wet or printed; measured friction of one object commonly spans a
factor of two over its surface. The rig gives every object a smooth field over
object-frame position ``x`` (m): a sum of ``terms`` random Fourier components
with wavelengths between ``wavelength_min`` and ``wavelength_max``

    g(x) = sum_k a_k cos(w_k . x + phi_k),   sum_k |a_k| = 1  (so -1 <= g <= 1)
    mu(x) = (low + high) / 2 + (high - low) / 2 * g(x)

so ``low <= mu(x) <= high`` everywhere. The field is seeded by the object's name
(and ``seed``), so one object keeps its surface across episodes, like a real
object would, while different objects differ. It is applied at pad and table
contacts (the table's own friction is folded into the same coefficient) and is
the static coefficient the Stribeck law starts from.

When disabled: the object's nominal friction (``ObjectAsset.friction``) everywhere.
"""

from __future__ import annotations

import zlib

import numpy as np

NAME = "friction_map"
DOC = "smooth seeded friction field over the object surface (wear, moisture); off: nominal mu everywhere"
PARAMS = {
    "low": {"kind": "float", "default": 0.5, "range": (0.05, 2.0), "unit": "1",
            "doc": "lowest friction coefficient of the field"},
    "high": {"kind": "float", "default": 1.2, "range": (0.05, 2.0), "unit": "1",
             "doc": "highest friction coefficient of the field"},
    "terms": {"kind": "int", "default": 6, "range": (1, 32), "unit": "1",
              "doc": "number of random Fourier components"},
    "wavelength_min": {"kind": "float", "default": 0.02, "range": (0.002, 1.0), "unit": "m",
                       "doc": "shortest wavelength of the field"},
    "wavelength_max": {"kind": "float", "default": 0.08, "range": (0.002, 1.0), "unit": "m",
                       "doc": "longest wavelength of the field"},
    "seed": {"kind": "int", "default": 0, "range": (0, 2**31 - 1), "unit": "1",
             "doc": "added to the object's name hash: another family of surfaces"},
}


class FrictionField:
    """Static friction coefficient over object-frame positions.

    Args:
      object_name: seeds the field (crc32 of the name + ``params['seed']``).
      nominal: the object's nominal coefficient (used when ``params`` is None).
      params: the effect's parameters, or None when disabled.
    """

    def __init__(self, object_name: str, nominal: float, params: dict | None):
        self.nominal = float(nominal)
        self.params = params
        if params is None:
            return
        rng = np.random.default_rng([zlib.crc32(object_name.encode()), int(params["seed"]), 0x4D41])
        n = int(params["terms"])
        directions = rng.normal(size=(n, 3))
        directions /= np.linalg.norm(directions, axis=1, keepdims=True)
        wavelength = np.exp(rng.uniform(np.log(params["wavelength_min"]), np.log(params["wavelength_max"]), n))
        self.w = directions * (2 * np.pi / wavelength)[:, None]  # [n, 3] rad/m
        self.phi = rng.uniform(0, 2 * np.pi, n)
        a = rng.uniform(0.2, 1.0, n)
        self.a = a / a.sum()
        self.mid = 0.5 * (params["low"] + params["high"])
        self.half = 0.5 * (params["high"] - params["low"])

    @property
    def range(self) -> tuple[float, float]:
        """(low, high) bounds of the coefficient."""
        if self.params is None:
            return self.nominal, self.nominal
        return self.mid - self.half, self.mid + self.half

    def __call__(self, points: np.ndarray) -> np.ndarray:
        """[n] coefficient at [n, 3] object-frame points (m)."""
        points = np.asarray(points, dtype=float)
        if self.params is None:
            return np.full(len(points), self.nominal)
        g = np.cos(points @ self.w.T + self.phi) @ self.a
        return self.mid + self.half * g
