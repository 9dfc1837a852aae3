"""Grasp outcomes (lifted, slipped, dropped) of a predicted replay, by the rig's own definition.

The rig labels each recorded episode from its exact trajectory (``rig.scripts.episode_labels``:
the object rose more than ``lift_threshold``; it moved more than ``slip_threshold`` relative
to a pad, or turned more than ``slip_angle_threshold`` relative to the hand, during hold and
perturbation; it was lifted and then lost). A model's replay of the episode is labelled by
the same function on the predicted trajectory, so success and slip rates of models and of
the recordings compare like with like.
"""

from __future__ import annotations

import mujoco
import numpy as np

from ..rig.scripts import episode_labels


def outcome_series(scene, qpos: np.ndarray) -> dict:
    """The quantities ``episode_labels`` needs, from a trajectory of the scene.

    Args:
      scene: the replay's scene (with a hand).
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
    qb_inv = np.zeros(4)
    for k in range(F):
        d.qpos[:] = qpos[k]
        mujoco.mj_kinematics(m, d)
        p = d.xpos[ob]
        out["object_pos"][k] = p
        for i, s in enumerate(sites):
            out["rel_pad"][k, i] = d.site_xmat[s].reshape(3, 3).T @ (p - d.site_xpos[s])
        out["rel_pos"][k] = d.xmat[base].reshape(3, 3).T @ (p - d.xpos[base])
        mujoco.mju_negQuat(qb_inv, d.xquat[base])
        mujoco.mju_mulQuat(out["rel_quat"][k], qb_inv, d.xquat[ob])
    fromto = np.zeros(6)
    last = min(mujoco.mj_geomDistance(m, d, g, og, 1.0, fromto) for g in hand_geoms for og in scene.object_geom_ids)
    out["hand_object_distance"] = np.full(F, float(last))
    return out


def predicted_labels(scene, qpos: np.ndarray, ep, thresholds: dict, *, series: dict | None = None) -> dict | None:
    """Outcome labels of a predicted trajectory of episode ``ep`` (None when the episode does
    not record its script phases, e.g. a capture from elsewhere).

    Args:
      thresholds: ``lift_threshold`` (m), ``slip_threshold`` (m), ``slip_angle_threshold`` (rad).
      series: ``outcome_series(scene, qpos)`` if the caller has it already.
    """
    phases = ((ep.provenance.generator or {}).get("script") or {}).get("phases")
    if not phases or scene.hand is None:
        return None
    s = outcome_series(scene, qpos) if series is None else series
    t = ep.timestamps[: len(qpos)] - ep.timestamps[0]
    return episode_labels(t, s["object_pos"], s["rel_pad"], s["rel_pos"], s["rel_quat"], s["hand_object_distance"],
                          phases, thresholds)


def rates(labels: list[dict | None]) -> dict:
    """Success (lifted and not dropped), slip (among lifted) and drop rates over episodes with labels."""
    ls = [x for x in labels if x is not None]
    n = len(ls)
    lifted = [x for x in ls if x["lifted"]]
    return {
        "episodes": n,
        "success_rate": None if n == 0 else sum(x["lifted"] and not x["dropped"] for x in ls) / n,
        "slip_rate": None if not lifted else sum(x["slipped"] for x in lifted) / len(lifted),
        "drop_rate": None if not lifted else sum(x["dropped"] for x in lifted) / len(lifted),
        "lifted": len(lifted),
    }


def agreement(pred: list[dict | None], true: list[dict | None]) -> dict:
    """Per-episode agreement of predicted with recorded outcomes (fraction of episodes)."""
    pairs = [(p, t) for p, t in zip(pred, true) if p is not None and t is not None]
    if not pairs:
        return {"episodes": 0, "success": None, "slip": None}
    ok = lambda x: bool(x["lifted"] and not x["dropped"])  # noqa: E731
    return {"episodes": len(pairs),
            "success": sum(ok(p) == ok(t) for p, t in pairs) / len(pairs),
            "slip": sum(bool(p["slipped"]) == bool(t["slipped"]) for p, t in pairs) / len(pairs)}
