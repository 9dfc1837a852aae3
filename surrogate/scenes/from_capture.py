"""Scenes for captured episodes: the object (from its ``ObjectSpec``), the hand the dataset
names, the surface and gravity of the episode."""

from __future__ import annotations

import dataclasses

import numpy as np
import trimesh

from ..errors import ConfigError
from ..objects.asset import ObjectAsset, safe_name
from .builder import HANDS, build_scene


def asset_from_spec(spec) -> ObjectAsset:
    """An ``ObjectAsset`` from a capture's ``ObjectSpec`` (box, mesh or procedural) with the
    spec's (nominal) mass and inertia."""
    geo = spec.geometry
    kind = geo.get("kind")
    friction = float(spec.friction or 0.8)
    if kind == "box":
        pieces = [trimesh.creation.box(extents=2 * np.asarray(geo["half_extents"], float))]
        asset = ObjectAsset.from_pieces(safe_name(spec.name), "box", pieces, source=f"capture:{spec.name}",
                                        mass=float(spec.mass), friction=friction)
    elif kind == "mesh":
        from ..objects import load_mesh_object

        asset = load_mesh_object(geo["path"], mass=float(spec.mass), scale=geo.get("scale", 1.0),
                                 name=safe_name(spec.name), friction=friction)
    elif kind == "procedural":
        from ..objects import make_object

        # Rebuild from family and seed; only the parameters that were overridden are passed
        # (the rest of ``params`` is what the seed drew, plus derived values like volume).
        params = geo.get("params", {}) or {}
        overrides = {k: params[k] for k in params.get("overrides", []) if k in params}
        asset = make_object(geo["family"], int(geo["seed"]), name=safe_name(spec.name), **overrides)
    else:
        raise ConfigError(f"cannot rebuild object geometry of kind {kind!r}", key="object.geometry")
    inertia = np.asarray(spec.inertia, float)
    inertia.setflags(write=False)
    return dataclasses.replace(asset, mass=float(spec.mass), inertia=inertia)


def scene_for_episode(ep, meta, *, margin: float, substeps: int, contact_mode: str = "external", cone: str = "pyramidal"):
    """The MuJoCo scene of a capture episode: object, hand (if the dataset names one), surface, gravity.

    Timestep = frame period / ``substeps``; owned pairs detect within ``margin`` (m).
    """
    dt = 1.0 / float(ep.provenance.capture_rate_hz)
    hand = (meta.hand or {}).get("name", "none") if meta.hand else "none"
    if hand not in HANDS:
        raise ConfigError(f"hand {hand!r} of the dataset is not a known scene hand {HANDS}", key="hand")
    setting = "table" if ep.environment.kind == "table" else "ground"
    scene = build_scene(asset_from_spec(ep.object), hand=hand, setting=setting, timestep=dt / substeps,
                        owned_margin=margin, contact_mode=contact_mode, cone=cone)
    scene.model.opt.gravity[:] = ep.environment.gravity
    return scene
