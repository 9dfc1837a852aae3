"""Put an ``ObjectAsset`` into an ``mujoco.MjSpec`` as a free rigid body.

The body is named ``object``, its free joint ``object_free``, and each convex
piece ``i`` becomes a mesh asset ``object_mesh{i}`` and a geom ``obj_piece{i}``.
MuJoCo takes the convex hull of every mesh geom, which is why assets are split
into convex pieces.

Mass properties come from the asset, never from the geoms: the body gets an
explicit inertial (``explicitinertial``, ``mass``, ``fullinertia`` about the
COM at the body origin) and the compiler then ignores geom volumes
(``inertiafromgeom`` is ``auto``). MuJoCo diagonalizes ``fullinertia`` itself
(``body_inertia`` holds the principal moments, ``body_iquat`` the axes).

The object geoms get ``contype = conaffinity = 0``: nothing collides with the
object except through explicit ``<pair>`` elements, which the scene builder
adds (see ``surrogate.scenes.builder``).
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np

from surrogate.errors import AssetError
from surrogate.objects.asset import ObjectAsset

OBJECT_BODY = "object"
OBJECT_JOINT = "object_free"


def piece_geom_name(i: int) -> str:
    """Name of the geom of convex piece ``i``."""
    return f"obj_piece{i}"


def full_inertia_vector(inertia: np.ndarray) -> list[float]:
    """[3, 3] inertia tensor (kg m^2) -> MuJoCo's ``fullinertia`` [6]: Ixx Iyy Izz Ixy Ixz Iyz."""
    i = np.asarray(inertia, dtype=float)
    return [i[0, 0], i[1, 1], i[2, 2], i[0, 1], i[0, 2], i[1, 2]]


def add_object_body(
    spec: mujoco.MjSpec,
    obj: ObjectAsset,
    *,
    pos: Sequence[float] = (0.0, 0.0, 0.0),
    quat: Sequence[float] = (1.0, 0.0, 0.0, 0.0),
    rgba: Sequence[float] = (0.85, 0.45, 0.2, 1.0),
) -> mujoco.MjsBody:
    """Add ``obj`` as a free body ``object`` under the world body.

    Args:
      spec: the spec to add to (modified in place).
      obj: the asset: pieces in the body frame (m), COM at the origin.
      pos: [3] initial body position in the world (m); ``qpos0`` of the free joint.
      quat: [4] initial orientation (w, x, y, z).
      rgba: [4] colour of the piece geoms.
    Returns:
      The new body. Geoms are ``obj_piece{i}``, one per piece, non-colliding
      except through explicit pairs.
    Raises:
      AssetError: non-positive mass or an inertia that is not a symmetric
        positive-definite [3, 3] tensor.
    """
    inertia = np.asarray(obj.inertia, dtype=float)
    if not np.isfinite(obj.mass) or obj.mass <= 0:
        raise AssetError(f"mass must be positive kg, got {obj.mass!r}", file=obj.source, field="mass")
    if inertia.shape != (3, 3) or not np.allclose(inertia, inertia.T, rtol=1e-9, atol=1e-15):
        raise AssetError("inertia must be a symmetric [3, 3] tensor", file=obj.source, field="inertia")
    if np.linalg.eigvalsh(inertia).min() <= 0:
        raise AssetError("inertia must be positive definite", file=obj.source, field="inertia")

    body = spec.worldbody.add_body(name=OBJECT_BODY, pos=list(pos), quat=list(quat))
    body.add_freejoint(name=OBJECT_JOINT)
    # Explicit inertial: the asset's COM is the body origin, so ipos = 0.
    body.explicitinertial = True
    body.mass = float(obj.mass)
    body.ipos = [0.0, 0.0, 0.0]
    body.fullinertia = full_inertia_vector(inertia)

    for i, piece in enumerate(obj.pieces):
        mesh = spec.add_mesh(name=f"{OBJECT_BODY}_mesh{i}")
        mesh.uservert = np.asarray(piece.vertices, dtype=float).ravel().tolist()
        mesh.userface = np.asarray(piece.faces, dtype=np.int64).ravel().tolist()
        # The mesh's own inertia is not used (explicit inertial) but MuJoCo
        # still computes it; the convex rule never fails on thin pieces.
        mesh.inertia = mujoco.mjtMeshInertia.mjMESH_INERTIA_CONVEX
        body.add_geom(
            name=piece_geom_name(i),
            type=mujoco.mjtGeom.mjGEOM_MESH,
            meshname=mesh.name,
            contype=0,
            conaffinity=0,
            rgba=list(rgba),
            friction=[float(obj.friction), 0.005, 0.0001],
        )
    return body
