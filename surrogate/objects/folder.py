"""Every object of a folder of downloaded assets: its URDFs and the mesh files no URDF references."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from pathlib import Path

from surrogate.capture import dataset_hash
from surrogate.errors import AssetError
from surrogate.objects.asset import ObjectAsset
from surrogate.objects.meshes import MESH_SUFFIXES, OTHER_3D_SUFFIXES, load_mesh_object
from surrogate.objects.mjcf import is_mjcf, load_mjcf_object, mjcf_referenced_files
from surrogate.objects.urdf import load_urdf_object, mesh_candidates


def _referenced_files(urdf: Path, mesh_root) -> set[Path]:
    """Every existing file a URDF names (collision and visual), found by text so that broken URDFs count too."""
    try:
        text = urdf.read_text(errors="replace")
    except OSError:
        return set()
    refs = set()
    for filename in re.findall(r'filename\s*=\s*"([^"]+)"', text):
        for cand in mesh_candidates(filename, urdf.parent, mesh_root):
            if cand.is_file():
                refs.add(cand.resolve())
    return refs


# what readers of a bad file raise (trimesh, numpy, XML, MuJoCo's compiler); a TypeError or AttributeError is a bug of
# this package, not of the file, and is not turned into a skipped file
READER_ERRORS = (OSError, ValueError, IndexError, KeyError, SyntaxError, ZeroDivisionError, OverflowError)


def _files(folder: Path) -> list[Path]:
    """Every file under ``folder``, sorted, symlinked sub-folders followed (``Path.rglob`` does not follow them
    before Python 3.13, so a folder of links to downloads looked empty).

    A link to a folder that is already on the path to it (a loop) is not entered. A file reached by several paths
    (a real folder and a link to it, two links) is listed once: by a path through no linked folder if there is one
    (the path that was listed before links were followed), else the first path in sorted order.
    """
    chain = {str(folder): (frozenset([os.path.realpath(folder)]), False)}  # dirpath: (real ancestors, via a link)
    best: dict[str, tuple[bool, Path]] = {}
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=True):
        ancestors, linked = chain.pop(dirpath)
        keep = []
        for d in sorted(dirnames):
            sub = os.path.join(dirpath, d)
            real = os.path.realpath(sub)
            if real not in ancestors:
                keep.append(d)
                chain[sub] = (ancestors | {real}, linked or os.path.islink(sub))
        dirnames[:] = keep
        for f in filenames:
            cand = (linked, Path(dirpath, f))
            key = os.path.realpath(cand[1])
            if key not in best or cand < best[key]:
                best[key] = cand
    return sorted(p for _, p in best.values())


def folder_sha256(folder: Path) -> str:
    """sha256 over the files ``load_object_folder`` walks (``_files``: symlinked sub-folders followed), by relative
    path and content (``capture.dataset_hash`` of those files): what a folder of objects is, for a cache of captures
    made of it."""
    return dataset_hash(folder, files=_files(Path(folder)))


def _unique(obj: ObjectAsset, rel: Path, taken: set[str]) -> ObjectAsset:
    """``obj`` under a name no object in ``taken`` has: its own when free, else qualified by a short digest of its
    path relative to the folder (``_`` and 6 hex digits of its SHA-1; more digits on the rare clash)."""
    if obj.name not in taken:
        return obj
    digest = hashlib.sha1(rel.as_posix().encode()).hexdigest()
    names = [f"{obj.name}_{digest[:k]}" for k in (6, 12, 40)]
    names += [f"{obj.name}_{digest}_{i}" for i in range(len(taken) + 1)]  # one of these is free: never StopIteration
    return dataclasses.replace(obj, name=next(n for n in names if n not in taken))


def load_object_folder(
    folder: str | Path, *, density: float = 1000.0, mesh_root: str | Path | None = None
) -> tuple[list[ObjectAsset], list[tuple[Path, str]]]:
    """Every URDF and MJCF object file under ``folder`` (``mjcf.load_mjcf_object``: an ``.xml`` whose root is
    ``<mujoco>``) and every mesh file none of them references (at ``density`` kg/m^3); a 3D file of a format this
    reader does not take (``OTHER_3D_SUFFIXES``, e.g. COLLADA) that none references is skipped, named.

    Suffixes are matched in any case (``BALL.URDF``); symlinked sub-folders are scanned, each file once (``_files``).
    Bad files are skipped, not fatal, whatever their reader raises (``READER_ERRORS``): a folder of downloaded
    assets usually has a few.

    Names: an object is named by its URDF's robot name or its mesh file (``meshes._name_from_path``). Two different
    files may give the same name (``cup.stl`` in two sub-folders, URDFs all called ``object``, stems in another
    script that ``safe_name`` reduces alike); all of them load. Objects take their names in load order (URDFs, then
    meshes, each sorted by path): the first keeps its name, a later one is qualified by a digest of its path relative
    to ``folder`` (``cup_3f2a9c``; ``_unique``). So the names are deterministic, a name that was unique before stays
    as it was, and a qualified name depends only on its object's own path; but a file added whose object takes the
    same name and sorts first takes the plain name, qualifying the other one (captures name objects by their files
    too: ``geometry.path``).

    Returns:
      (objects sorted by path, skipped as (path, reason) pairs).
    Raises:
      AssetError(field='folder') when ``folder`` is not a directory.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise AssetError("not a directory", file=folder, field="folder")
    files = _files(folder)
    # object files: URDFs, and MJCF files (``.xml`` whose root is <mujoco>: MuJoCo's own packaging of scanned objects)
    urdfs = [p for p in files if p.suffix.lower() == ".urdf" or (p.suffix.lower() == ".xml" and is_mjcf(p))]
    referenced: set[Path] = set()
    for u in urdfs:
        referenced |= _referenced_files(u, mesh_root) if u.suffix.lower() == ".urdf" else mjcf_referenced_files(u)
    unreferenced = [p for p in files if p.suffix.lower() in MESH_SUFFIXES + OTHER_3D_SUFFIXES
                    and p.resolve() not in referenced]
    skipped = [(p, "broken symbolic link") for p in urdfs + unreferenced if not p.is_file()]
    skipped += [(p, f"unsupported mesh format '{p.suffix}'; convert it to one of {list(MESH_SUFFIXES)}")
                for p in unreferenced if p.suffix.lower() in OTHER_3D_SUFFIXES and p.is_file()]
    loose = [p for p in unreferenced if p.suffix.lower() in MESH_SUFFIXES and p.is_file()]

    objects, names = [], set()
    for p in [u for u in urdfs if u.is_file()] + loose:
        try:
            if p.suffix.lower() == ".urdf":
                obj = load_urdf_object(p, mesh_root=mesh_root)
            elif p.suffix.lower() == ".xml":
                obj = load_mjcf_object(p)
            else:
                obj = load_mesh_object(p, density=density)
        except AssetError as exc:
            skipped.append((p, str(exc)))
            continue
        except READER_ERRORS as exc:  # a reader's own error (trimesh, numpy, XML): still one file, not the folder
            skipped.append((p, f"{type(exc).__name__}: {exc}"))
            continue
        obj = _unique(obj, p.relative_to(folder), names)
        names.add(obj.name)
        objects.append(obj)
    return objects, skipped
