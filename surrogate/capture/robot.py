"""The robot a capture was recorded with, as files in the dataset: its MJCF and the mesh, texture and height-field
files that MJCF names, under ``meta/robot/`` (``DatasetMeta.robot_files``; ``docs/capture-format.md``).

``bundle`` turns an ``MjSpec`` into one self-contained MJCF (includes inlined by MuJoCo, every asset file named by
its base name) and the bytes of those files; ``robot_entry`` does it for an MJCF on disk (``surrogate import
lerobot`` with ``hand.mjcf``). The hand's description (names of its pads, servos and dimensions) is checked where a
scene is built from it (``scenes.hand_model``).
"""

from __future__ import annotations

import re
from pathlib import Path

import mujoco

from ..errors import CaptureError

ROBOT_DIR = "meta/robot"  # where a capture keeps its robot's MJCF and asset files


def _file_assets(spec: mujoco.MjSpec):
    """(element, folder attribute) of every asset of ``spec`` that names a file."""
    for el in spec.meshes:
        yield el, "meshdir"
    for el in spec.textures:
        yield el, "texturedir"
    for el in spec.hfields:
        yield el, "meshdir"


def bundle(spec: mujoco.MjSpec, *, base: Path | None = None, label: str = "robot") -> tuple[str, dict]:
    """(MJCF text, {file name: bytes}) of ``spec`` (modified: its asset files renamed to their base names; two
    different files of one base name, e.g. ``left/finger.stl`` and ``right/finger.stl``, become ``finger.stl`` and
    ``finger-2.stl``).

    ``base``: the folder relative paths are resolved from (the MJCF's own; None: the current folder).

    Raises:
      CaptureError: an asset file that is missing, or an MJCF MuJoCo cannot write.
    """
    base = Path(".") if base is None else Path(base)
    files = {}
    for el, folder in _file_assets(spec):
        name = el.file
        if not name:  # a builtin texture, a mesh given by vertices
            continue
        path = Path(name)
        if not path.is_absolute():
            path = base / (getattr(spec, folder) or "") / path
        if not path.is_file():
            raise CaptureError(f"the {label}'s MJCF names {name!r}, which is not a file ({path})", file=path,
                               field="hand.mjcf")
        data, key, k = path.read_bytes(), path.name, 1
        while files.get(key, data) != data:
            k += 1
            key = f"{path.stem}-{k}{path.suffix}"
        files[key] = data
        el.file = key
    spec.meshdir = spec.texturedir = ""
    spec.assets = {**spec.assets, **files}  # ``to_xml`` compiles: it finds the renamed files here
    try:
        return spec.to_xml(), files
    except ValueError as e:
        raise CaptureError(f"MuJoCo cannot write the {label}'s MJCF: {e}", file=base, field="hand.mjcf") from e


def entry(name: str, xml: str, assets: dict, description: dict, *, folder: str = ROBOT_DIR) -> tuple[dict, dict]:
    """(``DatasetMeta.hand``, ``DatasetMeta.robot_files``) of the robot ``name``: its MJCF ``xml`` at
    ``<folder>/<name>.xml`` (the name made file-safe), its ``assets`` beside it (one that would take the MJCF's
    file name is refused)."""
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", str(name)).strip(".") or "robot"
    if f"{stem}.xml" in assets:
        raise CaptureError(f"an asset file of robot {name!r} is named {stem}.xml, the name of its MJCF in the "
                           "capture", field="hand.mjcf")
    target = f"{folder}/{stem}.xml"
    files = {target: xml.encode()} | {f"{folder}/{k}": v for k, v in assets.items()}
    return {"name": name, "mjcf": target, "description": description}, files


def robot_entry(name: str, mjcf, description: dict, *, folder: str = ROBOT_DIR) -> tuple[dict, dict]:
    """``entry`` of the robot ``name`` whose MJCF is the file ``mjcf`` (``bundle``: includes inlined, asset files
    copied).

    Raises:
      CaptureError: an MJCF MuJoCo cannot read, or a missing asset file (naming it).
    """
    path = Path(mjcf)
    try:
        spec = mujoco.MjSpec.from_file(str(path))
    except ValueError as e:
        raise CaptureError(f"MuJoCo cannot read the robot's MJCF: {e}", file=path, field="hand.mjcf") from e
    xml, assets = bundle(spec, base=path.parent, label=f"robot {name!r}")
    return entry(name, xml, assets, description, folder=folder)
