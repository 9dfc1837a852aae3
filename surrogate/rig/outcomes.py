"""The quantities the one outcome definition (``rig.scripts.episode_labels``: lifted, slipped, dropped)
reads from a grasp trajectory, computed one way for the rig's exact trajectory, a model's replay
(``bench.grasp_outcome``) and a policy's rollout in the environments (``policies.rollout``).

Per frame, after MuJoCo's kinematics: the object's position (world), its position in each pad site's
frame (``rel_pad``, slip), its position and orientation in the hand base's frame (``rel_pos``,
``rel_quat``); and the smallest hand-object distance (``hand_object_distance``, a lost object).
"""

from __future__ import annotations

import mujoco
import numpy as np


def relative_pose(d: mujoco.MjData, ob: int, base: int, sites) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rel_pad [S, 3], rel_pos [3], rel_quat [4]) of body ``ob`` in the frames of ``sites`` and of body
    ``base`` (m; w x y z), from ``d``'s kinematics."""
    p = d.xpos[ob]
    rel_pad = np.zeros((len(sites), 3))
    for i, s in enumerate(sites):
        rel_pad[i] = d.site_xmat[s].reshape(3, 3).T @ (p - d.site_xpos[s])
    rel_pos = d.xmat[base].reshape(3, 3).T @ (p - d.xpos[base])
    qb_inv, rel_quat = np.zeros(4), np.zeros(4)
    mujoco.mju_negQuat(qb_inv, d.xquat[base])
    mujoco.mju_mulQuat(rel_quat, qb_inv, d.xquat[ob])
    return rel_pad, rel_pos, rel_quat


def hand_object_distance(m: mujoco.MjModel, d: mujoco.MjData, hand_geoms, object_geoms) -> float:
    """Smallest distance (m) between any hand geom and any object geom (``mj_geomDistance``, capped at 1 m)."""
    fromto = np.zeros(6)
    return min(mujoco.mj_geomDistance(m, d, g, og, 1.0, fromto) for g in hand_geoms for og in object_geoms)


def outcome_series(scene, qpos: np.ndarray) -> dict:
    """The quantities ``episode_labels`` needs, from a trajectory of the scene.

    Args:
      scene: the scene (with a hand).
      qpos: [F, nq] at the episode's frames.
    Returns:
      {"object_pos": [F, 3], "rel_pad": [F, S, 3], "rel_pos": [F, 3], "rel_quat": [F, 4],
       "hand_object_distance": [F] (m; only the last frame is computed, the rest repeat it:
       the labels read only the last)}.
    """
    m = scene.model
    d = mujoco.MjData(m)
    hand = scene.hand
    ob = scene.object_body_id
    base = m.body(hand.base_body).id
    sites = [m.site(n).id for n in hand.pad_site_names]
    hand_geoms = [m.geom(n).id for n in (*hand.pad_geom_names, *hand.link_geom_names)]
    F = len(qpos)
    out = {"object_pos": np.zeros((F, 3)), "rel_pad": np.zeros((F, len(sites), 3)), "rel_pos": np.zeros((F, 3)),
           "rel_quat": np.zeros((F, 4))}
    for k in range(F):
        d.qpos[:] = qpos[k]
        mujoco.mj_kinematics(m, d)
        out["object_pos"][k] = d.xpos[ob]
        out["rel_pad"][k], out["rel_pos"][k], out["rel_quat"][k] = relative_pose(d, ob, base, sites)
    last = hand_object_distance(m, d, hand_geoms, scene.object_geom_ids)
    out["hand_object_distance"] = np.full(F, float(last))
    return out
