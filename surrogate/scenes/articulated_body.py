"""Put an articulated object (``objects.articulated``) into an ``mujoco.MjSpec``: the base link as the free body
``object`` (free joint ``object_free``), every other link a child body named ``object_<link>`` joined by its
URDF joint (``hinge`` for continuous/revolute, ``slide`` for prismatic; named as in the URDF).

Bodies are placed in their LINK frames (the frame the capture tracks for the base), with an explicit inertial at
each link's centre of mass (``ipos``) and its inertia from the collision geometry. The convex pieces of every link
become geoms ``obj_piece{i}`` numbered across links in link order (the order of ``Articulation.asset().pieces``),
non-colliding except through the scene's explicit pairs, so the links never collide with each other (the URDF's
Drake collision filter says the same) and the scene owns the floor contacts of every link.
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np
from scipy.spatial.transform import Rotation

from surrogate.objects.asset import ObjectAsset
from surrogate.scenes.object_body import OBJECT_BODY, OBJECT_JOINT, full_inertia_vector, piece_geom_name


def articulation_of(obj: ObjectAsset):
    """The ``Articulation`` of an articulated asset, or None for a rigid one."""
    return (obj.params or {}).get("articulation") if obj.family == "articulated" else None


def link_body_name(art, i: int) -> str:
    """MJCF body name of link ``i`` (the base link is ``object``)."""
    return OBJECT_BODY if i == 0 else f"{OBJECT_BODY}_{art.links[i].name}"


def _add_link(spec, parent, art, i: int, piece0: int, *, friction: float, rgba, pos, quat):
    lk = art.links[i]
    body = parent.add_body(name=link_body_name(art, i), pos=list(pos), quat=list(quat))
    body.explicitinertial = True
    body.mass = float(lk.mass)
    body.ipos = [float(x) for x in lk.com]
    body.fullinertia = full_inertia_vector(lk.inertia)
    for k, piece in enumerate(lk.pieces):
        mesh = spec.add_mesh(name=f"{OBJECT_BODY}_mesh{piece0 + k}")
        mesh.uservert = np.asarray(piece.vertices, dtype=float).ravel().tolist()
        mesh.userface = np.asarray(piece.faces, dtype=np.int64).ravel().tolist()
        mesh.inertia = mujoco.mjtMeshInertia.mjMESH_INERTIA_CONVEX
        body.add_geom(name=piece_geom_name(piece0 + k), type=mujoco.mjtGeom.mjGEOM_MESH, meshname=mesh.name, contype=0,
                      conaffinity=0, rgba=list(rgba), friction=[float(friction), 0.005, 0.0001])
    return body, piece0 + len(lk.pieces)


def add_articulated_body(spec: mujoco.MjSpec, obj: ObjectAsset, *, pos: Sequence[float] = (0.0, 0.0, 0.0),
                         quat: Sequence[float] = (1.0, 0.0, 0.0, 0.0), rgba: Sequence[float] = (0.85, 0.45, 0.2, 1.0)):
    """Add the articulated ``obj`` (``Articulation.asset``) with its base link frame at ``pos``/``quat``.

    Returns:
      the base body. Joint coordinates start at zero (``qpos0``).
    """
    art = articulation_of(obj)
    bodies = {}
    base = spec.worldbody
    body, n = _add_link(spec, base, art, 0, 0, friction=obj.friction, rgba=rgba, pos=pos, quat=quat)
    body.add_freejoint(name=OBJECT_JOINT)
    bodies[art.links[0].name] = body
    for j in art.joints:
        i = art.link_index(j.child)
        q = Rotation.from_euler("xyz", j.rpy).as_quat(scalar_first=True)
        child, n = _add_link(spec, bodies[j.parent], art, i, n, friction=obj.friction, rgba=rgba, pos=j.xyz, quat=q)
        kind = mujoco.mjtJoint.mjJNT_SLIDE if j.type == "prismatic" else mujoco.mjtJoint.mjJNT_HINGE
        jnt = child.add_joint(name=j.name, type=kind, axis=list(j.axis))
        if j.limit is not None:
            jnt.limited = mujoco.mjtLimited.mjLIMITED_TRUE
            jnt.range = list(j.limit)
        bodies[j.child] = child
    return bodies[art.links[0].name]


def articulation_meta(model: mujoco.MjModel, obj: ObjectAsset) -> dict:
    """What a scene records about the object's links and joints (``Scene.meta``): ``object_link_bodies`` (body ids,
    link order), ``object_joints`` (names), ``object_joint_qpos_adr`` / ``object_joint_dof_adr``; {} for a rigid object."""
    art = articulation_of(obj)
    if art is None:
        return {}
    jids = [model.joint(j.name).id for j in art.joints]
    return {"object_link_bodies": [int(model.body(link_body_name(art, i)).id) for i in range(len(art.links))],
            "object_joints": [j.name for j in art.joints], "object_link_size": float(art.links[0].size),
            "object_joint_qpos_adr": [int(model.jnt_qposadr[j]) for j in jids],
            "object_joint_dof_adr": [int(model.jnt_dofadr[j]) for j in jids]}
