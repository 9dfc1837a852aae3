"""Scenes of a user's own model (``scene_from_model``): any MJCF, with every contact of chosen geoms owned.

The user names the geoms whose contacts the learned model owns (all on one free body: the object whose size the
law's units scale with). The model's spec (an ``MjSpec`` given, read from an MJCF path, or recovered from a compiled
``MjModel`` with ``mj_saveLastXML``) is changed in three ways, nothing else:

- every geom pair MuJoCo's dynamic collision would test with an owned geom (``collisions.dynamic_geom_pairs``:
  contype / conaffinity, same body, parent / child and excluded body pairs as MuJoCo filters them) becomes an explicit
  ``<pair>`` named ``own:<other geom>:<owned geom>`` with the parameters MuJoCo would mix for it
  (``collisions.mixed_pair_params``); the model's own ``<pair>``s that involve an owned geom are owned as they are;
- the owned geoms get ``contype = conaffinity = 0``, so their default collisions are gone and each contact is
  detected once, by its pair;
- unnamed geoms and pairs get a name (``_geom<k>``, ``_pair<k>``) so that pairs can name them.

Refused or warned about (``check_ownership``), since the learned contact's solve takes the bodies' free motion from
``qacc_smooth``, which holds none of MuJoCo's constraint forces: a body whose collidable geoms are owned in part (a
``ConfigError``: own them all), and, with one ``UserWarning``, MuJoCo's contacts on the owned object's own free-floating
body tree (a hinged link's floor contact) or on a free-floating body the owned geoms touch (an unowned box under the
object): the object can creep.

The owned pairs' force is switched by ``scene.set_contact_mode`` as in every scene: ``analytic`` is MuJoCo's own
contact with margin 0 (owned pairs with a margin are refused: the switch uses the margin), ``external`` leaves the
force to the contact model. Roles: a pair with a moving body is ``pad-object``, with a static plane
``object-ground``, with any other static geom ``object-table``.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

import mujoco
import numpy as np
import trimesh

from surrogate.errors import ConfigError
from surrogate.objects.asset import ObjectAsset, safe_name
from surrogate.scenes.collisions import dynamic_geom_pairs, mixed_pair_params
from surrogate.scenes.scene import MODES, OWNED_PREFIX, Scene, set_contact_mode, sorted_pair_keys

_GEOM = mujoco.mjtGeom
# compiled sizes that a model recovered from an MjModel must share with it
_SIZES = ("nq", "nv", "nu", "na", "nbody", "ngeom", "npair", "neq", "ntendon", "nsensor", "nmesh")
_TABLES = ("body_mass", "body_inertia", "geom_size", "geom_friction", "geom_contype", "geom_conaffinity", "qpos0",
           "dof_damping", "actuator_gainprm", "actuator_biasprm", "pair_friction", "pair_margin")


def model_spec(model) -> tuple[mujoco.MjSpec, mujoco.MjModel | None]:
    """(a spec of the user's model that this module may edit, the user's ``MjModel`` if one was given).

    ``model``: an ``MjSpec`` (copied), an MJCF path, or a compiled ``MjModel``, whose MJCF MuJoCo can only recover
    while it is the last model loaded from XML (``mj_saveLastXML``, with its current parameter values)."""
    if isinstance(model, mujoco.MjSpec):
        return model.copy(), None
    if isinstance(model, (str, Path)):
        path = Path(model)
        if not path.is_file():
            raise ConfigError(f"no MJCF file at {path}", file=path, key="model")
        return mujoco.MjSpec.from_file(str(path)), None
    if not isinstance(model, mujoco.MjModel):
        raise ConfigError(f"model must be an MjModel, an MjSpec or an MJCF path, got {type(model).__name__}",
                          key="model")
    fd, tmp = tempfile.mkstemp(suffix=".xml")
    os.close(fd)
    try:
        mujoco.mj_saveLastXML(tmp, model)
        spec = mujoco.MjSpec.from_file(tmp)
    except Exception as e:  # MuJoCo raises FatalError / ValueError for a model it did not load last
        raise ConfigError(f"cannot recover the MJCF of this MjModel ({e}): MuJoCo keeps only the last model loaded "
                          "from XML; pass the MJCF path or its MjSpec instead", key="model") from None
    finally:
        os.unlink(tmp)
    return spec, model


def _name_unnamed(spec: mujoco.MjSpec) -> None:
    """Unnamed geoms and pairs get a name, so that pairs can refer to them (names change no physics)."""
    for kind, items in (("geom", spec.geoms), ("pair", spec.pairs)):
        taken = {it.name for it in items}
        for k, it in enumerate(items):
            if not it.name:
                name = f"_{kind}{k}"
                while name in taken:
                    name += "_"
                it.name = name
                taken.add(name)


def _check_same(user: mujoco.MjModel, ref: mujoco.MjModel) -> None:
    """The spec recovered from ``user`` compiles to the same model (else refuse: we would step another model)."""
    bad = [k for k in _SIZES if getattr(user, k) != getattr(ref, k)]
    bad += [k for k in _TABLES if not np.allclose(getattr(user, k), getattr(ref, k), rtol=1e-12, atol=1e-15)]
    if bad:
        raise ConfigError(f"the MJCF recovered from this MjModel compiles to another model ({', '.join(bad)} differ: "
                          "is it the last model loaded from XML?); pass the MJCF path or its MjSpec instead",
                          key="model")


def owned_geom_ids(m: mujoco.MjModel, owned: Sequence[str]) -> tuple[np.ndarray, int]:
    """([G] geom ids of the ``owned`` names, the one free body they are on); ``ConfigError`` naming the geoms and
    their bodies otherwise."""
    names = [owned] if isinstance(owned, str) else list(owned)
    if not names:
        raise ConfigError("owned must name at least one geom", key="owned")
    ids, unknown = [], []
    for n in names:
        g = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, str(n))
        (unknown if g < 0 else ids).append(n if g < 0 else g)
    if unknown:
        hint = [n for n in unknown if mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, str(n)) >= 0]
        raise ConfigError(f"owned: no geom named {unknown} in model {m.names[:m.names.index(0)].decode() or '?'!r}"
                          + (f" ({hint} are bodies: name their geoms)" if hint else ""), key="owned")
    bodies = sorted({int(m.geom_bodyid[g]) for g in ids})

    def where():
        return ", ".join(f"{m.geom(g).name!r} on body {m.body(int(m.geom_bodyid[g])).name!r}" for g in ids)

    if len(bodies) != 1:
        raise ConfigError("owned geoms must belong to one free body (the object the law's units scale with): "
                          f"{where()}", key="owned")
    b = bodies[0]
    free = m.body_jntnum[b] == 1 and m.jnt_type[m.body_jntadr[b]] == mujoco.mjtJoint.mjJNT_FREE
    if not free:
        raise ConfigError(f"owned geoms must belong to one free body (a body with one free joint): {where()}, and "
                          f"body {m.body(b).name!r} has {int(m.body_jntnum[b])} joints, no free joint alone",
                          key="owned")
    return np.array(sorted(set(ids)), dtype=int), b


def _piece(m: mujoco.MjModel, g: int) -> trimesh.Trimesh:
    """Geom ``g`` as a convex mesh in its geom frame (m)."""
    t, s = int(m.geom_type[g]), m.geom_size[g]
    if t == _GEOM.mjGEOM_BOX:
        return trimesh.creation.box(extents=2 * s)
    if t == _GEOM.mjGEOM_SPHERE:
        return trimesh.creation.icosphere(subdivisions=2, radius=s[0])
    if t == _GEOM.mjGEOM_CAPSULE:
        return trimesh.creation.capsule(height=2 * s[1], radius=s[0], count=[16, 16])
    if t == _GEOM.mjGEOM_CYLINDER:
        return trimesh.creation.cylinder(radius=s[0], height=2 * s[1], sections=32)
    if t == _GEOM.mjGEOM_ELLIPSOID:
        sphere = trimesh.creation.icosphere(subdivisions=2, radius=1.0)
        return trimesh.Trimesh(sphere.vertices * s, sphere.faces)
    if t == _GEOM.mjGEOM_MESH:  # MuJoCo collides a mesh's convex hull
        adr, n = m.mesh_vertadr[m.geom_dataid[g]], m.mesh_vertnum[m.geom_dataid[g]]
        return trimesh.convex.convex_hull(m.mesh_vert[adr:adr + n].astype(float))
    raise ConfigError(f"owned geom {m.geom(g).name!r} has type {_GEOM(t).name}, which a free object cannot own "
                      "(box, sphere, capsule, cylinder, ellipsoid or mesh)", key="owned")


def body_asset(m: mujoco.MjModel, body: int, geoms: np.ndarray) -> ObjectAsset:
    """The owned body as an ``ObjectAsset``: the owned ``geoms`` as pieces in the body's inertial frame (COM at the
    origin), the model's mass and principal inertia; its ``size`` (largest bounding-box side) is the law's L."""
    quat_i = np.zeros(4)
    mujoco.mju_negQuat(quat_i, m.body_iquat[body])
    pieces = []
    for g in geoms:
        rot_g, rot_i = np.zeros(9), np.zeros(9)
        mujoco.mju_quat2Mat(rot_g, m.geom_quat[g])
        mujoco.mju_quat2Mat(rot_i, quat_i)
        v = _piece(m, int(g))
        # geom frame -> body frame -> the body's inertial frame
        verts = ((v.vertices @ rot_g.reshape(3, 3).T + m.geom_pos[g]) - m.body_ipos[body]) @ rot_i.reshape(3, 3).T
        pieces.append(trimesh.Trimesh(verts, v.faces, process=False))
    inertia = np.diag(m.body_inertia[body]).astype(float)
    inertia.setflags(write=False)
    return ObjectAsset(name=safe_name(m.body(body).name or f"body{body}"), family="mjcf", pieces=tuple(pieces),
                       mass=float(m.body_mass[body]), inertia=inertia, source=f"mjcf body {m.body(body).name!r}",
                       params={"geoms": [m.geom(int(g)).name for g in geoms]},
                       friction=float(m.geom_friction[geoms, 0].max()))


def _role(m: mujoco.MjModel, other: int) -> str:
    if m.body_weldid[m.geom_bodyid[other]] != 0:
        return "pad-object"
    return "object-ground" if m.geom_type[other] == _GEOM.mjGEOM_PLANE else "object-table"


def _owned_pairs(spec: mujoco.MjSpec, ref: mujoco.MjModel, geoms: np.ndarray, owned_margin: float, dynamic):
    """Add the owned pairs to ``spec``: ([names], {name: role}), the model's own pairs with an owned geom first;
    ``dynamic``: ``collisions.dynamic_geom_pairs(ref)``."""
    mine = set(geoms.tolist())
    names, roles, margins = [], {}, []
    for p in range(ref.npair):
        g1, g2 = int(ref.pair_geom1[p]), int(ref.pair_geom2[p])
        if g1 in mine or g2 in mine:
            name = ref.pair(p).name
            names.append(name)
            roles[name] = _role(ref, g2 if g1 in mine else g1)
            margins.append((name, float(ref.pair_margin[p])))
    for g1, g2 in dynamic:
        if g1 not in mine and g2 not in mine:
            continue
        own, other = (g1, g2) if g1 in mine else (g2, g1)
        p = mixed_pair_params(ref, g1, g2)
        name = f"{OWNED_PREFIX}{ref.geom(other).name}:{ref.geom(own).name}"
        pair = spec.add_pair(name=name, geomname1=ref.geom(g1).name, geomname2=ref.geom(g2).name)
        pair.condim, pair.solref, pair.solimp, pair.friction = p["condim"], p["solref"], p["solimp"], p["friction"]
        pair.margin, pair.gap = 0.0, owned_margin
        names.append(name)
        roles[name] = _role(ref, other)
        margins.append((name, p["margin"]))
    bad = [f"{n} ({mg:g} m)" for n, mg in margins if mg != 0]
    if bad:
        raise ConfigError(f"owned contacts must have margin 0 (the analytic / external switch sets the margin): "
                          f"{', '.join(bad)}; set the margin of these geoms or pairs to 0", key="owned")
    if not names:
        raise ConfigError(f"the owned geoms {[ref.geom(int(g)).name for g in geoms]} collide with nothing "
                          "(contype / conaffinity and no pair): nothing to own", key="owned")
    return names, roles


def _free_root(m: mujoco.MjModel, body: int) -> int:
    """The root of ``body``'s tree (its ancestor below the world) if that root moves on a free joint, else 0."""
    root = int(m.body_rootid[body])
    free = root and m.body_jntnum[root] and m.jnt_type[m.body_jntadr[root]] == mujoco.mjtJoint.mjJNT_FREE
    return root if free else 0


def check_ownership(m: mujoco.MjModel, geoms: np.ndarray, dynamic) -> str | None:
    """Refuse (``ConfigError``) a body whose collidable geoms are owned in part; return the warning for owned contacts
    whose bodies also carry MuJoCo's (analytic) contacts on the same free-floating tree, or None.

    The learned contact's solve (``sim.law_solve``) takes the bodies' free motion from ``qacc_smooth``, which holds no
    constraint force: MuJoCo's contacts on the same dofs are not seen, and the object creeps (measured: 2.3 mm/s for
    a box whose second geom, a sphere, stayed analytic; 1.8 mm/s for a hinged flap's floor contact; a box on an
    unowned free box slid off it). ``dynamic``: ``collisions.dynamic_geom_pairs(m)``."""
    mine = set(geoms.tolist())
    contacts = list(dynamic) + [(int(a), int(b)) for a, b in zip(m.pair_geom1, m.pair_geom2)]
    analytic = {g for pair in contacts if not mine.intersection(pair) for g in pair}  # geoms with an unowned contact
    touching = {g for pair in contacts if mine.intersection(pair) for g in pair} - mine  # the owned pairs' others
    body = int(m.geom_bodyid[geoms[0]])

    def names(gs):
        return [m.geom(int(g)).name for g in sorted(gs)]

    partial = {g for g in range(m.ngeom) if m.geom_bodyid[g] == body and g not in mine} & (analytic | touching)
    if partial:
        raise ConfigError(f"owned geoms {names(mine)} are only some of body {m.body(body).name!r}'s collidable geoms: "
                          f"{names(partial)} collide too and would stay analytic, and the learned contact's solve does "
                          "not see MuJoCo's constraint forces on the body (it creeps); own them all: "
                          f"owned={names(mine | partial)}", key="owned")
    notes = []
    root = _free_root(m, body)
    mine_tree = {g for g in analytic if root and _free_root(m, int(m.geom_bodyid[g])) == root}
    if mine_tree:
        notes.append(f"geoms {names(mine_tree)} of the object's own body tree (free joint of body "
                     f"{m.body(root).name!r}) keep MuJoCo's contacts")
    for r in sorted({_free_root(m, int(m.geom_bodyid[g])) for g in touching} - {0, root}):
        theirs = {g for g in analytic if _free_root(m, int(m.geom_bodyid[g])) == r}
        if theirs:
            notes.append(f"the owned geoms can touch free-floating body {m.body(r).name!r}, whose geoms "
                         f"{names(theirs)} keep MuJoCo's contacts")
    if not notes:
        return None
    return ("; ".join(notes) + ": the learned contact's solve does not see MuJoCo's constraint forces on those "
            "dofs, so the object can creep (measured: 2 mm/s at rest; a box on an unowned free box slid off it); own "
            "those contacts too where you can (surrogate.hybrid owns one body's geoms), or step with "
            "contact='analytic' (docs/stepper-and-envs.md, 'Your own MJCF')")


def scene_from_model(model, *, owned: Sequence[str], owned_margin: float = 0.005,
                     contact_mode: str = "analytic") -> Scene:
    """A ``Scene`` of the user's model whose owned pairs are every contact of the ``owned`` geoms (module docstring).

    Args:
      model: an ``MjModel`` (the last one loaded from XML), an ``MjSpec`` (not modified) or an MJCF path.
      owned: geom names, all on one free body.
      owned_margin: m, the owned pairs report contacts within it (``scene.set_contact_mode``).
      contact_mode: the owned pairs' initial mode, ``analytic`` or ``external``.
    Returns:
      The ``Scene`` (``hand`` None, ``setting`` ``model``, ``surface_z`` NaN: the model has no known surface).
    Raises:
      ConfigError: an unknown geom, geoms of several bodies or of a body that is not free, a body's collidable geoms
        owned in part, owned contacts with a margin, a model MuJoCo cannot give back as MJCF, ``mjENBL_OVERRIDE`` (it
        would undo the switch), flexes.
    Warns:
      UserWarning: MuJoCo's contacts on the dofs of the owned object (``check_ownership``).
    """
    if contact_mode not in MODES:
        raise ConfigError(f"contact_mode must be one of {MODES}, got {contact_mode!r}", key="contact_mode")
    if not owned_margin > 0:
        raise ConfigError(f"owned_margin must be positive m, got {owned_margin!r}", key="owned_margin")
    spec, user = model_spec(model)
    _name_unnamed(spec)
    ref = spec.compile()
    if user is not None:
        _check_same(user, ref)
    if ref.opt.enableflags & mujoco.mjtEnableBit.mjENBL_OVERRIDE:
        raise ConfigError("the contact override (mjENBL_OVERRIDE) replaces every pair's margin and would undo the "
                          "owned pairs' switch: turn it off", key="model")
    geoms, body = owned_geom_ids(ref, owned)
    dynamic = dynamic_geom_pairs(ref)
    caution = check_ownership(ref, geoms, dynamic)
    asset = body_asset(ref, body, geoms)
    pairs, roles = _owned_pairs(spec, ref, geoms, owned_margin, dynamic)
    if caution:
        warnings.warn(caution, UserWarning, stacklevel=3)  # at the caller of ``surrogate.hybrid``
    for g in geoms:
        sg = spec.geom(ref.geom(int(g)).name)
        sg.contype, sg.conaffinity = 0, 0  # their contacts are the explicit pairs now
    compiled = spec.compile()
    pair_ids = np.array([compiled.pair(n).id for n in pairs], dtype=int)
    keys, order = sorted_pair_keys(compiled, pair_ids)
    jnt = int(compiled.body_jntadr[body])
    meta = {"name": spec.modelname, "object": asset.name, "object_body": compiled.body(body).name,
            "owned_geoms": [compiled.geom(int(g)).name for g in geoms], "setting": "model",
            "timestep": float(compiled.opt.timestep), "owned_margin": owned_margin,
            "source": str(model) if isinstance(model, (str, Path)) else type(model).__name__}
    scene = Scene(spec=spec, model=compiled, obj=asset, hand=None, setting="model", surface_z=float("nan"),
                  owned_margin=owned_margin, owned_pairs=pairs, analytic_pairs=[], pair_roles=roles,
                  owned_pair_ids=pair_ids, object_body_id=body, object_geom_ids=geoms,
                  object_qpos_adr=int(compiled.jnt_qposadr[jnt]), object_dof_adr=int(compiled.jnt_dofadr[jnt]),
                  hand_actuator_ids=np.zeros(0, dtype=int), meta=meta, _keys=keys, _key_pair=order)
    set_contact_mode(compiled, scene, contact_mode)
    return scene
