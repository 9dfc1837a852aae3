"""The mapping of a foreign LeRobot dataset: loading and checking it, its units and its object.

The mapping's format (fields, units, object, environment, provenance) is described in
``surrogate.capture.lerobot_import``, which reads a dataset with it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import yaml

from ..config import parse_yaml
from ..errors import CaptureError, ConfigError
from .episode import Environment, ObjectSpec, Provenance
from .schema import ANGULAR_FRAMES, POSE_NAMES, UNIT_TO_SI

# Capture quantity -> {option: (default unit or None if required, allowed SI units or None for any)}.
UNIT_OPTIONS = {
    "object_pose": {"length_unit": ("m", ("m",))},
    "object_pose_valid": {},
    "object_twist": {"linear_unit": ("m/s", ("m/s",)), "angular_unit": ("rad/s", ("rad/s",))},
    "joint_pos": {"unit": (None, ("m", "rad"))},
    "joint_vel": {"unit": (None, ("m/s", "rad/s"))},
    "joint_cmd": {"unit": (None, ("m", "rad"))},
    "wrench": {"force_unit": ("N", ("N",)), "torque_unit": ("N*m", ("N*m",))},
    "tactile": {"unit": ("", None)},  # "" = dimensionless/unknown, stored as is
    "contact_regions": {},
    "time": {"unit": ("s", ("s",))},
}

EXTRA_OPTIONS = {"object_pose": {"layout"}, "wrench": {"sensors"}}

TOP_KEYS = {"fields", "object", "environment", "provenance", "angular_frame", "name", "robot_type", "hand",
            "joint_names", "contact_region_seeds", "episode_id_prefix"}


def load_mapping(path: str | Path) -> dict:
    """Load and check a mapping YAML file. Errors name the file and the key."""
    path = Path(path)
    try:
        mapping = parse_yaml(path.read_text())  # the config files' one parser (1e5: a float)
    except OSError as e:
        raise ConfigError(f"cannot read ({e.strerror or e})", file=path) from None
    except yaml.YAMLError as e:
        raise ConfigError(f"not valid YAML ({e})", file=path) from None
    check_mapping(mapping, file=path)
    hand = mapping.get("hand")
    if isinstance(hand, dict) and isinstance(hand.get("mjcf"), str) and not Path(hand["mjcf"]).is_absolute():
        hand["mjcf"] = str(path.parent / hand["mjcf"])  # relative to the mapping file
    return mapping


def check_mapping(mapping, *, file=None) -> None:
    """Check a mapping's structure and units (before any data is read).

    Raises ConfigError naming the key for structural problems and CaptureError naming
    the field (``fields.<quantity>.<option>``) and the known units for a bad unit.
    """
    if not isinstance(mapping, dict):
        raise ConfigError(f"must be a mapping with keys {sorted(TOP_KEYS)}, got {type(mapping).__name__}", file=file)
    unknown = sorted(set(mapping) - TOP_KEYS)
    if unknown:
        raise ConfigError(f"unknown key; allowed: {sorted(TOP_KEYS)}", file=file, key=unknown[0])
    for key in ("fields", "object", "provenance"):
        if not isinstance(mapping.get(key), dict):
            raise ConfigError("required, as a mapping", file=file, key=key)
    fields = mapping["fields"]
    if "object_pose" not in fields:
        raise ConfigError("required: the column holding the object pose", file=file, key="fields.object_pose")
    for name, spec in fields.items():
        _check_field(name, spec, file)
    for key in ("source", "real"):
        if key not in mapping["provenance"]:
            raise ConfigError("required (say whether the data comes from physical hardware)" if key == "real" else "required",
                              file=file, key=f"provenance.{key}")
    obj = mapping["object"]
    for key in ("name", "mass", "geometry"):
        if key not in obj:
            raise ConfigError("required", file=file, key=f"object.{key}")
    if not isinstance(obj["geometry"], dict):
        raise ConfigError("must be a mapping with a 'kind'", file=file, key="object.geometry")
    if "inertia" not in obj and obj["geometry"].get("kind") != "box":
        raise ConfigError("required unless the geometry is a box (3x3, kg m^2, about the centre of mass)",
                          file=file, key="object.inertia")
    if mapping.get("environment") is not None and not isinstance(mapping["environment"], dict):
        raise ConfigError("must be a mapping", file=file, key="environment")
    for key, cls in (("object", ObjectSpec), ("environment", Environment), ("provenance", Provenance)):
        allowed = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(mapping.get(key) or {}) - allowed)
        if unknown:
            raise ConfigError(f"unknown key; allowed: {sorted(allowed)}", file=file, key=f"{key}.{unknown[0]}")
    _check_hand(mapping.get("hand"), file)
    frame = mapping.get("angular_frame", "world")
    if frame not in ANGULAR_FRAMES:
        raise ConfigError(f"must be one of {list(ANGULAR_FRAMES)}, got {frame!r}", file=file, key="angular_frame")


def _check_field(name: str, spec, file) -> None:
    if name not in UNIT_OPTIONS:
        raise ConfigError(f"unknown quantity; allowed: {sorted(UNIT_OPTIONS)}", file=file, key=f"fields.{name}")
    if not isinstance(spec, dict) or ("key" not in spec and name != "time"):
        raise ConfigError("must be a mapping with at least 'key' (the LeRobot feature)", file=file, key=f"fields.{name}")
    allowed = {"key"} | set(UNIT_OPTIONS[name]) | EXTRA_OPTIONS.get(name, set())
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise ConfigError(f"unknown option; allowed: {sorted(allowed)}", file=file, key=f"fields.{name}.{unknown[0]}")
    for option, (default, dims) in UNIT_OPTIONS[name].items():
        unit = spec.get(option, default)
        if unit is None:
            raise ConfigError(f"required: the unit of the column ({' or '.join(dims)} or a multiple)", file=file,
                              key=f"fields.{name}.{option}")
        if unit != "":
            _unit_factor(unit, dims, f"fields.{name}.{option}", file)
    if name == "object_pose" and "layout" in spec:
        layout = spec["layout"]
        if not isinstance(layout, list) or sorted(layout) != sorted(POSE_NAMES):
            raise ConfigError(f"must list {POSE_NAMES} in the column's order, got {layout!r}", file=file,
                              key="fields.object_pose.layout")
    if name == "wrench" and "sensors" in spec:
        if not isinstance(spec["sensors"], list) or not spec["sensors"]:
            raise ConfigError("must be a non-empty list of sensor names", file=file, key="fields.wrench.sensors")


def _unit_factor(unit: str, dims, field: str, file=None) -> float:
    """Factor from ``unit`` to SI; CaptureError naming ``field`` for an unknown or wrong-kind unit."""
    if unit not in UNIT_TO_SI:
        raise CaptureError(f"unknown unit {unit!r}; known units: {sorted(UNIT_TO_SI)}", file=file, field=field)
    si, factor = UNIT_TO_SI[unit]
    if dims is not None and si not in dims:
        raise CaptureError(f"unit {unit!r} converts to {si!r}, expected a unit of {' or '.join(dims)}", file=file, field=field)
    return factor


def box_inertia(mass: float, half_extents) -> list:
    """[3, 3] inertia (kg m^2) of a solid box of ``mass`` kg with half extents (m) about its centre."""
    hx, hy, hz = (float(h) for h in half_extents)
    return (mass / 3.0 * np.diag([hy**2 + hz**2, hx**2 + hz**2, hx**2 + hy**2])).tolist()


def object_spec(obj: dict) -> ObjectSpec:
    geometry = dict(obj["geometry"])
    half = geometry.get("half_extents")
    inertia = obj.get("inertia")
    if inertia is None:
        inertia = box_inertia(obj["mass"], half)  # check_mapping ensured this is a box
    size = obj.get("size")
    if size is None and half is not None:
        size = 2.0 * max(float(h) for h in half)
    return ObjectSpec(name=obj["name"], mass=obj["mass"], inertia=inertia, size=size, geometry=geometry,
                      friction=obj.get("friction"))


def _check_hand(hand, file) -> None:
    """``hand``: None, or a mapping with a ``name``; with ``mjcf`` (a file) also a ``description`` mapping."""
    if hand is None:
        return
    if not isinstance(hand, dict) or not isinstance(hand.get("name"), str) or not hand["name"]:
        raise ConfigError("must be a mapping with a 'name' (and optionally 'mjcf' and 'description')", file=file,
                          key="hand")
    if hand.get("mjcf") is not None:
        if not isinstance(hand["mjcf"], str):
            raise ConfigError("must be the path of the robot's MJCF file", file=file, key="hand.mjcf")
        if not isinstance(hand.get("description"), dict):
            raise ConfigError("required with hand.mjcf: the names of the robot's base body and joints, its servos, "
                              "pads and dimensions (the fields of scenes.hand_parts.HandInfo)", file=file,
                              key="hand.description")
