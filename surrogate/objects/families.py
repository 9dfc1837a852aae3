"""Procedural object families: seeded sizes, densities and convex pieces.

Every family draws its parameters from ``numpy.random.default_rng`` seeded by
(family, seed), builds convex trimesh pieces from them, and the asset is
centred on its centre of mass. Sizes are chosen so that the objects fit a
parallel gripper with about 10 cm maximum opening and a small three-finger
hand: characteristic sizes 3-8 cm. Densities are drawn from 300-1500 kg/m^3
(wood to dense plastic); friction is the nominal 0.8 a user would enter.

Non-convex families (``lshape``, ``dumbbell``) are unions of convex pieces that
only touch, never overlap, so their mass properties are exact.

Usage::

    asset = make_object("box", 3)                     # name "box_s3"
    asset = make_object("box", 3, size_x=0.05)        # override one parameter
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import trimesh

from surrogate.errors import ConfigError
from surrogate.objects.asset import ObjectAsset

DENSITY_RANGE = (300.0, 1500.0)  # kg/m^3
NOMINAL_FRICTION = 0.8

# Tessellation: enough that polygonal inertia is within ~1 % of the smooth
# shape, few enough vertices that MuJoCo's convex collision stays fast.
_SECTIONS = 32
_SPHERE_SUBDIVISIONS = 3


@dataclass(frozen=True)
class Family:
    """A procedural family: parameter ranges and a builder.

    Attributes:
      name: family name (``box`` ...).
      ranges: parameter name -> (low, high); sizes in metres, drawn uniformly in
        the listed order (integers when both bounds are int: inclusive range).
      build: ``build(params, rng) -> list[trimesh.Trimesh]`` convex pieces (m), any
        placement; ``rng`` is for shape randomness beyond the parameters.
      doc: one line on what the parameters mean.
    """

    name: str
    ranges: dict
    build: Callable[[dict, np.random.Generator], list]
    doc: str = ""

    @property
    def param_names(self) -> tuple[str, ...]:
        """Keys accepted as overrides: the shape parameters plus density and friction."""
        return (*self.ranges, "density", "friction")

    def __call__(self, rng: np.random.Generator, **overrides) -> tuple[list[trimesh.Trimesh], dict]:
        """Draw parameters (then apply ``overrides``) and build the pieces.

        All parameters are drawn in a fixed order even when overridden, so that
        overriding one leaves the others as they were for the same seed.

        Returns:
          (pieces, params): convex pieces (m) and the parameters used.
        """
        unknown = sorted(set(overrides) - set(self.param_names))
        if unknown:
            raise ConfigError(
                f"unknown override(s) {unknown} for family '{self.name}'; allowed: {list(self.param_names)}",
                key=unknown[0],
            )
        params: dict = {}
        for key, (lo, hi) in self.ranges.items():
            if isinstance(lo, int) and isinstance(hi, int):
                params[key] = int(rng.integers(lo, hi + 1))
            else:
                params[key] = float(rng.uniform(lo, hi))
        params["density"] = float(rng.uniform(*DENSITY_RANGE))
        params["friction"] = NOMINAL_FRICTION
        for key, value in overrides.items():
            params[key] = _checked_override(self, key, value)
        return self.build(params, rng), params


def _checked_override(family: Family, key: str, value):
    """An override value must be a finite positive number (an int >= 4 for point counts)."""
    lo_hi = family.ranges.get(key)
    if lo_hi is not None and isinstance(lo_hi[0], int):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 4:
            raise ConfigError(f"'{key}' must be an integer >= 4, got {value!r}", key=key)
        return int(value)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not np.isfinite(value) or value <= 0:
        raise ConfigError(f"'{key}' must be a finite positive number, got {value!r}", key=key)
    return float(value)


def _require(cond: bool, key: str, message: str) -> None:
    if not cond:
        raise ConfigError(message, key=key)


def _hull(points: np.ndarray) -> trimesh.Trimesh:
    """Convex hull of [n, 3] points (m), snapped to a 1 micrometre grid first.

    Why: trimesh merges hull vertices closer than 1e-8 m, and dense samples of
    box-like superquadrics contain such near-duplicates; the merge then breaks
    the hull's watertightness. Snapping keeps distinct points >= 1 um apart.
    """
    pts = np.unique(np.round(np.asarray(points, dtype=float), 6), axis=0)
    return trimesh.convex.convex_hull(pts)


def _translated(mesh: trimesh.Trimesh, offset) -> trimesh.Trimesh:
    mesh.apply_translation(np.asarray(offset, dtype=float))
    return mesh


# --- convex families -------------------------------------------------------


def _box(p, rng):
    return [trimesh.creation.box(extents=(p["size_x"], p["size_y"], p["size_z"]))]


def _cylinder(p, rng):
    return [trimesh.creation.cylinder(radius=p["radius"], height=p["height"], sections=_SECTIONS)]


def _sphere(p, rng):
    return [trimesh.creation.icosphere(subdivisions=_SPHERE_SUBDIVISIONS, radius=p["radius"])]


def _capsule(p, rng):
    # trimesh's capsule has one hemisphere centre at the origin; centring happens later
    return [trimesh.creation.capsule(height=p["length"], radius=p["radius"], count=[16, 16])]


def _ellipsoid(p, rng):
    mesh = trimesh.creation.icosphere(subdivisions=_SPHERE_SUBDIVISIONS, radius=1.0)
    mesh.apply_scale((p["semi_x"], p["semi_y"], p["semi_z"]))  # a linear map keeps it convex
    return [mesh]


def _superquadric(p, rng):
    """Superellipsoid; exponents e1 (vertical), e2 (horizontal) in (0, 1]: 1 = ellipsoid, -> 0 = box.

    Convex for exponents <= 2; sampled on a latitude/longitude grid and hulled.
    """
    eta = np.linspace(-np.pi / 2, np.pi / 2, 17)
    omega = np.linspace(-np.pi, np.pi, 32, endpoint=False)
    eta, omega = np.meshgrid(eta, omega, indexing="ij")

    def spow(x, e):
        return np.sign(x) * np.abs(x) ** e

    ce, se = spow(np.cos(eta), p["e1"]), spow(np.sin(eta), p["e1"])
    co, so = spow(np.cos(omega), p["e2"]), spow(np.sin(omega), p["e2"])
    pts = np.stack([p["semi_x"] * ce * co, p["semi_y"] * ce * so, p["semi_z"] * se], axis=-1).reshape(-1, 3)
    return [_hull(pts)]


def _triangular_prism(p, rng):
    """Triangle with sides ``side_a``, ``side_b`` at ``angle_deg`` between them, extruded by ``height``."""
    a, b, th = p["side_a"], p["side_b"], np.deg2rad(p["angle_deg"])
    tri = np.array([[0.0, 0.0], [a, 0.0], [b * np.cos(th), b * np.sin(th)]])
    pts = np.concatenate([np.c_[tri, np.zeros(3)], np.c_[tri, np.full(3, p["height"])]])
    return [_hull(pts)]


def _convex_hull(p, rng):
    """Hull of ``n_points`` random directions at radii 0.6-1 of an ellipsoid with semi-axes ``semi_*``."""
    n = p["n_points"]
    d = rng.normal(size=(n, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    r = rng.uniform(0.6, 1.0, size=(n, 1))
    pts = d * r * np.array([p["semi_x"], p["semi_y"], p["semi_z"]])
    return [_hull(pts)]


# --- non-convex families: touching convex pieces ---------------------------


def _lshape(p, rng):
    """Two boxes in the xy-plane forming an L, ``width`` thick, ``depth`` deep (z)."""
    long_arm, short_arm, w, d = p["long_arm"], p["short_arm"], p["width"], p["depth"]
    _require(w < short_arm, "width", f"width {w} must be smaller than short_arm {short_arm}")
    _require(w < long_arm, "width", f"width {w} must be smaller than long_arm {long_arm}")
    bar = _translated(trimesh.creation.box(extents=(long_arm, w, d)), (long_arm / 2, w / 2, d / 2))
    # the leg starts where the bar ends (y = w), so the pieces touch but do not overlap
    leg_len = short_arm - w
    leg = _translated(trimesh.creation.box(extents=(w, leg_len, d)), (w / 2, w + leg_len / 2, d / 2))
    return [bar, leg]


def _dumbbell(p, rng):
    """Two disc weights (``plate_radius``, ``plate_thickness``) joined by a bar along z."""
    rp, t, rb, length = p["plate_radius"], p["plate_thickness"], p["bar_radius"], p["bar_length"]
    _require(rb < rp, "bar_radius", f"bar_radius {rb} must be smaller than plate_radius {rp}")
    plate0 = _translated(trimesh.creation.cylinder(radius=rp, height=t, sections=_SECTIONS), (0, 0, t / 2))
    bar = _translated(trimesh.creation.cylinder(radius=rb, height=length, sections=_SECTIONS), (0, 0, t + length / 2))
    plate1 = _translated(trimesh.creation.cylinder(radius=rp, height=t, sections=_SECTIONS), (0, 0, t + length + t / 2))
    return [plate0, bar, plate1]


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in [
        Family("box", {"size_x": (0.03, 0.08), "size_y": (0.03, 0.08), "size_z": (0.03, 0.08)}, _box, "side lengths (m)"),
        Family("cylinder", {"radius": (0.015, 0.04), "height": (0.03, 0.08)}, _cylinder, "radius, height (m), axis z"),
        Family("sphere", {"radius": (0.015, 0.04)}, _sphere, "radius (m)"),
        Family("capsule", {"radius": (0.012, 0.03), "length": (0.02, 0.05)}, _capsule, "radius, straight length (m)"),
        Family(
            "ellipsoid",
            {"semi_x": (0.015, 0.04), "semi_y": (0.015, 0.04), "semi_z": (0.015, 0.04)},
            _ellipsoid,
            "semi-axes (m)",
        ),
        Family(
            "superquadric",
            {"semi_x": (0.015, 0.04), "semi_y": (0.015, 0.04), "semi_z": (0.015, 0.04), "e1": (0.2, 1.0), "e2": (0.2, 1.0)},
            _superquadric,
            "semi-axes (m), shape exponents (1 = ellipsoid, -> 0 = box)",
        ),
        Family(
            "triangular_prism",
            {"side_a": (0.03, 0.08), "side_b": (0.03, 0.08), "angle_deg": (40.0, 110.0), "height": (0.02, 0.06)},
            _triangular_prism,
            "two triangle sides (m), the angle between them (deg), extrusion (m)",
        ),
        Family(
            "convex_hull",
            {"n_points": (8, 24), "semi_x": (0.015, 0.04), "semi_y": (0.015, 0.04), "semi_z": (0.015, 0.04)},
            _convex_hull,
            "point count, ellipsoid semi-axes (m) the points lie in",
        ),
        Family(
            "lshape",
            {"long_arm": (0.05, 0.08), "short_arm": (0.03, 0.06), "width": (0.012, 0.025), "depth": (0.015, 0.04)},
            _lshape,
            "arm lengths, arm width, depth (m)",
        ),
        Family(
            "dumbbell",
            {
                "plate_radius": (0.015, 0.025),
                "plate_thickness": (0.008, 0.02),
                "bar_radius": (0.005, 0.01),
                "bar_length": (0.02, 0.045),
            },
            _dumbbell,
            "disc radius and thickness, bar radius and length (m)",
        ),
    ]
}


def family_rng(family: str, seed: int) -> np.random.Generator:
    """The generator for (family, seed): seeded with a stable hash of the family name
    so that ``box_s3`` and ``sphere_s3`` do not share their random draws."""
    return np.random.default_rng([zlib.crc32(family.encode()), seed])


def make_object(family: str, seed: int, *, name: str | None = None, **overrides) -> ObjectAsset:
    """One procedural object, deterministic for (family, seed, overrides).

    Args:
      family: a key of ``FAMILIES``.
      seed: non-negative integer.
      name: asset name; default ``<family>_s<seed>``, plus a short hash of the
        overrides when there are any (so different overrides never share a name).
      overrides: fix parameters instead of drawing them: the family's shape
        parameters (m; see ``FAMILIES[family].ranges``), ``density`` (kg/m^3),
        ``friction``.
    Returns:
      ObjectAsset with convex pieces centred on the centre of mass.
    Raises:
      ConfigError: unknown family, bad seed, unknown or invalid override.
    """
    if family not in FAMILIES:
        raise ConfigError(f"unknown family {family!r}; allowed: {sorted(FAMILIES)}", key="family")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}", key="seed")
    seed = int(seed)
    fam = FAMILIES[family]
    pieces, params = fam(family_rng(family, seed), **overrides)
    if name is None:
        name = f"{family}_s{seed}"
        if overrides:
            digest = hashlib.sha1(repr(sorted(params.items())).encode()).hexdigest()[:6]
            name = f"{name}_{digest}"
    params["seed"] = seed
    params["overrides"] = sorted(overrides)
    return ObjectAsset.from_pieces(
        name,
        family,
        pieces,
        source=f"procedural:{family}:seed={seed}",
        density=params["density"],
        params=params,
        friction=params["friction"],
    )
