"""Articulated objects from URDFs with several links and joints (e.g. the DAIR Lab's two-link "elbow").

An ``Articulation`` is a tree of links (the base link first, the one no joint moves) joined by
``continuous``, ``revolute`` or ``prismatic`` joints; URDF links joined by ``fixed`` joints are welded into one link
(``urdf.welded_bodies``: their masses summed, their shapes placed in its frame). Each link's collision shapes are
placed in its frame by their ``<origin>``; its mass comes from the URDF and its centre of mass and inertia from its
collision geometry at uniform density, as ``urdf.load_urdf_object`` does for one link (the URDF inertia tensors are
ignored: the elbow's is a 0.1 m cube's, not its 0.1 x 0.05 x 0.05 m box's).

``to_json`` / ``articulation_from_json`` is the plain-data form a capture's ``ObjectSpec.geometry``
holds (``kind: articulated``), so that a dataset rebuilds its object without the URDF. ``link_poses``
is the one forward kinematics (metrics, scenes, estimates).
"""

from __future__ import annotations

import hashlib
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import trimesh
from scipy.spatial.transform import Rotation

from surrogate.errors import AssetError
from surrogate.objects.asset import ObjectAsset, safe_name
from surrogate.objects.meshes import origin_matrix, placed_pieces, primitive_mesh
from surrogate.objects.urdf import Joint, _Collision, welded_bodies


@dataclass(frozen=True)
class Link:
    """One rigid link: ``pieces`` (convex, link frame, m), mass kg, ``com`` [3] and ``inertia`` [3, 3] about it
    (link axes), ``shapes`` (their plain-data description), ``size`` (largest side of its bounding box, m)."""

    name: str
    mass: float
    com: np.ndarray
    inertia: np.ndarray
    pieces: tuple
    shapes: list
    size: float


@dataclass(frozen=True)
class Articulation:
    """Links (base first, then in the joints' order) and joints (parents before children)."""

    name: str
    links: tuple
    joints: tuple
    source: str = ""
    sha256: str = ""
    friction: float | None = None

    @property
    def joint_names(self) -> list[str]:
        return [j.name for j in self.joints]

    def link_index(self, name: str) -> int:
        return [lk.name for lk in self.links].index(name)

    def to_json(self) -> dict:
        return {"kind": "articulated", "urdf": self.source, "sha256": self.sha256, "name": self.name,
                "inertia_from": "collision geometry at uniform density (the URDF's inertia tensors are ignored)",
                "links": [{"name": lk.name, "mass": float(lk.mass), "com": [float(x) for x in lk.com],
                           "inertia": np.asarray(lk.inertia, float).tolist(), "size": float(lk.size), "shapes": lk.shapes}
                          for lk in self.links],
                "joints": [{"name": j.name, "type": j.type, "parent": j.parent, "child": j.child, "xyz": list(j.xyz),
                            "rpy": list(j.rpy), "axis": list(j.axis), "limit": None if j.limit is None else list(j.limit)}
                           for j in self.joints]}

    def link_poses(self, base_pose: np.ndarray, joint_pos: np.ndarray) -> np.ndarray:
        """Forward kinematics: [T, L, 7] every link frame's pose (m; w x y z) from the base link frame's pose
        [T, 7] and the joint coordinates [T, J] (rad or m)."""
        base_pose = np.atleast_2d(np.asarray(base_pose, float))
        q = np.asarray(joint_pos, float).reshape(len(base_pose), -1)
        T = len(base_pose)
        pos = {self.links[0].name: base_pose[:, :3]}
        rot = {self.links[0].name: Rotation.from_quat(base_pose[:, 3:7], scalar_first=True)}
        for k, j in enumerate(self.joints):
            r_o = Rotation.from_euler("xyz", j.rpy)
            axis = np.asarray(j.axis, float)
            p = pos[j.parent] + rot[j.parent].apply(np.tile(np.asarray(j.xyz, float), (T, 1)))
            r = rot[j.parent] * r_o
            if j.type == "prismatic":
                p = p + r.apply(np.outer(q[:, k], axis))
            else:
                r = r * Rotation.from_rotvec(np.outer(q[:, k], axis))
            pos[j.child], rot[j.child] = p, r
        return np.stack([np.concatenate([pos[lk.name], rot[lk.name].as_quat(scalar_first=True)], axis=1)
                         for lk in self.links], axis=1)

    def link_vertices(self, base_pose: np.ndarray, joint_pos: np.ndarray) -> list[np.ndarray]:
        """Per link, [T, P_l, 3] the vertices of its collision pieces in the world (m), from the base link frame's
        pose [T, 7] and the joint coordinates [T, J]."""
        poses = self.link_poses(base_pose, joint_pos)
        out = []
        for li, link in enumerate(self.links):
            verts = np.concatenate([p.vertices for p in link.pieces])
            rot = Rotation.from_quat(poses[:, li, 3:7].reshape(-1, 4), scalar_first=True)
            out.append(np.einsum("tij,pj->tpi", rot.as_matrix(), verts) + poses[:, li, None, :3])
        return out

    def com_positions(self, base_pose: np.ndarray, joint_pos: np.ndarray) -> np.ndarray:
        """[T, L, 3] every link's centre of mass in the world (m)."""
        poses = self.link_poses(base_pose, joint_pos)
        out = np.zeros(poses.shape[:2] + (3,))
        for i, lk in enumerate(self.links):
            out[:, i] = poses[:, i, :3] + Rotation.from_quat(poses[:, i, 3:7], scalar_first=True).apply(lk.com)
        return out

    def asset(self, *, friction: float | None = None) -> ObjectAsset:
        """An ``ObjectAsset`` for scenes: ``pieces`` every link's at zero joint coordinates in the BASE LINK's frame
        (not centred: the scene's object body is the base link frame), ``mass`` the base link's, ``inertia`` the
        base link's about its COM; ``params["articulation"]`` holds this articulation."""
        poses = self.link_poses(np.array([[0, 0, 0, 1.0, 0, 0, 0]]), np.zeros((1, len(self.joints))))[0]
        pieces = []
        for lk, pose in zip(self.links, poses):
            M = np.eye(4)
            M[:3, :3] = Rotation.from_quat(pose[3:7], scalar_first=True).as_matrix()
            M[:3, 3] = pose[:3]
            for p in lk.pieces:
                q = p.copy()
                q.apply_transform(M)
                pieces.append(q)
        mu = friction if friction is not None else (self.friction if self.friction is not None else 0.8)
        base = self.links[0]
        return ObjectAsset(name=safe_name(self.name), family="articulated", pieces=tuple(pieces), mass=float(base.mass),
                           inertia=np.asarray(base.inertia, float), source=self.source,
                           params={"articulation": self, "urdf": self.source}, friction=float(mu))


def _shape_json(col: _Collision) -> dict:
    d = {"kind": col.kind, "xyz": [float(x) for x in col.xyz], "rpy": [float(x) for x in col.rpy]}
    if col.kind == "mesh":
        d.update(path=str(Path(col.mesh).resolve()), scale=[float(x) for x in col.scale])  # readable from any folder
    else:
        d.update({k: [float(x) for x in v] for k, v in col.size.items()})
    return d


def _shape_pieces(shape: dict, *, file=None) -> list[trimesh.Trimesh]:
    """Convex pieces (link frame) of one plain-data collision shape."""
    if shape["kind"] == "mesh":
        return placed_pieces(Path(shape["path"]), tuple(shape["scale"]), tuple(shape["xyz"]), tuple(shape["rpy"]), True)
    size = {k: tuple(shape[k]) for k in ("size", "radius", "length") if k in shape}
    prim = primitive_mesh(shape["kind"], size)
    prim.apply_transform(origin_matrix(shape["xyz"], shape["rpy"], file=file))
    return [prim]


def make_link(name: str, mass: float, shapes: list, *, file=None) -> Link:
    """A link from its mass and shapes: centre of mass and inertia from the geometry at uniform density."""
    from surrogate.objects.inertia import piece_mass_properties, scale_to_mass, validate_inertia

    pieces = [p for s in shapes for p in _shape_pieces(s, file=file)]
    props = piece_mass_properties(pieces, 1.0, file=file)
    inertia = validate_inertia(scale_to_mass(props.inertia, props.mass, float(mass)), file=file, field=f"link[{name}].inertia")
    lo = np.min([p.bounds[0] for p in pieces], axis=0)
    hi = np.max([p.bounds[1] for p in pieces], axis=0)
    return Link(name, float(mass), np.asarray(props.com, float), np.asarray(inertia, float), tuple(pieces), shapes,
                float((hi - lo).max()))


def _friction(root) -> float | None:
    """Drake's ``<drake:mu_static value=...>`` of the first collision that has one (the authors' nominal friction)."""
    for el in root.iter():
        if el.tag.endswith("mu_static") and el.get("value") is not None:
            try:
                return float(el.get("value"))
            except ValueError:
                return None
    return None


def load_articulation(urdf_path: str | Path, *, mesh_root: str | Path | None = None) -> Articulation:
    """An ``Articulation`` from a URDF with one or more links (see the module docstring).

    Raises:
      AssetError naming the URDF and the element (``link[elbow_2].collision[0].geometry``, ``joint[hinge].type``).
    """
    path = Path(urdf_path)
    if not path.is_file():
        raise AssetError("file does not exist", file=path, field="path")
    try:
        raw = path.read_bytes()
        root = ET.fromstring(raw)
    except ET.ParseError as exc:
        raise AssetError(f"not valid XML: {exc}", file=path, field="xml") from exc
    if root.tag != "robot":
        raise AssetError(f"root element is <{root.tag}>, expected <robot>", file=path, field="robot")
    bodies, joints = welded_bodies(root, path, mesh_root)
    links = [make_link(b.name, b.mass, [_shape_json(c) for c in b.collisions], file=path) for b in bodies]
    return Articulation(name=root.get("name") or path.stem, links=tuple(links), joints=tuple(joints), source=str(path),
                        sha256=hashlib.sha256(raw).hexdigest(), friction=_friction(root))


def articulation_from_json(geo: dict, *, pieces: bool = True) -> Articulation:
    """The ``Articulation`` of a capture's ``ObjectSpec.geometry`` (``kind: articulated``, ``Articulation.to_json``):
    link masses, centres of mass and inertias as stored; pieces rebuilt from the shapes (``pieces=False``: none,
    the kinematics alone, e.g. for metrics)."""
    links = []
    for lk in geo["links"]:
        made = make_link(lk["name"], float(lk["mass"]), lk["shapes"], file=geo.get("urdf")) if pieces else None
        links.append(Link(lk["name"], float(lk["mass"]), np.asarray(lk["com"], float), np.asarray(lk["inertia"], float),
                          made.pieces if made else (), lk["shapes"], float(lk["size"] if "size" in lk else made.size)))
    joints = [Joint(j["name"], j["type"], j["parent"], j["child"], tuple(j["xyz"]), tuple(j["rpy"]), tuple(j["axis"]),
                    None if j.get("limit") is None else tuple(j["limit"])) for j in geo.get("joints", [])]
    return Articulation(name=geo.get("name", "articulated"), links=tuple(links), joints=tuple(joints),
                        source=str(geo.get("urdf", "")), sha256=str(geo.get("sha256", "")))
