"""The LeRobot side of a capture: which episode arrays become which features (key, dtype, names,
units, frame), and their parquet columns as LeRobot itself writes them."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .episode import OPTIONAL_ARRAYS, DatasetMeta, Episode
from .schema import (
    ENV_STATE_KEY,
    FEATURE_KEYS,
    POSE_NAMES,
    POSE_UNITS,
    TRUTH_PREFIX,
    TWIST_NAMES,
    TWIST_UNITS,
    WRENCH_NAMES,
    WRENCH_UNITS,
)


def flat(ep: Episode, name: str) -> np.ndarray:
    """[T, n] float32 view of a per-frame array (wrench [T,S,6] -> [T,6S])."""
    a = np.asarray(getattr(ep, name))
    return a.reshape(len(a), -1)


def feature_layout(ep: Episode, meta: DatasetMeta) -> dict:
    """LeRobot feature key -> (source, dtype, names, units, frame) for the arrays ``ep`` has."""
    layout = {FEATURE_KEYS["object_pose"]: ("object_pose", "float32", POSE_NAMES, POSE_UNITS, "world"),
              # the same pose under the key LeRobot's policies read as the environment state
              ENV_STATE_KEY: ("env_state", "float32", POSE_NAMES, POSE_UNITS, "world")}
    J = None
    for name in OPTIONAL_ARRAYS:
        arr = getattr(ep, name)
        if arr is None:
            continue
        key = FEATURE_KEYS[name]
        if name == "object_pose_valid":
            # float32 0/1, not bool: LeRobot's normalizer cannot subtract a mean from a bool tensor
            layout[key] = (name, "float32", None, ["1"], None)
        elif name == "object_twist":
            layout[key] = (name, "float32", TWIST_NAMES, TWIST_UNITS, f"linear: world, angular: {meta.angular_frame}")
        elif name in ("joint_pos", "joint_vel", "joint_cmd"):
            J = np.asarray(arr).shape[1]
            names = list(meta.joint_names) if meta.joint_names else [f"joint{i}" for i in range(J)]
            unit = {"joint_pos": "rad|m", "joint_vel": "rad/s|m/s", "joint_cmd": "rad|m"}[name]
            layout[key] = (name, "float32", [f"{n}.{name.split('_')[1]}" for n in names], [unit] * J, "joint")
        elif name == "wrench":
            S = np.asarray(arr).shape[1]
            sensors = list(meta.wrench_sensors) if meta.wrench_sensors else [f"sensor{i}" for i in range(S)]
            layout[key] = (name, "float32", [f"{s}.{c}" for s in sensors for c in WRENCH_NAMES], WRENCH_UNITS * S, "sensor")
        elif name == "tactile":
            K = np.asarray(arr).shape[1]
            layout[key] = (name, "float32", [f"taxel{i}" for i in range(K)], [meta.tactile_unit or "1"] * K, "sensor")
        elif name in ("object_joint_pos", "object_joint_vel"):
            Jo = np.asarray(arr).shape[1]
            names = list(meta.object_joint_names) if meta.object_joint_names else [f"object_joint{i}" for i in range(Jo)]
            suffix, unit = ("pos", "rad|m") if name == "object_joint_pos" else ("vel", "rad/s|m/s")
            layout[key] = (name, "float32", [f"{n}.{suffix}" for n in names], [unit] * Jo, "object joint")
        elif name == "contact_regions":
            R = np.asarray(arr).shape[1]
            layout[key] = (name, "float32", [f"region{i}" for i in range(R)], ["1"] * R, "object")
    for tname, arr in ep.truth.items():
        n = int(np.prod(np.asarray(arr).shape[1:])) if np.asarray(arr).ndim > 1 else 1
        layout[TRUTH_PREFIX + tname] = (f"truth:{tname}", "float32", [f"{tname}{i}" for i in range(n)], None, "evaluation only")
    return layout


def quantity(source: str) -> str:
    """What ``meta/contact.json`` calls the quantity of a feature with layout source ``source``."""
    if source.startswith("truth:"):
        return "truth"
    if source == "env_state":
        return "object_pose (copy for LeRobot policies; read observation.object_pose)"
    return source


def is_scalar(feature: dict) -> bool:
    """LeRobot's rule (``get_hf_features_from_features``): a shape-(1,) feature is a scalar ``Value``
    column, whatever its names; a shape-(k,) feature is a fixed-size list of k (``List``/``Sequence``)."""
    return list(feature["shape"]) == [1]


def arrow_column(values: np.ndarray, dtype: str, feature: dict) -> pa.Array:
    """One parquet column of a feature.

    Args:
      values: [T] or [T, n] per-frame values.
      dtype: ``float32`` (or ``bool`` for LeRobot datasets of schema 1.0 style).
      feature: its ``info.json`` entry; shape (1,) -> a [T] scalar column, (n,) -> [T] lists of n.
    """
    if dtype == "bool":
        return pa.array(np.asarray(values, dtype=bool).reshape(-1))
    v = np.ascontiguousarray(values, dtype=np.float32)
    v = v.reshape(len(v), -1)
    if is_scalar(feature):
        return pa.array(v.reshape(-1))
    return pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1)), v.shape[1])


def hf_features(features: dict) -> dict:
    """The ``huggingface`` schema metadata LeRobot writes for ``features`` (info.json style)."""
    out = {}
    for key, f in features.items():
        if is_scalar(f):
            out[key] = {"dtype": f["dtype"], "_type": "Value"}
        else:
            out[key] = {"feature": {"dtype": f["dtype"], "_type": "Value"}, "length": f["shape"][0], "_type": "List"}
    return {"info": {"features": out}}
