"""Reader: a capture dataset on disk -> Episodes, validated on the way in.

Reads only with pyarrow and json; nothing here needs LeRobot installed. Evaluation-
only ``truth.*`` features are loaded only when ``include_truth=True`` so that training
code paths cannot see the exact state by accident.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import CaptureError
from .episode import DatasetMeta, ObjectSpec
from .episode_columns import episode_from_columns, file_episodes, text_column, validate_naming_files
from .lerobot_columns import check_whole_numbers
from .schema import CONTACT_META, ENV_STATE_KEY, SCHEMA_NAME, SCHEMA_VERSION, TRUTH_PREFIX
from .validate import validate_fps, validate_meta
from .writer import EPISODES_PATH

STATS = "meta/stats.json"
BOOKKEEPING = ("frame_index", "episode_index", "index", "task_index")  # LeRobot's; no units to describe
MAX_RATE_HZ = 1e5
# LeRobot's numbers in info.json: text such as "50" would pass float() unnoticed (fps) or turn a check off
# (total_frames)
INFO_NUMBERS = ("fps", "total_episodes", "total_frames", "total_tasks", "chunks_size", "data_files_size_in_mb",
                "video_files_size_in_mb")


@dataclass
class CaptureDataset:
    """A loaded capture dataset.

    Attributes:
      root: dataset directory.
      info: ``meta/info.json`` as a dict.
      contact: ``meta/contact.json`` as a dict.
      meta: the dataset-wide description.
      episodes: valid episodes, in episode_index order.
      skipped: [{"file","episode","field","reason"}]: recorded by the importer, plus episodes
        this read rejected (with ``on_error="skip"``).
    """

    root: Path
    info: dict
    contact: dict
    meta: DatasetMeta
    episodes: list = field(default_factory=list)
    skipped: list = field(default_factory=list)

    def __len__(self):
        return len(self.episodes)

    @property
    def capture_rate_hz(self) -> float:
        return float(self.contact["capture_rate_hz"])


TEXT_DTYPES = ("string", "str", "large_string")  # info.json dtypes of features that hold text by design

def _load_json(path: Path, what: str) -> dict:
    if not path.is_file():
        raise CaptureError(f"missing {what}; is this a capture dataset?", file=path)
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CaptureError(f"corrupt JSON ({e})", file=path) from None


def read_metadata(root: str | Path) -> tuple[dict, dict]:
    """(info.json, contact.json) of a dataset, checking the schema version."""
    root = Path(root)
    if not root.is_dir():
        raise CaptureError("no such folder (a capture dataset is a folder)" if not root.exists() else
                           "a file, not a capture dataset (a folder)", file=root)
    info = _load_json(root / "meta/info.json", "meta/info.json")
    if not (root / CONTACT_META).is_file() and "codebase_version" in info:
        raise CaptureError(f"missing {CONTACT_META}: a LeRobot dataset without the contact metadata; import it "
                           "first (surrogate import lerobot SRC --mapping MAPPING.yaml --out DATASET)",
                           file=root / CONTACT_META)
    contact = _load_json(root / CONTACT_META, CONTACT_META)
    if contact.get("schema") != SCHEMA_NAME:
        raise CaptureError(f"not a {SCHEMA_NAME} file (schema={contact.get('schema')!r})", file=root / CONTACT_META, field="schema")
    major = str(contact.get("schema_version", "")).split(".")[0]
    if major != SCHEMA_VERSION.split(".")[0]:
        raise CaptureError(f"schema version {contact.get('schema_version')!r} is not readable by this version "
                           f"(reads {SCHEMA_VERSION.split('.')[0]}.x)", file=root / CONTACT_META, field="schema_version")
    for key in ("features", "fps", "data_path", "total_episodes"):
        if key not in info:
            raise CaptureError("missing key", file=root / "meta/info.json", field=key)
    _check_info_numbers(info, root / "meta/info.json")
    _check_rate(info.get("fps"), file=root / "meta/info.json", field="fps")
    _check_rate(contact.get("capture_rate_hz"), file=root / CONTACT_META, field="capture_rate_hz")
    validate_fps(info["fps"], contact["capture_rate_hz"], file=root / "meta/info.json")
    _check_feature_descriptions(info, contact, root)
    _check_files(root)
    return info, contact


def not_a_number(value) -> str | None:
    """Why a JSON value is not a number ("holds text '50', expected a number"), or None where it is one."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return None
    what = "text" if isinstance(value, str) else "null" if value is None else type(value).__name__
    return f"holds {what} {value!r}, expected a number"


def _check_info_numbers(info: dict, path: Path) -> None:
    """Refuse info.json where one of LeRobot's numbers (``INFO_NUMBERS``) holds something else; a null or missing one
    is left to the checks that need it (fps, total_episodes: ``read_metadata``, ``_check_rate``, ``read_dataset``)."""
    for key in INFO_NUMBERS:
        why = info.get(key) is not None and not_a_number(info[key])
        if why:
            raise CaptureError(why, file=path, field=key)


def _check_rate(value, *, file, field) -> None:
    """A capture rate must be a positive finite number of Hz (LeRobot's ``fps``, our exact rate)."""
    if isinstance(value, str):  # said as text, not as a rate out of range
        raise CaptureError(not_a_number(value), file=file, field=field)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 < value < MAX_RATE_HZ:
        raise CaptureError(f"must be a rate in (0, {MAX_RATE_HZ:g}) Hz, got {value!r}", file=file, field=field)


def _check_feature_descriptions(info: dict, contact: dict, root: Path) -> None:
    """Every feature in info.json needs its units and frame in contact.json (a removed description is an error)."""
    if not isinstance(info["features"], dict):
        raise CaptureError("must be a mapping of feature key -> description", file=root / "meta/info.json", field="features")
    described = contact.get("features")
    if not isinstance(described, dict):
        raise CaptureError("missing the units and frames of the features", file=root / CONTACT_META, field="features")
    for key in info["features"]:
        if key not in BOOKKEEPING and not isinstance(described.get(key), dict):
            raise CaptureError(f"feature '{key}' of meta/info.json has no description (quantity, units, frame)",
                               file=root / CONTACT_META, field=f"features.{key}")


def _check_files(root: Path) -> None:
    """The LeRobot files a complete dataset has besides info.json and data/: stats and the episode index."""
    if not (root / STATS).is_file():
        raise CaptureError("missing; the dataset is incomplete (rewrite it)", file=root / STATS)
    _load_json(root / STATS, STATS)
    if not list(root.glob(EPISODES_PATH.replace("{chunk_index:03d}", "*").replace("{file_index:03d}", "*"))):
        first = root / EPISODES_PATH.format(chunk_index=0, file_index=0)
        raise CaptureError("missing: no episode index under meta/episodes/; the dataset is incomplete (rewrite it)", file=first)


def _meta_from_contact(contact: dict) -> DatasetMeta:
    return DatasetMeta(
        name=contact.get("name", "capture"),
        robot_type="none",
        hand=contact.get("hand"),
        joint_names=contact.get("joint_names"),
        wrench_sensors=contact.get("wrench_sensors"),
        tactile_unit=contact.get("tactile_unit"),
        angular_frame=contact.get("angular_frame", "world"),
        contact_region_seeds=contact.get("contact_region_seeds", {}),
        skipped=list(contact.get("skipped", [])),
        object_joint_names=contact.get("object_joint_names"),
        capture_rate_hz=float(contact["capture_rate_hz"]),
    )


def _robot_files(root: Path) -> dict:
    """{dataset path: bytes} of the files under ``meta/robot/`` (the robot's MJCF and meshes; empty without)."""
    folder = root / "meta" / "robot"
    if not folder.is_dir():
        return {}
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink()}  # the dataset's own files, nothing a link points at


def _objects_from_contact(contact: dict, path: Path) -> dict:
    """Object name -> ObjectSpec; a malformed object maps to the CaptureError its episodes raise."""
    out = {}
    for name, o in (contact.get("objects") or {}).items():
        try:
            out[name] = ObjectSpec.from_json(o)
        except (TypeError, AttributeError) as e:
            out[name] = CaptureError(f"malformed object '{name}' ({e})", file=path, field="objects")
    return out


def _episode_entries(contact: dict, path: Path) -> dict:
    """episode_index -> the episode's entry in contact.json, or why it has no entry of its own (a duplicate index)."""
    entries = contact.get("episodes")
    if not isinstance(entries, list) or not all(isinstance(e, dict) and "episode_index" in e for e in entries):
        raise CaptureError("must be a list of objects, each with an episode_index", file=path, field="episodes")
    last = {e["episode_index"]: e for e in entries}
    twice = {e["episode_index"] for e in entries if last[e["episode_index"]] is not e}
    return {i: f"duplicate episode_index {i}: more than one entry has it" if i in twice else e for i, e in last.items()}


def _read_table(path: Path, columns) -> pa.Table:
    """``columns`` of the parquet file ``path``; a CaptureError naming the file and the first missing column (Arrow's
    own message about it prints the whole schema), or why the file cannot be read."""
    try:
        names = pq.read_schema(path).names
        missing = [c for c in columns or () if c not in names]
        if missing:
            raise CaptureError(f"no column {missing[0]!r}" + (f" (nor {missing[1:]})" if missing[1:] else "")
                               + f"; the file has {names}", file=path, field=missing[0])
        return pq.read_table(path, columns=columns)
    except (OSError, pa.ArrowException) as e:
        raise CaptureError(f"unreadable parquet ({type(e).__name__}: {e})", file=path) from None


def episode_index(root: Path) -> dict[int, dict]:
    """LeRobot's episode index (``meta/episodes/chunk-*/file-*.parquet``): episode_index -> {"length": frames or
    None, "data_file": (chunk, file) or None}; {} when there is none. An unreadable index file, or one of those columns
    holding text (int() would read "3" as 3): CaptureError naming the file and the column."""
    out = {}
    for path in sorted((root / "meta/episodes").glob("chunk-*/file-*.parquet")):
        try:
            names = pq.read_schema(path).names
        except (OSError, pa.ArrowException) as e:
            raise CaptureError(f"unreadable parquet ({type(e).__name__}: {e})", file=path) from None
        cols = [c for c in ("episode_index", "length", "data/chunk_index", "data/file_index") if c in names]
        if "episode_index" not in cols:
            continue
        table = _read_table(path, cols)
        for name in cols:
            check_whole_numbers(table[name].to_numpy(zero_copy_only=False), file=path, field=name)
        t = table.to_pydict()
        for i, e in enumerate(t["episode_index"]):
            out[int(e)] = {"length": t["length"][i] if "length" in t else None,
                           "data_file": tuple(None if x is None else int(x)  # 3.0 from another tool: 3
                                              for x in (t["data/chunk_index"][i], t["data/file_index"][i]))
                           if "data/chunk_index" in t and "data/file_index" in t else None}
    return out


def metadata_problems(info: dict, counts: dict[int, int], index: dict[int, dict]
                      ) -> tuple[list[tuple[str, str]], dict[int, str]]:
    """What ``meta/info.json`` and the episode index say that the data contradicts: ([(field, why)] of the
    dataset (``total_frames``, also where it holds no number), {episode: why} of episodes whose index ``length``
    differs from their frames). ``counts``: the frames each episode has in the data files."""
    whole = []
    total = info.get("total_frames")
    if total is not None and not_a_number(total):  # text "68" had turned the check off
        whole.append(("total_frames", not_a_number(total)))
    elif total is not None and total != sum(counts.values()):
        whole.append(("total_frames", f"info.json says {total} frames, the data files hold {sum(counts.values())}"))
    per = {e: f"meta/episodes says {index[e]['length']} frames, the data files hold {n}"
           for e, n in counts.items() if e in index and index[e]["length"] is not None and index[e]["length"] != n}
    return whole, per


def read_dataset(root: str | Path, *, include_truth: bool = False, on_error: str = "raise") -> CaptureDataset:
    """Load and validate every episode of the dataset at ``root``.

    Args:
      include_truth: also load evaluation-only ``truth.*`` features (benchmarks only).
      on_error: "raise" stops at the first invalid episode; "skip" leaves it out and
        lists it in ``dataset.skipped``. An episode with a column of text (even of digits) where numbers belong is
        invalid, named with its data file and the column.
    Raises:
      CaptureError, whatever ``on_error``, for what no episode can be read without: meta/ files (numbers of
      info.json or meta/episodes held as text among them) and data files that cannot be read or cut into episodes
      (an episode_index column of text).
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    root = Path(root)
    info, contact = read_metadata(root)
    meta = _meta_from_contact(contact)
    meta.robot_type = info.get("robot_type", "none")
    meta.robot_files = _robot_files(root)
    validate_meta(meta, file=root / CONTACT_META)
    features = info["features"]
    # observation.environment_state (schema >= 1.1) repeats observation.object_pose: not read.
    wanted = [k for k in features if (include_truth or not k.startswith(TRUTH_PREFIX)) and k != ENV_STATE_KEY]
    objects = _objects_from_contact(contact, root / CONTACT_META)
    ep_meta = _episode_entries(contact, root / CONTACT_META)

    # a feature info.json declares as text (a language instruction, say) is text by right: not checked for numbers
    numeric = {k for k in wanted if str((features[k] or {}).get("dtype", "")).lower() not in TEXT_DTYPES}
    frames, sources, text = _read_frames(root, wanted, numeric)
    dataset = CaptureDataset(root=root, info=info, contact=contact, meta=meta, skipped=list(meta.skipped))
    if len(frames) != info["total_episodes"]:
        msg = f"info.json says {info['total_episodes']} episodes, data files hold {len(frames)}"
        if on_error == "raise":
            raise CaptureError(msg, file=root / "meta/info.json", field="total_episodes")
        dataset.skipped.append({"file": str(root / "meta/info.json"), "episode": None, "field": "total_episodes", "reason": msg})
    counts = {e: sum(len(v) for v in frames[e]["episode_index"]) for e in frames}
    whole, bad_length = metadata_problems(info, counts, episode_index(root))
    for key, msg in whole:
        if on_error == "raise":
            raise CaptureError(msg, file=root / "meta/info.json", field=key)
        dataset.skipped.append({"file": str(root / "meta/info.json"), "episode": None, "field": key, "reason": msg})
    for e in sorted(frames):
        cols = {k: np.concatenate(v) for k, v in frames[e].items()}
        em = ep_meta.get(e, f"episode_index {e} has no entry in {CONTACT_META}")
        try:
            if e in text:  # the first: text read as numbers explains whatever else looks wrong
                path, key, why = text[e]
                raise CaptureError(why, file=path, episode=em.get("episode_id", e) if isinstance(em, dict) else e,
                                   field=key)
            if e in bad_length:
                raise CaptureError(bad_length[e], file=root / "meta/episodes", episode=e, field="length")
            if isinstance(em, str):  # no entry, or a duplicate index: why
                raise CaptureError(em, file=root / CONTACT_META, episode=e, field="episodes")
            ep = episode_from_columns(cols, em, objects, contact.get("features", {}), root)
            validate_naming_files(ep, meta, data_file=sources[e], contact_file=root / CONTACT_META)
        except CaptureError as err:
            if on_error == "raise":
                raise
            dataset.skipped.append({"file": str(err.file), "episode": err.episode, "field": err.field, "reason": err.reason})
            continue
        dataset.episodes.append(ep)
    return dataset


def _read_frames(root: Path, wanted: list[str], numeric: set[str]) -> tuple[dict, dict, dict]:
    """The ``wanted`` columns of every data file, by episode; those of ``numeric`` must hold numbers.

    Returns:
      frames: {episode_index: {column: [its values in each file holding the episode]}};
      sources: {episode_index: the first data file holding it} (errors name the file to look at);
      text: {episode_index: (data file, column, why)} of the first of its columns holding text, not numbers.
    Raises:
      CaptureError naming the file: none under data/, one unreadable, without a wanted column, or whose episode_index
      holds text (it cannot be cut into episodes).
    """
    files = sorted((root / "data").glob("chunk-*/file-*.parquet"))
    if not files:
        raise CaptureError("no data files under data/", file=root)
    frames: dict[int, dict[str, list]] = {}
    sources: dict[int, Path] = {}
    text: dict[int, tuple] = {}
    for path in files:
        table = _read_table(path, wanted)
        missing = [k for k in wanted if k not in table.column_names]
        if missing:
            raise CaptureError(f"columns {missing} named in meta/info.json are missing", file=path, field=missing[0])
        for e, cols in file_episodes(table, path).items():
            sources.setdefault(e, path)
            found = text_column({k: v for k, v in cols.items() if k in numeric})
            if found and e not in text:
                text[e] = (path, *found)
            dst = frames.setdefault(e, {})
            for k, v in cols.items():
                dst.setdefault(k, []).append(v)
    return frames, sources, text


def dataset_hash(root: str | Path, files=None) -> str:
    """sha256 over every file of a dataset (relative names and bytes): its identity in
    checkpoint cards and benchmark ledgers. ``files``: the files to hash, sorted (default every file under ``root``;
    an object folder passes the loader's own walk, ``objects.folder.folder_sha256``)."""
    root = Path(root)
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")) if files is None else files:
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode())
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()
