"""Scenes: an object, optionally a hand, on a table or the ground, with the
contact pairs an external contact model owns named and switchable.

Owned contact pairs
-------------------
Every contact involving the object comes from an explicit ``<pair>``: the
object geoms have ``contype = conaffinity = 0``, so MuJoCo's automatic
(bitmask) collision never sees them. Pairs are named

* ``own:<geom>:obj_piece<i>`` - owned by an external contact model; roles
  ``pad-object`` (fingertip pads), ``object-table``, ``object-ground``;
* ``ana:<geom>:obj_piece<i>`` - always analytic (palm, finger links vs object).

How a pair is detected but gets no force (measured in MuJoCo 4.0.1)
--------------------------------------------------------------------
MuJoCo 4.0 changed what ``gap`` means. The collision functions are called
with ``margin + gap`` (a contact is *detected* when ``dist < margin + gap``),
``contact.includemargin`` is set to ``margin`` (gap no longer subtracted), and
``contact.exclude = dist >= margin`` (an excluded contact is reported in
``data.contact`` but never enters the constraint solver; ``efc_address = -1``).
MuJoCo 3.x had ``detected: dist < margin``, ``includemargin = margin - gap``.
Measured on 4.0.1: a pair with margin 0.005 and gap 1000 still had
``includemargin = 0.005``, ``exclude = 0``, and held a box 5 mm *above* the
plane (no fall-through); with margin = gap = 0.005 (the 3.x "analytic" recipe)
the force acts across the whole 5 mm margin, and a tumbling drop differed from
a margin-0 model by 6e-3 to 0.9 in qpos after 1 s. So the 3.x recipe is wrong
in 4.0 in both directions.

So the switch is (``d`` = ``owned_margin``, 5 mm by default):

* ``analytic``: ``pair_margin = 0``, ``pair_gap = d``. Detected within ``d``,
  force only at penetration, exactly like a margin-0 model. Measured over 1 s
  (500 steps of 2 ms) of a spinning, sliding mesh dropped against a margin-0,
  gap-0 copy of the same pair: on a plane (box, cylinder, icosphere meshes)
  qpos is bit-for-bit identical (the plane colliders only use the tolerance to
  decide what to report); on the table box, box and cylinder meshes differ by
  < 1e-15, a tilted box by 1.3e-5, and a rolling icosphere drifts (0.2 after
  1 s: chaotic rolling amplifies a 1e-6 m first difference in the EPA contact
  point, because the convex collider runs with the positive tolerance and may
  return 5 instead of 4 contacts when ``margin + gap > 0``). A plain drop of
  the icosphere without spin differs by < 4e-6. A 2 s scripted grasp, lift and
  shake differs by 2e-8 (parallel jaw, box) and 2e-3 (three fingers, cylinder).
* ``external``: ``pair_margin = -1e3``, ``pair_gap = 1e3 + d``. Still
  detected within ``d`` (``margin + gap = d``), but ``exclude`` is 1 for every
  contact (``dist >= -1e3``), so MuJoCo applies no force; the object falls
  through the table while its contacts keep appearing in ``data.contact`` with
  position, frame and distance. Detection, contact count limits and the contact
  order are the same in both modes (both have ``margin + gap = d``).

Do not enable ``mjENBL_OVERRIDE`` with these scenes: it replaces every pair's
margin and would undo the switch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import mujoco
import numpy as np

from surrogate.errors import ConfigError
from surrogate.objects.asset import ObjectAsset
from surrogate.scenes.hands import BASE_BODY, HandInfo, add_hand, hand_ctrl
from surrogate.scenes.object_body import OBJECT_BODY, OBJECT_JOINT, add_object_body, piece_geom_name

OWNED_PREFIX = "own:"
ANALYTIC_PREFIX = "ana:"
ROLES = ("pad-object", "object-table", "object-ground")
MODES = ("analytic", "external")
SETTINGS = ("table", "ground")
HANDS = ("none", "parallel_jaw", "three_finger")

TABLE_HEIGHT = 0.4  # m, top surface of the table
TABLE_HALF = (0.4, 0.4, TABLE_HEIGHT / 2)  # m, the table is a solid box standing on the ground
_FAR = 1e3  # m, the pair margin of external mode is -_FAR
_REST_CLEARANCE = 1e-4  # m between the object's lowest vertex and the surface in make_data
_HAND_CLEARANCE = 0.03  # m between the object top and the open hand's lowest point at start


@dataclass
class Scene:
    """A compiled scene and the names a recorder or stepper needs.

    Attributes:
      spec: the ``MjSpec`` it was built from (edit and recompile for variants).
      model: compiled ``MjModel`` (starts in the mode given to ``build_scene``).
      obj: the object asset.
      hand: the hand's names and helpers, or None.
      setting: ``table`` or ``ground``.
      surface_z: m, height of the surface the object rests on.
      owned_margin: m, detection distance of owned pairs.
      owned_pairs: names of the pairs an external contact model owns.
      analytic_pairs: names of the always-analytic object pairs.
      pair_roles: owned pair name -> ``pad-object`` | ``object-table`` | ``object-ground``.
      owned_pair_ids: [n_owned] model pair ids, in ``owned_pairs`` order.
      object_body_id: body id of ``object``.
      object_geom_ids: [n_pieces] geom ids of ``obj_piece{i}``.
      object_qpos_adr: qpos address of the free joint (7 values: pos, quat wxyz).
      object_dof_adr: dof address of the free joint (6 values: lin vel world, ang vel local).
      hand_actuator_ids: [4 + n_finger_actuators] actuator ids in ``hand.actuator_names`` order (empty without a hand).
      meta: plain-data description: names, heights, where the hand starts,
        ``grasp_base_z`` (the ``hand_z`` target that puts the open pads at the
        object's rest COM height, limited so the fingers stay 3 mm above the
        surface).
    """

    spec: mujoco.MjSpec
    model: mujoco.MjModel
    obj: ObjectAsset
    hand: HandInfo | None
    setting: str
    surface_z: float
    owned_margin: float
    owned_pairs: list[str]
    analytic_pairs: list[str]
    pair_roles: dict[str, str]
    owned_pair_ids: np.ndarray
    object_body_id: int
    object_geom_ids: np.ndarray
    object_qpos_adr: int
    object_dof_adr: int
    hand_actuator_ids: np.ndarray
    meta: dict = field(default_factory=dict)
    # Sorted unordered geom-pair keys (min * ngeom + max) of the owned pairs and
    # the index into owned_pairs for each: matches data.contact.geom in O(log n).
    _keys: np.ndarray = field(default=None, repr=False)
    _key_pair: np.ndarray = field(default=None, repr=False)

    def make_data(self, *, drop_height: float = 0.0, model: mujoco.MjModel | None = None) -> mujoco.MjData:
        """A fresh ``MjData`` with the object resting at its initial pose.

        The object's lowest vertex is ``1e-4 m + drop_height`` above the surface
        (the rest pose is ``model.qpos0``); the hand, if any, is at its start
        pose with the fingers open and ``ctrl`` holding that pose.

        Args:
          drop_height: m, extra height of the object above its rest pose.
          model: another compiled copy of this scene's model (default ``self.model``).
        Returns:
          MjData after ``mj_forward``.
        """
        m = self.model if model is None else model
        d = mujoco.MjData(m)
        d.qpos[self.object_qpos_adr + 2] += drop_height
        if self.hand is not None:
            for name, q in zip(self.hand.finger_joint_names, self.hand.open_command):
                j = m.joint(name).id
                d.qpos[m.jnt_qposadr[j]] = q
            d.ctrl[self.hand_actuator_ids] = hand_ctrl(self.hand)
        mujoco.mj_forward(m, d)
        return d


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


def _lowest_point(obj: ObjectAsset, quat: Sequence[float]) -> float:
    """Lowest z (m) of the object's vertices in the world when rotated by ``quat`` about its COM."""
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, np.asarray(quat, dtype=float))
    verts = np.concatenate([np.asarray(p.vertices) for p in obj.pieces])
    return float((verts @ mat.reshape(3, 3).T)[:, 2].min())


def _highest_point(obj: ObjectAsset, quat: Sequence[float]) -> float:
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, np.asarray(quat, dtype=float))
    verts = np.concatenate([np.asarray(p.vertices) for p in obj.pieces])
    return float((verts @ mat.reshape(3, 3).T)[:, 2].max())


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
      hand: ``none``, ``parallel_jaw`` or ``three_finger``.
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
    if hand not in HANDS:
        raise ConfigError(f"hand must be one of {HANDS}, got {hand!r}", key="hand")
    if setting not in SETTINGS:
        raise ConfigError(f"setting must be one of {SETTINGS}, got {setting!r}", key="setting")
    if contact_mode not in MODES:
        raise ConfigError(f"contact_mode must be one of {MODES}, got {contact_mode!r}", key="contact_mode")
    if condim not in (3, 4, 6):
        raise ConfigError(f"condim must be 3, 4 or 6, got {condim!r}", key="condim")
    cones = {"pyramidal": mujoco.mjtCone.mjCONE_PYRAMIDAL, "elliptic": mujoco.mjtCone.mjCONE_ELLIPTIC}
    if cone not in cones:
        raise ConfigError(f"cone must be one of {tuple(cones)}, got {cone!r}", key="cone")
    if not timestep > 0:
        raise ConfigError(f"timestep must be positive s, got {timestep!r}", key="timestep")
    if not owned_margin > 0:
        raise ConfigError(f"owned_margin must be positive m, got {owned_margin!r}", key="owned_margin")

    if isinstance(object_quat, str):
        if object_quat != "stable":
            raise ConfigError(f"object_quat must be 4 numbers or 'stable', got {object_quat!r}", key="object_quat")
        quat = stable_quat(obj)
    else:
        quat = np.array([1.0, 0, 0, 0]) if object_quat is None else np.asarray(object_quat, dtype=float)
    quat = quat / np.linalg.norm(quat)
    xy = np.zeros(2) if object_pos is None else np.asarray(object_pos, dtype=float)[:2]
    surface_z = TABLE_HEIGHT if setting == "table" else 0.0
    rest_z = surface_z - _lowest_point(obj, quat) + _REST_CLEARANCE
    top_z = rest_z + _highest_point(obj, quat)

    spec = mujoco.MjSpec()
    spec.modelname = f"{obj.name}_{hand}_{setting}"
    spec.compiler.degree = False  # joint ranges in radians (MjSpec defaults to degrees)
    spec.option.timestep = timestep
    # implicitfast treats the servos' damping implicitly, so stiff position
    # actuators stay stable; it is supported by mj_step1/mj_step2.
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.option.cone = cones[cone]

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

    add_object_body(spec, obj, pos=[xy[0], xy[1], rest_z], quat=quat)
    pieces = [piece_geom_name(i) for i in range(len(obj.pieces))]

    hand_info = None
    meta = {}
    if hand != "none":
        hand_info = add_hand(spec, hand, base_pos=[0, 0, 0], grip_force=grip_force)
        base_z = top_z + _HAND_CLEARANCE + hand_info.finger_depth
        spec.body(BASE_BODY).pos = [xy[0], xy[1], base_z]
        lowest_cmd = surface_z + 0.003 + hand_info.finger_depth - base_z
        meta["hand_base_pos"] = [float(xy[0]), float(xy[1]), float(base_z)]
        meta["grasp_base_z"] = float(max(rest_z + hand_info.pad_depth - base_z, lowest_cmd))

    mu = float(obj.friction)
    owned, analytic, roles = [], [], {}
    for piece in pieces:
        others = [(g, "pad-object") for g in (hand_info.pad_geom_names if hand_info else ())] + surfaces
        for g, role in others:
            name = f"{OWNED_PREFIX}{g}:{piece}"
            _add_pair(spec, name, g, piece, friction=mu, condim=condim, margin=0.0, gap=owned_margin)
            owned.append(name)
            roles[name] = role
        for g in hand_info.link_geom_names if hand_info else ():
            name = f"{ANALYTIC_PREFIX}{g}:{piece}"
            _add_pair(spec, name, g, piece, friction=mu, condim=condim, margin=0.0, gap=0.0)
            analytic.append(name)

    model = spec.compile()
    pair_ids = np.array([model.pair(n).id for n in owned], dtype=int)
    g1, g2 = model.pair_geom1[pair_ids], model.pair_geom2[pair_ids]
    keys = np.minimum(g1, g2) * model.ngeom + np.maximum(g1, g2)
    order = np.argsort(keys)
    if len(np.unique(keys)) != len(keys):  # pragma: no cover - names are unique per geom pair
        raise ConfigError("two owned pairs share a geom pair", key="owned_pairs")

    jnt = model.joint(OBJECT_JOINT).id
    meta.update(
        name=spec.modelname,
        object=obj.name,
        hand=hand,
        setting=setting,
        surface_z=surface_z,
        table_height=TABLE_HEIGHT if setting == "table" else None,
        object_rest_pos=[float(xy[0]), float(xy[1]), float(rest_z)],
        object_rest_quat=[float(q) for q in quat],
        timestep=timestep,
        owned_margin=owned_margin,
        condim=condim,
        cone=cone,
    )
    scene = Scene(
        spec=spec,
        model=model,
        obj=obj,
        hand=hand_info,
        setting=setting,
        surface_z=surface_z,
        owned_margin=owned_margin,
        owned_pairs=owned,
        analytic_pairs=analytic,
        pair_roles=roles,
        owned_pair_ids=pair_ids,
        object_body_id=model.body(OBJECT_BODY).id,
        object_geom_ids=np.array([model.geom(p).id for p in pieces], dtype=int),
        object_qpos_adr=int(model.jnt_qposadr[jnt]),
        object_dof_adr=int(model.jnt_dofadr[jnt]),
        hand_actuator_ids=(
            np.array([model.actuator(n).id for n in hand_info.actuator_names], dtype=int)
            if hand_info else np.zeros(0, dtype=int)
        ),
        meta=meta,
        _keys=keys[order],
        _key_pair=order,
    )
    set_contact_mode(model, scene, contact_mode)
    return scene


def set_contact_mode(model: mujoco.MjModel, scene: Scene, mode: str, *, roles: Sequence[str] | None = None) -> None:
    """Switch owned pairs between MuJoCo's analytic force and none (external).

    Args:
      model: a compiled model of ``scene`` (modified in place; no recompile).
      scene: the scene.
      mode: ``analytic`` (margin 0, gap ``owned_margin``: force as a margin-0
        model, contacts reported within ``owned_margin``) or ``external``
        (margin -1e3, gap 1e3 + ``owned_margin``: reported, never in the solver).
      roles: only switch pairs of these roles (default all): e.g. pads external
        and the table analytic.
    """
    if mode not in MODES:
        raise ConfigError(f"contact mode must be one of {MODES}, got {mode!r}", key="mode")
    roles = ROLES if roles is None else tuple(roles)
    bad = [r for r in roles if r not in ROLES]
    if bad:
        raise ConfigError(f"roles must be among {ROLES}, got {bad}", key="roles")
    ids = np.array([pid for name, pid in zip(scene.owned_pairs, scene.owned_pair_ids) if scene.pair_roles[name] in roles],
                   dtype=int)
    if ids.size == 0:
        return
    d = scene.owned_margin
    margin, gap = (0.0, d) if mode == "analytic" else (-_FAR, _FAR + d)
    model.pair_margin[ids] = margin
    model.pair_gap[ids] = gap


def contact_modes(model: mujoco.MjModel, scene: Scene) -> dict[str, str]:
    """Owned pair name -> its current mode in ``model`` (``analytic`` / ``external``)."""
    margins = model.pair_margin[scene.owned_pair_ids]
    return {n: ("external" if m < 0 else "analytic") for n, m in zip(scene.owned_pairs, margins)}


def contact_pair_index(model: mujoco.MjModel, data: mujoco.MjData, scene: Scene) -> np.ndarray:
    """[ncon] index into ``scene.owned_pairs`` of each contact in ``data.contact``, -1 if not owned."""
    n = data.ncon
    if n == 0:
        return np.zeros(0, dtype=int)
    geom = data.contact.geom[:n]
    # Flex contacts have geom -1 on one side; they never belong to owned pairs.
    valid = (geom >= 0).all(axis=1)
    keys = geom.min(axis=1) * model.ngeom + geom.max(axis=1)
    pos = np.clip(np.searchsorted(scene._keys, keys), 0, len(scene._keys) - 1)
    hit = valid & (scene._keys[pos] == keys)
    return np.where(hit, scene._key_pair[pos], -1)


def owned_contacts(
    model: mujoco.MjModel, data: mujoco.MjData, scene: Scene, *, role: str | None = None
) -> np.ndarray:
    """Indices into ``data.contact`` of the contacts of owned pairs.

    Args:
      model, data: after collision detection (``mj_forward``, ``mj_step1`` or ``mj_collision``).
      scene: the scene.
      role: only contacts of this role (``pad-object``, ``object-table``, ``object-ground``).
    Returns:
      [k] int array, ascending.
    """
    idx = contact_pair_index(model, data, scene)
    mask = idx >= 0
    if role is not None:
        if role not in ROLES:
            raise ConfigError(f"role must be one of {ROLES}, got {role!r}", key="role")
        pair_role = np.array([scene.pair_roles[n] == role for n in scene.owned_pairs] + [False])
        mask &= pair_role[idx]  # idx -1 reads the trailing False
    return np.flatnonzero(mask)


def contact_roles(model: mujoco.MjModel, data: mujoco.MjData, scene: Scene) -> list[str | None]:
    """[ncon] role of each contact in ``data.contact`` (None if not owned)."""
    idx = contact_pair_index(model, data, scene)
    return [scene.pair_roles[scene.owned_pairs[i]] if i >= 0 else None for i in idx]
