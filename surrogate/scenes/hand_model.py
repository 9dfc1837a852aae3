"""A hand as data: its MJCF (with the mesh files it names) and its ``HandInfo``, so that a capture describes the robot
it was recorded with and a scene is rebuilt from the capture alone (issue #26).

In a capture dataset (``docs/capture-format.md``): ``meta/contact.json``'s ``hand`` is
``{"name", "mjcf": "meta/robot/<name>.xml", "description": {HandInfo's fields}}`` and the MJCF and its meshes are
files under ``meta/robot/`` (``DatasetMeta.robot_files``). The MJCF holds the hand alone: its positioned base at the
origin (the ``description.base_body``, moved per episode to the recorded base position), its bodies, joints,
actuators and sensors; the scene builder adds the world, the table and the object (``build_scene(hand=HandModel)``).

    model = hand_model("jaco")                        # a hand the package builds, as data
    meta.hand, meta.robot_files = capture_entry(model)
    scene = build_scene(obj, hand=load_hand_model(meta.hand, meta.robot_files))
"""

from __future__ import annotations

import dataclasses
import posixpath
from dataclasses import dataclass

import mujoco
import numpy as np

from ..capture.robot import ROBOT_DIR, bundle
from ..errors import ConfigError
from .hand_parts import HandInfo
from .hands import add_hand

_ARRAYS = ("open_command", "closed_command", "grip_levers")


@dataclass(frozen=True)
class HandModel:
    """A hand as data.

    Attributes:
      xml: the hand's MJCF (base at the origin), its mesh files named by base name.
      assets: {file name: bytes} of the meshes the MJCF names.
      info: its ``HandInfo`` (names, commands, dimensions).
    """

    xml: str
    assets: dict
    info: HandInfo

    def spec(self) -> mujoco.MjSpec:
        """A fresh ``MjSpec`` of the hand."""
        return mujoco.MjSpec.from_string(self.xml, assets=dict(self.assets))


def hand_model(name: str, *, grip_force: float | None = None) -> HandModel:
    """The ``HandModel`` of a hand this package builds (``scenes.hands.HAND_BUILDERS``), base at the origin."""
    spec = mujoco.MjSpec()
    spec.compiler.degree = False
    spec.modelname = f"hand_{name}"
    info = add_hand(spec, name, base_pos=[0.0, 0.0, 0.0], grip_force=grip_force)
    xml, assets = bundle(spec, label=f"hand {name!r}")  # a hand's builder names its mesh files by absolute paths
    return HandModel(xml=xml, assets=assets, info=info)


def info_json(info: HandInfo) -> dict:
    """``HandInfo`` as JSON (arrays as lists)."""
    d = dataclasses.asdict(info)
    return {k: (np.asarray(v, dtype=float).tolist() if k in _ARRAYS else list(v) if isinstance(v, tuple) else v)
            for k, v in d.items()}


def info_from_json(d: dict, *, where: str = "hand.description") -> HandInfo:
    """The ``HandInfo`` of ``info_json``'s dict; a missing or unknown field is an error naming it."""
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
        if k in _ARRAYS:
            out[k] = np.asarray(v, dtype=float)
        elif isinstance(v, list):
            out[k] = tuple(v)
        else:
            out[k] = v
    return HandInfo(**out)


def capture_entry(model: HandModel, *, folder: str = ROBOT_DIR) -> tuple[dict, dict]:
    """(``DatasetMeta.hand``, ``DatasetMeta.robot_files``) describing ``model`` in a capture."""
    name = model.info.name
    mjcf = f"{folder}/{name}.xml"
    files = {mjcf: model.xml.encode()} | {f"{folder}/{k}": v for k, v in model.assets.items()}
    return {"name": name, "mjcf": mjcf, "description": info_json(model.info)}, files


def load_hand_model(hand: dict, files: dict, *, file=None) -> HandModel:
    """The ``HandModel`` a capture describes: ``hand`` (its ``meta.hand``) and ``files`` (``meta.robot_files``: dataset
    paths -> bytes). The meshes are the files beside the MJCF.

    Raises:
      ConfigError: no ``mjcf`` or ``description``, an MJCF the dataset does not hold, or one MuJoCo cannot compile
        (its message), naming the field.
    """
    mjcf = hand.get("mjcf") if isinstance(hand, dict) else None
    if not isinstance(mjcf, str) or mjcf not in files:
        raise ConfigError(f"the dataset holds no MJCF of its hand at {mjcf!r} (files: {sorted(files)[:5]})",
                          file=file, key="hand.mjcf")
    folder = posixpath.dirname(mjcf)
    assets = {posixpath.basename(p): b for p, b in files.items() if posixpath.dirname(p) == folder and p != mjcf}
    model = HandModel(xml=files[mjcf].decode(), assets=assets,
                      info=info_from_json(hand.get("description"), where="hand.description"))
    try:
        m = model.spec().compile()
    except ValueError as e:
        raise ConfigError(f"MuJoCo cannot build the hand's MJCF {mjcf}: {e}", file=file, key="hand.mjcf") from e
    names = {"joint": model.info.joint_names, "actuator": model.info.actuator_names, "geom": model.info.hand_geom_names,
             "site": model.info.pad_site_names, "body": (model.info.base_body,)}
    for kind, wanted in names.items():
        for n in wanted:
            try:
                getattr(m, kind)(n)
            except KeyError:
                raise ConfigError(f"the hand's description names {kind} {n!r}, which its MJCF {mjcf} lacks",
                                  file=file, key="hand.description") from None
    return model
