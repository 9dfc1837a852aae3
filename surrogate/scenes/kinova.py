"""Where dm_control's Kinova Jaco assets are (``jaco_assets``) and the hand's finger range: a leaf module, shared by
the Jaco arm scene (``scenes.jaco``) and the rig's Jaco hand (``scenes.jaco_hand``)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from ..errors import ConfigError

ASSETS_ENV = "SURROGATE_JACO_ASSETS"
FINGER_RANGE = (0.15, 1.35)  # rad, the hand's joint range (jaco_hand.xml)


def jaco_assets(assets=None) -> Path:
    """The folder holding ``jaco_arm.xml`` and ``jaco_hand.xml`` (module docstring: argument, environment, package).

    Raises:
      ConfigError: none found, saying how to get them.
    """
    if assets is None:
        assets = os.environ.get(ASSETS_ENV) or None
    if assets is None:
        spec = importlib.util.find_spec("dm_control")  # a top-level package: found, not imported
        if spec is not None and spec.submodule_search_locations:
            assets = Path(next(iter(spec.submodule_search_locations))) / "third_party" / "kinova"
    if assets is None:
        raise ConfigError("the Jaco assets were not found: `pip install --no-deps dm-control` (the MJCF and meshes "
                          f"of dm_control; its dependencies would replace mujoco-core), or set {ASSETS_ENV} to a folder "
                          "with jaco_arm.xml and jaco_hand.xml", key="assets")
    folder = Path(assets)
    missing = [f for f in ("jaco_arm.xml", "jaco_hand.xml") if not (folder / f).is_file()]
    if missing:
        raise ConfigError(f"{folder}: no {', '.join(missing)} (expected dm_control's third_party/kinova folder)",
                          key="assets")
    return folder
