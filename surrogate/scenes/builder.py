"""Building scenes (``build_scene``): an object, optionally a hand, on a table or the ground, with the
contact pairs an external contact model owns named (``own:``) and switchable (``scenes.scene``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import mujoco
import numpy as np

from surrogate.errors import ConfigError
from surrogate.hand_names import CODE_HANDS, GRASPING_HANDS, HANDS  # noqa: F401  (re-exported)
from surrogate.objects.asset import ObjectAsset
from surrogate.scenes.articulated_body import add_articulated_body, articulation_meta, articulation_of
from surrogate.scenes.hand_model import HandModel
from surrogate.scenes.hands import HandInfo, add_hand
from surrogate.scenes.object_body import OBJECT_BODY, OBJECT_JOINT, add_object_body, piece_geom_name
from surrogate.scenes.scene import ANALYTIC_PREFIX, MODES, OWNED_PREFIX, Scene, set_contact_mode, sorted_pair_keys

SETTINGS = ("table", "ground")
CONES = {"pyramidal": mujoco.mjtCone.mjCONE_PYRAMIDAL, "elliptic": mujoco.mjtCone.mjCONE_ELLIPTIC}

TABLE_HEIGHT = 0.4  # m, top surface of the table
TABLE_HALF = (0.4, 0.4, TABLE_HEIGHT / 2)  # m, the table is a solid box standing on the ground
_REST_CLEARANCE = 1e-4  # m between the object's lowest vertex and the surface in make_data
_HAND_CLEARANCE = 0.03  # m between the object top and the open hand's lowest point at start


def stable_quat(obj: ObjectAsset) -> np.ndarray:
    """[4] orientation (w, x, y, z) in which ``obj`` rests stably on a horizontal plane.

    The face of the convex hull nearest to the centre of mass is a stable
    resting face (the potential energy is at its global minimum there, so the
    COM projects inside it); the returned rotation turns its outward normal to
    -z with the smallest rotation. Objects with a neutral direction (spheres,
    capsules on their side) may still roll when pushed.
    """
    hull = obj.combined_mesh().convex_hull
    normals = np.asarray(hull.face_normals)
    # Distance from the COM (the origin, inside the hull) to each face plane: n . v0 > 0.
    dist = np.einsum("ij,ij->i", normals, hull.triangles[:, 0, :])
    n = normals[int(np.argmin(dist))]
    quat = np.zeros(4)
    target = np.array([0.0, 0.0, -1.0])
    axis = np.cross(n, target)
    s, c = np.linalg.norm(axis), float(np.dot(n, target))
    if s < 1e-12:
        # Already facing down, or facing straight up (turn half about x).
        return np.array([1.0, 0, 0, 0]) if c > 0 else np.array([0.0, 1.0, 0, 0])
    angle = np.arctan2(s, c)
    mujoco.mju_axisAngle2Quat(quat, axis / s, angle)
    return quat


def rotated_vertices(obj: ObjectAsset, quat: Sequence[float]) -> np.ndarray:
    """[V, 3] the object's vertices (every piece) rotated by ``quat`` about its COM (m)."""
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, np.asarray(quat, dtype=float))
    verts = np.concatenate([np.asarray(p.vertices) for p in obj.pieces])
    return verts @ mat.reshape(3, 3).T


def _z_extent(obj: ObjectAsset, quat: Sequence[float]) -> tuple[float, float]:
    """(lowest, highest) z (m) of the object's vertices when rotated by ``quat`` about its COM."""
    z = rotated_vertices(obj, quat)[:, 2]
    return float(z.min()), float(z.max())


def _add_pair(spec, name, g1, g2, *, friction, condim, margin, gap):
    pair = spec.add_pair(name=name, geomname1=g1, geomname2=g2, condim=condim, margin=margin, gap=gap)
    # 5 values: sliding (2 tangent directions), torsional, rolling (2).
    pair.friction = [friction, friction, 0.005, 0.0001, 0.0001]
    return pair


def build_scene(
    obj: ObjectAsset,
    *,
    hand: str = "none",
    setting: str = "table",
    timestep: float = 0.002,
    owned_margin: float = 0.005,
    object_pos: Sequence[float] | None = None,
    object_quat: Sequence[float] | str | None = None,
    contact_mode: str = "analytic",
    condim: int = 3,
    cone: str = "pyramidal",
    grip_force: float | None = None,
) -> Scene:
    """Build and compile a scene around ``obj``.

    Args:
      obj: the object.
      hand: ``none``, a hand's name (``HANDS``: ``parallel_jaw``, ``three_finger``, ``jaco``) or a ``HandModel``
        (a hand as data, e.g. a capture's: ``scenes.hand_model``).
      setting: ``table`` (a 0.4 m high table box on the ground, object on the
        table) or ``ground`` (object on the ground plane only, for tosses).
      timestep: s.
      owned_margin: m, owned pairs report contacts with ``dist < owned_margin``.
      object_pos: [2] or [3] x, y (m) of the object's COM; z is ignored: the
        object is put to rest on the surface. Default (0, 0).
      object_quat: [4] initial orientation (w, x, y, z), or ``"stable"`` for
        ``stable_quat(obj)``. Default identity.
      contact_mode: initial mode of the owned pairs (``set_contact_mode``).
      condim: contact dimensionality of the object pairs: 3 (sliding friction),
        4 (+ torsional) or 6 (+ rolling).
      cone: ``pyramidal`` (MuJoCo's default) or ``elliptic`` friction cone.
      grip_force: N, fingertip force bound of the hand (hand default if None).
    Returns:
      The compiled ``Scene``.
    Raises:
      ConfigError: an unknown hand, setting, mode, cone or condim, or a
        non-positive timestep / owned_margin.
    """
    hand_name = hand.info.name if isinstance(hand, HandModel) else hand
    _check_options(hand="none" if isinstance(hand, HandModel) else hand, setting=setting, contact_mode=contact_mode,
                   condim=condim, cone=cone, timestep=timestep, owned_margin=owned_margin)
    quat = _initial_quat(obj, object_quat)
    xy = np.zeros(2) if object_pos is None else np.asarray(object_pos, dtype=float)[:2]
    surface_z = TABLE_HEIGHT if setting == "table" else 0.0
    low, high = _z_extent(obj, quat)
    rest_z = surface_z - low + _REST_CLEARANCE
    spec, surfaces = _world(f"{obj.name}_{hand_name}_{setting}", setting, timestep=timestep, cone=cone,
                            spec=hand.spec() if isinstance(hand, HandModel) else None)
    if articulation_of(obj) is not None:  # links and joints of a URDF object, the base link's frame at the pose
        add_articulated_body(spec, obj, pos=[xy[0], xy[1], rest_z], quat=quat)
    else:
        add_object_body(spec, obj, pos=[xy[0], xy[1], rest_z], quat=quat)
    pieces = [piece_geom_name(i) for i in range(len(obj.pieces))]
    hand_info, meta = None, {}
    if hand_name != "none":
        hand_info = _hand(spec, hand, grip_force)
        base_z = rest_z + high + _HAND_CLEARANCE + hand_info.finger_depth
        spec.body(hand_info.base_body).pos = [xy[0], xy[1], base_z]
        lowest_cmd = surface_z + 0.003 + hand_info.finger_depth - base_z
        meta["hand_base_pos"] = [float(xy[0]), float(xy[1]), float(base_z)]
        meta["grasp_base_z"] = float(max(rest_z + hand_info.pad_depth - base_z, lowest_cmd))
    owned, analytic, roles = _add_object_pairs(spec, pieces, hand_info, surfaces, friction=float(obj.friction),
                                               condim=condim, owned_margin=owned_margin)
    model = spec.compile()
    meta.update(name=spec.modelname, object=obj.name, hand=hand_name, setting=setting, surface_z=surface_z,
                table_height=TABLE_HEIGHT if setting == "table" else None,
                object_rest_pos=[float(xy[0]), float(xy[1]), float(rest_z)], object_rest_quat=[float(q) for q in quat],
                timestep=timestep, owned_margin=owned_margin, condim=condim, cone=cone, **articulation_meta(model, obj))
    scene = _scene(spec, model, obj, hand_info, setting=setting, surface_z=surface_z, owned_margin=owned_margin,
                   owned=owned, analytic=analytic, roles=roles, pieces=pieces, meta=meta)
    set_contact_mode(model, scene, contact_mode)
    return scene


def _hand(spec: mujoco.MjSpec, hand, grip_force: float | None) -> HandInfo:
    """The hand in ``spec``: added by its builder (a name), or already there (a ``HandModel``'s spec, whose finger
    servos are then bounded at ``grip_force``)."""
    if not isinstance(hand, HandModel):
        return add_hand(spec, hand, base_pos=[0, 0, 0], grip_force=grip_force)
    info = hand.info
    if grip_force is not None:
        for name, lever in zip(info.finger_actuator_names, info.grip_levers):
            spec.actuator(name).forcerange = [-grip_force * lever, grip_force * lever]
        info = dataclasses.replace(info, grip_force=float(grip_force))
    return info


def _check_options(*, hand, setting, contact_mode, condim, cone, timestep, owned_margin) -> None:
    for key, value, allowed in (("hand", hand, HANDS), ("setting", setting, SETTINGS),
                                ("contact_mode", contact_mode, MODES), ("cone", cone, tuple(CONES))):
        if value not in allowed:
            raise ConfigError(f"{key} must be one of {allowed}, got {value!r}", key=key)
    if condim not in (3, 4, 6):
        raise ConfigError(f"condim must be 3, 4 or 6, got {condim!r}", key="condim")
    if not timestep > 0:
        raise ConfigError(f"timestep must be positive s, got {timestep!r}", key="timestep")
    if not owned_margin > 0:
        raise ConfigError(f"owned_margin must be positive m, got {owned_margin!r}", key="owned_margin")


def _initial_quat(obj: ObjectAsset, object_quat) -> np.ndarray:
    """[4] the unit orientation ``build_scene``'s ``object_quat`` asks for."""
    if isinstance(object_quat, str):
        if object_quat != "stable":
            raise ConfigError(f"object_quat must be 4 numbers or 'stable', got {object_quat!r}", key="object_quat")
        quat = stable_quat(obj)
    else:
        quat = np.array([1.0, 0, 0, 0]) if object_quat is None else np.asarray(object_quat, dtype=float)
    return quat / np.linalg.norm(quat)


def _world(name: str, setting: str, *, timestep: float, cone: str, spec: mujoco.MjSpec | None = None):
    """(spec with options, light, ground and table, [(surface geom, owned role)]); added to ``spec`` if given (a
    hand's MJCF)."""
    spec = mujoco.MjSpec() if spec is None else spec
    spec.modelname = name
    spec.compiler.degree = False  # joint ranges in radians (MjSpec defaults to degrees)
    spec.option.timestep = timestep
    # implicitfast treats the servos' damping implicitly, so stiff position
    # actuators stay stable; it is supported by mj_step1/mj_step2.
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.option.cone = CONES[cone]
    world = spec.worldbody
    world.add_light(name="sun", pos=[0, 0, 3], dir=[0, 0, -1], type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL)
    world.add_geom(name="ground", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[3, 3, 0.05], rgba=[0.5, 0.55, 0.5, 1])
    surfaces = [("ground", "object-ground")]
    if setting == "table":
        world.add_geom(
            name="table", type=mujoco.mjtGeom.mjGEOM_BOX, size=list(TABLE_HALF),
            pos=[0, 0, TABLE_HALF[2]], rgba=[0.6, 0.45, 0.3, 1],
        )
        surfaces.append(("table", "object-table"))
    return spec, surfaces


def _add_object_pairs(spec, pieces, hand_info, surfaces, *, friction, condim, owned_margin):
    """(owned pair names, analytic pair names, owned name -> role): pads and surfaces owned, hand links analytic."""
    owned, analytic, roles = [], [], {}
    for piece in pieces:
        others = [(g, "pad-object") for g in (hand_info.pad_geom_names if hand_info else ())] + surfaces
        for g, role in others:
            name = f"{OWNED_PREFIX}{g}:{piece}"
            _add_pair(spec, name, g, piece, friction=friction, condim=condim, margin=0.0, gap=owned_margin)
            owned.append(name)
            roles[name] = role
        for g in hand_info.link_geom_names if hand_info else ():
            name = f"{ANALYTIC_PREFIX}{g}:{piece}"
            _add_pair(spec, name, g, piece, friction=friction, condim=condim, margin=0.0, gap=0.0)
            analytic.append(name)
    return owned, analytic, roles


def _scene(spec, model, obj, hand_info, *, setting, surface_z, owned_margin, owned, analytic, roles, pieces,
           meta) -> Scene:
    """The ``Scene`` of a compiled model, with the sorted geom-pair keys of its owned pairs."""
    pair_ids = np.array([model.pair(n).id for n in owned], dtype=int)
    keys, order = sorted_pair_keys(model, pair_ids)
    jnt = model.joint(OBJECT_JOINT).id
    return Scene(
        spec=spec, model=model, obj=obj, hand=hand_info, setting=setting, surface_z=surface_z,
        owned_margin=owned_margin, owned_pairs=owned, analytic_pairs=analytic, pair_roles=roles,
        owned_pair_ids=pair_ids, object_body_id=model.body(OBJECT_BODY).id,
        object_geom_ids=np.array([model.geom(p).id for p in pieces], dtype=int),
        object_qpos_adr=int(model.jnt_qposadr[jnt]), object_dof_adr=int(model.jnt_dofadr[jnt]),
        hand_actuator_ids=(np.array([model.actuator(n).id for n in hand_info.actuator_names], dtype=int)
                           if hand_info else np.zeros(0, dtype=int)),
        meta=meta, _keys=keys, _key_pair=order,
    )
