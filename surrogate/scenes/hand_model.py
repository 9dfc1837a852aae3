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

import functools
import json
import posixpath
from dataclasses import dataclass

import mujoco

from ..capture.robot import bundle, entry
from ..errors import ConfigError
from .hand_description import check_description, check_world_settings, info_from_json, info_json
from .hand_parts import HandInfo
from .hands import add_hand


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


def capture_entry(model: HandModel) -> tuple[dict, dict]:
    """(``DatasetMeta.hand``, ``DatasetMeta.robot_files``) describing ``model`` in a capture (``capture.robot.entry``)."""
    return entry(model.info.name, model.xml, model.assets, info_json(model.info))


def load_hand_model(hand: dict, files: dict, *, file=None) -> HandModel:
    """The ``HandModel`` a capture describes: ``hand`` (its ``meta.hand``: ``name``, ``mjcf``, ``description``, whose
    ``name`` may be left out: it is the hand's) and ``files`` (``meta.robot_files``: dataset paths -> bytes). The
    asset files are the files beside the MJCF.

    Raises:
      ConfigError: an MJCF the dataset does not hold, one MuJoCo cannot compile (its message), one that changes the
        world's settings, or a description that does not fit it (``hand_description.check_description``), naming
        the field.
    """
    mjcf = hand.get("mjcf") if isinstance(hand, dict) else None
    if not isinstance(mjcf, str) or mjcf not in files:
        raise ConfigError(f"the dataset holds no MJCF of its hand at {mjcf!r} (files: {sorted(files)[:5]})",
                          file=file, key="hand.mjcf")
    # Every episode's scene asks for its dataset's hand: compiled and checked once per hand and files (exact key)
    return _load(json.dumps(hand, sort_keys=True, default=str), tuple(sorted(files.items())), file)


@functools.lru_cache(maxsize=8)
def _load(hand_json: str, files: tuple, file) -> HandModel:
    """``load_hand_model`` of a hand (as JSON) and its files (sorted (path, bytes) pairs)."""
    hand, files = json.loads(hand_json), dict(files)
    mjcf = hand["mjcf"]
    folder = posixpath.dirname(mjcf)
    assets = {posixpath.basename(p): b for p, b in files.items() if posixpath.dirname(p) == folder and p != mjcf}
    desc = hand.get("description")
    info = info_from_json({**desc, "name": hand.get("name")} if isinstance(desc, dict) else desc)
    model = HandModel(xml=files[mjcf].decode(), assets=assets, info=info)
    try:
        spec = model.spec()
        m = spec.compile()
    except ValueError as e:
        raise ConfigError(f"MuJoCo cannot build the hand's MJCF {mjcf}: {e}", file=file, key="hand.mjcf") from e
    check_world_settings(spec, m, where=mjcf, file=file)
    check_description(info, m, where=mjcf, file=file)
    return model
