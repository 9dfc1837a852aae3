"""Generic importer for tracked trajectories of a freely moving object.

Any lab's mocap or vision tracks of an object (one file per episode: CSV, NPZ or
torch tensors) plus the object's mesh and mass become a capture dataset. Columns,
rotation convention and units come from YAML (``configs/import/poses.yaml`` holds
the defaults and documents every key) and ``--set key=value`` overrides.

Poses in the files are of the mesh file's frame (what a tracker reports); the
capture format stores the pose of the centre-of-mass frame, so positions are
shifted by the rotated centre-of-mass offset computed from the mesh.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import torch
from scipy.spatial.transform import Rotation
from tqdm import tqdm

from ..capture import DatasetMeta, Environment, Episode, ObjectSpec, Provenance, validate_episode
from ..capture.schema import ENVIRONMENT_KINDS, UNIT_TO_SI
from ..config import apply_overrides, check_keys, get_dotted, load_yaml, merge, naming_overrides, set_dotted
from ..errors import AssetError, CaptureError, ConfigError
from ..paths import CONFIG_DIR, file_sha256
from .csv_table import read_csv
from .floor_check import rest_gap_warnings
from .report import ImportReport

DEFAULT_CONFIG = CONFIG_DIR / "import" / "poses.yaml"
ORIENTATIONS = {"quat_wxyz": 4, "quat_xyzw": 4, "euler_xyz": 3, "rotvec": 3}
FORMATS = {".csv": "csv", ".txt": "csv", ".npz": "npz", ".pt": "pt", ".pth": "pt"}
TOP_KEYS = {"format", "pattern", "columns", "orientation", "array", "rate_hz", "units", "tracked_frame", "object", "environment", "provenance"}
SECTION_KEYS = {
    "units": {"time", "length", "angle"},
    "object": {"mesh", "urdf", "mass", "density", "scale", "friction", "name"},
    "environment": {"kind", "height", "gravity"},
    "provenance": {"source", "real", "license", "notes"},
}
# key -> (low, high, None allowed): numbers a config may hold, with the range that makes physical sense.
NUMBER_RANGES = {
    "rate_hz": (1e-3, 1e5, True),
    "object.mass": (1e-6, 1e4, True),
    "object.density": (1e-3, 1e5, True),
    "object.friction": (0.0, 10.0, True),
    "environment.height": (-100.0, 100.0, False),
}
FLOAT_TEXT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")  # e.g. "1e9", which YAML 1.1 reads as text


def _as_number(value, *, file, key, lo, hi, allow_none=False):
    """``value`` as a float in [lo, hi] (numeric text such as ``1e9`` included); ConfigError naming ``key``."""
    if value is None and allow_none:
        return None
    if isinstance(value, str) and FLOAT_TEXT.match(value.strip()):
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"must be a number, got {value!r}", file=file, key=key)
    if not lo <= value <= hi:
        raise ConfigError(f"must be in [{lo:g}, {hi:g}], got {value:g}", file=file, key=key)
    return float(value)


def check_values(cfg: dict, *, file) -> None:
    """Sections are mappings with known keys; numbers are numbers in range (converted in place)."""
    for section, keys in SECTION_KEYS.items():
        if not isinstance(cfg.get(section), dict):
            raise ConfigError(f"must be a mapping, got {cfg.get(section)!r}", file=file, key=section)
        check_keys(cfg[section], keys, where=section, file=file)
    for key, (lo, hi, allow_none) in NUMBER_RANGES.items():
        set_dotted(cfg, key, _as_number(get_dotted(cfg, key), file=file, key=key, lo=lo, hi=hi, allow_none=allow_none))
    g = cfg["environment"].get("gravity")
    if not isinstance(g, (list, tuple)) or len(g) != 3:
        raise ConfigError(f"must be 3 numbers [gx, gy, gz] in m/s^2, got {g!r}", file=file, key="environment.gravity")
    cfg["environment"]["gravity"] = [_as_number(v, file=file, key="environment.gravity", lo=-1e3, hi=1e3) for v in g]
    scale = cfg["object"].get("scale", 1.0)
    if isinstance(scale, (list, tuple)) and len(scale) == 3:
        cfg["object"]["scale"] = [_as_number(v, file=file, key="object.scale", lo=1e-6, hi=1e3) for v in scale]
    else:
        cfg["object"]["scale"] = _as_number(scale, file=file, key="object.scale", lo=1e-6, hi=1e3)
    if not isinstance(cfg["provenance"].get("real", True), bool):
        raise ConfigError(f"must be true or false, got {cfg['provenance']['real']!r}", file=file, key="provenance.real")


def load_config(path=None, overrides=()) -> dict:
    """Defaults merged with the user's YAML and ``key=value`` overrides, checked."""
    cfg = load_yaml(DEFAULT_CONFIG)
    if path is not None:
        user = load_yaml(path)
        check_keys(user, TOP_KEYS, where="", file=path)
        cfg = merge(cfg, user)
    cfg = apply_overrides(cfg, list(overrides), file=path)
    with naming_overrides(list(overrides)):
        return check_config(cfg, file=path or DEFAULT_CONFIG)


def check_config(cfg: dict, *, file) -> dict:
    """``cfg`` (defaults, file and overrides merged) checked: keys, values, units, columns; errors name ``file``."""
    check_keys(cfg, TOP_KEYS, where="", file=file)
    check_values(cfg, file=file)
    if cfg["orientation"] not in ORIENTATIONS:
        raise ConfigError(f"must be one of {sorted(ORIENTATIONS)}, got {cfg['orientation']!r}", file=file, key="orientation")
    if cfg["format"] not in ("auto", "csv", "npz", "pt"):
        raise ConfigError(f"must be auto, csv, npz or pt, got {cfg['format']!r}", file=file, key="format")
    for q, allowed in (("time", ("s", "ms", "us", "ns")), ("length", ("m", "cm", "mm", "in")), ("angle", ("rad", "deg"))):
        u = cfg["units"].get(q)
        if u not in allowed:
            raise ConfigError(f"unknown unit {u!r}; allowed: {list(allowed)}", file=file, key=f"units.{q}")
    cols = cfg["columns"]
    check_keys(cols, {"time", "position", "orientation"}, where="columns", file=file)
    if cols.get("time") is None and not cfg.get("rate_hz"):
        raise ConfigError("no time column: give rate_hz", file=file, key="rate_hz")
    n_rot = ORIENTATIONS[cfg["orientation"]]
    if not isinstance(cols.get("orientation"), (list, str)) or (isinstance(cols["orientation"], list) and len(cols["orientation"]) != n_rot):
        raise ConfigError(f"needs {n_rot} columns for {cfg['orientation']}", file=file, key="columns.orientation")
    if not isinstance(cols.get("position"), (list, str)) or (isinstance(cols["position"], list) and len(cols["position"]) != 3):
        raise ConfigError("needs 3 columns (x, y, z)", file=file, key="columns.position")
    if cfg["tracked_frame"] not in ("mesh", "com"):
        raise ConfigError("must be mesh or com", file=file, key="tracked_frame")
    if cfg["environment"]["kind"] not in ENVIRONMENT_KINDS:
        raise ConfigError(f"must be one of {list(ENVIRONMENT_KINDS)}", file=file, key="environment.kind")
    if not cfg["provenance"].get("source"):
        raise ConfigError("say who recorded the data and how (e.g. provenance.source='lab X, OptiTrack')", file=file, key="provenance.source")
    return cfg


# -- reading one file into named columns ------------------------------------------

def _read_arrays(path: Path, fmt: str, array_name) -> tuple[dict, np.ndarray | None]:
    """(named arrays, main 2-D array or None) from NPZ or torch files."""
    try:
        if fmt == "npz":
            with np.load(path, allow_pickle=False) as z:
                named = {k: np.asarray(z[k]) for k in z.files}
        else:
            obj = torch.load(path, weights_only=True, map_location="cpu")
            if isinstance(obj, torch.Tensor):
                named = {"": obj.detach().double().numpy()}
            elif isinstance(obj, dict):
                named = {str(k): v.detach().double().numpy() for k, v in obj.items() if isinstance(v, torch.Tensor)}
            else:
                raise CaptureError(f"holds a {type(obj).__name__}; expected a tensor or a dict of tensors", file=path)
    except CaptureError:
        raise
    except Exception as e:
        raise CaptureError(f"unreadable {fmt} file ({type(e).__name__}: {str(e)[:120]})", file=path) from None
    if array_name is not None:
        if array_name not in named:
            raise CaptureError(f"no array named {array_name!r}; arrays: {sorted(named)}", file=path, field="array")
        main = named[array_name]
    else:
        two_d = [v for v in named.values() if v.ndim >= 2]
        main = two_d[0] if len(two_d) == 1 else None
    if main is not None:
        main = main.reshape(-1, main.shape[-1]) if main.ndim == 3 and main.shape[0] == 1 else main
    return named, main


def _select(spec, header, data, named, *, path, field) -> tuple[np.ndarray, list[str]]:
    """Columns ``spec`` (name(s) or index/indices, or an array name) -> ([T, n] float64, column labels)."""
    if isinstance(spec, str) and named and spec in named:
        a = np.asarray(named[spec], dtype=np.float64)
        a = a.reshape(len(a), -1)
        return a, [f"{spec}[{i}]" for i in range(a.shape[1])]
    specs = spec if isinstance(spec, list) else [spec]
    idx = []
    for s in specs:
        if isinstance(s, int):
            j = s
        elif header is not None and s in header:
            j = header.index(s)
        else:
            where = f"header {header}" if header else f"arrays {sorted(named)}" if named else "no header"
            raise CaptureError(f"column {s!r} not found ({where})", file=path, field=field)
        if data is None or not 0 <= j < data.shape[1]:
            raise CaptureError(f"column index {j} out of range", file=path, field=field)
        idx.append(j)
    labels = [header[j] if header else f"{field} (column {j})" for j in idx]
    return data[:, idx], labels


def _to_quat_wxyz(rot: np.ndarray, kind: str, angle_scale: float) -> np.ndarray:
    if kind == "quat_wxyz":
        return rot
    if kind == "quat_xyzw":
        return rot[:, [3, 0, 1, 2]]
    r = Rotation.from_euler("xyz", rot * angle_scale) if kind == "euler_xyz" else Rotation.from_rotvec(rot * angle_scale)
    return r.as_quat(scalar_first=True)


def read_track(path: Path, cfg: dict) -> tuple[np.ndarray, np.ndarray]:
    """One file -> (timestamps [T] s, poses [T, 7] of the tracked frame, m and wxyz)."""
    fmt = cfg["format"] if cfg["format"] != "auto" else FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise CaptureError(f"unknown file type {path.suffix!r}; set format: csv | npz | pt", file=path, field="format")
    if fmt == "csv":
        header, data = read_csv(path)
        named = {}
    else:
        named, data = _read_arrays(path, fmt, cfg.get("array"))
        header = None
    cols = cfg["columns"]
    pos, pos_labels = _select(cols["position"], header, data, named, path=path, field="position")
    rot, rot_labels = _select(cols["orientation"], header, data, named, path=path, field="orientation")
    if cols.get("time") is not None:
        t, t_labels = _select(cols["time"], header, data, named, path=path, field="time")
        t = UNIT_TO_SI[cfg["units"]["time"]][1] * t[:, 0]
    else:
        t, t_labels = np.arange(len(pos)) / float(cfg["rate_hz"]), ["time"]
    for name, a, labels in (("time", t, t_labels), ("position", pos, pos_labels), ("orientation", rot, rot_labels)):
        if len(a) != len(pos):
            raise CaptureError(f"has {len(a)} rows, position has {len(pos)}", file=path, field=name)
        bad = ~np.isfinite(a.reshape(len(a), -1))
        if bad.any():
            row, col = np.argwhere(bad)[0]
            raise CaptureError(f"non-finite value in row {int(row)}", file=path, field=labels[int(col)])
    pos = pos * UNIT_TO_SI[cfg["units"]["length"]][1]
    q = _to_quat_wxyz(rot, cfg["orientation"], UNIT_TO_SI[cfg["units"]["angle"]][1])
    return t, np.concatenate([pos, q], axis=1)


def _stored(path) -> str:
    """The path a capture stores for its object's file: absolute, as it is read again from any folder."""
    return str(Path(path).resolve())


def object_from_config(ocfg: dict, *, file=None):
    """(ObjectAsset, ObjectSpec) for the ``object`` section: a mesh with mass/density, or a URDF."""
    from ..objects import load_mesh_object, load_urdf_object

    try:
        if ocfg.get("urdf"):
            asset = load_urdf_object(ocfg["urdf"], friction=float(ocfg.get("friction") or 0.8))
            geometry = {"kind": "mesh", "path": _stored(ocfg["urdf"]), "sha256": file_sha256(ocfg["urdf"]), "scale": 1.0}
        elif ocfg.get("mesh"):
            if ocfg.get("mass") is None and ocfg.get("density") is None:
                raise ConfigError("give the object's mass (kg) or density (kg/m^3)", file=file, key="object.mass")
            kw = {"mass": ocfg["mass"]} if ocfg.get("mass") is not None else {"density": float(ocfg["density"])}
            asset = load_mesh_object(ocfg["mesh"], scale=ocfg.get("scale", 1.0), name=ocfg.get("name"),
                                     friction=float(ocfg.get("friction") or 0.8), **kw)
            geometry = {"kind": "mesh", "path": _stored(ocfg["mesh"]), "sha256": file_sha256(ocfg["mesh"]),
                        "scale": ocfg.get("scale", 1.0)}
        else:
            raise ConfigError("give object.mesh (with mass) or object.urdf", file=file, key="object")
    except AssetError as e:
        raise ConfigError(str(e), file=file, key="object") from None
    geometry["com_in_mesh_frame"] = asset.params.get("com_in_source_frame", [0.0, 0.0, 0.0])
    spec = ObjectSpec(name=asset.name, mass=float(asset.mass), inertia=np.asarray(asset.inertia).tolist(),
                      size=float(asset.size), geometry=geometry, friction=float(asset.friction))
    return asset, spec


def mesh_frame_to_com(pose: np.ndarray, com_in_mesh: np.ndarray) -> np.ndarray:
    """Poses [T, 7] of the mesh frame -> poses of the centre-of-mass frame (same orientation)."""
    q = pose[:, 3:7] / np.linalg.norm(pose[:, 3:7], axis=1, keepdims=True)
    R = Rotation.from_quat(q, scalar_first=True)
    out = pose.copy()
    out[:, :3] = pose[:, :3] + R.apply(np.asarray(com_in_mesh, dtype=float))
    return out


def _broken_link(path: Path) -> str:
    """Why a symbolic link cannot be read: it loops, or it leads nowhere."""
    import errno
    import os

    try:
        os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "a symbolic link loop (the link leads back to itself)"
        return f"a dangling symbolic link (to {os.readlink(path)!r}, which does not exist)"
    return "unreadable symbolic link"


def import_poses(src, out, *, config=None, overrides=(), overwrite=False, progress=True) -> ImportReport:
    """Import every matching file under ``src`` as one episode each (sorted by name)."""
    cfg = load_config(config, overrides)
    report = ImportReport(out=Path(out))
    report.check_output(overwrite=overwrite)
    src = Path(src)
    matches = [src] if src.is_file() else sorted(src.glob(cfg["pattern"]))
    files = [p for p in matches if p.is_file()]
    for p in matches:  # a match that is no file because its link leads nowhere: named, not silently ignored
        if p.is_symlink() and not p.exists():
            report.skip(CaptureError(_broken_link(p), file=p, field="file"), file=p, episode=p.stem)
    if cfg["format"] == "auto":
        files = [p for p in files if p.suffix.lower() in FORMATS]
    if not files:
        if report.skipped:
            raise CaptureError(f"no readable trajectory files matching {cfg['pattern']!r}; skipped: "
                               + "; ".join(f"{s.get('file')}: {s.get('reason')}" for s in report.skipped), file=src)
        raise CaptureError(f"no trajectory files matching {cfg['pattern']!r}", file=src)
    asset, obj = object_from_config(cfg["object"], file=config)
    com = np.asarray(obj.geometry["com_in_mesh_frame"]) if cfg["tracked_frame"] == "mesh" else np.zeros(3)
    env = Environment(**cfg["environment"])
    pv = cfg["provenance"]
    episodes = []
    for path in tqdm(files, desc="poses", unit="file", disable=not progress):
        try:
            t, pose = read_track(path, cfg)
            qn = np.linalg.norm(pose[:, 3:7], axis=1)
            if (np.abs(qn - 1) > 1e-2).any():
                i = int(np.argmax(np.abs(qn - 1) > 1e-2))
                raise CaptureError(f"quaternion at row {i} has norm {qn[i]:.4f}, not 1 (wrong column order?)", file=path, field="orientation")
            dt = np.diff(t)
            rate = 1.0 / float(np.median(dt)) if len(dt) and np.median(dt) > 0 else float("nan")
            ep = Episode(
                episode_id=path.stem, timestamps=t, object_pose=mesh_frame_to_com(pose, com), object=obj,
                environment=env,
                provenance=Provenance(source=pv["source"], real=bool(pv.get("real", True)), capture_rate_hz=rate,
                                      upstream_id=path.name, license=pv.get("license"), notes=pv.get("notes")),
                task="free motion",
            )
            validate_episode(ep, file=path)
        except CaptureError as e:
            report.skip(e, file=path, episode=path.stem)
            continue
        except (OSError, ValueError, IndexError) as e:  # anything else one bad file can raise: skip it, keep the rest
            report.skip(CaptureError(f"unreadable ({type(e).__name__}: {str(e)[:120]})", file=path, field="file"),
                        file=path, episode=path.stem)
            continue
        episodes.append(ep)
    # imported as recorded, with a warning where the object rests inside or above its surface (units, surface height)
    vertices = np.concatenate([np.asarray(p.vertices) for p in asset.pieces])
    report.warnings += rest_gap_warnings(vertices, asset.size, episodes)
    meta = DatasetMeta(name=Path(out).name, robot_type="none")
    return report.write(episodes, meta, overwrite=overwrite)
