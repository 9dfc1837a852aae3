"""Objects from URDFs: collision geometry placed by its origin, mass from ``<mass>``; the kinematic tree of links and
joints, links joined by ``fixed`` joints welded into one body (``welded_bodies``: a rigid object of several links, or
a link of an articulated object, ``objects.articulated``).

Mesh collisions go through ``meshes`` (convex pieces, decompositions split); box, cylinder and
sphere collisions become meshes here. Bad input is an ``AssetError`` naming the URDF and the
element (e.g. ``collision[0].geometry.mesh.scale``).
"""

from __future__ import annotations

import dataclasses
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import trimesh

from surrogate.errors import AssetError
from surrogate.objects.asset import ObjectAsset, safe_name
from surrogate.objects.meshes import (
    MAX_EXTENT,
    MIN_EXTENT,
    _check_extents,
    origin_matrix,
    placed_pieces,
    primitive_mesh,
)


@dataclass
class _Collision:
    kind: str  # mesh | box | cylinder | sphere
    xyz: tuple
    rpy: tuple
    mesh: Path | None = None
    scale: tuple = (1.0, 1.0, 1.0)
    size: dict = field(default_factory=dict)


def _not_numbers(text: str, plain: str) -> str:
    """Why ``text`` does not parse as numbers: ``plain``, unless it is a xacro expression (``${pi/2}``,
    ``$(arg x)``), named as one because a ``.urdf.xacro`` saved as ``.urdf`` is the usual cause and the fix is to
    expand the file, not to edit the number."""
    if "${" in text or "$(" in text:
        return (f"{text!r} is a xacro expression, not a number: expand the xacro file first "
                "(`xacro model.urdf.xacro > model.urdf`)")
    return plain


def _floats(text: str | None, n: int, default, *, file, fld) -> tuple:
    """``n`` finite numbers from an attribute's text (one number stands for three); ``default`` when the attribute is
    absent, an AssetError naming ``fld`` when it is absent and ``default`` is None (a required attribute)."""
    if text is None:
        if default is None:
            raise AssetError("missing: the attribute is required", file=file, field=fld)
        return tuple(default)
    try:
        vals = tuple(float(x) for x in text.split())
    except ValueError:
        raise AssetError(_not_numbers(text, f"expected {n} numbers, got {text!r}"), file=file, field=fld) from None
    if n == 3 and len(vals) == 1:
        vals = vals * 3
    if len(vals) != n or not all(np.isfinite(vals)):
        raise AssetError(f"expected {n} finite numbers, got {text!r}", file=file, field=fld)
    return vals


def _ros_packages(name: str, urdf_dir: Path) -> list[Path]:
    """The folders of ROS package ``name`` around a URDF, nearest first: its folder or one above it that is named
    ``name`` or holds a ``package.xml`` whose ``<name>`` is ``name`` (a package checked out under another folder
    name). Walked on the path as given, not resolved, so a package reached through a symlink is found where the user
    sees it."""
    here, out = Path(os.path.abspath(urdf_dir)), []
    for d in (here, *here.parents):
        if d.name == name:
            out.append(d)
        elif (d / "package.xml").is_file():
            try:
                declared = ET.parse(d / "package.xml").getroot().findtext("name")
            except (ET.ParseError, OSError):
                continue  # not a package we can read: not the one named
            if declared is not None and declared.strip() == name:
                out.append(d)
    return out


def mesh_candidates(filename: str, urdf_dir: Path, mesh_root: Path | None) -> list[Path]:
    """Where a URDF mesh filename may live, in this order: as given, relative to the URDF, under ``mesh_root``;
    ``package://pkg/rest`` is tried both as ``pkg/rest`` and as ``rest`` there, then as ``rest`` under the ROS
    package's folder (``_ros_packages``: the standard layout, ``pkg/urdf/x.urdf`` naming ``pkg/meshes/x.stl``)."""
    rels, packages = [], []
    if filename.startswith("package://"):
        rest = filename[len("package://") :]
        rels += [rest, rest.split("/", 1)[1] if "/" in rest else rest]
        if "/" in rest:
            pkg, sub = rest.split("/", 1)
            packages = [d / sub for d in _ros_packages(pkg, urdf_dir)]
    elif filename.startswith("file://"):
        rels.append(filename[len("file://") :])
    else:
        rels.append(filename)
    out = []
    for rel in rels:
        p = Path(rel)
        if p.is_absolute():
            out.append(p)
            continue
        out.append(urdf_dir / p)
        if mesh_root is not None:
            out.append(Path(mesh_root) / p)
    return list(dict.fromkeys(out + packages))


def link_mass(link, path: Path, prefix: str = "") -> float:
    """The ``<inertial><mass>`` of a URDF ``<link>`` element (kg); AssetError naming ``prefix`` + the element."""
    mass_el = link.find("inertial/mass")
    if mass_el is None or mass_el.get("value") is None:
        raise AssetError("no <inertial><mass value=...>; the object's mass is needed", file=path, field=f"{prefix}inertial.mass")
    try:
        mass = float(mass_el.get("value"))
    except ValueError:
        value = mass_el.get("value")
        raise AssetError(_not_numbers(value, f"mass {value!r} is not a number"), file=path,
                         field=f"{prefix}inertial.mass") from None
    if not np.isfinite(mass) or mass <= 0:
        raise AssetError(f"mass must be positive, got {mass}", file=path, field=f"{prefix}inertial.mass")

    return mass


# a primitive's size attributes (name, how many numbers); every one is required (URDF's spec gives no default)
_PRIMITIVE_SIZES = {"box": (("size", 3),), "cylinder": (("radius", 1), ("length", 1)), "sphere": (("radius", 1),)}


def _primitive_collision(shape, xyz, rpy, path: Path, fld: str) -> _Collision:
    """A ``<box>``, ``<cylinder>`` or ``<sphere>``: every size present and positive, and in metres by the unit check
    a mesh gets (``meshes._check_extents``: a box written in millimetres is refused with the factor that fixes it);
    AssetError naming the attribute, e.g. ``collision[0].geometry.sphere.radius``."""
    size = {}
    for attr, n in _PRIMITIVE_SIZES[shape.tag]:
        vals = _floats(shape.get(attr), n, None, file=path, fld=f"{fld}.{attr}")
        if min(vals) <= 0:
            raise AssetError(f"must be positive (m), got {shape.get(attr)!r}", file=path, field=f"{fld}.{attr}")
        size[attr] = vals
    d = 2 * size["radius"][0] if "radius" in size else None  # a sphere's diameter on every axis, a cylinder's on x, y
    box = np.array(size["size"] if d is None else [d, d, size["length"][0] if "length" in size else d])
    try:  # the bounding box's corners, not the tessellated primitive: trimesh merges a tiny one's vertices away
        _check_extents(trimesh.PointCloud([-box / 2, box / 2]), np.ones(3), file=path)
    except AssetError as exc:  # name the attribute out of range: a cylinder's length when only it is
        length_only = shape.tag == "cylinder" and MIN_EXTENT <= box[0] <= MAX_EXTENT
        attr = "length" if length_only else next(iter(size))
        raise AssetError(f"{exc.reason} (a <{shape.tag}>'s sizes are metres: write them times that factor)",
                         file=path, field=f"{fld}.{attr}") from None
    return _Collision(shape.tag, xyz, rpy, size=size)


def link_collisions(link, path: Path, mesh_root, prefix: str = "") -> list[_Collision]:
    """The collision geometries of a URDF ``<link>`` element (``prefix`` starts the names of bad elements)."""
    collisions = []
    for i, col in enumerate(link.findall("collision")):
        fld = f"{prefix}collision[{i}]"
        origin = col.find("origin")
        xyz = _floats(None if origin is None else origin.get("xyz"), 3, (0, 0, 0), file=path, fld=f"{fld}.origin.xyz")
        rpy = _floats(None if origin is None else origin.get("rpy"), 3, (0, 0, 0), file=path, fld=f"{fld}.origin.rpy")
        geom = col.find("geometry")
        shape = None if geom is None or len(geom) == 0 else geom[0]
        if shape is None:
            raise AssetError("collision has no geometry", file=path, field=f"{fld}.geometry")
        if shape.tag == "mesh":
            filename = shape.get("filename")
            if not filename:
                raise AssetError("mesh has no filename", file=path, field=f"{fld}.geometry.mesh.filename")
            tried = mesh_candidates(filename, path.parent, mesh_root)
            found = next((p for p in tried if p.is_file()), None)
            if found is None:
                raise AssetError(
                    f"mesh {filename!r} not found; tried {[str(p) for p in tried]} (pass mesh_root=)",
                    file=path,
                    field=f"{fld}.geometry.mesh.filename",
                )
            scale = _floats(shape.get("scale"), 3, (1, 1, 1), file=path, fld=f"{fld}.geometry.mesh.scale")
            collisions.append(_Collision("mesh", xyz, rpy, mesh=found, scale=scale))
        elif shape.tag in _PRIMITIVE_SIZES:
            collisions.append(_primitive_collision(shape, xyz, rpy, path, f"{fld}.geometry.{shape.tag}"))
        else:
            raise AssetError(f"unsupported collision geometry <{shape.tag}>", file=path, field=f"{fld}.geometry")
    if not collisions:
        raise AssetError("link has no <collision> geometry", file=path, field=f"{prefix}collision")
    return collisions


def _parse_urdf(path: Path, mesh_root) -> tuple[str, float, list[_Collision]]:
    """(robot name, mass kg, collision geometries) of a one-link URDF, or of one whose links are welded by fixed
    joints (their masses summed, their collisions placed in the base link's frame)."""
    if not path.is_file():
        raise AssetError("file does not exist", file=path, field="path")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise AssetError(f"not valid XML: {exc}", file=path, field="xml") from exc
    if root.tag != "robot":
        raise AssetError(f"root element is <{root.tag}>, expected <robot>", file=path, field="robot")
    links = root.findall("link")
    if len(links) != 1:  # links welded by fixed joints are one rigid object too
        bodies, moving = welded_bodies(root, path, mesh_root)
        if moving:
            j = moving[0]
            raise AssetError(f"joint {j.name!r} is {j.type!r}: a rigid object's links are joined by fixed joints only "
                             "(an articulated object loads with objects.articulated.load_articulation, e.g. "
                             "`surrogate import contactnets --urdf`)", file=path, field=f"joint[{j.name}].type")
        return root.get("name") or path.stem, bodies[0].mass, bodies[0].collisions
    link = links[0]

    mass = link_mass(link, path)
    collisions = link_collisions(link, path, mesh_root)
    return root.get("name") or path.stem, mass, collisions


def load_urdf_object(urdf_path: str | Path, *, mesh_root: str | Path | None = None, friction: float = 0.8) -> ObjectAsset:
    """An object from a one-link URDF, or one whose links are all welded by ``fixed`` joints (``welded_bodies``):
    collision geometry placed by its origin, mass from ``<mass>`` (summed over the links).

    The URDF's inertia tensor and inertial origin are ignored (YCB's are
    placeholders): inertia and centre of mass come from the collision hulls at
    uniform density, scaled to the URDF mass. Mesh filenames are resolved
    relative to the URDF's folder, then ``mesh_root``; ``package://pkg/rest`` there with and without ``pkg/``, then
    under the ROS package ``pkg`` found above the URDF (``mesh_candidates``). Box, cylinder and sphere sizes are
    checked for units as meshes are.

    Returns:
      ObjectAsset named after the robot, family ``mesh``; params record the mesh
      files and ``com_in_source_frame`` (the centre of mass in the link frame).
    Raises:
      AssetError naming the URDF and the element (e.g. ``collision[0].geometry.mesh.scale``).
    """
    path = Path(urdf_path)
    name, mass, collisions = _parse_urdf(path, mesh_root)
    pieces: list[trimesh.Trimesh] = []
    for i, col in enumerate(collisions):
        if col.kind != "mesh":
            prim = primitive_mesh(col.kind, col.size)
            prim.apply_transform(origin_matrix(col.xyz, col.rpy, file=path))
            pieces.append(prim)
            continue
        try:
            pieces += placed_pieces(col.mesh, col.scale, col.xyz, col.rpy, True)
        except AssetError as exc:
            sub = exc.location.field or "mesh"
            where = f"collision[{i}].geometry.mesh" + (".scale" if sub == "scale" else f" ({sub})")
            raise AssetError(f"{exc.location.file}: {exc.reason}", file=path, field=where) from exc
    return ObjectAsset.from_pieces(
        safe_name(name),
        "mesh",
        pieces,
        source=str(path),
        mass=mass,
        params={
            "urdf": str(path),
            "meshes": [str(c.mesh) for c in collisions if c.mesh is not None],
            "mass_from": "urdf",
        },
        friction=friction,
        file=path,
    )


# -- links and joints: a URDF's kinematic tree, its fixed joints welded ----------------------------------------------
MOVABLE_JOINTS = ("continuous", "revolute", "prismatic")
JOINT_TYPES = MOVABLE_JOINTS + ("fixed",)


@dataclass(frozen=True)
class Joint:
    """A joint: ``child``'s frame is ``parent``'s moved by the origin (``xyz``, ``rpy``), then by the joint's
    coordinate about (revolute) or along (prismatic) the unit ``axis`` of the child frame (none for ``fixed``)."""

    name: str
    type: str
    parent: str
    child: str
    xyz: tuple
    rpy: tuple
    axis: tuple
    limit: tuple | None = None


def parse_joint(el, path: Path, i: int) -> Joint:
    """The ``<joint>`` element ``el`` (the ``i``-th); AssetError naming ``joint[name].field``."""
    fld = f"joint[{el.get('name') or i}]"
    jtype = el.get("type")
    if jtype not in JOINT_TYPES:
        raise AssetError(f"joint type {jtype!r} is not supported; one of {JOINT_TYPES}", file=path, field=f"{fld}.type")
    parent, child = el.find("parent"), el.find("child")
    if parent is None or child is None or not parent.get("link") or not child.get("link"):
        raise AssetError("a joint needs <parent link=...> and <child link=...>", file=path, field=fld)
    origin = el.find("origin")
    xyz = _floats(None if origin is None else origin.get("xyz"), 3, (0, 0, 0), file=path, fld=f"{fld}.origin.xyz")
    rpy = _floats(None if origin is None else origin.get("rpy"), 3, (0, 0, 0), file=path, fld=f"{fld}.origin.rpy")
    ax_el = el.find("axis")
    axis = np.asarray(_floats(None if ax_el is None else ax_el.get("xyz"), 3, (1, 0, 0), file=path, fld=f"{fld}.axis"))
    if np.linalg.norm(axis) < 1e-9:
        raise AssetError("joint axis is zero", file=path, field=f"{fld}.axis")
    lim, limit = el.find("limit"), None
    if jtype in ("revolute", "prismatic") and lim is not None and lim.get("lower") is not None \
            and lim.get("upper") is not None:
        limit = tuple(_floats(lim.get(k), 1, None, file=path, fld=f"{fld}.limit.{k}")[0] for k in ("lower", "upper"))
    return Joint(el.get("name") or f"joint{i}", jtype, parent.get("link"), child.get("link"), tuple(xyz), tuple(rpy),
                 tuple(float(x) for x in axis / np.linalg.norm(axis)), limit)


def tree_order(links: dict, joints: list[Joint], path: Path) -> tuple[list[str], list[Joint]]:
    """(link names base first, joints parents before children); AssetError unless the joints form one tree."""
    children = [j.child for j in joints]
    for j in joints:
        for end in (j.parent, j.child):
            if end not in links:
                raise AssetError(f"joint {j.name!r} names link {end!r}, which the URDF does not have", file=path,
                                 field=f"joint[{j.name}]")
    if len(set(children)) != len(children):
        raise AssetError("a link is the child of two joints (not a tree)", file=path, field="joint")
    roots = [n for n in links if n not in children]
    if len(roots) != 1:
        raise AssetError(f"expected one base link (no joint's child), found {roots}", file=path, field="link")
    order, ordered = [roots[0]], []
    while len(ordered) < len(joints):
        nxt = [j for j in joints if j.parent in order and j.child not in order]
        if not nxt:
            raise AssetError("the joints do not connect every link to the base (a loop or a separate part)", file=path,
                             field="joint")
        for j in nxt:
            order.append(j.child)
            ordered.append(j)
    return order, ordered


@dataclass
class Body:
    """Links welded by fixed joints, in the frame of the one nearest the base (whose ``name`` it takes): their
    summed ``mass`` (kg) and every ``collisions`` placed in that frame."""

    name: str
    mass: float
    collisions: list


def _moved(xyz, rpy, frame: np.ndarray) -> tuple[tuple, tuple]:
    """The origin (xyz, rpy) moved into the frame ``frame`` [4, 4] is given in."""
    m = frame @ origin_matrix(xyz, rpy)
    rpy = trimesh.transformations.euler_from_matrix(m, axes="sxyz")
    return tuple(float(x) for x in m[:3, 3]), tuple(float(x) for x in rpy)


def welded_bodies(root, path: Path, mesh_root) -> tuple[list[Body], list[Joint]]:
    """(bodies base first, the movable joints between them, parents first) of the URDF element ``root``: each link
    joined to its parent by a ``fixed`` joint is welded into its parent's body (placed by the joint's origin), each
    movable joint's origin moved into its parent body's frame. Without fixed joints: one body per link, its
    collisions and the joints' origins exactly as written. A body needs a mass and a collision geometry from at least
    one of its links (a link without either, e.g. a frame marker, adds nothing); AssetError naming the element."""
    link_els = {el.get("name"): el for el in root.findall("link")}
    if not link_els or None in link_els:
        raise AssetError("every <link> needs a name, and there must be one", file=path, field="link")
    order, joints = tree_order(link_els, [parse_joint(el, path, i) for i, el in enumerate(root.findall("joint"))],
                               path)
    body_of, frame = {order[0]: order[0]}, {order[0]: None}  # None: the body's own frame (identity)
    moving = []
    for j in joints:
        pose = frame[j.parent]
        if j.type == "fixed":
            body_of[j.child] = body_of[j.parent]
            frame[j.child] = origin_matrix(j.xyz, j.rpy) if pose is None else pose @ origin_matrix(j.xyz, j.rpy)
            continue
        body_of[j.child], frame[j.child] = j.child, None
        xyz, rpy = (j.xyz, j.rpy) if pose is None else _moved(j.xyz, j.rpy, pose)
        moving.append(Joint(j.name, j.type, body_of[j.parent], j.child, xyz, rpy, j.axis, j.limit))
    bodies = {}
    for name in order:
        b = bodies.setdefault(body_of[name], Body(body_of[name], 0.0, []))
        el, prefix = link_els[name], f"link[{name}]."
        single = sum(body_of[n] == b.name for n in order) == 1  # a link alone: its mass and collisions required
        if single or el.find("inertial/mass") is not None:
            b.mass += link_mass(el, path, prefix)
        if single or el.find("collision") is not None:
            cols = link_collisions(el, path, mesh_root, prefix)
            b.collisions += cols if frame[name] is None else [
                dataclasses.replace(c, **dict(zip(("xyz", "rpy"), _moved(c.xyz, c.rpy, frame[name])))) for c in cols]
    for b in bodies.values():
        if b.mass <= 0:
            raise AssetError(f"no link welded into {b.name!r} has an <inertial><mass>", file=path,
                             field=f"link[{b.name}].inertial.mass")
        if not b.collisions:
            raise AssetError(f"no link welded into {b.name!r} has <collision> geometry", file=path,
                             field=f"link[{b.name}].collision")
    return [bodies[n] for n in order if n in bodies], moving
