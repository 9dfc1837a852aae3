"""Scenes for captured episodes: the object (from its ``ObjectSpec``), the hand the dataset
names, the surface and gravity of the episode."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from pathlib import Path

import mujoco
import numpy as np
import trimesh

from ..errors import CaptureError, ConfigError
from ..objects.asset import ObjectAsset, safe_name
from ..paths import file_sha256
from .builder import CODE_HANDS, HANDS, build_scene  # CODE_HANDS: rebuilt by name (``capture_hand``)
from .hand_model import load_hand_model

HANDS_MODULE = "surrogate.scenes.hands"  # a capture's ``hand.model`` when this package built its hand (the rig)


def recorded_file(spec, episode=None) -> Path:
    """The mesh or URDF file a capture's object (``ObjectSpec`` of geometry kind ``mesh``) was made from: a
    ``CaptureError`` naming the object, the file and the ``episode`` where it is missing, or where its bytes are not
    those the capture recorded (``geometry.sha256``): its episodes were recorded with another shape."""
    path, want = Path(spec.geometry["path"]), spec.geometry.get("sha256")
    if not path.is_file():
        hint = "" if path.is_absolute() else f" (a relative path, read from the current folder {Path.cwd()})"
        raise CaptureError(f"object {spec.name!r} was made from this file, which does not exist{hint}; put the file "
                           "there", file=path, episode=episode, field="object.geometry.path")
    if want and _sha256(path) != want:
        raise CaptureError(f"object {spec.name!r}: the file has changed since the capture was made (sha256 "
                           f"{_sha256(path)[:12]}, recorded {want[:12]}): its episodes were recorded with another "
                           "shape; restore the file the capture was made from", file=path, episode=episode,
                           field="object.geometry.sha256")
    return path


@functools.lru_cache(maxsize=256)
def _sha256_at(path: str, mtime_ns: int, size: int) -> str:
    return file_sha256(path)


def _sha256(path: Path) -> str:
    st = path.stat()  # a file is read again only when it changed: a dataset names one file in many episodes
    return _sha256_at(str(path.resolve()), st.st_mtime_ns, st.st_size)


def asset_from_spec(spec, episode=None) -> ObjectAsset:
    """An ``ObjectAsset`` from a capture's ``ObjectSpec`` (box, mesh or procedural) with the
    spec's (nominal) mass and inertia; a mesh or URDF from the file the capture recorded (``recorded_file``;
    ``episode`` names where it is used in its errors)."""
    geo = spec.geometry
    kind = geo.get("kind")
    if kind == "mesh":
        recorded_file(spec, episode)
    friction = float(spec.friction or 0.8)
    if kind == "articulated":  # links, joints and per-link mass properties as the capture stored them
        from ..objects.articulated import articulation_from_json

        return articulation_from_json(geo).asset(friction=friction)
    if kind == "box":
        pieces = [trimesh.creation.box(extents=2 * np.asarray(geo["half_extents"], float))]
        asset = ObjectAsset.from_pieces(safe_name(spec.name), "box", pieces, source=f"capture:{spec.name}",
                                        mass=float(spec.mass), friction=friction)
    elif kind == "mesh" and str(geo.get("path", "")).lower().endswith(".urdf"):
        from ..objects.urdf import load_urdf_object

        # A URDF's collision meshes, origins and scales: the geometry the capture was made with.
        asset = dataclasses.replace(load_urdf_object(geo["path"], friction=friction), name=safe_name(spec.name))
    elif kind == "mesh" and str(geo.get("path", "")).lower().endswith(".xml"):
        from ..objects.mjcf import load_mjcf_object

        # MuJoCo's own file of the object: its collision geoms as MuJoCo compiles them, as the capture was made
        asset = dataclasses.replace(load_mjcf_object(geo["path"], friction=friction), name=safe_name(spec.name))
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


def scene_key(ep) -> tuple:
    """What ``scene_for_episode`` builds a scene from, less the hand's pose: episodes with equal keys share one scene,
    built from any of them. The object is keyed by its whole spec, not only its name: two test datasets may give one
    name to different objects (dair_pll's cube and ContactNets' are both ``contactnets_cube``), and a scene built
    for the first would have rolled out the other's tosses; then the capture rate, the surface (ground or table),
    gravity and the rig's hand base."""
    spec = json.dumps(ep.object.to_json(), sort_keys=True, default=str)
    return (ep.object.name, hashlib.sha256(spec.encode()).hexdigest()[:16], float(ep.provenance.capture_rate_hz),
            ep.environment.kind, tuple(float(g) for g in ep.environment.gravity),
            str(((ep.provenance.generator or {}).get("script") or {}).get("hand_base_pos")))


def scene_for_episode(ep, meta, *, margin: float, substeps: int, contact_mode: str = "external", cone: str = "pyramidal"):
    """The MuJoCo scene of a capture episode: object, hand (if the dataset names one), surface, gravity.

    Timestep = frame period / ``substeps``; owned pairs detect within ``margin`` (m).
    """
    dt = 1.0 / float(ep.provenance.capture_rate_hz)
    hand = capture_hand(meta)
    setting = "table" if ep.environment.kind == "table" else "ground"
    # The hand's base height follows the object's top as it lies on the table, so the scene is
    # built with the object as recorded: otherwise recorded joint positions put the pads
    # centimetres away from where they were (an object lying on its side is lower than upright).
    scene = build_scene(asset_from_spec(ep.object, ep.episode_id), hand=hand, setting=setting, timestep=dt / substeps,
                        owned_margin=margin, contact_mode=contact_mode, cone=cone,
                        object_quat=first_quat(ep) if hand != "none" else None)
    base = ((ep.provenance.generator or {}).get("script") or {}).get("hand_base_pos")
    if base is not None and scene.hand is not None:
        place_hand_base(scene, base)
    scene.model.opt.gravity[:] = ep.environment.gravity
    return scene


def capture_hand(meta):
    """The hand a capture dataset names, for ``build_scene``: ``none``; one of the two hands this package writes in
    code (``parallel_jaw``, ``three_finger``) as this package built them (``hand.model`` is ``HANDS_MODULE``),
    rebuilt exactly by their builders (an MJCF round trip rounds to 6 digits); otherwise the robot its MJCF
    describes (``hand.mjcf`` and ``hand.description``: a ``HandModel``, e.g. the rig's Jaco, or another robot's
    imported captures); without an MJCF, a hand this package builds (``HANDS``), by name.

    Raises:
      ConfigError: a hand that is neither, or an MJCF that does not build (``scenes.hand_model.load_hand_model``).
    """
    hand = meta.hand if isinstance(meta.hand, dict) else {}
    name = meta.hand_name or "none"
    if name == "none" or (name in CODE_HANDS and (not hand.get("mjcf") or hand.get("model") == HANDS_MODULE)):
        return name
    if hand.get("mjcf"):
        return load_hand_model(hand, meta.robot_files)
    if name in HANDS:  # a hand this package builds, without its MJCF (jaco: with dm_control's assets installed)
        return name
    raise ConfigError(f"hand {name!r} of the dataset is none of {HANDS[1:]} and the dataset has no MJCF of it "
                      "(meta/contact.json hand.mjcf, under meta/robot/)", key="hand")


def first_quat(ep) -> np.ndarray:
    """[4] the object's orientation at its first tracked frame (w, x, y, z)."""
    first = 0 if ep.object_pose_valid is None or not np.any(ep.object_pose_valid) else int(np.argmax(ep.object_pose_valid))
    q = np.asarray(ep.object_pose[first, 3:7], dtype=float)
    n = np.linalg.norm(q)
    return q / n if np.isfinite(n) and n > 0 else np.array([1.0, 0.0, 0.0, 0.0])


def place_hand_base(scene, pos) -> None:
    """Move the hand's base (where its base joints are zero) to ``pos`` [3] (world, m), as the
    capture recorded it (the rig writes ``provenance.generator.script.hand_base_pos``)."""
    pos = np.asarray(pos, dtype=float)
    if pos.shape != (3,) or not np.isfinite(pos).all():
        raise ConfigError(f"hand_base_pos must be 3 finite numbers, got {pos.tolist()!r}",
                          key="provenance.generator.script.hand_base_pos")
    m = scene.model
    b = m.body(scene.hand.base_body).id
    shift = pos - m.body_pos[b]
    m.body_pos[b] = pos
    if "hand_base_pos" in scene.meta:
        scene.meta["hand_base_pos"] = [float(v) for v in pos]
        scene.meta["grasp_base_z"] = float(scene.meta["grasp_base_z"] - shift[2])


def recorded_joint_columns(model, joint_names) -> list[tuple[int, int, int]]:
    """(column in the recorded joint arrays, ``qpos`` address, ``qvel`` address) of each recorded joint
    (``DatasetMeta.joint_names``) the model has; joints the scene lacks are left out."""
    out = []
    for c, name in enumerate(joint_names or []):
        try:
            j = model.joint(name).id
        except KeyError:
            continue
        out.append((c, int(model.jnt_qposadr[j]), int(model.jnt_dofadr[j])))
    return out


def recorded_grip_force(ep) -> float | None:
    """The fingertip force bound (N) the episode's controller ran with (its generator script's ``grip_force``)."""
    grip = ((ep.provenance.generator or {}).get("script") or {}).get("grip_force")
    return None if grip is None else float(grip)


def recorded_commands(ep, model, joint_names, frames, substeps: int):
    """[(len(frames) - 1) * substeps, nu] the episode's recorded joint commands (``joint_cmd``) as actuator controls
    per physics step from ``frames[0]`` (zero-order hold over each frame), for the joint actuators whose joint was
    recorded (the others 0); None without recorded commands."""
    if ep.joint_cmd is None:
        return None
    cols = {n: i for i, n in enumerate(joint_names or [])}
    hold = np.repeat(np.asarray(frames[:-1], dtype=np.int64), substeps)
    ctrl = np.zeros((len(hold), model.nu))
    for a in range(model.nu):
        if model.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT:
            name = model.joint(int(model.actuator_trnid[a, 0])).name
            if name in cols:
                ctrl[:, a] = ep.joint_cmd[hold, cols[name]]
    return ctrl


def sensor_pads(scene, meta) -> list[tuple[int, int, int]]:
    """[(sensor column, pad site id, pad body id)] for the dataset's force/torque sensors.

    Sensor names follow the scenes: ``ft_<pad>`` (e.g. ``ft_left`` on ``pad_left``) or the
    MuJoCo sensor names ``ft_<pad>_force``; a name that matches no pad is ignored.
    """
    m = scene.model
    out = []
    for s, name in enumerate(meta.wrench_sensors or []):
        core = name[3:] if name.startswith("ft_") else name
        core = core[:-6] if core.endswith("_force") else core
        for site_name in (f"pad_{core}_site", f"{core}_site", core):
            try:
                site = m.site(site_name).id
            except KeyError:
                continue
            out.append((s, site, int(m.site_bodyid[site])))
            break
    return out
