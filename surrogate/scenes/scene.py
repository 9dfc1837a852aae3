"""A compiled scene (``Scene``) and its owned contact pairs: their names, roles and the switch between
MuJoCo's analytic force and none (``set_contact_mode``). ``builder`` builds scenes, ``from_model`` makes one of
a user's own model.

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

from collections.abc import Sequence
from dataclasses import dataclass, field

import mujoco
import numpy as np

from surrogate.errors import ConfigError
from surrogate.objects.asset import ObjectAsset
from surrogate.scenes.hands import HandInfo, hand_ctrl

OWNED_PREFIX = "own:"
ANALYTIC_PREFIX = "ana:"
ROLES = ("pad-object", "object-table", "object-ground")
MODES = ("analytic", "external")
_FAR = 1e3  # m, the pair margin of external mode is -_FAR


@dataclass
class Scene:
    """A compiled scene and the names a recorder or stepper needs.

    Attributes:
      spec: the ``MjSpec`` it was built from (edit and recompile for variants).
      model: compiled ``MjModel`` (starts in the mode given to ``build_scene``).
      obj: the object asset.
      hand: the hand's names and helpers, or None.
      setting: ``table`` or ``ground``; ``model`` for a user's own model (``from_model``).
      surface_z: m, height of the surface the object rests on (NaN for a user's own model: not known).
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


def set_contact_mode(model: mujoco.MjModel, scene: Scene, mode: str, *, roles: Sequence[str] | None = None,
                     pair_map: np.ndarray | None = None) -> None:
    """Switch owned pairs between MuJoCo's analytic force and none (external).

    Args:
      model: a compiled model of ``scene`` (modified in place; no recompile).
      scene: the scene.
      mode: ``analytic`` (margin 0, gap ``owned_margin``: force as a margin-0
        model, contacts reported within ``owned_margin``) or ``external``
        (margin -1e3, gap 1e3 + ``owned_margin``: reported, never in the solver).
      roles: only switch pairs of these roles (default all): e.g. pads external
        and the table analytic.
      pair_map: [B, npair] for a model of B copies of the scene (``sim.copies_model``): each copy's id of each
        of the scene's pairs; every row's owned pairs are switched.
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
    if pair_map is not None:
        ids = np.asarray(pair_map)[:, ids].ravel()
    d = scene.owned_margin
    margin, gap = (0.0, d) if mode == "analytic" else (-_FAR, _FAR + d)
    model.pair_margin[ids] = margin
    model.pair_gap[ids] = gap


def contact_modes(model: mujoco.MjModel, scene: Scene) -> dict[str, str]:
    """Owned pair name -> its current mode in ``model`` (``analytic`` / ``external``)."""
    margins = model.pair_margin[scene.owned_pair_ids]
    return {n: ("external" if m < 0 else "analytic") for n, m in zip(scene.owned_pairs, margins)}


def pair_keys(model: mujoco.MjModel, pair_ids) -> np.ndarray:
    """[P] the unordered geom-pair key ``min(g1, g2) * ngeom + max(g1, g2)`` of each model pair."""
    g1, g2 = model.pair_geom1[pair_ids], model.pair_geom2[pair_ids]
    return np.minimum(g1, g2) * model.ngeom + np.maximum(g1, g2)


def sorted_pair_keys(model: mujoco.MjModel, pair_ids) -> tuple[np.ndarray, np.ndarray]:
    """([P] the owned pairs' geom-pair keys sorted, [P] the position in ``pair_ids`` of each): ``Scene._keys`` and
    ``Scene._key_pair``. Two pairs of one geom pair are refused (a contact would belong to both)."""
    keys = pair_keys(model, pair_ids)
    if len(np.unique(keys)) != len(keys):
        raise ConfigError("two owned pairs share a geom pair", key="owned_pairs")
    order = np.argsort(keys)
    return keys[order], order


def match_pair_keys(geom: np.ndarray, ngeom: int, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which contacts belong to the pairs of the sorted ``keys``: (owned [n] bool, position in ``keys`` [n]).

    ``geom`` [n, 2]: ``data.contact.geom`` of n contacts. The one matching of contacts to owned pairs
    (scenes, the training graphs, the stepper's batched graphs), by binary search: O(n log P).
    """
    if not len(geom) or not len(keys):
        return np.zeros(len(geom), dtype=bool), np.zeros(len(geom), dtype=int)
    g0, g1 = geom[:, 0].astype(np.int64), geom[:, 1].astype(np.int64)  # int64: no overflow of the key
    lo = np.minimum(g0, g1)
    k = lo * ngeom + np.maximum(g0, g1)
    pos = np.minimum(np.searchsorted(keys, k), len(keys) - 1)
    # Flex contacts have geom -1 on one side; they never belong to owned pairs.
    return (lo >= 0) & (keys[pos] == k), pos


def contact_pair_index(model: mujoco.MjModel, data: mujoco.MjData, scene: Scene) -> np.ndarray:
    """[ncon] index into ``scene.owned_pairs`` of each contact in ``data.contact``, -1 if not owned."""
    hit, pos = match_pair_keys(data.contact.geom[:data.ncon], model.ngeom, scene._keys)
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
