"""The transfer suite's measurements: per-step traces of a rollout (``Tape``), the first divergence between the
sim and rig traces of the same rollout, and the rates of rollouts (their sim-minus-rig gaps with bootstrap intervals
over held-out objects: ``grasp_outcome.pooled_gap``).

First divergence (per paired rollout: same object, same reset seed, same tuned policy), at control step k:

* ``pose``: the object's positions differ by more than ``divergence.pose_m``;
* ``force``: the summed pad force magnitudes (the observation's F/T block) differ by more than
  ``max(divergence.force_n, divergence.force_rel * the larger)``;
* ``slip``: one side has slipped (the object moved more than ``divergence.slip_m`` relative to a pad since
  the hold started) and the other not;
* ``timing``: one side has lifted the object (rise above the task's ``lift_threshold``) and the other not.

The earliest such step is the first divergence; at a tie the kinds are named in that order.
"""

from __future__ import annotations

import math

import numpy as np

from ..rig.outcomes import outcome_series

KINDS = ("pose", "force", "slip", "timing")


class Tape(list):
    """A ``policies.rollout`` ``record`` list that also samples each copy's summed pad force (N) per frame.

    Items: [N, nq] qpos after the reset and after each control step; ``force``: the matching [N] forces.
    """

    def __init__(self, task):
        super().__init__()
        self.task = task
        self.force: list[np.ndarray] = []

    def append(self, qpos: np.ndarray) -> None:
        super().append(qpos)
        t = self.task
        J, P = len(t.qadr), len(t.pad_bodies)
        ft = t.observe()[:, 2 * J + 13: 2 * J + 13 + 6 * P].reshape(t.num_envs, P, 6)
        self.force.append(np.linalg.norm(ft[:, :, :3], axis=2).sum(axis=1))


def _series(tape: Tape, i: int, hold_index: int) -> dict:
    """Copy ``i``'s per-step object position [K, 3], pad force [K], slipped [K] and lifted [K] flags."""
    t = tape.task
    q = np.stack([x[i] for x in tape])
    out = outcome_series(t.scene, q)
    pos = out["object_pos"]
    h = min(hold_index, len(q) - 1)
    slip = np.linalg.norm(out["rel_pad"] - out["rel_pad"][h][None], axis=2).max(axis=1)
    slip[:h] = 0.0
    rise = pos[:, 2] - pos[0, 2]
    return {"pos": pos, "force": np.array([f[i] for f in tape.force]), "slip": slip,
            "lifted": np.maximum.accumulate(rise > t.lift_threshold)}


def first_divergence(sim: Tape, rig: Tape, i: int, *, hold_start: float, control_dt: float, thr: dict) -> dict:
    """{"step": k or None, "time_s", "kind": the first kind or None, "kinds": all kinds at that step} of copy ``i``."""
    h = math.ceil(hold_start / control_dt - 1e-9)
    a, b = _series(sim, i, h), _series(rig, i, h)
    K = min(len(a["pos"]), len(b["pos"]))
    big = np.maximum(a["force"][:K], b["force"][:K])
    flags = {
        "pose": np.linalg.norm(a["pos"][:K] - b["pos"][:K], axis=1) > thr["pose_m"],
        "force": np.abs(a["force"][:K] - b["force"][:K]) > np.maximum(thr["force_n"], thr["force_rel"] * big),
        "slip": (a["slip"][:K] > thr["slip_m"]) != (b["slip"][:K] > thr["slip_m"]),
        "timing": a["lifted"][:K] != b["lifted"][:K],
    }
    first = {k: int(np.argmax(f)) for k, f in flags.items() if f.any()}
    if not first:
        return {"step": None, "time_s": None, "kind": None, "kinds": []}
    k = min(first.values())
    kinds = [n for n in KINDS if first.get(n) == k]
    return {"step": k, "time_s": k * control_dt, "kind": kinds[0], "kinds": kinds}


def rates(results: list[dict]) -> dict:
    """Counts and rates of ``policies.rollout`` results: success over episodes, slip over lifted episodes."""
    succ = np.concatenate([r["success"] for r in results])
    lifted = np.concatenate([r["lifted"] for r in results])
    slipped = np.concatenate([r["slipped"] for r in results]) & lifted
    n, nl = len(succ), int(lifted.sum())
    return {"episodes": n, "successes": int(succ.sum()), "lifted": nl, "slipped": int(slipped.sum()),
            "success_rate": float(succ.mean()) if n else None, "slip_rate": float(slipped.sum() / nl) if nl else None}
