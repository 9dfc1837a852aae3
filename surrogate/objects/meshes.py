"""Objects from mesh files (OBJ, STL, PLY, glTF/GLB, OFF); one-link URDFs are in ``urdf``, folders in ``folder``.

MuJoCo collides the convex hull of every mesh geom, so an asset is a set of
convex pieces. A file holding a convex decomposition (several hulls in one
file, e.g. YCB ``textured_vhacd.stl``) is split into its hulls; any other
mesh becomes its own convex hull, with a warning when that changes the shape.

Splitting a decomposition, and why not ``trimesh.Trimesh.split``:
adjacent VHACD hulls share vertices *and edges* where a cutting plane passed,
so splitting by edge connectivity (``mesh.split``) glues neighbouring hulls
into non-convex blobs and leaves one- and two-triangle fragments where such
edges are shared by four faces (on the YCB sample: 66-80 components where VHACD
wrote 41-64 hulls; on the wood block more than half of them not watertight).
Decomposition writers emit one hull after the other, though, so the
file's face order is the reliable signal: a hull ends where every edge seen so
far has been traversed once in each direction (a closed, consistently oriented
surface). On the YCB sample that yields exactly VHACD's 64 (or 41) watertight
convex hulls. When the face order does not close into surfaces, edge
connectivity is the fallback.
"""

from __future__ import annotations

import struct
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import trimesh

from surrogate.errors import AssetError
from surrogate.objects.asset import ObjectAsset, safe_name

# glTF / GLB (e.g. Objaverse's objects) are metres by their specification; a scene of several meshes is read as one,
# each placed by its node's transform, in the file's order (one hull per closed mesh: see the splitting below)
MESH_SUFFIXES = (".obj", ".stl", ".ply", ".glb", ".gltf", ".off")
# 3D formats this reader does not take (a folder's file of one of these is skipped by name, never ignored silently)
OTHER_3D_SUFFIXES = (".dae", ".fbx", ".3mf", ".step", ".stp", ".iges", ".igs", ".blend", ".usd", ".usda", ".usdc",
                     ".usdz", ".3ds", ".wrl", ".x3d")
# Outside these extents (m) a mesh is almost surely in the wrong unit.
MIN_EXTENT, MAX_EXTENT = 0.002, 2.0
# A piece whose hull is this much larger than the piece is reported as non-convex.
_NONCONVEX_RTOL = 0.01
# Folder names that say nothing about the object (YCB: <id>_<name>/google_16k/textured_vhacd.stl).
_GENERIC_STEMS = {"textured", "textured_vhacd", "nontextured", "model", "mesh", "collision", "visual"}
_GENERIC_DIRS = {"google_16k", "google_64k", "google_512k", "meshes", "collision", "visual", "tsdf", "poisson"}


# --- reading ----------------------------------------------------------------


def _check_stl_size(path: Path) -> None:
    """Binary STL declares its triangle count; a size mismatch means truncation.

    Why: trimesh reads a truncated binary STL as an empty mesh without error.
    """
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(84)
    if len(head) == 84:
        (n,) = struct.unpack("<I", head[80:84])
        if 84 + 50 * n == size:
            return
    else:
        n = None
    with open(path, "rb") as f:
        text = f.read(4096)
    if text.lstrip().lower().startswith(b"solid") and b"facet" in text.lower():
        return  # ASCII STL: trimesh's parser reports its own problems
    if n is None:
        raise AssetError(f"corrupt STL: only {size} bytes, shorter than the 84-byte binary header", file=path, field="mesh")
    raise AssetError(
        f"truncated or corrupt binary STL: header declares {n} triangles ({84 + 50 * n} bytes) but the file has {size} bytes",
        file=path,
        field="mesh",
    )


def read_mesh(path: str | Path) -> trimesh.Trimesh:
    """Read one mesh file as a single triangle mesh with shared vertices (units as in the file).

    Face order is kept (no processing besides merging coincident vertices), as
    the piece splitting relies on it.

    Raises:
      AssetError naming the file and field: ``path`` (missing), ``format``,
      ``mesh`` (unreadable/corrupt), ``faces`` (empty), ``vertices`` (non-finite).
    """
    path = Path(path)
    if not path.is_file():
        raise AssetError("file does not exist", file=path, field="path")
    if path.suffix.lower() not in MESH_SUFFIXES:
        raise AssetError(f"unsupported mesh format '{path.suffix}'; supported: {list(MESH_SUFFIXES)}", file=path, field="format")
    if path.suffix.lower() == ".stl":
        _check_stl_size(path)
    try:
        mesh = trimesh.load(path, force="mesh", process=False)
    except Exception as exc:  # trimesh raises many types for bad files
        raise AssetError(f"unreadable or corrupt mesh file: {type(exc).__name__}: {exc}", file=path, field="mesh") from exc
    if not isinstance(mesh, trimesh.Trimesh) or len(mesh.faces) == 0:
        raise AssetError("mesh has no faces", file=path, field="faces")
    if not np.all(np.isfinite(mesh.vertices)):
        bad = int(np.sum(~np.all(np.isfinite(mesh.vertices), axis=1)))
        raise AssetError(f"{bad} vertices are NaN or infinite", file=path, field="vertices")
    mesh.merge_vertices()  # STL stores every triangle with its own corners
    return mesh


# --- splitting into convex pieces -------------------------------------------


def _closed_runs(faces: np.ndarray) -> list[np.ndarray] | None:
    """Split ``faces`` [F, 3] into consecutive runs that each close into a surface.

    Returns the face-index arrays of the runs, or None when the faces left at
    the end do not close (the file is not a sequence of closed pieces).
    """
    runs, start, balance = [], 0, {}
    for i, (a, b, c) in enumerate(faces):
        for u, v in ((a, b), (b, c), (c, a)):
            key = (u, v) if u < v else (v, u)
            val = balance.get(key, 0) + (1 if u < v else -1)
            if val:
                balance[key] = val
            else:
                del balance[key]
        if not balance:
            runs.append(np.arange(start, i + 1))
            start = i + 1
    return runs if start == len(faces) else None


def split_decomposition(mesh: trimesh.Trimesh) -> list[trimesh.Trimesh]:
    """The pieces of a mesh file: closed runs of faces in file order, else edge-connected components.

    Args:
      mesh: as returned by ``read_mesh`` (face order as in the file).
    Returns:
      Pieces (not yet hulled), in file order.
    """
    runs = _closed_runs(mesh.faces)
    if runs is not None:
        pieces = [trimesh.Trimesh(mesh.vertices, mesh.faces[r], process=False) for r in runs]
        for p in pieces:
            p.remove_unreferenced_vertices()
        if all(p.is_watertight for p in pieces):
            return pieces
    return mesh.split(only_watertight=False)


def convex_pieces(
    mesh: trimesh.Trimesh, *, split: bool = True, file=None, label: str = "mesh"
) -> list[trimesh.Trimesh]:
    """Convex hulls of the mesh's pieces (what MuJoCo will collide).

    Degenerate pieces (flat, fewer than 4 non-coplanar points) are dropped;
    pieces that are not convex (hull > 1 % larger) or not closed are replaced by
    their hull. Both are reported in one warning per mesh.

    Raises:
      AssetError(field='pieces') when no piece has a volume.
    """
    pieces = split_decomposition(mesh) if split else [mesh]
    hulls, dropped, nonconvex, open_ = [], 0, [], 0
    for piece in pieces:
        try:
            # trimesh divides by the volume when orienting a hull: silence it for flat ones
            with np.errstate(invalid="ignore", divide="ignore"):
                hull = piece.convex_hull
                flat = not hull.is_watertight or not hull.volume > 0
        except Exception:  # qhull: flat or too few points
            dropped += 1
            continue
        if flat:
            dropped += 1
            continue
        if piece.is_watertight:
            vol = abs(float(piece.volume))
            if hull.volume > vol * (1 + _NONCONVEX_RTOL):
                nonconvex.append((vol, float(hull.volume)))
        else:
            open_ += 1
        hulls.append(hull)
    if not hulls:
        raise AssetError(
            f"none of the {len(pieces)} pieces has a volume (all flat or degenerate)", file=file, field="pieces"
        )
    notes = []
    if nonconvex:
        worst = max(h / max(v, 1e-300) - 1 for v, h in nonconvex)
        notes.append(
            f"{len(nonconvex)} non-convex piece(s) replaced by their convex hull (MuJoCo collides hulls; "
            f"up to {100 * worst:.0f} % more volume) - decompose the mesh (VHACD/CoACD) for a faithful shape"
        )
    if open_:
        notes.append(f"{open_} open (non-watertight) piece(s) replaced by their convex hull")
    if dropped:
        notes.append(f"{dropped} flat or degenerate piece(s) dropped")
    if notes:
        warnings.warn(f"{file or label}: " + "; ".join(notes), stacklevel=3)
    return hulls


# --- placement and units ----------------------------------------------------


def _scale_vector(scale, *, file=None, field="scale") -> np.ndarray:
    s = np.broadcast_to(np.asarray(scale, dtype=float), (3,)) if np.ndim(scale) == 0 else np.asarray(scale, dtype=float)
    if s.shape != (3,) or not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise AssetError(f"scale must be a positive number or three of them, got {scale!r}", file=file, field=field)
    return s


def _suggest_scale(extent: float, scale: np.ndarray) -> str:
    """A unit fix that brings the largest extent (m) to a graspable 1 cm - 1 m."""
    fixes = (
        (0.001, "the file is in millimetres"),
        (0.01, "the file is in centimetres"),
        (0.0254, "the file is in inches"),
        (1000.0, "a millimetre scale was applied to a file in metres"),
        (100.0, "a centimetre scale was applied to a file in metres"),
    )
    for factor, cause in fixes:
        if 0.01 <= extent * factor <= 1.0:
            new = scale * factor
            shown = f"{new[0]:g}" if np.allclose(new, new[0]) else " ".join(f"{x:g}" for x in new)
            urdf = " ".join(f"{x:g}" for x in new)
            # who reads the file decides where a scale goes: an argument or config key, a URDF attribute, or none
            return (f"; if {cause}, pass scale={shown} (Python, an importer's object config; a URDF: <mesh "
                    f"scale=\"{urdf}\">; a loose mesh file, as in a folder given to `surrogate rig generate "
                    f"--objects`, takes no scale: re-export it in metres, or reference it from a URDF with that "
                    f"<mesh scale> and the object's <mass>)")
    return ""


def _check_extents(mesh: trimesh.Trimesh, scale: np.ndarray, *, file=None, field="scale") -> None:
    """Refuse extents outside [2 mm, 2 m]: a unit error (field ``scale``, with a fix) or a flat mesh (``extents``)."""
    ext = mesh.extents
    if MIN_EXTENT <= np.max(ext) <= MAX_EXTENT and np.min(ext) < MIN_EXTENT:
        raise AssetError(
            f"extents {np.round(ext, 6).tolist()} m: thinner than {MIN_EXTENT * 1000:g} mm along an axis; "
            "a flat or sheet-like mesh has no volume to weigh or collide",
            file=file,
            field="extents",
        )
    if np.any(ext < MIN_EXTENT) or np.any(ext > MAX_EXTENT):
        raise AssetError(
            f"extents {np.round(ext, 6).tolist()} m at scale {scale.tolist()} are outside "
            f"[{MIN_EXTENT}, {MAX_EXTENT}] m{_suggest_scale(float(np.max(ext)), scale)}",
            file=file,
            field=field,
        )


def origin_matrix(xyz: Sequence[float], rpy: Sequence[float], *, file=None, field="origin") -> np.ndarray:
    """[4, 4] transform of a URDF ``<origin xyz rpy>``: R = Rz(yaw) Ry(pitch) Rx(roll), then translate."""
    xyz, rpy = np.asarray(xyz, dtype=float), np.asarray(rpy, dtype=float)
    if xyz.shape != (3,) or rpy.shape != (3,) or not (np.all(np.isfinite(xyz)) and np.all(np.isfinite(rpy))):
        raise AssetError(f"origin needs three finite xyz and rpy values, got {xyz!r}, {rpy!r}", file=file, field=field)
    t = trimesh.transformations.euler_matrix(*rpy, axes="sxyz")
    t[:3, 3] = xyz
    return t


def placed_pieces(path, scale, xyz, rpy, split, *, scale_field="scale") -> list[trimesh.Trimesh]:
    """Read ``path``, scale in the mesh frame, check units, hull the pieces, then place them by the origin."""
    mesh = read_mesh(path)
    s = _scale_vector(scale, file=path, field=scale_field)
    mesh.apply_scale(s)
    _check_extents(mesh, s, file=path, field=scale_field)
    t = origin_matrix(xyz, rpy, file=path)
    hulls = convex_pieces(mesh, split=split, file=path)
    for h in hulls:
        h.apply_transform(t)
    return hulls


def primitive_mesh(kind: str, size: dict) -> trimesh.Trimesh:
    """The mesh of a primitive centred on its frame, sized by URDF's attributes (``size``: {"size": full extents [3]}
    of a ``box``, {"radius": (r,)} of a ``sphere``, {"radius": (r,), "length": (full length along z,)} of a
    ``cylinder``): URDF's primitives, and MuJoCo's given so."""
    if kind == "box":
        return trimesh.creation.box(extents=size["size"])
    if kind == "sphere":
        return trimesh.creation.icosphere(subdivisions=3, radius=size["radius"][0])
    return trimesh.creation.cylinder(radius=size["radius"][0], height=size["length"][0], sections=32)


def _name_from_path(path: Path) -> str:
    """``ycb/025_mug/google_16k/textured_vhacd.stl`` -> ``025_mug``; ``cup.obj`` -> ``cup``."""
    if path.stem.lower() not in _GENERIC_STEMS:
        return safe_name(path.stem)
    for parent in path.parents:
        if parent.name and parent.name.lower() not in _GENERIC_DIRS:
            return safe_name(parent.name)
    return safe_name(path.stem)


def load_mesh_object(
    path: str | Path,
    *,
    mass: float | None = None,
    density: float = 1000.0,
    scale: float | Sequence[float] = 1.0,
    name: str | None = None,
    origin_xyz: Sequence[float] = (0.0, 0.0, 0.0),
    origin_rpy: Sequence[float] = (0.0, 0.0, 0.0),
    split_pieces: bool = True,
    friction: float = 0.8,
) -> ObjectAsset:
    """An object from an OBJ, STL, PLY, glTF/GLB or OFF file.

    Args:
      path: mesh file; units times ``scale`` must give metres.
      mass: kg; when given, inertia is computed from the shape and scaled to it.
      density: kg/m^3, used when ``mass`` is None.
      scale: one factor or three (x, y, z) applied in the file's frame.
      name: asset name; default from the file (or its folder for generic names).
      origin_xyz, origin_rpy: placement of the scaled mesh (m, rad; URDF convention).
      split_pieces: treat the file as a convex decomposition and keep each hull;
        False hulls the whole mesh as one piece.
      friction: nominal sliding friction.
    Returns:
      ObjectAsset, family ``mesh``, centred on its centre of mass.
    Raises:
      AssetError naming the file and field (see ``read_mesh``; ``scale`` for
      absurd extents, ``pieces``, ``mass``, ``density``).
    """
    path = Path(path)
    pieces = placed_pieces(path, scale, origin_xyz, origin_rpy, split_pieces)
    return ObjectAsset.from_pieces(
        name if name is not None else _name_from_path(path),
        "mesh",
        pieces,
        source=str(path),
        mass=mass,
        density=None if mass is not None else density,
        params={
            "file": str(path),
            "scale": _scale_vector(scale).tolist(),
            "mass_from": "argument" if mass is not None else "density",
        },
        friction=friction,
        file=path,
    )
