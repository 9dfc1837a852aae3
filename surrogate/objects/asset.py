"""The object asset: what every other part of the project knows about an object.

An ``ObjectAsset`` is rigid geometry in its own body frame with the centre of
mass at the origin, split into pieces that MuJoCo can collide (convex pieces;
MuJoCo takes the convex hull of every mesh geom), plus mass properties.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import trimesh


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
