"""Objects from MuJoCo's own format: an MJCF file whose body is the object (MuJoCo Scanned Objects, Google Scanned
Objects and YCB as MuJoCo users package them: ``model.xml`` beside ``model.obj`` and ``model_collision_*.obj``).

MuJoCo compiles the file, so what the object is here is what MuJoCo makes of it: its mesh paths (``meshdir``,
``assetdir``), scales, geom placements, and its mass (from the geoms' densities or an explicit ``<inertial>``). The
object is the body with the free joint (or the one body at the top of the world) and every body welded below it; its
shape is its collision geoms (``contype`` or ``conaffinity`` not zero), each as the convex hull MuJoCo collides with,
placed in the object's frame. The inertia and centre of mass come from those hulls at uniform density scaled to
MuJoCo's mass, as a URDF object's do (``urdf.load_urdf_object``), so both formats give one kind of object.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import mujoco
import numpy as np
import trimesh

from surrogate.errors import AssetError
from surrogate.objects.asset import ObjectAsset, safe_name
from surrogate.objects.meshes import _check_extents, _name_from_path, primitive_mesh

# a model name that says nothing about the object (the file's folder names it then)
_GENERIC_MODELS = {"", "model", "object", "scanned objects", "mujoco model", "mujoco"}


def is_mjcf(path: Path) -> bool:
    """Whether ``path`` is an XML file whose root element is ``<mujoco>`` (a cheap look at its first element)."""
    try:
        for _, el in ET.iterparse(path, events=("start",)):
            return el.tag == "mujoco"
    except (ET.ParseError, OSError):
        return False
    return False


def mjcf_referenced_files(path: Path) -> set[Path]:
    """The mesh files an MJCF file names (resolved against its ``compiler`` ``meshdir`` / ``assetdir``): a folder
    reads them as the MJCF object's parts, not as objects of their own."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError):
        return set()
    compiler = root.find("compiler")
    base = path.parent
    meshdir = (compiler.get("meshdir") or compiler.get("assetdir") or "") if compiler is not None else ""
    return {(base / meshdir / m.get("file")).resolve() for m in root.iter("mesh") if m.get("file")}


def _object_body(m: mujoco.MjModel, path: Path) -> int:
    """The object's body: the one with a free joint, else the only body at the top of the world."""
    free = [int(m.jnt_bodyid[j]) for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
    tops = [b for b in range(1, m.nbody) if m.body_parentid[b] == 0]
    bodies = free or tops
    if len(bodies) != 1:
        names = [m.body(b).name or f"body {b}" for b in bodies]
        raise AssetError(f"{len(bodies)} {'free' if free else 'top-level'} bodies ({names[:6]}): an object file holds "
                         "one object (a scene of several is not one)", file=path, field="worldbody")
    body = bodies[0]
    moving = [m.joint(j).name or f"joint {j}" for j in range(m.njnt)
              if m.jnt_type[j] != mujoco.mjtJoint.mjJNT_FREE and _below(m, int(m.jnt_bodyid[j]), body)]
    if moving:
        raise AssetError(f"joint {moving[0]!r} moves a part of the object: a rigid object's parts are welded (an "
                         "articulated object loads from a URDF: objects.articulated.load_articulation)", file=path,
                         field=f"joint[{moving[0]}]")
    return body


def _below(m: mujoco.MjModel, b: int, root: int) -> bool:
    """Whether body ``b`` is ``root`` or in its subtree."""
    while b > 0:
        if b == root:
            return True
        b = int(m.body_parentid[b])
    return False


def _geom_vertices(m: mujoco.MjModel, g: int) -> np.ndarray:
    """[V, 3] points of geom ``g`` in its own frame whose convex hull is the shape MuJoCo collides with."""
    kind, size = m.geom_type[g], m.geom_size[g]
    if kind == mujoco.mjtGeom.mjGEOM_MESH:
        adr, n = m.mesh_vertadr[m.geom_dataid[g]], m.mesh_vertnum[m.geom_dataid[g]]
        return np.asarray(m.mesh_vert[adr:adr + n], dtype=float)
    if kind == mujoco.mjtGeom.mjGEOM_BOX:  # MuJoCo's sizes are half sizes
        return primitive_mesh("box", {"size": 2 * size}).vertices
    if kind == mujoco.mjtGeom.mjGEOM_SPHERE:
        return primitive_mesh("sphere", {"radius": size[:1]}).vertices
    if kind == mujoco.mjtGeom.mjGEOM_ELLIPSOID:
        return primitive_mesh("sphere", {"radius": (1.0,)}).vertices * size[:3]
    if kind == mujoco.mjtGeom.mjGEOM_CYLINDER:
        return primitive_mesh("cylinder", {"radius": size[:1], "length": (2 * size[1],)}).vertices
    if kind == mujoco.mjtGeom.mjGEOM_CAPSULE:
        return trimesh.creation.capsule(radius=size[0], height=2 * size[1], count=[16, 16]).vertices
    raise AssetError(f"collision geom {m.geom(g).name or g!r} is a {mujoco.mjtGeom(kind).name}: an object's shape is "
                     "made of meshes, boxes, spheres, ellipsoids, cylinders and capsules", field=f"geom[{g}].type")


def load_mjcf_object(path: str | Path, *, friction: float | None = None) -> ObjectAsset:
    """The object of MJCF file ``path`` (see the module docstring): family ``mesh``, its mass MuJoCo's, its friction
    ``friction`` or its first collision geom's sliding friction. AssetError naming the file and the element."""
    path = Path(path)
    try:
        m = mujoco.MjModel.from_xml_path(str(path))
    except ValueError as exc:  # MuJoCo's compiler: a missing mesh, a bad attribute, ...
        raise AssetError(f"MuJoCo cannot compile it: {str(exc).strip()}", file=path, field="mjcf") from None
    body = _object_body(m, path)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    R0, p0 = d.xmat[body].reshape(3, 3), d.xpos[body]
    geoms = [g for g in range(m.ngeom) if _below(m, int(m.geom_bodyid[g]), body)
             and (m.geom_contype[g] or m.geom_conaffinity[g])]
    if not geoms:
        raise AssetError("the object's body has no collision geom (contype or conaffinity not 0)", file=path,
                         field="geom")
    pieces = []
    for g in geoms:
        try:
            local = _geom_vertices(m, g)
        except AssetError as exc:
            raise AssetError(exc.reason, file=path, field=exc.location.field) from None
        world = local @ d.geom_xmat[g].reshape(3, 3).T + d.geom_xpos[g]
        pieces.append(trimesh.convex.convex_hull((world - p0) @ R0))  # in the object body's frame
    _check_extents(trimesh.util.concatenate(pieces), np.ones(3), file=path)
    mass = float(m.body_subtreemass[body])
    if not mass > 0:
        raise AssetError("MuJoCo gives the object no mass (its geoms' density or mass is 0)", file=path, field="mass")
    model_name = m.names.split(b"\0", 1)[0].decode().strip()  # <mujoco model=...>, "MuJoCo Model" when not given
    name = safe_name(model_name) if model_name.lower() not in _GENERIC_MODELS else _name_from_path(path)
    return ObjectAsset.from_pieces(
        name, "mesh", pieces, source=str(path), mass=mass,
        params={"file": str(path), "mass_from": "mjcf", "collision_geoms": len(geoms)},
        friction=float(friction if friction is not None else m.geom_friction[geoms[0]][0]), file=path)
