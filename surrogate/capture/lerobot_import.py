"""Read a foreign LeRobot v3 dataset (no ``meta/contact.json``) with a key mapping.

A LeRobot dataset knows its feature keys and shapes but not what they mean physically:
units, quaternion order, which column is the object pose, what the object is. The
mapping supplies that, in the same YAML style as the project's other configs::

    fields:
      object_pose: {key: observation.object_pose, layout: [x, y, z, qw, qx, qy, qz], length_unit: m}
      joint_pos: {key: observation.state, unit: m}
      joint_cmd: {key: action, unit: m}
      wrench: {key: observation.wrench, sensors: [wrist]}
    object: {name: box, mass: 0.2, size: 0.06, geometry: {kind: box, half_extents: [0.03, 0.03, 0.03]}, friction: 0.8}
    environment: {kind: table, height: 0.0}
    provenance: {source: "...", real: false}
    angular_frame: world

Per field (all optional except ``object_pose``):
  object_pose: key, layout (the 7 names x y z qw qx qy qz in the column's order, e.g.
    ``[x, y, z, qx, qy, qz, qw]``; default: the feature's names if they are those, else
    w-first), length_unit (default m).
  object_pose_valid: key (nonzero = tracked).
  object_twist: key, linear_unit (m/s), angular_unit (rad/s).
  joint_pos / joint_cmd: key, unit (required: rad, deg, m, mm, ...). joint_vel: key, unit (rad/s, m/s, ...).
  wrench: key, sensors (names; width must be 6 per sensor: fx fy fz tx ty tz), force_unit (N), torque_unit (N*m).
  tactile: key, unit (optional). contact_regions: key.
  time: key (default ``timestamp``), unit (default s).
Top level: object (ObjectSpec fields; ``inertia`` may be left out for a box),
environment, provenance (``source`` and ``real`` required; ``capture_rate_hz`` defaults to
info.json's fps), angular_frame, and optionally name, robot_type, hand, joint_names,
contact_region_seeds, episode_id_prefix. A ``hand`` with ``mjcf`` (a file, relative to the mapping) and
``description`` (``HandInfo``'s fields) is carried into the capture with MuJoCo's help (``capture.robot``).

Only pyarrow and json (and MuJoCo for a hand's MJCF) are used to read; neither LeRobot nor pandas is needed.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..errors import CaptureError
from .episode import DatasetMeta, Environment, Episode, Provenance, hold_last_valid
from .lerobot_mapping import UNIT_OPTIONS, box_inertia, check_mapping, load_mapping, object_spec  # noqa: F401  (re-exported: the mapping's public API)
from .reader import _read_table, episode_index, metadata_problems
from .robot import robot_entry
from .schema import POSE_NAMES, UNIT_TO_SI
from .validate import validate_episode, validate_meta

QUAT_RENORM_TOL = 0.1  # float32 storage leaves |q| a little off 1; further off is bad data for the validator

INDEX_COLUMNS = ("episode_index", "frame_index", "task_index")


# --------------------------------------------------------------------------- scene
def _dataset_meta(root: Path, mapping: dict, info: dict, joint_names, sensors, tactile_unit) -> DatasetMeta:
    hand, files = mapping.get("hand"), {}
    if isinstance(hand, dict) and hand.get("mjcf"):  # the robot's MJCF and its files travel into the capture
        entry, files = robot_entry(str(hand["name"]), hand["mjcf"], hand.get("description"))
        hand = {**hand, **entry}
    return DatasetMeta(
        name=mapping.get("name", root.name), robot_type=mapping.get("robot_type", info.get("robot_type") or "none"),
        hand=hand, robot_files=files, joint_names=joint_names, wrench_sensors=sensors, tactile_unit=tactile_unit,
        angular_frame=mapping.get("angular_frame", "world"),
        contact_region_seeds=mapping.get("contact_region_seeds") or {},
    )


# --------------------------------------------------------------------------- columns
class _Column:
    """How one capture quantity is read from one LeRobot feature.

    ``width``: values per frame in parquet; ``order``: indices that reorder the parquet
    columns into the capture layout (pose), or None; ``scale``: [width] factors to SI, in
    the capture layout.
    """

    def __init__(self, name, key, width, scale, order=None):
        self.name, self.key, self.width, self.scale, self.order = name, key, width, scale, order

    def convert(self, raw: np.ndarray, episode: str) -> np.ndarray:
        """[T, width] raw values -> SI values in the capture layout. Values that are not numbers (text, even of digits,
        which had been parsed as numbers) are refused naming ``episode``, the column and its dtype."""
        if raw.dtype.kind not in "fiub":
            raise CaptureError(f"dtype {raw.dtype} ({type(raw.flat[0]).__name__} values), expected numbers",
                               episode=episode, field=self.key)
        v = raw.astype(np.float64)
        if self.order is not None:
            v = v[:, self.order]
        return v * self.scale


def _feature(info: dict, spec: dict, name: str, info_path: Path) -> dict:
    key = spec["key"]
    feats = info["features"]
    if key not in feats:
        raise CaptureError(f"{key!r} is not a feature of this dataset; features: {sorted(feats)}", file=info_path,
                           field=f"fields.{name}.key")
    return feats[key]


def _plan_columns(info: dict, fields: dict, info_path: Path) -> tuple[dict, dict]:
    """Capture quantity -> _Column, plus the names found (joint names, sensors) for the meta."""
    cols, found = {}, {}
    for name, spec in fields.items():
        if name == "time":
            continue
        feat = _feature(info, spec, name, info_path)
        width = int(np.prod(feat.get("shape") or [1]))
        units = {opt: spec.get(opt, default) for opt, (default, _) in UNIT_OPTIONS[name].items()}
        if name == "object_pose":
            cols[name] = _pose_column(spec, feat, width, units["length_unit"], info_path)
        elif name == "object_twist":
            _need_width(width, 6, name, spec, info_path)
            lin, ang = UNIT_TO_SI[units["linear_unit"]][1], UNIT_TO_SI[units["angular_unit"]][1]
            cols[name] = _Column(name, spec["key"], 6, np.array([lin] * 3 + [ang] * 3))
        elif name == "wrench":
            sensors = spec.get("sensors") or [f"sensor{i}" for i in range(max(width // 6, 1))]
            _need_width(width, 6 * len(sensors), name, spec, info_path)
            f, t = UNIT_TO_SI[units["force_unit"]][1], UNIT_TO_SI[units["torque_unit"]][1]
            cols[name] = _Column(name, spec["key"], width, np.tile([f] * 3 + [t] * 3, len(sensors)))
            found["sensors"] = list(sensors)
        elif name == "object_pose_valid":
            _need_width(width, 1, name, spec, info_path)
            cols[name] = _Column(name, spec["key"], 1, np.ones(1))
        else:  # per-joint, tactile and region arrays: one unit for every component
            unit = units.get("unit") or "1"
            cols[name] = _Column(name, spec["key"], width, np.full(width, UNIT_TO_SI[unit][1] if unit else 1.0))
            if name == "joint_pos" and feat.get("names"):
                found["joint_names"] = [_strip_suffix(n) for n in feat["names"]]
            if name == "tactile" and spec.get("unit"):
                found["tactile_unit"] = UNIT_TO_SI[spec["unit"]][0]
    return cols, found


def _strip_suffix(name: str) -> str:
    # LeRobot names joints "finger_left.pos"; the writer appends ".pos"/".vel"/".cmd" itself.
    base, _, suffix = str(name).rpartition(".")
    return base if base and suffix in ("pos", "vel", "cmd") else str(name)


def _need_width(width: int, want: int, name: str, spec: dict, info_path: Path) -> None:
    if width != want:
        raise CaptureError(f"feature {spec['key']!r} has {width} values per frame, {name} needs {want}", file=info_path,
                           field=f"fields.{name}")


def _pose_column(spec, feat, width, length_unit, info_path) -> _Column:
    _need_width(width, 7, "object_pose", spec, info_path)
    names = feat.get("names")
    from_info = list(names) if isinstance(names, list) and sorted(names) == sorted(POSE_NAMES) else None
    layout = spec.get("layout") or from_info or POSE_NAMES
    if spec.get("layout") and from_info and from_info != list(spec["layout"]):
        # The dataset names its columns and the mapping contradicts it: one of them is wrong.
        raise CaptureError(f"layout {spec['layout']} contradicts the feature's names {from_info} in info.json",
                           file=info_path, field="fields.object_pose.layout")
    order = [layout.index(n) for n in POSE_NAMES]  # capture column i comes from parquet column order[i]
    factor = UNIT_TO_SI[length_unit][1]
    return _Column("object_pose", spec["key"], 7, np.array([factor] * 3 + [1.0] * 4), order)


def _as_2d(col: pa.ChunkedArray, width: int) -> np.ndarray:
    """[T, width] numpy array from a scalar, fixed-size list or list column."""
    col = col.combine_chunks()
    if pa.types.is_fixed_size_list(col.type) or pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
        flat = col.flatten().to_numpy(zero_copy_only=False)
        if flat.size != len(col) * width:
            raise ValueError(f"holds {flat.size} values for {len(col)} frames, expected {width} per frame")
        return flat.reshape(len(col), width)
    return col.to_numpy(zero_copy_only=False).reshape(len(col), 1)


# --------------------------------------------------------------------------- files
def _load_info(root: Path) -> dict:
    path = root / "meta/info.json"
    if not path.is_file():
        raise CaptureError("missing meta/info.json; is this a LeRobot dataset?", file=path)
    try:
        info = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CaptureError(f"corrupt JSON ({e})", file=path) from None
    for key in ("features", "fps"):
        if key not in info:
            raise CaptureError("missing key", file=path, field=key)
    version = str(info.get("codebase_version", ""))
    if not version.startswith("v3"):
        raise CaptureError(f"codebase_version {version!r}: only LeRobot v3 datasets are read (convert v2.x with LeRobot first)",
                           file=path, field="codebase_version")
    return info


def _data_files(root: Path, info: dict) -> list[Path]:
    """Data files named by the episode metadata (LeRobot's own index), else found on disk."""
    ep_files = sorted((root / "meta/episodes").glob("chunk-*/file-*.parquet"))
    template = info.get("data_path")
    if ep_files and template:
        pairs = set()
        for path in ep_files:
            t = _read_table(path, ["data/chunk_index", "data/file_index"])
            pairs.update(zip(t["data/chunk_index"].to_pylist(), t["data/file_index"].to_pylist()))
        files = [root / template.format(chunk_index=c, file_index=f) for c, f in sorted(pairs)]
        for f in files:
            if not f.is_file():
                raise CaptureError("named by meta/episodes but missing", file=f)
        return files
    files = sorted((root / "data").glob("chunk-*/file-*.parquet"))
    if not files:
        raise CaptureError("no data files under data/", file=root)
    return files


def _tasks(root: Path) -> dict[int, str]:
    """task_index -> task text from meta/tasks.parquet (pandas writes the text as the index)."""
    path = root / "meta/tasks.parquet"
    if not path.is_file():
        return {}
    table = _read_table(path, None)
    text_col = "task" if "task" in table.column_names else None
    if text_col is None and table.schema.metadata and b"pandas" in table.schema.metadata:
        index_cols = json.loads(table.schema.metadata[b"pandas"]).get("index_columns") or []
        text_col = next((c for c in index_cols if isinstance(c, str) and c in table.column_names), None)
    if text_col is None or "task_index" not in table.column_names:
        raise CaptureError(f"expected columns task_index and task (or a pandas index), got {table.column_names}", file=path)
    return dict(zip(table["task_index"].to_pylist(), table[text_col].to_pylist()))


# --------------------------------------------------------------------------- episodes
def _episode_arrays(table: pa.Table, cols: dict, time_key: str, time_scale: float) -> dict[int, dict]:
    """episode_index -> {quantity: [T, n] raw values, "timestamps": [T] s, "frame_index": [T], "task_index": [T]}."""
    ep_idx = table["episode_index"].to_numpy()
    frame = table["frame_index"].to_numpy()
    raw = {name: _as_2d(table[c.key], c.width) for name, c in cols.items()}
    t = table[time_key].to_numpy().astype(np.float64) * time_scale
    task = table["task_index"].to_numpy() if "task_index" in table.column_names else np.zeros(len(ep_idx), np.int64)
    out = {}
    for e in np.unique(ep_idx):
        sel = np.flatnonzero(ep_idx == e)
        arrays = {name: raw[name][sel] for name in cols}
        arrays.update(timestamps=t[sel], frame_index=frame[sel], task_index=task[sel])
        out[int(e)] = arrays
    return out


def _merge(parts: list[dict]) -> dict:
    """One episode's arrays from one or more files, concatenated and put in frame order."""
    merged = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    order = np.argsort(merged["frame_index"], kind="stable")
    return {k: v[order] for k, v in merged.items()}


def _normalize_quaternions(pose: np.ndarray) -> np.ndarray:
    """Renormalize near-unit quaternions (float32 storage); leave bad ones for the validator to reject."""
    pose = pose.copy()
    n = np.linalg.norm(pose[:, 3:], axis=1)
    ok = np.isfinite(n) & (np.abs(n - 1.0) <= QUAT_RENORM_TOL)
    pose[ok, 3:] /= n[ok, None]
    return pose


def _build_episode(ep_index: int, arrays: dict, cols: dict, mapping: dict, scene: dict, tasks: dict) -> Episode:
    episode_id = f"{mapping.get('episode_id_prefix', 'episode_')}{ep_index:06d}"
    arrays = {**arrays, **{name: c.convert(arrays[name], episode_id) for name, c in cols.items()}}  # to SI
    kw = {}
    valid = None
    if "object_pose_valid" in arrays:
        valid = arrays["object_pose_valid"][:, 0] != 0
        kw["object_pose_valid"] = valid
    pose = _normalize_quaternions(arrays["object_pose"])
    if valid is not None:
        pose = hold_last_valid(pose, valid)
    for name in ("object_twist", "joint_pos", "joint_vel", "joint_cmd", "tactile", "contact_regions"):
        if name in arrays:
            kw[name] = arrays[name]
    if "wrench" in arrays:
        kw["wrench"] = arrays["wrench"].reshape(len(pose), -1, 6)
    return Episode(
        episode_id=episode_id,
        timestamps=arrays["timestamps"],
        object_pose=pose,
        object=scene["object"],
        provenance=Provenance(**scene["provenance"]),
        environment=Environment(**scene["environment"]),
        task=tasks.get(int(arrays["task_index"][0]), ""),
        **kw,
    )


def read_lerobot(root: str | Path, mapping: dict | str | Path, *, on_error: str = "skip"
                 ) -> tuple[list[Episode], DatasetMeta, list[dict]]:
    """Read the LeRobot v3 dataset at ``root`` as capture episodes.

    Args:
      root: dataset directory (``meta/info.json``, ``data/``, ``meta/episodes/``, ``meta/tasks.parquet``).
      mapping: the mapping dict (see the module docstring) or a path to its YAML file.
      on_error: "skip" leaves an invalid episode out and reports it; "raise" stops at it.
    Returns:
      (episodes in episode_index order, the dataset meta, skipped) where skipped is a list of
      {"file", "episode", "field", "reason"} (also in ``meta.skipped`` so the writer records it).
      Arrays are SI; quaternions unit (w, x, y, z); wrench [T, S, 6].
    Raises:
      ConfigError for a malformed mapping (naming the key), CaptureError for a bad unit,
      a key the dataset lacks, a width mismatch or unreadable files (naming file and field).
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if isinstance(mapping, (str, Path)):
        mapping = load_mapping(mapping)
    else:
        check_mapping(mapping)
    root = Path(root)
    info = _load_info(root)
    info_path = root / "meta/info.json"
    fields = mapping["fields"]
    cols, found = _plan_columns(info, fields, info_path)
    time_spec = fields.get("time", {})
    time_key = time_spec.get("key", "timestamp")
    if time_key not in info["features"]:
        raise CaptureError(f"{time_key!r} is not a feature of this dataset", file=info_path, field="fields.time.key")
    time_scale = UNIT_TO_SI[time_spec.get("unit", "s")][1]

    joint_names = mapping.get("joint_names") or found.get("joint_names")
    meta = _dataset_meta(root, mapping, info, joint_names, found.get("sensors"), found.get("tactile_unit"))
    validate_meta(meta)
    scene = {
        "object": object_spec(mapping["object"]),
        "environment": dict(mapping.get("environment") or {}),
        "provenance": {"capture_rate_hz": float(info["fps"]), **mapping["provenance"]},
    }
    tasks = _tasks(root)
    wanted = sorted({c.key for c in cols.values()} | {time_key} | {k for k in INDEX_COLUMNS if k in info["features"]})

    index = episode_index(root)
    parts, sources, skipped = _read_data(root, info, index, mapping, wanted, cols, time_key, time_scale, on_error)
    unread = bool(skipped)
    counts = {e: sum(len(a["timestamps"]) for a in p) for e, p in parts.items()}
    whole, bad_length = metadata_problems(info, counts, index)
    for key, msg in [] if unread else whole:  # an unread file explains the totals: its episodes are named
        if on_error == "raise":
            raise CaptureError(msg, file=info_path, field=key)
        skipped.append({"file": str(info_path), "episode": None, "field": key, "reason": msg})
    episodes = []
    for ep_index in sorted(parts):
        path = sources[ep_index]
        try:
            if ep_index in bad_length:
                raise CaptureError(bad_length[ep_index], file=root / "meta/episodes", field="length")
            ep = _build_episode(ep_index, _merge(parts[ep_index]), cols, mapping, scene, tasks)
            validate_episode(ep, meta, file=path)
        except CaptureError as e:
            if on_error == "raise":
                raise
            skipped.append(_skip_record(e, path, ep_index, mapping))
            continue
        episodes.append(ep)
    meta.skipped = list(skipped)
    return episodes, meta, skipped


def _read_data(root, info, index, mapping, wanted, cols, time_key, time_scale, on_error):
    """({episode: [its arrays per data file]}, {episode: its first data file}, [skip records]) of every data file;
    an unreadable (truncated, corrupt) file's episodes are skipped (``on_error="skip"``), the rest kept."""
    parts: dict[int, list[dict]] = {}
    sources: dict[int, Path] = {}  # episode -> (first) data file, named in errors
    skipped = []
    for path in _data_files(root, info):
        try:
            table = _read_table(path, wanted)
        except CaptureError as e:
            if on_error == "raise":
                raise
            skipped += _unreadable_file(e, path, root, info, index, mapping)
            continue
        try:
            per_episode = _episode_arrays(table, cols, time_key, time_scale)
        except ValueError as e:
            raise CaptureError(str(e), file=path) from None
        for ep_index, arrays in per_episode.items():
            parts.setdefault(ep_index, []).append(arrays)
            sources.setdefault(ep_index, path)
    return parts, sources, skipped


def _unreadable_file(err: CaptureError, path: Path, root: Path, info: dict, index: dict, mapping: dict) -> list[dict]:
    """The skip records of an unreadable data file: one per episode LeRobot's index places in it (or one for the
    file, when the index does not say)."""
    template = info.get("data_path")
    eps = [e for e, v in sorted(index.items()) if template and v["data_file"] is not None
           and root / template.format(chunk_index=v["data_file"][0], file_index=v["data_file"][1]) == path]
    field = err.field or "file"  # a missing column is named
    if not eps:
        return [{"file": str(path), "episode": None, "field": field, "reason": err.reason}]
    return [_skip_record(CaptureError(err.reason, file=path, field=field), path, e, mapping) for e in eps]


def _skip_record(err: CaptureError, path: Path, ep_index: int, mapping: dict) -> dict:
    episode = err.episode or f"{mapping.get('episode_id_prefix', 'episode_')}{ep_index:06d}"
    return {"file": str(err.file or path), "episode": episode, "field": err.field, "reason": err.reason}
