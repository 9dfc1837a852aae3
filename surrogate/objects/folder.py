"""Every object of a folder of downloaded assets: its URDFs and the mesh files no URDF references."""

from __future__ import annotations

import re
from pathlib import Path

from surrogate.errors import AssetError
from surrogate.objects.asset import ObjectAsset
from surrogate.objects.meshes import MESH_SUFFIXES, OTHER_3D_SUFFIXES, load_mesh_object
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


def load_object_folder(
    folder: str | Path, *, density: float = 1000.0, mesh_root: str | Path | None = None
) -> tuple[list[ObjectAsset], list[tuple[Path, str]]]:
    """Every URDF under ``folder`` and every mesh file no URDF references (at ``density`` kg/m^3); a 3D file of a
    format this reader does not take (``OTHER_3D_SUFFIXES``, e.g. COLLADA) that no URDF references is skipped, named.

    Bad files are skipped, not fatal: a folder of downloaded assets usually has
    a few. Names must be unique; a later duplicate is skipped.

    Returns:
      (objects sorted by path, skipped as (path, reason) pairs).
    Raises:
      AssetError(field='folder') when ``folder`` is not a directory.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise AssetError("not a directory", file=folder, field="folder")
    urdfs = sorted(folder.rglob("*.urdf"))
    referenced: set[Path] = set()
    for u in urdfs:
        referenced |= _referenced_files(u, mesh_root)
    loose = sorted(
        p for p in folder.rglob("*") if p.suffix.lower() in MESH_SUFFIXES and p.is_file() and p.resolve() not in referenced
    )

    objects, names = [], set()
    skipped = [(p, f"unsupported mesh format '{p.suffix}'; convert it to one of {list(MESH_SUFFIXES)}")
               for p in sorted(folder.rglob("*")) if p.suffix.lower() in OTHER_3D_SUFFIXES and p.is_file()
               and p.resolve() not in referenced]
    for p in urdfs + loose:
        try:
            if p.suffix == ".urdf":
                obj = load_urdf_object(p, mesh_root=mesh_root)
            else:
                obj = load_mesh_object(p, density=density)
        except AssetError as exc:
            skipped.append((p, str(exc)))
            continue
        if obj.name in names:
            skipped.append((p, f"duplicate object name '{obj.name}'"))
            continue
        names.add(obj.name)
        objects.append(obj)
    return objects, skipped
