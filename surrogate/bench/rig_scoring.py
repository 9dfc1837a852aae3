"""Scoring the ``rig-grasp`` suite's replays: pose, horizons from first contact, divergence signals
(grip slip, lift timing, fingertip force), outcome labels, ensemble reductions, pad force traces.

A prediction of one episode is ``(qpos [F, nq], pad forces [F, S, 3] or None)``: the whole scene's
``qpos`` at the episode's frames and the force the object exerts on each sensed pad.
"""

from __future__ import annotations

import numpy as np

from .evaluate import aggregate, ensemble_mean_score, per_object, score_episode, spread_coverage
from .grasp_outcome import agreement, counts, outcome_series, pooled_gap, predicted_labels, rates
from .replay import joint_qpos_columns
from .rows import Scorer


def horizon_origin(ep, which: str) -> float:
    """Seconds after the first frame at which horizons start (``close``: the script's close phase)."""
    if which == "start":
        return 0.0
    phases = ((ep.provenance.generator or {}).get("script") or {}).get("phases") or {}
    if which not in phases:
        return 0.0
    return float(phases[which][0])


def recorded_qpos(replay) -> np.ndarray:
    """[F, nq] the recorded episode as scene ``qpos``: measured hand joints and object pose."""
    return scene_qpos(replay, replay.episode.object_pose, replay.episode.joint_pos)


def scene_qpos(replay, object_pose: np.ndarray, joint_pos: np.ndarray | None) -> np.ndarray:
    """[F, nq] the replay scene's ``qpos`` with the object at ``object_pose`` [F, 7] and the hand joints at
    ``joint_pos`` [F, J] (columns as the dataset's ``joint_names``; None: the initial state's), every other
    coordinate at the replay's initial state."""
    import mujoco

    m = replay.scene.model
    d = mujoco.MjData(m)
    mujoco.mj_setState(m, d, replay.init_state, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    q = np.tile(d.qpos, (len(object_pose), 1))
    a = replay.scene.object_qpos_adr
    q[:, a:a + 7] = object_pose
    if joint_pos is not None:
        for c, adr in joint_qpos_columns(m, replay.joint_names):
            q[:, adr] = joint_pos[:, c]
    return q


def hand_joints(replay, qpos: np.ndarray) -> np.ndarray:
    """[F, J] ``scene_qpos``'s inverse for the hand: the episode's recorded joints (columns as the dataset's
    ``joint_names``) with every joint the scene has taken from ``qpos`` [F, nq] (F: the shorter of the two)."""
    out = np.array(replay.episode.joint_pos[:len(qpos)], dtype=float, copy=True)
    for c, adr in joint_qpos_columns(replay.scene.model, replay.joint_names):
        out[:, c] = qpos[:len(out), adr]
    return out


def _lift_mismatch_s(pred_z, true_z, dt: float, thr: float) -> np.ndarray:
    """[F] seconds so far during which one trajectory is lifted (rise > thr) and the other is not."""
    a = (pred_z - pred_z[0]) > thr
    b = (true_z - true_z[0]) > thr
    return np.cumsum(a != b) * dt


class EpisodeScorer:
    """Scores predicted replays of one episode (pose, horizons, divergence signals, outcome labels)."""

    def __init__(self, replay, cfg, thresholds):
        self.replay, self.cfg, self.thr = replay, cfg, thresholds
        ep = replay.episode
        self.origin = horizon_origin(ep, cfg["metrics"].get("horizon_origin", "close"))
        self.true_q = recorded_qpos(replay)
        self.has_hand = replay.scene.hand is not None
        self.true_series = outcome_series(replay.scene, self.true_q) if self.has_hand else None
        self.dt = 1.0 / float(ep.provenance.capture_rate_hz)

    def force_error(self, pad_force: np.ndarray | None) -> np.ndarray | None:
        """[F] the largest sensed pad's force error against the recording, in object weights (None without
        sensors or predicted forces)."""
        r, ep = self.replay, self.replay.episode
        if pad_force is None or not r.sensors or ep.wrench is None:
            return None
        cols = [c for c, _, _ in r.sensors]
        weight = ep.object.mass * float(np.linalg.norm(ep.environment.gravity))
        n = min(len(pad_force), ep.num_frames)
        return np.linalg.norm(pad_force[:n] - ep.wrench[:n, cols, :3], axis=-1).max(axis=1) / weight

    def score(self, qpos: np.ndarray, pad_force: np.ndarray | None = None) -> dict:
        r, ep, m = self.replay, self.replay.episode, self.cfg["metrics"]
        a = r.scene.object_qpos_adr
        pose = qpos[:, a:a + 7]
        extra, labels = {}, None
        force_err = self.force_error(pad_force)
        if force_err is not None:
            extra["pad_force"] = (force_err, m["divergence"].get("pad_force_weights", 1.0))
        if self.has_hand:
            s = outcome_series(r.scene, qpos)
            slip = np.linalg.norm(s["rel_pos"] - self.true_series["rel_pos"], axis=1)
            extra["grip_slip"] = (slip, m["divergence"].get("slip_m", 0.005))
            extra["timing"] = (_lift_mismatch_s(pose[:, 2], ep.object_pose[:, 2], self.dt, self.thr["lift_threshold"]),
                               m["divergence"].get("timing_s", 0.1))
            labels = predicted_labels(r.scene, qpos, ep, self.thr, series=s)
        sc = score_episode(pose, ep, size=ep.object.size, horizons=m["horizons_s"], divergence=m["divergence"],
                           origin=self.origin, extra_series=extra, max_error_m=m.get("max_error_m"))
        sc["outcome"] = labels
        sc["pad_force_weights"] = None if force_err is None else float(force_err.mean())
        return sc


def mean_scores(member_scores: list[list[dict]]) -> list[dict]:
    """Per episode: the ensemble's expected error and median divergence time (``evaluate.ensemble_mean_score``), each
    member's outcome and the fraction of members that blew up."""
    out = []
    for i in range(len(member_scores[0])):
        rows = [ms[i] for ms in member_scores]
        s = ensemble_mean_score(rows)
        s["outcome_members"] = [r["outcome"] for r in rows]
        out.append(s)
    return out


def outcome_rates(scores: list[dict]) -> dict:
    """Rates over episodes; an ensemble's rate is the mean over its members."""
    if scores and "outcome_members" in scores[0]:
        K = len(scores[0]["outcome_members"])
        per = [rates([s["outcome_members"][k] for s in scores]) for k in range(K)]
        out = {}
        for key in ("success_rate", "slip_rate", "drop_rate"):
            vals = [p[key] for p in per if p[key] is not None]
            out[key] = float(np.mean(vals)) if vals else None
        out["episodes"] = per[0]["episodes"]
        out["lifted"] = float(np.mean([p["lifted"] for p in per]))
        return out
    return rates([s["outcome"] for s in scores])


def grasp_metrics(scores: list[dict], sets: dict, target_sets: list, cfg, true_labels: dict) -> dict:
    h = cfg["metrics"]["horizons_s"]
    seed = cfg["metrics"].get("bootstrap_seed", 0)
    target = [s for s in scores if s["set"] in target_sets]

    def block(rows):
        agg = aggregate(rows, horizons=h, seed=seed)
        r = outcome_rates(rows)
        agg["success_rate"], agg["slip_rate"], agg["drop_rate"] = r["success_rate"], r["slip_rate"], r.get("drop_rate")
        # the model's rates minus the recording's over the same episodes (an ensemble: its members' mean rate), with
        # an interval resampling objects (``pooled_gap``, objects in sorted order; not for an ensemble, whose rate is
        # already a mean)
        rec = rates([true_labels[s["id"]] for s in rows]) if rows else {}
        per_obj = {}
        if rows and "outcome_members" not in rows[0]:
            agg["outcome_agreement"] = agreement([s["outcome"] for s in rows], [true_labels[s["id"]] for s in rows])
            by_object = {}
            for s in rows:
                by_object.setdefault(s["object"], []).append(s)
            per_obj = {o: {"sim": counts([s["outcome"] for s in by_object[o]]),
                           "rig": counts([true_labels[s["id"]] for s in by_object[o]])} for o in sorted(by_object)}
        for key in ("success", "slip"):
            a, b = agg[f"{key}_rate"], rec.get(f"{key}_rate")
            agg[f"{key}_gap"] = None if a is None or b is None else float(a - b)
            agg[f"{key}_gap_ci95"] = pooled_gap(per_obj, key, seed=seed)["ci95"] if per_obj else None
        return agg

    return {"overall": block(target) if target else block(scores),
            "per_set": {name: block([s for s in scores if s["set"] == name]) for name in sets},
            "per_object": per_object(target or scores, horizons=h, seed=seed),
            "per_episode": [{k: v for k, v in s.items() if k != "outcome_members"} for s in scores]}


def force_traces(models: dict, replays: dict, traces: dict) -> dict:
    """{median, worst: {episode, t [F], recorded [F, S], models {name: [F, S]}, sensors}}: the sensed pads'
    force magnitude |F| (N, all three axes; the error metric compares the whole vector) of the episodes with the median and the largest pad force error of the
    surrogate (of identified MuJoCo without a surrogate); every second frame."""
    ref = "surrogate" if "per_episode" in models.get("surrogate", {}) else "analytic_identified"
    rows = [s for s in models[ref]["per_episode"] if s.get("pad_force_weights") is not None and s["id"] in traces]
    if not rows:
        return {}
    rows.sort(key=lambda s: s["pad_force_weights"])
    out = {}
    for which, s in (("median", rows[len(rows) // 2]), ("worst", rows[-1])):
        r = replays[s["id"]]
        ep = r.episode
        cols = [c for c, _, _ in r.sensors]
        out[which] = {"episode": s["id"], "object": ep.object.name, "error_weights": s["pad_force_weights"], "model": ref,
                      "t": (ep.timestamps[::2] - ep.timestamps[0]).round(4).tolist(),
                      "sensors": [r.scene.model.site(site).name for _, site, _ in r.sensors],
                      "recorded": np.linalg.norm(np.asarray(ep.wrench[::2][:, cols, :3]), axis=-1).round(4).tolist(),
                      "models": {k: np.asarray(v[::2]).round(4).tolist() for k, v in traces[s["id"]].items()}}
    return out



def grasp_scorer(scorers: dict, *, set_of: dict, sets: dict, target_sets: list, cfg: dict, true_labels: dict) -> Scorer:
    """The suite's ``rows.Scorer`` over the test episodes {``SET/ID``: EpisodeScorer} (in test order)."""

    def score(preds):
        out = []
        for key, sc in scorers.items():
            s = sc.score(*preds[key])
            s["id"], s["set"] = key, set_of[key]
            out.append(s)
        return out

    def coverage(members):
        inside = total = 0
        for key, sc in scorers.items():
            q = np.stack([m[key][0] for m in members])
            a, ep = sc.replay.scene.object_qpos_adr, sc.replay.episode
            i, t = spread_coverage(q[:, :, a:a + 3], ep.object_pose[:, :3], ep.object_pose_valid)
            inside, total = inside + i, total + t
        return inside / max(total, 1)

    return Scorer(score, lambda scores: grasp_metrics(scores, sets, target_sets, cfg, true_labels), mean_scores, coverage)
