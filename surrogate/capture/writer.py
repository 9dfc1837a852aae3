"""Writer: episodes -> a LeRobotDataset v3 tree plus ``meta/contact.json``, atomically.

The whole tree is built under a temporary sibling directory and renamed into place
when complete, so an interrupted write never leaves a dataset that looks finished.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import __version__
from ..atomic import atomic_directory, write_json_atomic
from ..config import plain
from ..errors import CaptureError, ForeignOutputError
from .episode import DatasetMeta, Episode
from .features import arrow_column, feature_layout, flat, hf_features, is_scalar, quantity
from .schema import CODEBASE_VERSION, CONTACT_META, SCHEMA_NAME, SCHEMA_VERSION
from .stats import aggregate_stats, feature_stats
from .validate import validate_episode, validate_meta

DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"


DATASET_ENTRIES = ("meta", "data")  # what the writer puts at a dataset's top level


def check_replaceable_dataset(path: str | Path) -> None:
    """Raise ForeignOutputError unless ``path`` is a capture dataset this project wrote.

    ``--overwrite`` replaces an earlier output, never a folder of something else: the
    folder must hold a ``meta/contact.json`` whose ``schema`` is this project's, and nothing at its top level that
    the writer does not write (``DATASET_ENTRIES``).
    """
    path = Path(path)
    advice = "refusing to replace it; move or delete it yourself, or choose another output"
    if path.is_symlink() or not path.is_dir():
        raise ForeignOutputError(f"is not a capture dataset folder ({'a symlink' if path.is_symlink() else 'a file'}); {advice}", file=path)
    contact = path / CONTACT_META
    try:
        schema = json.loads(contact.read_text()).get("schema")
    except (OSError, ValueError, AttributeError):
        schema = None
    if schema != SCHEMA_NAME:
        raise ForeignOutputError(f"is not a capture dataset (no {CONTACT_META} written by contact-surrogate); {advice}",
                                 file=path)
    foreign = sorted(p.name for p in path.iterdir() if p.name not in DATASET_ENTRIES)
    if foreign:  # a user's own notes or analysis beside the dataset: replacing the folder would delete them
        raise ForeignOutputError(f"holds what a capture dataset does not ({', '.join(foreign[:5])}"
                                 f"{' ...' if len(foreign) > 5 else ''}): replacing it would delete them; move them "
                                 "out first, or choose another output", file=path)


def _jsonable(obj, *, episode, field):
    """``obj`` as plain JSON types (``surrogate.config.plain``); CaptureError if not JSON-able.

    Checked at ``add`` time so that a bad label fails naming its episode, not later in
    ``close`` when the whole dataset is lost.
    """
    out = plain(obj)
    try:
        json.dumps(out, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise CaptureError(f"not JSON-serializable ({e})", episode=episode, field=field) from None
    return out


class CaptureWriter:
    """Streams episodes into a new capture dataset; ``close()`` publishes it atomically.

    Use as a context manager; on an exception nothing is published::

        with CaptureWriter(out, meta) as w:
            for ep in episodes:
                w.add(ep)

    The first episode fixes which optional arrays the dataset holds (LeRobot features
    are dataset-wide) and, unless ``meta.capture_rate_hz`` does, its capture rate; a later
    episode that differs is rejected naming the field.
    """

    def __init__(self, root: str | Path, meta: DatasetMeta, *, overwrite: bool = False,
                 data_file_mb: int = 100, chunks_size: int = 1000):
        validate_meta(meta)
        self.root = Path(root)
        self.meta = meta
        self.data_file_mb = data_file_mb
        self.chunks_size = chunks_size
        self._ctx = atomic_directory(self.root, overwrite=overwrite, replaceable=check_replaceable_dataset)
        self._tmp = self._ctx.__enter__()
        self._layout = None
        self._writer = None
        self._file_bytes = 0
        self._chunk, self._file = 0, 0
        self._episodes_rows: list[dict] = []
        self._episode_meta: list[dict] = []
        self._objects: dict[str, dict] = {}
        self._tasks: dict[str, int] = {}
        self._stats: dict[str, list] = {}
        self._index = 0
        self._ids: set[str] = set()
        self._closed = False
        self._truth_shapes: dict[str, list] = {}
        self._rate_meta = meta  # the meta episodes are checked against; its capture_rate_hz: the first episode's

    # -- per episode ---------------------------------------------------------
    def add(self, ep: Episode) -> None:
        """Validate ``ep`` against the format and the episodes before it, then write it.

        All checks run before any state changes, so a rejected episode leaves the writer
        as it was (the caller may catch the CaptureError and go on).
        """
        validate_episode(ep, self._rate_meta)
        if ep.episode_id in self._ids:
            raise CaptureError("duplicate episode id", episode=ep.episode_id, field="episode_id")
        layout = feature_layout(ep, self.meta)
        truth_shapes = {k: list(np.asarray(v).shape[1:]) for k, v in ep.truth.items()}
        if self._layout is not None:
            self._check_same_features(ep, layout, truth_shapes)
        obj_json = _jsonable(ep.object.to_json(), episode=ep.episode_id, field="object")
        known = self._objects.get(ep.object.name)
        if known is not None and known != obj_json:
            raise CaptureError(f"object '{ep.object.name}' differs from an earlier episode's object of the same name",
                               episode=ep.episode_id, field="object")
        json_parts = {name: _jsonable(value, episode=ep.episode_id, field=name) for name, value in (
            ("labels", ep.labels), ("environment", ep.environment.to_json()), ("provenance", ep.provenance.to_json()))}
        if self._layout is None:
            self._layout = layout
            self._truth_shapes = truth_shapes
            self._features = self._features_json(layout)
            self._schema = self._arrow_schema()
            if self.meta.capture_rate_hz is None:  # one rate per dataset (LeRobot's fps): the first episode's
                self._rate_meta = dataclasses.replace(self.meta, capture_rate_hz=float(ep.provenance.capture_rate_hz))
        self._ids.add(ep.episode_id)
        self._write_frames(ep, obj_json, json_parts)

    def _check_same_features(self, ep: Episode, layout: dict, truth_shapes: dict) -> None:
        """LeRobot features are dataset-wide: ``ep`` must have the first episode's fields and widths."""
        if set(layout) != set(self._layout):
            diff = sorted(set(layout) ^ set(self._layout))
            raise CaptureError(f"has fields {diff} differently from the dataset's first episode", episode=ep.episode_id, field=diff[0])
        for key, (_, _, names, _, _) in layout.items():
            if names is not None and len(names) != len(self._layout[key][2]):
                raise CaptureError(f"width {len(names)} differs from the dataset's {len(self._layout[key][2])}", episode=ep.episode_id, field=key)
        if truth_shapes != self._truth_shapes:
            raise CaptureError(f"truth shapes {truth_shapes} differ from the first episode's {self._truth_shapes}",
                               episode=ep.episode_id, field="truth")

    def _features_json(self, layout):
        feats = {}
        for key, (_, dtype, names, _, _) in layout.items():
            feats[key] = {"dtype": dtype, "shape": [len(names) if names else 1], "names": names}
        feats["timestamp"] = {"dtype": "float32", "shape": [1], "names": None}
        for k in ("frame_index", "episode_index", "index", "task_index"):
            feats[k] = {"dtype": "int64", "shape": [1], "names": None}
        return feats

    def _arrow_schema(self):
        fields = []
        for key, f in self._features.items():
            if f["dtype"] == "bool":
                fields.append(pa.field(key, pa.bool_()))
            elif f["dtype"] == "int64":
                fields.append(pa.field(key, pa.int64()))
            elif is_scalar(f):
                fields.append(pa.field(key, pa.float32()))
            else:
                fields.append(pa.field(key, pa.list_(pa.float32(), f["shape"][0])))
        meta = {b"huggingface": json.dumps(hf_features(self._features)).encode()}
        return pa.schema(fields, metadata=meta)

    def _values(self, ep, source):
        if source.startswith("truth:"):
            a = np.asarray(ep.truth[source[6:]])
            return a.reshape(len(a), -1)
        if source in ("object_pose", "env_state"):
            p = np.asarray(ep.object_pose, dtype=np.float64).copy()
            p[:, 3:] /= np.linalg.norm(p[:, 3:], axis=1, keepdims=True)  # store unit quaternions
            return p
        return flat(ep, source)

    def _write_frames(self, ep: Episode, obj_json: dict, json_parts: dict):
        T = ep.num_frames
        task = ep.task or "capture"
        task_index = self._tasks.setdefault(task, len(self._tasks))
        cols, stats = {}, {}
        for key, (source, dtype, _, _, _) in self._layout.items():
            v = self._values(ep, source)
            cols[key] = arrow_column(v, dtype, self._features[key])
            stats[key] = feature_stats(np.asarray(v, dtype=np.float32 if dtype != "bool" else bool).reshape(T, -1))
        t_rel = np.asarray(ep.timestamps, dtype=np.float64) - float(ep.timestamps[0])
        cols["timestamp"] = pa.array(t_rel.astype(np.float32))
        cols["frame_index"] = pa.array(np.arange(T, dtype=np.int64))
        cols["episode_index"] = pa.array(np.full(T, len(self._episode_meta), dtype=np.int64))
        cols["index"] = pa.array(np.arange(self._index, self._index + T, dtype=np.int64))
        cols["task_index"] = pa.array(np.full(T, task_index, dtype=np.int64))
        for k in ("timestamp", "frame_index", "episode_index", "index", "task_index"):
            stats[k] = feature_stats(cols[k].to_numpy(zero_copy_only=False)[:, None])
        table = pa.Table.from_pydict({k: cols[k] for k in self._schema.names}, schema=self._schema)

        if self._writer is not None and self._file_bytes > self.data_file_mb * 1e6:
            self._writer.close()
            self._writer = None
            self._file += 1
            if self._file >= self.chunks_size:
                self._chunk, self._file = self._chunk + 1, 0
        if self._writer is None:
            path = self._tmp / DATA_PATH.format(chunk_index=self._chunk, file_index=self._file)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = pq.ParquetWriter(path, self._schema)
            self._file_bytes = 0
        self._writer.write_table(table)
        self._file_bytes += table.nbytes

        ep_index = len(self._episode_meta)
        row = {
            "episode_index": ep_index, "tasks": [task], "length": T,
            "data/chunk_index": self._chunk, "data/file_index": self._file,
            "dataset_from_index": self._index, "dataset_to_index": self._index + T,
        }
        for key, st in stats.items():
            for name, v in st.items():
                row[f"stats/{key}/{name}"] = v
        row["meta/episodes/chunk_index"] = 0
        row["meta/episodes/file_index"] = 0
        self._episodes_rows.append(row)
        for key, st in stats.items():
            self._stats.setdefault(key, []).append(st)
        self._index += T
        self._objects.setdefault(ep.object.name, obj_json)
        self._episode_meta.append({
            "episode_index": ep_index,
            "episode_id": ep.episode_id,
            "object": ep.object.name,
            "environment": json_parts["environment"],
            "provenance": json_parts["provenance"],
            "task": task,
            "grasp_type": None if ep.grasp_type is None else int(ep.grasp_type),
            "labels": json_parts["labels"],
            "t0": float(ep.timestamps[0]) + float(ep.t0),
            "truth_fields": sorted(ep.truth),
        })

    # -- finish ---------------------------------------------------------------
    def close(self) -> Path:
        """Write the metadata and publish the dataset at ``root``. Returns ``root``."""
        if self._closed:
            return self.root
        if not self._episode_meta:
            self.abort()
            raise CaptureError("no valid episodes to write", file=self.root)
        try:
            self._publish()
        except BaseException:
            # A failure while writing the metadata must not leave the temporary tree behind.
            self.abort()
            raise
        return self.root

    def _publish(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        tmp = self._tmp
        rows = self._episodes_rows
        ep_table = pa.Table.from_pylist(rows)
        ep_path = tmp / EPISODES_PATH.format(chunk_index=0, file_index=0)
        ep_path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(ep_table, ep_path)
        self._write_tasks(tmp / "meta/tasks.parquet")
        stats = {k: aggregate_stats(v) for k, v in self._stats.items()}
        write_json_atomic(tmp / "meta/stats.json", stats)
        rates = [e["provenance"]["capture_rate_hz"] for e in self._episode_meta]
        n = len(self._episode_meta)
        info = {
            "codebase_version": CODEBASE_VERSION,
            "robot_type": self.meta.robot_type,
            "total_episodes": n,
            "total_frames": self._index,
            "total_tasks": len(self._tasks),
            "chunks_size": self.chunks_size,
            "data_files_size_in_mb": self.data_file_mb,
            "video_files_size_in_mb": 200,
            # LeRobot wants an integer rate; the exact one is in meta/contact.json.
            "fps": int(round(float(np.median(rates)))),
            "splits": {"train": f"0:{n}"},
            "data_path": DATA_PATH,
            "video_path": None,
            "features": self._features,
        }
        write_json_atomic(tmp / "meta/info.json", info)
        for rel, data in self.meta.robot_files.items():  # the robot's MJCF and meshes (validated: under meta/robot/)
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_bytes(data)
        contact = {
            "schema": SCHEMA_NAME,
            "schema_version": SCHEMA_VERSION,
            "writer": f"contact-surrogate {__version__}",
            "name": self.meta.name,
            "capture_rate_hz": float(np.median(rates)),
            "features": {
                key: {"quantity": quantity(src), "units": units, "frame": frame,
                      "evaluation_only": src.startswith("truth:"),
                      # parquet holds truth flattened to [T, n]; this restores [T, ...] on read.
                      **({"shape": self._truth_shapes[src[6:]]} if src.startswith("truth:") else {})}
                for key, (src, _, _, units, frame) in self._layout.items()
            } | {"timestamp": {"quantity": "time since the episode's first frame (t0 in episodes)", "units": ["s"],
                               "frame": None, "evaluation_only": False}},
            "hand": self.meta.hand,
            "joint_names": self.meta.joint_names,
            "wrench_sensors": self.meta.wrench_sensors,
            "tactile_unit": self.meta.tactile_unit,
            "angular_frame": self.meta.angular_frame,
            "contact_region_seeds": {k: np.asarray(v, dtype=float).tolist() for k, v in self.meta.contact_region_seeds.items()},
            "objects": self._objects,
            "episodes": self._episode_meta,
            "skipped": list(self.meta.skipped),
        }
        if self.meta.object_joint_names is not None:  # articulated objects only: rigid datasets keep their bytes
            contact["object_joint_names"] = list(self.meta.object_joint_names)
        # contact.json is written last: a tree without it is not a capture dataset.
        write_json_atomic(tmp / CONTACT_META, contact)
        self._ctx.__exit__(None, None, None)
        self._closed = True

    def _write_tasks(self, path):
        # Same bytes LeRobot (pandas) writes: tasks as the index, task_index as a column.
        names = list(self._tasks)
        pandas_meta = {
            "index_columns": ["__index_level_0__"],
            "column_indexes": [{"name": None, "field_name": None, "pandas_type": "unicode", "numpy_type": "object",
                                "metadata": {"encoding": "UTF-8"}}],
            "columns": [
                {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64", "metadata": None},
                {"name": None, "field_name": "__index_level_0__", "pandas_type": "unicode", "numpy_type": "object", "metadata": None},
            ],
            "attributes": {}, "creator": {"library": "pyarrow", "version": pa.__version__}, "pandas_version": "2.2.0",
        }
        schema = pa.schema([pa.field("task_index", pa.int64()), pa.field("__index_level_0__", pa.string())],
                           metadata={b"pandas": json.dumps(pandas_meta).encode()})
        table = pa.Table.from_pydict({"task_index": [self._tasks[n] for n in names], "__index_level_0__": names}, schema=schema)
        pq.write_table(table, path)

    def abort(self) -> None:
        """Discard everything written so far; ``root`` is left as it was."""
        if self._closed:
            return
        if self._writer is not None:
            self._writer.close()
        self._closed = True
        try:
            self._ctx.__exit__(RuntimeError, RuntimeError("aborted"), None)
        except RuntimeError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False


def write_dataset(root: str | Path, episodes, meta: DatasetMeta, *, overwrite: bool = False) -> Path:
    """Write ``episodes`` (an iterable of Episode) as one capture dataset at ``root``."""
    with CaptureWriter(root, meta, overwrite=overwrite) as w:
        for ep in episodes:
            w.add(ep)
    return Path(root)
