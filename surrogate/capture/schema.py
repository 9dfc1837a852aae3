"""The capture format's vocabulary: feature keys, units, frames and the grasp taxonomy.

A capture dataset is a LeRobotDataset v3 tree (``meta/info.json``, parquet under
``data/`` and ``meta/episodes/``, ``meta/stats.json``, ``meta/tasks.parquet``) plus
one extra file, ``meta/contact.json``, with what LeRobot has no place for: units and
frames of every feature, the scene of each episode (object, environment, hand),
provenance and annotations. docs/capture-format.md documents every
field; this module is the single source of truth the code checks against.
"""

from __future__ import annotations

SCHEMA_NAME = "contact-surrogate/capture"
# 1.1: shape-(1,) features are scalar parquet columns (LeRobot maps every shape-(1,) feature
# to a scalar ``Value``); ``observation.object_pose_valid`` is float32 0/1 (LeRobot's
# normalizer cannot take bools); ``observation.environment_state`` repeats the object pose
# for LeRobot's stock policies. Readers accept every 1.x dataset (1.0: bool valid flag,
# width-1 features as fixed-size lists of 1, no environment state).
SCHEMA_VERSION = "1.1"
CONTACT_META = "meta/contact.json"
CODEBASE_VERSION = "v3.0"  # LeRobotDataset layout version we write

# Per-frame quantities of an Episode -> (LeRobot feature key, unit per component, frame).
# Units are SI; "1" is dimensionless. Components are named in info.json's "names".
POSE_NAMES = ["x", "y", "z", "qw", "qx", "qy", "qz"]
POSE_UNITS = ["m", "m", "m", "1", "1", "1", "1"]
TWIST_NAMES = ["vx", "vy", "vz", "wx", "wy", "wz"]
TWIST_UNITS = ["m/s", "m/s", "m/s", "rad/s", "rad/s", "rad/s"]
WRENCH_NAMES = ["fx", "fy", "fz", "tx", "ty", "tz"]
WRENCH_UNITS = ["N", "N", "N", "N*m", "N*m", "N*m"]

FEATURE_KEYS = {
    "object_pose": "observation.object_pose",
    "object_pose_valid": "observation.object_pose_valid",
    "object_twist": "observation.object_twist",
    "joint_pos": "observation.state",
    "joint_vel": "observation.joint_velocity",
    "joint_cmd": "action",
    "wrench": "observation.wrench",
    "tactile": "observation.tactile",
    "contact_regions": "annotation.contact_regions",
    "object_joint_pos": "observation.object_joint_pos",
    "object_joint_vel": "observation.object_joint_velocity",
}
# The object pose again under the key LeRobot's policies (ACT, Diffusion) read as the
# environment state; derived on write, ignored on read (``observation.object_pose`` is the source).
ENV_STATE_KEY = "observation.environment_state"
TRUTH_PREFIX = "truth."  # evaluation-only exact state; never read by training code
LEROBOT_INDEX_KEYS = ("timestamp", "frame_index", "episode_index", "index", "task_index")

# Units we understand, with the factor to SI. Importers use this to convert; the
# format itself stores SI only.
UNIT_TO_SI = {
    "m": ("m", 1.0), "cm": ("m", 0.01), "mm": ("m", 0.001), "in": ("m", 0.0254),
    "rad": ("rad", 1.0), "deg": ("rad", 3.141592653589793 / 180.0),
    "s": ("s", 1.0), "ms": ("s", 1e-3), "us": ("s", 1e-6), "ns": ("s", 1e-9),
    "m/s": ("m/s", 1.0), "mm/s": ("m/s", 1e-3), "cm/s": ("m/s", 1e-2),
    "rad/s": ("rad/s", 1.0), "deg/s": ("rad/s", 3.141592653589793 / 180.0),
    "N": ("N", 1.0), "N*m": ("N*m", 1.0), "Nmm": ("N*m", 1e-3),
    "kg": ("kg", 1.0), "g": ("kg", 1e-3),
    "1": ("1", 1.0),
}
SI_UNITS = frozenset(v[0] for v in UNIT_TO_SI.values())

ENVIRONMENT_KINDS = ("ground", "table", "none")
ANGULAR_FRAMES = ("world", "body")

# Feix et al., "The GRASP Taxonomy of Human Grasp Types", IEEE THMS 2016: 33 types.
FEIX_GRASP_TYPES = {
    1: "large diameter", 2: "small diameter", 3: "medium wrap", 4: "adducted thumb",
    5: "light tool", 6: "prismatic 4 finger", 7: "prismatic 3 finger", 8: "prismatic 2 finger",
    9: "palmar pinch", 10: "power disk", 11: "power sphere", 12: "precision disk",
    13: "precision sphere", 14: "tripod", 15: "fixed hook", 16: "lateral",
    17: "index finger extension", 18: "extension type", 19: "distal type", 20: "writing tripod",
    21: "tripod variation", 22: "parallel extension", 23: "adduction grip", 24: "tip pinch",
    25: "lateral tripod", 26: "sphere 4 finger", 27: "quadpod", 28: "sphere 3 finger",
    29: "stick", 30: "palmar", 31: "ring", 32: "ventral", 33: "inferior pincer",
}


def feix_name(grasp_id: int) -> str:
    """Name of a Feix grasp type id (1..33); KeyError for others."""
    return FEIX_GRASP_TYPES[int(grasp_id)]
