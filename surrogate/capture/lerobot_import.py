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
import pyarrow.parquet as pq

from ..errors import CaptureError
from .episode import DatasetMeta, Environment, Episode, Provenance, hold_last_valid
from .lerobot_columns import Column, as_2d, check_numbers, plan_columns
from .lerobot_mapping import UNIT_OPTIONS, box_inertia, check_mapping, load_mapping, object_spec  # noqa: F401  (re-exported: the mapping's public API)
from .reader import _read_table, episode_index, metadata_problems, not_a_number
from .robot import robot_entry
from .schema import UNIT_TO_SI
from .validate import validate_episode, validate_meta

QUAT_RENORM_TOL = 0.1  # float32 storage leaves |q| a little off 1; further off is bad data for the validator

INDEX_COLUMNS = ("episode_index", "frame_index", "task_index")
EPISODE_INDEX_COLUMNS = ("episode_index", "length", "data/chunk_index", "data/file_index")  # read from meta/episodes


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
    for key in ("fps", "total_frames", "total_episodes"):
        # text such as "50" would pass float() unnoticed (fps) or turn the check of the totals off
        value = info.get(key)
        why = not_a_number(value)
        if why and (isinstance(value, str) or key == "fps"):
            raise CaptureError(why, file=path, field=key)
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
            pairs.update((int(c), int(f)) for c, f in zip(t["data/chunk_index"].to_pylist(),
                                                          t["data/file_index"].to_pylist()))  # 3.0: whole (checked)
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
    # a task_index of text ("0") would match no frame's task_index: every episode's task silently ""
    check_numbers(table["task_index"].to_numpy(), file=path, field="task_index")
    return dict(zip(table["task_index"].to_pylist(), table[text_col].to_pylist()))


def _check_episode_index(root: Path) -> None:
    """Refuse LeRobot's episode index (meta/episodes) where a column read from it holds no whole numbers: int() reads
    the text "3" as 3 unnoticed, and a file index of text names no data file (``_data_files``). A column of floats is
    left to ``reader.episode_index``, which reads whole ones (a tool that writes 3.0) and refuses the others."""
    for path in sorted((root / "meta/episodes").glob("chunk-*/file-*.parquet")):
        try:
            schema = pq.read_schema(path)
        except (OSError, pa.ArrowException):
            continue  # unreadable: reader.episode_index names it
        for name in EPISODE_INDEX_COLUMNS:
            kind = schema.field(name).type if name in schema.names else None
            if kind is None or pa.types.is_integer(kind) or pa.types.is_floating(kind):  # LeRobot writes int64
                continue
            what = "text" if pa.types.is_string(kind) or pa.types.is_large_string(kind) else "values"
            raise CaptureError(f"holds {what} (type {kind}), expected integers", file=path, field=name)


# --------------------------------------------------------------------------- episodes
def _episode_arrays(table: pa.Table, path: Path, cols: dict) -> dict[int, dict]:
    """episode_index -> {quantity: [T, n] raw values (the timestamps among them), "frame_index": [T], "task_index":
    [T]}. A CaptureError naming ``path`` and the column where the file's frames cannot be told apart (an index column
    of text: "10" sorts before "9", "0" finds no task) or cut into frames (a list column of the wrong width)."""
    index = {name: table[name].to_numpy() for name in INDEX_COLUMNS if name in table.column_names}
    for name, values in index.items():
        check_numbers(values, file=path, field=name)
    ep_idx, frame = index["episode_index"], index["frame_index"]
    task = index.get("task_index", np.zeros(len(ep_idx), np.int64))
    raw = {name: as_2d(table[c.key], c.width, file=path, field=c.key) for name, c in cols.items()}
    out = {}
    for e in np.unique(ep_idx):
        sel = np.flatnonzero(ep_idx == e)
        arrays = {name: raw[name][sel] for name in cols}
        arrays.update(frame_index=frame[sel], task_index=task[sel])
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


def _episode_id(ep_index: int, mapping: dict) -> str:
    return f"{mapping.get('episode_id_prefix', 'episode_')}{ep_index:06d}"


def _build_episode(ep_index: int, arrays: dict, cols: dict, mapping: dict, scene: dict, tasks: dict) -> Episode:
    episode_id = _episode_id(ep_index, mapping)
    # to SI; a column of text (timestamps among them) is refused for this episode, naming the column
    arrays = {**arrays, **{name: c.convert(arrays[name], episode_id) for name, c in cols.items()}}
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
        timestamps=arrays["timestamps"][:, 0],
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
      a key the dataset lacks, a width mismatch, numbers stored as text in meta/ or info.json (naming file and
      field); with ``on_error="raise"``, also the first skip record's error (same file, episode, field and reason).
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
    cols, found = plan_columns(info, fields, info_path)
    time_spec = fields.get("time", {})
    time_key = time_spec.get("key", "timestamp")
    if time_key not in info["features"]:
        raise CaptureError(f"{time_key!r} is not a feature of this dataset", file=info_path, field="fields.time.key")
    # read and checked as the other columns are (text refused per episode), kept [T, 1] until the episode is built
    cols["timestamps"] = Column("timestamps", time_key, 1, np.array([UNIT_TO_SI[time_spec.get("unit", "s")][1]]))

    joint_names = mapping.get("joint_names") or found.get("joint_names")
    meta = _dataset_meta(root, mapping, info, joint_names, found.get("sensors"), found.get("tactile_unit"))
    validate_meta(meta)
    scene = {
        "object": object_spec(mapping["object"]),
        "environment": dict(mapping.get("environment") or {}),
        "provenance": {"capture_rate_hz": float(info["fps"]), **mapping["provenance"]},
    }
    tasks = _tasks(root)
    # episode_index and frame_index are always read: without them a file's frames cannot be told apart
    index_keys = {"episode_index", "frame_index"} | {"task_index"} & set(info["features"])
    wanted = sorted({c.key for c in cols.values()} | index_keys)

    _check_episode_index(root)
    index = episode_index(root)
    parts, sources, skipped = _read_data(root, info, index, mapping, wanted, cols, on_error)
    unread = bool(skipped)
    counts = {e: sum(len(a["timestamps"]) for a in p) for e, p in parts.items()}
    whole, bad_length = metadata_problems(info, counts, index)
    for key, msg in [] if unread else whole:  # an unread file explains the totals: its episodes are named
        err = CaptureError(msg, file=info_path, field=key)
        if on_error == "raise":
            raise err
        skipped.append(_record(err))
    episodes = []
    for ep_index in sorted(parts):
        path = sources[ep_index]
        try:
            if ep_index in bad_length:
                raise CaptureError(bad_length[ep_index], file=root / "meta/episodes", field="length")
            ep = _build_episode(ep_index, _merge(parts[ep_index]), cols, mapping, scene, tasks)
            validate_episode(ep, meta, file=path)
        except CaptureError as e:
            located = _locate(e, path, ep_index, mapping)
            if on_error == "raise":
                raise located from None
            skipped.append(_record(located))
            continue
        episodes.append(ep)
    meta.skipped = list(skipped)
    return episodes, meta, skipped


def _read_data(root, info, index, mapping, wanted, cols, on_error):
    """({episode: [its arrays per data file]}, {episode: its first data file}, [skip records]) of every data file;
    the episodes of a file that cannot be read (truncated, corrupt) or cut into episodes and frames (an index column of
    text) are skipped (``on_error="skip"``), in every file, the rest kept."""
    parts: dict[int, list[dict]] = {}
    sources: dict[int, Path] = {}  # episode -> (first) data file, named in errors
    skipped, lost = [], set()
    for path in _data_files(root, info):
        table = None
        try:
            table = _read_table(path, wanted)
            per_episode = _episode_arrays(table, path, cols)
        except CaptureError as e:
            errors = _file_errors(e, path, table, root, info, index, mapping)
            if on_error == "raise":
                raise errors[0][1] from None
            skipped += [_record(err) for _, err in errors]
            lost.update(ep for ep, _ in errors)
            continue
        for ep_index, arrays in per_episode.items():
            parts.setdefault(ep_index, []).append(arrays)
            sources.setdefault(ep_index, path)
    for ep_index in lost:  # an episode split over files is not imported with only the frames of its readable ones
        parts.pop(ep_index, None)
    return parts, sources, skipped


def _file_errors(err: CaptureError, path: Path, table, root: Path, info: dict, index: dict, mapping: dict) -> list:
    """[(episode or None, its error)] of a data file that cannot be read or cut: one per episode in it (as its
    episode_index column says where that holds integers, else as LeRobot's index places them), or one naming no
    episode where neither says."""
    eps = []
    if table is not None and "episode_index" in table.column_names:
        column = table["episode_index"].to_numpy()
        eps = [int(e) for e in np.unique(column)] if column.dtype.kind in "iu" else []
    template = info.get("data_path")
    eps = eps or [e for e, v in sorted(index.items()) if template and v["data_file"] is not None
                  and root / template.format(chunk_index=v["data_file"][0], file_index=v["data_file"][1]) == path]
    err = CaptureError(err.reason, file=path, field=err.field or "file")  # a missing or bad column is named
    return [(e, _locate(err, path, e, mapping)) for e in eps] or [(None, err)]


def _locate(err: CaptureError, path: Path, ep_index: int, mapping: dict) -> CaptureError:
    """``err`` naming the data file and the episode too where it did not: the one error both modes give (raised, or
    recorded by ``_record``), so that a raised error names what the skip report names."""
    file, episode = err.file or path, err.episode or _episode_id(ep_index, mapping)
    if (file, episode) == (err.file, err.episode):
        return err
    return CaptureError(err.reason, file=file, episode=episode, field=err.field)


def _record(err: CaptureError) -> dict:
    """The skip record of a located error (``_locate``)."""
    return {"file": str(err.file), "episode": err.episode, "field": err.field, "reason": err.reason}
