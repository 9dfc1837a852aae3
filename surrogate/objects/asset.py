"""The object asset: what every other part of the project knows about an object.

An ``ObjectAsset`` is rigid geometry in its own body frame with the centre of
mass at the origin, split into pieces that MuJoCo can collide (convex pieces;
MuJoCo takes the convex hull of every mesh geom), plus mass properties.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import trimesh

from surrogate.errors import AssetError

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]+$")


def safe_name(text: str) -> str:
    """``text`` made filesystem- and MJCF-safe: every other character becomes ``_``."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", str(text)).strip("_")
    return name or "object"


@dataclass(frozen=True)
class ObjectAsset:
    """A rigid object ready to be put into a scene.

    Attributes:
      name: unique, filesystem- and MJCF-safe name (``[A-Za-z0-9_-]``).
      family: procedural family (``box``, ``cylinder`` ...) or ``mesh`` for files.
      pieces: convex pieces in the body frame (metres), centre of mass at origin.
      mass: kg.
      inertia: [3, 3] inertia tensor about the centre of mass, body frame, kg m^2.
      source: where it came from: ``procedural:<family>:seed=<n>`` or a file path.
      params: the parameters that generated it (sizes in metres, density kg/m^3 ...).
      friction: nominal sliding friction coefficient a user would enter.
    """

    name: str
    family: str
    pieces: tuple[trimesh.Trimesh, ...]
    mass: float
    inertia: np.ndarray
    source: str
    params: dict = field(default_factory=dict)
    friction: float = 0.8

    @property
    def bounds(self) -> np.ndarray:
        """[2, 3] axis-aligned bounds of all pieces in the body frame (m)."""
        lo = np.min([p.bounds[0] for p in self.pieces], axis=0)
        hi = np.max([p.bounds[1] for p in self.pieces], axis=0)
        return np.stack([lo, hi])

    @property
    def extents(self) -> np.ndarray:
        """[3] bounding-box side lengths (m)."""
        b = self.bounds
        return b[1] - b[0]

    @property
    def size(self) -> float:
        """Characteristic size (m): the largest bounding-box side. Errors are reported as a fraction of it."""
        return float(np.max(self.extents))

    def combined_mesh(self) -> trimesh.Trimesh:
        """All pieces concatenated into one mesh (for rendering, sampling, regions)."""
        return trimesh.util.concatenate(list(self.pieces))

    @classmethod
    def from_pieces(
        cls,
        name: str,
        family: str,
        pieces: Sequence[trimesh.Trimesh],
        *,
        source: str,
        density: float | None = None,
        mass: float | None = None,
        params: dict | None = None,
        friction: float = 0.8,
        file=None,
    ) -> ObjectAsset:
        """Build an asset from closed convex pieces in any frame: computes mass properties and centres them.

        Exactly one of ``density`` (kg/m^3) or ``mass`` (kg) is used: with ``mass``
        the inertia is computed at unit density and rescaled to it (the shape
        sets the distribution, the mass its total). The pieces are translated so
        the centre of mass is at the origin; where it was in the input frame is
        kept in ``params["com_in_source_frame"]`` (m), with ``params["volume"]``
        (m^3) and the effective ``params["density"]`` (kg/m^3).

        Raises:
          AssetError naming ``file`` and the field (name, mass, friction, pieces, inertia).
        """
        from surrogate.objects.inertia import piece_mass_properties, scale_to_mass, validate_inertia

        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise AssetError(f"name {name!r} must match [A-Za-z0-9_-]+", file=file, field="name")
        if not (isinstance(friction, (int, float)) and np.isfinite(friction) and friction > 0):
            raise AssetError(f"friction must be a positive number, got {friction!r}", file=file, field="friction")
        if (density is None) == (mass is None):
            raise AssetError("give exactly one of density or mass", file=file, field="mass")
        props = piece_mass_properties(pieces, 1.0 if density is None else density, file=file)
        if mass is not None:
            if not (isinstance(mass, (int, float)) and np.isfinite(mass) and mass > 0):
                raise AssetError(f"mass must be a positive number of kg, got {mass!r}", file=file, field="mass")
            inertia = scale_to_mass(props.inertia, props.mass, float(mass))
            total = float(mass)
        else:
            inertia, total = props.inertia, props.mass
        inertia = validate_inertia(inertia, file=file, field="inertia").copy()
        inertia.setflags(write=False)

        centred = []
        for p in pieces:
            q = p.copy()
            q.apply_translation(-props.com)
            centred.append(q)
        info = dict(params or {})
        info.update(
            volume=props.volume,
            density=total / props.volume,
            com_in_source_frame=[float(x) for x in props.com],
            n_pieces=len(centred),
        )
        return cls(
            name=name,
            family=family,
            pieces=tuple(centred),
            mass=total,
            inertia=inertia,
            source=source,
            params=info,
            friction=float(friction),
        )
