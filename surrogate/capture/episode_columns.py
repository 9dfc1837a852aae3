"""The reader's per-episode half: one Episode from its data-file columns and its ``meta/contact.json`` entry.

Parquet and numpy turn text into numbers without a word (``np.array(["0.02"]).astype(float)``, and the text "0.0" is
a true flag), so every column read is checked to hold numbers (``lerobot_columns.not_numbers``, the importer's check)
before it is built into an episode.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from ..errors import CaptureError
from .episode import Environment, Episode, Provenance
from .lerobot_columns import check_numbers, not_numbers
from .schema import CONTACT_META, FEATURE_KEYS, TRUTH_PREFIX
from .validate import validate_episode

SCENE_FIELDS = ("object.", "environment.", "provenance.")  # an episode's scene: described in meta/contact.json


def column_values(col: pa.ChunkedArray) -> np.ndarray:
    """The values of a parquet column: [T] of a scalar column, [T, width] of a fixed-size list column."""
    col = col.combine_chunks()
    if pa.types.is_fixed_size_list(col.type):
        width = col.type.list_size
        return col.flatten().to_numpy(zero_copy_only=False).reshape(-1, width)
    return col.to_numpy(zero_copy_only=False)


def file_episodes(table: pa.Table, path: Path) -> dict[int, dict[str, np.ndarray]]:
    """A data file's columns cut into its episodes.

    Args:
      table: the columns read from the data file ``path``; ``episode_index`` among them.
    Returns:
      {episode_index: {column: its values in this file, [T] or [T, width] (``column_values``)}}.
    Raises:
      CaptureError naming ``path`` and ``episode_index`` where that column does not hold numbers: the file cannot be
      cut into episodes (the text "3" would have been read as episode 3).
    """
    cols = {k: column_values(table[k]) for k in table.column_names}
    ep_idx = cols["episode_index"]
    check_numbers(ep_idx, file=path, field="episode_index")
    out = {}
    for e in np.unique(ep_idx):
        sel = ep_idx == e
        out[int(e)] = {k: v[sel] for k, v in cols.items()}
    return out


def text_column(cols: dict[str, np.ndarray]) -> tuple[str, str] | None:
    """(column, why) of the first of one episode's columns (``file_episodes``) that does not hold numbers (text, even
    of digits), or None where all do."""
    for key, values in cols.items():
        why = not_numbers(values)
        if why:
            return key, why
    return None


def validate_naming_files(ep: Episode, meta, *, data_file: Path, contact_file: Path) -> None:
    """``validate_episode``, its errors naming the file to fix: the data parquet for the recorded arrays,
    ``meta/contact.json`` for the scene (object mass, inertia, environment, provenance)."""
    try:
        validate_episode(ep, meta, file=data_file)
    except CaptureError as err:
        if str(err.field or "").startswith(SCENE_FIELDS):
            raise CaptureError(err.reason, file=contact_file, episode=err.episode, field=err.field) from None
        raise


def episode_from_columns(cols: dict, em: dict, objects: dict, contact_features: dict, root: Path) -> Episode:
    """Build one Episode from its columns and its ``meta/contact.json`` entry.

    Args:
      cols: {column: [T] or [T, width] values} of the episode, its files' concatenated (``file_episodes``).
      em: the episode's entry in ``meta/contact.json`` (episode_id, object, provenance, environment, ...).
      objects: {object name: ObjectSpec, or the CaptureError of a malformed one}.
      contact_features: ``meta/contact.json``'s "features" ({key: {"shape": ...}} gives the truth shapes).
      root: the dataset folder, named in errors.
    Returns:
      the Episode, frames in frame_index order. A malformed entry (missing keys, wrong types) is a CaptureError naming
      the episode, so that ``on_error="skip"`` can skip it like any other bad episode.
    """
    try:
        return _build_episode(cols, em, objects, contact_features, root)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        if isinstance(e, CaptureError):
            raise
        what = f"missing key {e}" if isinstance(e, KeyError) else f"{type(e).__name__}: {e}"
        ep_id = em.get("episode_id", em.get("episode_index")) if isinstance(em, dict) else None
        raise CaptureError(f"malformed episode entry ({what})", file=root / CONTACT_META, episode=ep_id, field="episodes") from None


def _array_from_column(name: str, v: np.ndarray, em: dict, root: Path) -> np.ndarray:
    """An Episode array from its column values, for every 1.x layout.

    Args:
      name: the Episode field (``FEATURE_KEYS``).
      v: [T] (a scalar column: shape-(1,) features since schema 1.1, and the valid flag) or
        [T, n] (a fixed-size list column; schema 1.0 also wrote width-1 features this way).
    Returns:
      object_pose_valid: [T] bool (stored as bool in 1.0, float32 0/1 since 1.1);
      wrench: [T, S, 6]; every other field [T, n] float64.
    """
    if name == "object_pose_valid":
        v = v.reshape(len(v), -1)[:, 0]
        if v.dtype.kind == "f" and not np.isin(v, (0.0, 1.0)).all():
            i = int(np.flatnonzero(~np.isin(v, (0.0, 1.0)))[0])
            raise CaptureError(f"must be 0 or 1, got {float(v[i]):g} at frame {i}", file=root, episode=em.get("episode_id"),
                               field=FEATURE_KEYS[name])
        return v.astype(bool)
    if v.ndim == 1:
        v = v[:, None]  # a width-1 feature stored as a scalar column
    if name == "wrench":
        v = v.reshape(len(v), -1, 6)
    return v.astype(np.float64) if v.dtype.kind == "f" else v


def _build_episode(cols, em, objects, contact_features, root) -> Episode:
    order = np.argsort(cols["frame_index"], kind="stable")
    cols = {k: v[order] for k, v in cols.items()}
    obj = objects.get(em["object"])
    if obj is None:
        raise CaptureError(f"object '{em['object']}' is not described in {CONTACT_META}", file=root / CONTACT_META,
                           episode=em.get("episode_id"), field="objects")
    if isinstance(obj, CaptureError):
        raise CaptureError(obj.reason, file=obj.file, episode=em.get("episode_id"), field="objects")
    t = cols["timestamp"].astype(np.float64)
    kw = {name: _array_from_column(name, cols[key], em, root) for name, key in FEATURE_KEYS.items() if key in cols}
    if "object_pose" not in kw:
        raise CaptureError("missing", file=root, episode=em.get("episode_id"), field=FEATURE_KEYS["object_pose"])
    truth = {}
    for k, v in cols.items():
        if k.startswith(TRUTH_PREFIX):
            # Parquet holds truth flattened to [T, n]; contact.json keeps the per-frame shape.
            shape = contact_features.get(k, {}).get("shape")
            v = v.astype(np.float64)
            truth[k[len(TRUTH_PREFIX):]] = v.reshape((len(v), *shape)) if shape is not None else v
    return Episode(
        episode_id=str(em["episode_id"]),
        timestamps=t,
        object=obj,
        provenance=Provenance.from_json(em["provenance"]),
        environment=Environment.from_json(em.get("environment", {})),
        grasp_type=em.get("grasp_type"),
        task=em.get("task", ""),
        labels=em.get("labels", {}),
        t0=float(em.get("t0", 0.0)),
        truth=truth,
        **kw,
    )
