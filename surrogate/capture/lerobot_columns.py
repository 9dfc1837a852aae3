"""How the LeRobot importer (``lerobot_import``) reads each mapped feature: its width, order and units, and that its
values are numbers.

Parquet and numpy turn text into numbers without a word (``np.array(["0.033"]).astype(float)``), so a column stored as
text, even of digits, would be imported as if it held numbers; every column read here goes through ``check_numbers``
first.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from ..errors import CaptureError
from .lerobot_mapping import UNIT_OPTIONS
from .schema import POSE_NAMES, UNIT_TO_SI

NUMBER_KINDS = "fiub"  # numpy dtype kinds that hold numbers (bool: a tracked flag)


def not_numbers(raw: np.ndarray) -> str | None:
    """Why ``raw`` does not hold numbers (its dtype and the type of its values), or None where it does."""
    if raw.dtype.kind in NUMBER_KINDS:
        return None
    first = next((v for v in raw.flat if v is not None), None)  # a null (None) says nothing of the column's type
    values = type(first).__name__
    if raw.dtype.kind in "SU" or isinstance(first, (str, bytes)):
        return f"holds text (dtype {raw.dtype}, {values} values), expected numbers"
    return f"dtype {raw.dtype} ({values} values), expected numbers"


def check_numbers(raw: np.ndarray, *, field: str, file=None, episode=None) -> None:
    """A CaptureError naming ``file``, ``episode`` and ``field`` where ``raw`` does not hold numbers."""
    why = not_numbers(raw)
    if why:
        raise CaptureError(why, file=file, episode=episode, field=field)


def check_whole_numbers(raw: np.ndarray, *, field: str, file=None) -> None:
    """``check_numbers``, and whole ones (an index: 3.0 from a tool that writes floats is 3; 1.5 is no index). Nulls
    pass, as in ``check_numbers``."""
    check_numbers(raw, field=field, file=file)
    v = np.asarray([x for x in np.asarray(raw, dtype=object).ravel() if x is not None], dtype=float)
    if not np.all(np.isfinite(v)) or not np.array_equal(v, np.round(v)):
        raise CaptureError("holds values that are not whole numbers, expected integers", file=file, field=field)


class Column:
    """How one capture quantity is read from one LeRobot feature.

    ``width``: values per frame in parquet; ``order``: indices that reorder the parquet
    columns into the capture layout (pose), or None; ``scale``: [width] factors to SI, in
    the capture layout.
    """

    def __init__(self, name, key, width, scale, order=None):
        self.name, self.key, self.width, self.scale, self.order = name, key, width, scale, order

    def convert(self, raw: np.ndarray, episode: str) -> np.ndarray:
        """[T, width] raw values -> SI values in the capture layout. Values that are not numbers (text, even of digits,
        which had been parsed as numbers) are refused naming ``episode``, the column and its dtype (the caller adds
        the file: ``lerobot_import._locate``)."""
        check_numbers(raw, episode=episode, field=self.key)
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


def plan_columns(info: dict, fields: dict, info_path: Path) -> tuple[dict, dict]:
    """Capture quantity -> Column, plus the names found (joint names, sensors) for the meta."""
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
            cols[name] = Column(name, spec["key"], 6, np.array([lin] * 3 + [ang] * 3))
        elif name == "wrench":
            sensors = spec.get("sensors") or [f"sensor{i}" for i in range(max(width // 6, 1))]
            _need_width(width, 6 * len(sensors), name, spec, info_path)
            f, t = UNIT_TO_SI[units["force_unit"]][1], UNIT_TO_SI[units["torque_unit"]][1]
            cols[name] = Column(name, spec["key"], width, np.tile([f] * 3 + [t] * 3, len(sensors)))
            found["sensors"] = list(sensors)
        elif name == "object_pose_valid":
            _need_width(width, 1, name, spec, info_path)
            cols[name] = Column(name, spec["key"], 1, np.ones(1))
        else:  # per-joint, tactile and region arrays: one unit for every component
            unit = units.get("unit") or "1"
            cols[name] = Column(name, spec["key"], width, np.full(width, UNIT_TO_SI[unit][1] if unit else 1.0))
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


def _pose_column(spec, feat, width, length_unit, info_path) -> Column:
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
    return Column("object_pose", spec["key"], 7, np.array([factor] * 3 + [1.0] * 4), order)


def as_2d(col: pa.ChunkedArray, width: int, *, file: Path, field: str) -> np.ndarray:
    """[T, width] numpy array from a scalar, fixed-size list or list column; a list column whose frames do not hold
    ``width`` values each is refused naming ``file`` and ``field`` (it cannot be cut into frames)."""
    col = col.combine_chunks()
    if pa.types.is_fixed_size_list(col.type) or pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
        flat = col.flatten().to_numpy(zero_copy_only=False)
        if flat.size != len(col) * width:
            raise CaptureError(f"holds {flat.size} values for {len(col)} frames, expected {width} per frame",
                               file=file, field=field)
        return flat.reshape(len(col), width)
    return col.to_numpy(zero_copy_only=False).reshape(len(col), 1)
