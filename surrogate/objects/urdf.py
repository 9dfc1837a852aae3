"""Objects from simple one-link URDFs: collision geometry placed by its origin, mass from ``<mass>``.

Mesh collisions go through ``meshes`` (convex pieces, decompositions split); box, cylinder and
sphere collisions become meshes here. Bad input is an ``AssetError`` naming the URDF and the
element (e.g. ``collision[0].geometry.mesh.scale``).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import trimesh

from surrogate.errors import AssetError
from surrogate.objects.asset import ObjectAsset, safe_name
from surrogate.objects.meshes import origin_matrix, placed_pieces


@dataclass
class _Collision:
    kind: str  # mesh | box | cylinder | sphere
    xyz: tuple
    rpy: tuple
    mesh: Path | None = None
    scale: tuple = (1.0, 1.0, 1.0)
    size: dict = field(default_factory=dict)


def _floats(text: str | None, n: int, default, *, file, fld) -> tuple:
    if text is None:
        return tuple(default)
    try:
        vals = tuple(float(x) for x in text.split())
    except ValueError:
        raise AssetError(f"expected {n} numbers, got {text!r}", file=file, field=fld) from None
    if n == 3 and len(vals) == 1:
        vals = vals * 3
    if len(vals) != n or not all(np.isfinite(vals)):
        raise AssetError(f"expected {n} finite numbers, got {text!r}", file=file, field=fld)
    return vals


def mesh_candidates(filename: str, urdf_dir: Path, mesh_root: Path | None) -> list[Path]:
    """Where a URDF mesh filename may live: as given, relative to the URDF, under ``mesh_root``;
    ``package://pkg/rest`` is tried both as ``pkg/rest`` and as ``rest``."""
    rels = []
    if filename.startswith("package://"):
        rest = filename[len("package://") :]
        rels += [rest, rest.split("/", 1)[1] if "/" in rest else rest]
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
    return list(dict.fromkeys(out))


def link_mass(link, path: Path, prefix: str = "") -> float:
    """The ``<inertial><mass>`` of a URDF ``<link>`` element (kg); AssetError naming ``prefix`` + the element."""
    mass_el = link.find("inertial/mass")
    if mass_el is None or mass_el.get("value") is None:
        raise AssetError("no <inertial><mass value=...>; the object's mass is needed", file=path, field=f"{prefix}inertial.mass")
    try:
        mass = float(mass_el.get("value"))
    except ValueError:
        raise AssetError(f"mass {mass_el.get('value')!r} is not a number", file=path, field=f"{prefix}inertial.mass") from None
    if not np.isfinite(mass) or mass <= 0:
        raise AssetError(f"mass must be positive, got {mass}", file=path, field=f"{prefix}inertial.mass")

    return mass


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
        elif shape.tag in ("box", "cylinder", "sphere"):
            attrs = {"box": ("size", 3), "cylinder": ("radius", 1), "sphere": ("radius", 1)}[shape.tag]
            size = {attrs[0]: _floats(shape.get(attrs[0]), attrs[1], (), file=path, fld=f"{fld}.geometry.{shape.tag}")}
            if shape.tag == "cylinder":
                size["length"] = _floats(shape.get("length"), 1, (), file=path, fld=f"{fld}.geometry.cylinder.length")
            collisions.append(_Collision(shape.tag, xyz, rpy, size=size))
        else:
            raise AssetError(f"unsupported collision geometry <{shape.tag}>", file=path, field=f"{fld}.geometry")
    if not collisions:
        raise AssetError("link has no <collision> geometry", file=path, field=f"{prefix}collision")
    return collisions


def _parse_urdf(path: Path, mesh_root) -> tuple[str, float, list[_Collision]]:
    """(robot name, mass kg, collision geometries) of a one-link URDF."""
    if not path.is_file():
        raise AssetError("file does not exist", file=path, field="path")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise AssetError(f"not valid XML: {exc}", file=path, field="xml") from exc
    if root.tag != "robot":
        raise AssetError(f"root element is <{root.tag}>, expected <robot>", file=path, field="robot")
    links = root.findall("link")
    if len(links) != 1:
        raise AssetError(
            f"expected exactly one <link> (a rigid object), found {len(links)}", file=path, field="link"
        )
    link = links[0]

    mass = link_mass(link, path)
    collisions = link_collisions(link, path, mesh_root)
    return root.get("name") or path.stem, mass, collisions


def _primitive(col: _Collision) -> trimesh.Trimesh:
    if col.kind == "box":
        return trimesh.creation.box(extents=col.size["size"])
    if col.kind == "sphere":
        return trimesh.creation.icosphere(subdivisions=3, radius=col.size["radius"][0])
    return trimesh.creation.cylinder(radius=col.size["radius"][0], height=col.size["length"][0], sections=32)


def load_urdf_object(urdf_path: str | Path, *, mesh_root: str | Path | None = None, friction: float = 0.8) -> ObjectAsset:
    """An object from a one-link URDF: collision geometry placed by its origin, mass from ``<mass>``.

    The URDF's inertia tensor and inertial origin are ignored (YCB's are
    placeholders): inertia and centre of mass come from the collision hulls at
    uniform density, scaled to the URDF mass. Mesh filenames are resolved
    relative to the URDF's folder, then ``mesh_root``; ``package://`` is stripped.

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
            prim = _primitive(col)
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
