"""In-memory capture episodes: arrays per frame plus the scene and provenance.

Shapes use T = frames, J = hand joints, S = force/torque sensors, K = tactile
taxels, R = contact regions on the object surface. All values SI; quaternions
(w, x, y, z); positions and linear velocities in the world frame.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np


class _JsonFields:
    """``to_json`` / ``from_json`` of a plain dataclass: its fields as a dict, unknown keys ignored on read."""

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict):
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


@dataclass
class ObjectSpec(_JsonFields):
    """What a user would enter about the object (nominal, not necessarily true, values).

    Attributes:
      name: object name, unique within a dataset.
      mass: kg.
      inertia: [3, 3] about the centre of mass in the body frame, kg m^2.
      size: characteristic size in m (largest bounding-box side); errors are reported relative to it.
      geometry: how to rebuild the shape, one of
        ``{"kind": "box", "half_extents": [hx, hy, hz]}``,
        ``{"kind": "mesh", "path": str, "sha256": str, "scale": float}``,
        ``{"kind": "procedural", "family": str, "seed": int, "params": {...}}``.
        Mesh paths are as given at capture time; geometry is in the body frame with the
        centre of mass at the origin.
      friction: nominal sliding friction coefficient, or None if unknown.
    """

    name: str
    mass: float
    inertia: list
    size: float
    geometry: dict
    friction: float | None = None

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["inertia"] = np.asarray(self.inertia, dtype=float).tolist()
        return d


@dataclass
class Environment(_JsonFields):
    """The static surroundings: ``kind`` ground | table | none, surface ``height`` (m), ``gravity`` [3] m/s^2."""

    kind: str = "ground"
    height: float = 0.0
    gravity: list = field(default_factory=lambda: [0.0, 0.0, -9.81])


@dataclass
class Provenance(_JsonFields):
    """Where an episode comes from.

    ``real`` is True only for recordings of physical hardware; generated episodes
    (the capture rig) say so here and in ``generator``.
    """

    source: str
    real: bool
    capture_rate_hz: float
    upstream_id: str | None = None
    license: str | None = None
    notes: str | None = None
    generator: dict | None = None


@dataclass
class Episode:
    """One captured episode.

    Arrays (T frames):
      timestamps: [T] s, strictly increasing (stored relative to the first frame; ``t0`` keeps the offset).
      object_pose: [T, 7] position (m, world) and unit quaternion (w, x, y, z) world-from-body.
      object_pose_valid: [T] bool or None; False where the tracker lost the object
        (the pose there holds the last valid value and must be ignored).
      object_twist: [T, 6] or None; linear velocity (m/s, world) then angular velocity
        (rad/s) in the frame named by the dataset's ``angular_frame``.
      joint_pos, joint_vel, joint_cmd: [T, J] or None (rad or m per joint; rad/s or m/s).
      wrench: [T, S, 6] or None; force (N) and torque (N m) per sensor in the sensor frame.
      tactile: [T, K] or None; taxel readings in the unit the dataset's meta names.
      contact_regions: [T, R] or None; 1 where region r of the object surface is in contact.
      object_joint_pos, object_joint_vel: [T, Jo] or None; the object's own joints (an articulated object:
        rad or m per joint of its URDF, named by the dataset's ``object_joint_names``; rad/s or m/s).
        ``object_pose`` is then the pose of its base link's frame.
      truth: name -> [T, ...] exact physical state (generated data only). Evaluation only:
        training code never reads it, and readers only load it when asked.
    """

    episode_id: str
    timestamps: np.ndarray
    object_pose: np.ndarray
    object: ObjectSpec
    provenance: Provenance
    environment: Environment = field(default_factory=Environment)
    object_pose_valid: np.ndarray | None = None
    object_twist: np.ndarray | None = None
    joint_pos: np.ndarray | None = None
    joint_vel: np.ndarray | None = None
    joint_cmd: np.ndarray | None = None
    wrench: np.ndarray | None = None
    tactile: np.ndarray | None = None
    contact_regions: np.ndarray | None = None
    object_joint_pos: np.ndarray | None = None
    object_joint_vel: np.ndarray | None = None
    grasp_type: int | None = None
    task: str = ""
    labels: dict = field(default_factory=dict)
    t0: float = 0.0
    truth: dict = field(default_factory=dict)

    @property
    def num_frames(self) -> int:
        return int(len(self.timestamps))

    @property
    def duration(self) -> float:
        """Seconds from the first to the last frame."""
        return float(self.timestamps[-1] - self.timestamps[0]) if self.num_frames else 0.0


def hold_last_valid(x: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """``x`` [T, ...] with untracked frames holding the last tracked value (the format's convention for
    ``object_pose`` where ``object_pose_valid`` is false; trackers often write NaN there), frames before
    the first tracked one holding that one; ``x`` itself when every frame, or none, is tracked."""
    if valid.all() or not valid.any():
        return x
    idx = np.where(valid, np.arange(len(valid)), -1)
    idx = np.maximum.accumulate(idx)
    idx[idx < 0] = np.flatnonzero(valid)[0]
    return x[idx]


# The optional per-frame arrays, in the order the writer stores them.
OPTIONAL_ARRAYS = (
    "object_pose_valid", "object_twist", "joint_pos", "joint_vel", "joint_cmd",
    "wrench", "tactile", "contact_regions", "object_joint_pos", "object_joint_vel",
)


@dataclass
class DatasetMeta:
    """Dataset-wide description (one per dataset; LeRobot features are dataset-wide).

    Attributes:
      name: dataset name (LeRobot repo id style ``org/name`` allowed).
      robot_type: LeRobot's robot_type (hand model name, or ``none`` for free objects).
      hand: {"name": str, "model": str | None} or None; joint names live in ``joint_names``.
      joint_names: [J] names of the hand joints, or None.
      wrench_sensors: [S] names of force/torque sensors, or None.
      tactile_unit: unit of tactile readings (e.g. "N" or "1"), or None.
      angular_frame: "world" | "body": frame of the angular part of ``object_twist``.
      contact_region_seeds: object name -> [R, 3] seed points (body frame, m); region r is the
        part of the surface nearest seed r (a Voronoi partition of the surface).
      skipped: [{"file", "episode", "field", "reason"}] inputs an importer skipped.
      object_joint_names: [Jo] names of an articulated object's joints (its URDF's), or None (rigid objects).
      robot_files: {dataset path: bytes} files describing the robot, under ``meta/robot/`` (the MJCF ``hand["mjcf"]``
        names and its meshes: ``scenes.hand_model``); written and read with the dataset, not in contact.json.
      capture_rate_hz: the dataset's one capture rate (``meta/contact.json``'s, set by the reader), which every
        episode's ``provenance.capture_rate_hz`` must agree with; None: the writer takes the first episode's.
    """

    name: str = "capture"
    robot_type: str = "none"
    hand: dict | None = None
    joint_names: list | None = None
    wrench_sensors: list | None = None
    tactile_unit: str | None = None
    angular_frame: str = "world"
    contact_region_seeds: dict = field(default_factory=dict)
    skipped: list = field(default_factory=list)
    object_joint_names: list | None = None
    robot_files: dict = field(default_factory=dict)
    capture_rate_hz: float | None = None

    @property
    def hand_name(self) -> str | None:
        """The name of the hand the dataset names (``hand["name"]``), or None."""
        return self.hand.get("name") if isinstance(self.hand, dict) else None
