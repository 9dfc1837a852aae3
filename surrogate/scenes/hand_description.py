"""A hand's description in a capture (``HandInfo`` as JSON) and the checks that it fits its MJCF (``hand_model``).

A capture's robot MJCF is the root of every scene built from it (``builder.build_scene``: the world, table and object
are added to it), so it must leave the world's settings alone: an MJCF that sets gravity or other physics options, a
total mass, or the main default class's contact parameters would change the table and the object too, and is
refused naming what it sets (put a robot's defaults in a class of its own).
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np

from ..errors import ConfigError
from .hand_parts import HandInfo

_ARRAYS = ("open_command", "closed_command", "grip_levers")
_SCENE_OPTIONS = ("timestep", "integrator", "cone")  # the scene sets these (``builder._world``)
_DEFAULT_GEOM = ("solref", "solimp", "friction", "margin", "gap", "condim", "contype", "conaffinity", "priority",
                 "solmix", "density")


def info_json(info: HandInfo) -> dict:
    """``HandInfo`` as JSON (arrays as lists)."""
    d = dataclasses.asdict(info)
    return {k: (np.asarray(v, dtype=float).tolist() if k in _ARRAYS else list(v) if isinstance(v, tuple) else v)
            for k, v in d.items()}


def info_from_json(d: dict, *, where: str = "hand.description") -> HandInfo:
    """The ``HandInfo`` of ``info_json``'s dict; a missing or unknown field, or one of the wrong type, is an error
    naming it."""
    if not isinstance(d, dict):
        raise ConfigError(f"must be a mapping of the hand's names and dimensions, got {type(d).__name__}", key=where)
    fields = {f.name: f for f in dataclasses.fields(HandInfo)}
    unknown = sorted(set(d) - set(fields))
    missing = sorted(k for k, f in fields.items() if k not in d and f.default is dataclasses.MISSING
                     and f.default_factory is dataclasses.MISSING)
    if unknown or missing:
        raise ConfigError(f"unknown fields {unknown}, missing fields {missing}", key=where)
    out = {}
    for k, v in d.items():
        f = fields[k]
        if k in _ARRAYS or k == "finger_angles":
            arr = np.asarray(v, dtype=float) if _numbers(v) else None
            if arr is None or arr.ndim != 1 or not np.isfinite(arr).all():
                raise ConfigError(f"must be a list of finite numbers, got {v!r}", key=f"{where}.{k}")
            out[k] = arr if k in _ARRAYS else tuple(float(x) for x in arr)
        elif "tuple" in str(f.type):
            if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
                raise ConfigError(f"must be a list of names, got {v!r}", key=f"{where}.{k}")
            out[k] = tuple(v)
        elif f.type in ("float", float):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
                raise ConfigError(f"must be a finite number, got {v!r}", key=f"{where}.{k}")
            out[k] = float(v)
        elif f.type in ("bool", bool):
            if not isinstance(v, bool):
                raise ConfigError(f"must be true or false, got {v!r}", key=f"{where}.{k}")
            out[k] = v
        else:
            if not isinstance(v, str) or not v:
                raise ConfigError(f"must be a name, got {v!r}", key=f"{where}.{k}")
            out[k] = v
    return HandInfo(**out)


def _numbers(v) -> bool:
    return isinstance(v, (list, tuple)) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)


def check_description(info: HandInfo, m: mujoco.MjModel, *, where: str, file=None) -> None:
    """Every name ``info`` gives is in the compiled hand ``m``, and its per-finger lists fit its finger servos and
    pads (one lever, open and closed command per finger actuator; one direction per pad).

    Raises:
      ConfigError: naming the field (``hand.description.<field>``) and what is missing or how long it should be.
    """
    names = {"joint": ("base_joint_names", "finger_joint_names"), "actuator": ("base_actuator_names",
             "finger_actuator_names"), "geom": ("pad_geom_names", "link_geom_names"), "site": ("pad_site_names",),
             "sensor": ("sensor_names",), "body": ("bodies",)}
    for kind, keys in names.items():
        for key in keys:
            for n in getattr(info, key):
                try:
                    getattr(m, kind)(n)
                except KeyError:
                    raise ConfigError(f"the hand's description names {kind} {n!r}, which its MJCF {where} lacks",
                                      file=file, key=f"hand.description.{key}") from None
    try:
        m.body(info.base_body)
    except KeyError:
        raise ConfigError(f"the hand's description names body {info.base_body!r}, which its MJCF {where} lacks",
                          file=file, key="hand.description.base_body") from None
    n = len(info.finger_actuator_names)
    for key in ("grip_levers", "open_command", "closed_command"):
        if len(getattr(info, key)) != n:
            raise ConfigError(f"has {len(getattr(info, key))} values for {n} finger actuators", file=file,
                              key=f"hand.description.{key}")
    if len(info.pad_site_names) != len(info.pad_geom_names):
        raise ConfigError(f"{len(info.pad_site_names)} pad sites for {len(info.pad_geom_names)} pads", file=file,
                          key="hand.description.pad_site_names")
    if info.finger_angles and len(info.finger_angles) != len(info.pad_geom_names):
        raise ConfigError(f"{len(info.finger_angles)} directions for {len(info.pad_geom_names)} pads", file=file,
                          key="hand.description.finger_angles")


def check_world_settings(spec: mujoco.MjSpec, m: mujoco.MjModel, *, where: str, file=None) -> None:
    """The hand's MJCF leaves the world's settings at MuJoCo's defaults (module docstring).

    Raises:
      ConfigError: naming the settings it changes (key ``hand.mjcf``).
    """
    ref_spec = mujoco.MjSpec()
    ref = ref_spec.compile()
    changed = [f"option {k}" for k in dir(ref.opt) if not k.startswith("_") and k not in _SCENE_OPTIONS
               and not callable(getattr(ref.opt, k)) and not np.array_equal(getattr(m.opt, k), getattr(ref.opt, k))]
    if spec.compiler.settotalmass != ref_spec.compiler.settotalmass:
        changed.append("compiler settotalmass")
    changed += [f"default geom {k}" for k in _DEFAULT_GEOM
                if not np.array_equal(getattr(spec.default.geom, k), getattr(ref_spec.default.geom, k))]
    if changed:
        raise ConfigError(f"the hand's MJCF {where} changes the world's settings ({', '.join(changed)}), which would "
                          "act on the table and the object too: leave them at MuJoCo's defaults (a robot's own "
                          "defaults in a class of its own)", file=file, key="hand.mjcf")
