"""How much of `elbow-real`'s error a perfect contact model would keep: the first-state estimate's own uncertainty,
carried through the first impact.

    python eval/elbow_floor.py --checkpoint checkpoints/cube_tosses [--draws 8] [--models surrogate nominal]

Every model of `elbow-real` starts from one estimate of the toss's first state (base pose and velocity, hinge angle
and rate, fitted to the first ``simulation.init_frames`` tracked frames: ``estimate.initial_state``). The tracker's
noise makes that estimate uncertain; a toss that hits the floor edge first amplifies the difference. This script
measures the amplification with the suite's own test tosses, estimate and scorer:

1. the noise of the first frames: the residuals of the estimate's own fits (a ballistic parabola for the position,
   a constant body rate for the rotation, a line for the hinge), pooled over the test tosses with the fits' degrees
   of freedom, so a standard deviation per channel (m, rad, rad);
2. a parametric bootstrap of the estimate: ``--draws`` copies of each toss whose first frames carry fresh noise of
   that size (the rest of the toss is not read by a rollout), each estimated again as the suite does;
3. each model rolled out from the toss's estimate (its ``elbow-real`` prediction) and from every redrawn estimate;
   the redrawn rollouts scored against the model's own by the suite's scorer (the model's rollout in the place of
   the recording), averaged over the draws per toss.

That self-divergence estimates what a model that had the contact exactly right would still score against the
recording from an estimate this uncertain, provided the real toss is as sensitive to its start as the model is:
an estimate, not a bound. It is printed beside the model's error against the recording, at the suite's horizons and
over the whole toss, with the share of the error it accounts for; and how far the second link swings after the
first impact (the hinge's range from 0.15 s on), recorded against predicted. Writes nothing.
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
from scipy.spatial.transform import Rotation


def fit_noise(episodes, k: int) -> dict:
    """Pooled residual standard deviations of the first-state estimate's own fits (``estimate.initial_free_state``,
    ``estimate.initial_joint_state``) over the first ``k`` frames of ``episodes``: {"pos_m", "rot_rad", "joint_rad"}."""
    from surrogate.estimate import initial_free_state, initial_joint_state

    ss = {"pos_m": 0.0, "rot_rad": 0.0, "joint_rad": 0.0}
    dof = {"pos_m": 0, "rot_rad": 0, "joint_rad": 0}
    for ep in episodes:
        t = (ep.timestamps[:k] - ep.timestamps[0])[:, None]
        q, v = initial_free_state(ep, k=k)
        g = np.asarray(ep.environment.gravity, float)
        r_first = Rotation.from_quat(ep.object_pose[0, 3:7], scalar_first=True)
        rel = (r_first.inv() * Rotation.from_quat(ep.object_pose[:k, 3:7], scalar_first=True)).as_rotvec()
        r0 = (r_first.inv() * Rotation.from_quat(q[3:7], scalar_first=True)).as_rotvec()  # the fit's intercept
        resid = {"pos_m": ep.object_pose[:k, :3] - (q[:3] + v[:3] * t + 0.5 * g * t**2),
                 "rot_rad": rel - (r0 + v[3:6] * t)}
        if ep.object_joint_pos is not None:
            jq, jv = initial_joint_state(ep, k=k)
            resid["joint_rad"] = np.unwrap(np.asarray(ep.object_joint_pos[:k], float), axis=0) - (jq + jv * t)
        for name, r in resid.items():  # each channel's line has 2 parameters per coordinate
            ss[name] += float((r**2).sum())
            dof[name] += r.shape[1] * (k - 2)
    return {n: float(np.sqrt(ss[n] / dof[n])) if dof[n] else 0.0 for n in ss}


def redrawn(ep, noise: dict, k: int, rng, tag: str):
    """A copy of ``ep`` (episode id + ``tag``) whose first ``k`` frames carry fresh Gaussian noise of ``noise``'s
    size: position (world), rotation (body frame), joint angles."""
    pose = np.array(ep.object_pose, float)
    pose[:k, :3] += rng.normal(0.0, noise["pos_m"], (k, 3))
    turn = Rotation.from_rotvec(rng.normal(0.0, noise["rot_rad"], (k, 3)))  # body frame: right-multiplied
    r = Rotation.from_quat(pose[:k, 3:7], scalar_first=True) * turn
    pose[:k, 3:7] = r.as_quat(scalar_first=True)
    fields = {"object_pose": pose, "episode_id": f"{ep.episode_id}{tag}"}
    if ep.object_joint_pos is not None:
        jp = np.array(ep.object_joint_pos, float)
        jp[:k] += rng.normal(0.0, noise["joint_rad"], jp[:k].shape)
        fields["object_joint_pos"] = jp
    return dataclasses.replace(ep, **fields)


def as_recording(ep, pred: np.ndarray):
    """``ep`` with a prediction [T, 7 + J] in the place of its recording (every frame valid)."""
    T = ep.num_frames
    fields = {"object_pose": np.asarray(pred[:T, :7], float), "object_pose_valid": np.ones(T, bool)}
    if ep.object_joint_pos is not None:
        fields["object_joint_pos"] = np.asarray(pred[:T, 7:], float)
    return dataclasses.replace(ep, **fields)


def predictor(name: str, checkpoint, cfg: dict, test: list):
    """``predict(episodes) -> {episode id: [T, 7 + J]}`` of one `elbow-real` row."""
    sim = cfg["simulation"]
    if name == "surrogate":
        from surrogate.bench.elbow_real import surrogate_predict

        return lambda eps: surrogate_predict(checkpoint, eps, substeps=sim["substeps"],
                                             init_frames=sim["init_frames"])[0]
    from surrogate.bench.analytic import nominal_params
    from surrogate.bench.predictors import predict_analytic

    params = nominal_params(test[0], cfg["baselines"]["nominal"])
    return lambda eps: predict_analytic([params], eps, substeps=sim["substeps"], init_frames=sim["init_frames"])[0]


def floor(name: str, checkpoint, cfg: dict, test: list, noise: dict, draws: int, seed: int,
          after_s: float = 0.15) -> dict:
    """{"model": the row's overall metrics against the recordings, "floor": its redrawn rollouts' against its own,
    "per_episode": [(model pos %, floor pos %)], "hinge_travel": [(recorded, predicted) deg after ``after_s``]}."""
    from surrogate.bench.cube_real import toss_scorer
    from surrogate.bench.evaluate import aggregate, ensemble_mean_score

    predict = predictor(name, checkpoint, cfg, test)
    k, h = int(cfg["simulation"]["init_frames"]), cfg["metrics"]["horizons_s"]
    base = predict(test)
    own = toss_scorer(test, cfg).score(base)
    refs = [as_recording(e, base[e.episode_id]) for e in test]
    ref_scorer = toss_scorer(refs, cfg)
    rng = np.random.default_rng(seed)
    members = []
    for d in range(draws):
        copies = [redrawn(e, noise, k, rng, f"#draw{d}") for e in test]
        preds = predict(copies)
        members.append(ref_scorer.score({e.episode_id: preds[c.episode_id] for e, c in zip(test, copies)}))
    self_div = [ensemble_mean_score([m[i] for m in members]) for i in range(len(test))]
    return {"model": aggregate(own, horizons=h), "floor": aggregate(self_div, horizons=h),
            "per_episode": [(a["pos_pct_size"], b["pos_pct_size"]) for a, b in zip(own, self_div)],
            "hinge_travel": [(hinge_travel(e.object_joint_pos, e.timestamps, after_s),
                              hinge_travel(base[e.episode_id][:e.num_frames, 7:], e.timestamps, after_s))
                             for e in test]}


def hinge_travel(joint_pos: np.ndarray, timestamps: np.ndarray, after_s: float) -> float:
    """Range (deg) of the first joint's unwrapped angle from ``after_s`` after the first frame to the end: how far
    the second link swings after the first impact. joint_pos [T, J]."""
    j = np.degrees(np.unwrap(np.asarray(joint_pos, float)[:, 0]))
    return float(np.ptp(j[np.searchsorted(timestamps - timestamps[0], after_s):]))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", default="checkpoints/cube_tosses", help="the surrogate row's contact model")
    p.add_argument("--models", nargs="+", default=["surrogate", "nominal"], choices=["surrogate", "nominal"])
    p.add_argument("--draws", type=int, default=8, help="redrawn first states per toss (default 8)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--suite", default="elbow-real", help="the suite whose data, split, estimate and scorer are used")
    args = p.parse_args(argv)
    if args.draws < 1:
        p.error("--draws must be at least 1")
    from surrogate.bench.elbow_real import articulated_tests
    from surrogate.bench.run import CACHE_DIR
    from surrogate.bench.toss_data import load_tosses
    from surrogate.splits import suite_split
    from surrogate.suites import load_suite

    cfg = load_suite(args.suite)
    ds = load_tosses(cfg["data"]["source"], cache_dir=CACHE_DIR, urdf=cfg["data"]["urdf"], progress=False)
    eps, sp = suite_split(ds.episodes, cfg["data"], [])
    test = articulated_tests(cfg, eps, sp, None, CACHE_DIR)[0]
    k = int(cfg["simulation"]["init_frames"])
    noise = fit_noise(test, k)
    print(f"{len(test)} test tosses of {args.suite}; first-state fits over {k} frames: residual sd position "
          f"{noise['pos_m'] * 1e3:.2f} mm, rotation {np.degrees(noise['rot_rad']):.2f} deg, hinge "
          f"{np.degrees(noise['joint_rad']):.2f} deg; {args.draws} redrawn estimates per toss")
    h = [f"{x:g}" for x in cfg["metrics"]["horizons_s"]]
    print(f"| row | against | link 1 position % (whole toss) | rotation deg | hinge deg | "
          f"position % at {', '.join(h)} s |")
    print("|---|---|---|---|---|---|")
    for name in args.models:
        r = floor(name, args.checkpoint, cfg, test, noise, args.draws, args.seed)
        for which, label in (("model", "the recording"), ("floor", "itself, redrawn start")):
            o = r[which]
            at = " / ".join(f"{o['horizons']['pos_pct_size'][x]['mean']:.1f}" for x in h)
            print(f"| {name} | {label} | {_ci(o['pos_pct_size'])} | {_ci(o['rot_deg'])} | "
                  f"{_ci(o.get('joint_deg') or {})} | {at} |")
        own, fl = np.array(r["per_episode"], float).T
        rec, mod = np.array(r["hinge_travel"], float).T
        print(f"  {name}: floor / error over the whole toss {fl.mean() / own.mean():.2f} (mean over tosses of the "
              f"ratio {np.mean(fl / own):.2f}); the hinge's travel after 0.15 s, median recorded {np.median(rec):.0f} "
              f"deg against predicted {np.median(mod):.0f} deg (predicted below recorded in {np.sum(mod < rec)} of "
              f"{len(rec)} tosses)")
    return 0


def _ci(s: dict) -> str:
    if not s or s.get("mean") is None:
        return "n/a"
    lo, hi = s.get("mean_ci95") or (None, None)
    return f"{s['mean']:.1f} [{lo:.1f}, {hi:.1f}]" if lo is not None else f"{s['mean']:.1f}"


if __name__ == "__main__":
    raise SystemExit(main())
