"""What happens at the real elbow's first impact that the models do not reproduce, measured on the recordings.

    python eval/elbow_impacts.py [--tosses pool|test] [--checkpoint checkpoints/cube_tosses] [--damping 4 16]
                                 [--ledger runs/bench/elbow/ledger.json]

`elbow-real`'s models track free flight to a few mm and part from the recording at the first floor impact
(docs/benchmarks.md). This measures that impact per toss, on the recording and on each model's rollout from the
suite's own first-state estimate (every model through the suite's rollout path, as `eval/elbow_sensitivity.py`):

- ``rise``: how far the elbow's centre of mass climbs within ``--after-s`` of its first impact (mm): the bounce;
- ``swing``: how far the hinge turns in the same time (deg): the energy the impact puts into the joint;
- ``error at impact + after-s``: link 1's position error (% of its size) at that frame of the recording, from the
  suite's start and from a restart a few frames before the impact (the same estimate on the last free-flight
  frames): equal errors say the impact makes the error, not the flight before it; and the error from the start
  split into its horizontal and vertical parts (mm);
- the tracker's frame: where a toss ends at rest, the plane its lowest corners rest on (the floor), and its tilt
  from the frame's horizontal; beside it the direction of gravity that free flight shows in those tosses.

Rows: nominal MuJoCo, the checkpoint's law, the law with its damping divided by each ``--damping`` factor (a bouncier
law), and with ``--ledger`` MuJoCo at the parameters that ledger identified on cube tosses. By default on the
few-shot training pool (the tosses the test split never sees). Writes nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import numpy as np
from scipy.spatial import ConvexHull

from surrogate.bench.toss_windows import corner_points, first_impact, toss_stretch  # noqa: F401 (cube_impacts)

REST_FRAMES = 10  # a toss at rest: its last frames move less than STILL_M
STILL_M = 0.003
MAX_FLOOR_TILT_DEG = 5.0  # a resting plane steeper than this is not the floor (the elbow propped on itself)


def sibling(name: str):
    """The module of ``eval/<name>.py`` (the studies are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def centre_of_mass(art, base_pose: np.ndarray, joints: np.ndarray) -> np.ndarray:
    """[T, 3] the whole object's centre of mass (m)."""
    m = np.array([lk.mass for lk in art.links])
    return np.einsum("tlk,l->tk", art.com_positions(base_pose, joints), m / m.sum())


def rise(com_z: np.ndarray, i: int, frames: int) -> float:
    """How far [T] (m) climbs within ``frames`` after frame ``i`` (m; 0 if it never rises)."""
    return float(max(0.0, com_z[i:i + frames + 1].max() - com_z[i]))


def swing(q: np.ndarray, i: int, frames: int) -> float:
    """How far the joint angle [T] (rad, wrapped) turns from frame ``i`` to ``i + frames`` (deg)."""
    u = np.unwrap(q)
    j = min(i + frames, len(u) - 1)
    return float(np.degrees(abs(u[j] - u[i])))


def floor_tilt(art, ep) -> float | None:
    """The tilt (deg) from the frame's horizontal of the plane a toss ends resting on: of the lower faces of the
    convex hull of its corners over the last frames, the most horizontal (the face the object stands on). None where
    the toss does not end at rest or stands on no face within ``MAX_FLOOR_TILT_DEG``."""
    pose, q = ep.object_pose[-REST_FRAMES:], ep.object_joint_pos[-REST_FRAMES:]
    if len(ep.object_pose) < REST_FRAMES or np.linalg.norm(pose[-1, :3] - pose[0, :3]) > STILL_M:
        return None
    normals = []
    for pts in corner_points(art, pose, q):
        eq = ConvexHull(pts).equations
        lower = eq[eq[:, 2] < 0]
        normals.append(-lower[np.argmin(lower[:, 2]), :3])
    n = np.mean(normals, axis=0)
    tilt = float(np.degrees(np.arccos(np.clip(n[2] / np.linalg.norm(n), -1.0, 1.0))))
    return tilt if tilt <= MAX_FLOOR_TILT_DEG else None


def flight_gravity(art, ep, impact: int, start: int = 1) -> np.ndarray | None:
    """[3] the acceleration (m/s^2) of a parabola through the centre of mass from ``start`` to 2 frames before the
    first ``impact``; None with fewer than 8 frames of flight."""
    end = impact - 2
    if end - start < 8:
        return None
    t = ep.timestamps[start:end] - ep.timestamps[start]
    c, *_ = np.linalg.lstsq(np.vander(t, 3, increasing=True),
                            centre_of_mass(art, ep.object_pose[start:end], ep.object_joint_pos[start:end]), rcond=None)
    return 2.0 * c[2]


def impacts(art, base_pose: np.ndarray, joints: np.ndarray, frames: int) -> dict | None:
    """{"frame", "rise_mm", "swing_deg"} of one trajectory's first impact; None without one."""
    i = first_impact(corner_points(art, base_pose, joints)[..., 2].min(axis=1))
    if i is None:
        return None
    com = centre_of_mass(art, base_pose, joints)
    return {"frame": i, "rise_mm": 1e3 * rise(com[:, 2], i, frames), "swing_deg": swing(joints[:, 0], i, frames)}


def restarted(ep, impact: int, lead: int, init_frames: int):
    """``ep`` from ``lead`` frames before its first ``impact`` on (the suite's estimate then reads the last
    ``init_frames`` frames of free flight before it), or None when fewer than ``init_frames`` + 2 frames precede it."""
    s = impact - lead
    if s < 0 or lead < init_frames + 2:
        return None
    return toss_stretch(ep, s, labels={"window_start": s, "first_impact": impact})


def position_pct(pred: np.ndarray, ep, frame: int) -> float:
    """Link 1's position error at ``frame`` of ``ep``, % of the object's size (the suite's pose error)."""
    from surrogate.metrics import pose_errors

    f = min(frame, len(pred) - 1, ep.num_frames - 1)
    return 100.0 * float(pose_errors(pred[f:f + 1, :7], ep.object_pose[f:f + 1])["pos_m"][0]) / ep.object.size


def recorded_impacts(tosses: list, art, *, frames: int, lead: int, init_frames: int) -> tuple[dict, dict]:
    """({id: the recording's first impact (``impacts``) or None}, {id: the toss restarted ``lead`` frames before it}):
    what every row is measured against, computed once."""
    hits = {e.episode_id: impacts(art, e.object_pose, e.object_joint_pos, frames) for e in tosses}
    cut = {e.episode_id: r for e in tosses if hits[e.episode_id]
           and (r := restarted(e, hits[e.episode_id]["frame"], lead, init_frames)) is not None}
    return hits, cut


def score_row(name: str, predict, tosses: list, art, *, frames: int, lead: int, hits: dict, cut: dict) -> dict:
    """One row: ``predict`` ({id: [T, 7 + J]} of a list of episodes) on ``tosses`` and on their restarts ``cut``;
    medians of the impact's rise and swing, means of link 1's error ``frames`` after the recording's impact
    (``hits``)."""
    preds = predict(tosses)
    again = predict(list(cut.values())) if cut else {}
    own = [impacts(art, preds[e.episode_id][:, :7], preds[e.episode_id][:, 7:], frames) for e in tosses]
    err_start, err_restart, parts = [], [], []
    for e in tosses:
        hit = hits[e.episode_id]
        if hit is None or e.episode_id not in cut:
            continue
        f = min(hit["frame"] + frames, e.num_frames - 1)
        err_start.append(position_pct(preds[e.episode_id], e, f))
        err_restart.append(position_pct(again[e.episode_id], cut[e.episode_id], f - (hit["frame"] - lead)))
        d = preds[e.episode_id][f, :3] - e.object_pose[f, :3]
        parts.append((np.linalg.norm(d[:2]), abs(d[2])))
    own = [h for h in own if h is not None]
    return {"name": name, "rise_mm": float(np.median([h["rise_mm"] for h in own])),
            "swing_deg": float(np.median([h["swing_deg"] for h in own])), "impacts": len(own),
            "err_start": float(np.mean(err_start)), "err_restart": float(np.mean(err_restart)), "pairs": len(err_start),
            "xy_mm": 1e3 * float(np.mean([p[0] for p in parts])), "z_mm": 1e3 * float(np.mean([p[1] for p in parts]))}


def recording_row(hits: dict) -> dict:
    found = [h for h in hits.values() if h is not None]
    return {"name": "the recording", "rise_mm": float(np.median([h["rise_mm"] for h in found])),
            "swing_deg": float(np.median([h["swing_deg"] for h in found])), "impacts": len(found)}


def frame_summary(raw: list, art) -> str:
    """The tracker's frame against the floor and against free flight's gravity, over the whole recordings."""
    tilts = {e.episode_id: t for e in raw if (t := floor_tilt(art, e)) is not None}
    tilted = [i for i, t in tilts.items() if t > 1.5]
    up = {}
    for group, ids in (("tilted", set(tilted)), ("level", set(tilts) - set(tilted))):
        acc = []
        for e in raw:
            hit = impacts(art, e.object_pose, e.object_joint_pos, 1) if e.episode_id in ids else None
            if hit and (a := flight_gravity(art, e, hit["frame"])) is not None:
                acc.append(-a / np.linalg.norm(a))
        if acc:
            m = np.median(acc, axis=0)
            up[group] = (float(np.degrees(np.arccos(m[2] / np.linalg.norm(m)))), len(acc))
    text = (f"tracker frame: {len(tilts)} of {len(raw)} tosses end at rest on a face; the plane they rest on is "
            f"tilted from the frame's horizontal by a median {np.median(list(tilts.values())):.2f} deg, more than "
            f"1.5 deg in {len(tilted)}")
    for group, (deg, n) in up.items():
        text += f"; gravity in free flight ({group} ones, {n}) is {deg:.2f} deg from the frame's vertical"
    return text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", default="checkpoints/cube_tosses", help="the law rolled out as the surrogate row")
    p.add_argument("--tosses", choices=["pool", "test"], default="pool",
                   help="the few-shot training pool (default: the test split never sees it) or the test split")
    p.add_argument("--damping", type=float, nargs="*", default=[4.0, 16.0], help="the law's damping divided by these")
    p.add_argument("--ledger", default=None, help="an elbow-real ledger: MuJoCo at its cube-identified parameters")
    p.add_argument("--after-s", type=float, default=0.1, help="what happens within this long after the impact (s)")
    p.add_argument("--lead", type=int, default=7, help="restarts this many frames before the impact")
    p.add_argument("--max-tosses", type=int, default=None, help="the first N tosses only")
    args = p.parse_args(argv)
    sens = sibling("elbow_sensitivity")
    from surrogate.bench.analytic import AnalyticParams, nominal_params
    from surrogate.bench.predictors import DEFAULT_MARGIN, predict_analytic
    from surrogate.model.checkpoint import load_checkpoint
    from surrogate.objects.articulated import articulation_from_json

    cfg, raw, tosses = sens.suite_tosses("elbow-real", args.tosses, args.max_tosses)
    sim = cfg["simulation"]
    art = articulation_from_json(raw[0].object.geometry)
    frames = int(round(args.after_s * raw[0].provenance.capture_rate_hz))
    margin = float(load_checkpoint(args.checkpoint)[1].get("data", {}).get("margin_m", DEFAULT_MARGIN))
    base = sens.law_values(args.checkpoint)
    mu0 = nominal_params(tosses[0], cfg["baselines"]["nominal"]).friction
    rows = [("nominal MuJoCo", lambda es: sens.predict_mujoco(mu0, es, cfg))]
    if args.ledger:
        import json

        ledger = json.loads(Path(args.ledger).read_text())
        ap = AnalyticParams.from_json(ledger["models"]["analytic_identified"]["params"])
        rows.append(("MuJoCo identified on the cube", lambda es: predict_analytic(
            [ap], es, substeps=sim["substeps"], init_frames=sim["init_frames"])[0]))
    for label, f in [("the release", None)] + [(f"the release, damping / {f:g}", f) for f in args.damping]:
        model = sens.law_variant(args.checkpoint, {} if f is None else {"damping": base["damping"] / f})
        rows.append((label, lambda es, m=model: sens.predict_law(m, es, cfg, margin=margin)))
    hits, cut = recorded_impacts(tosses, art, frames=frames, lead=args.lead, init_frames=int(sim["init_frames"]))
    kw = {"frames": frames, "lead": args.lead, "hits": hits, "cut": cut}
    scored = [recording_row(hits)] + [score_row(n, f, tosses, art, **kw) for n, f in rows]
    print(f"{len(tosses)} {args.tosses} tosses of elbow-real; within {args.after_s:g} s of the first impact "
          f"({frames} frames); restarts {args.lead} frames before it")
    print(f"| row | rise of the centre of mass, mm (median) | hinge swing, deg (median) | link 1 position % at impact "
          f"+ {args.after_s:g} s: from the start / restarted before the impact (mean) | from the start: horizontal / "
          "vertical part, mm (mean) |")
    print("|---|---:|---:|---|---|")
    for r in scored:
        err = f"{r['err_start']:.1f} / {r['err_restart']:.1f} ({r['pairs']} tosses)" if "err_start" in r else "-"
        part = f"{r['xy_mm']:.1f} / {r['z_mm']:.1f}" if "xy_mm" in r else "-"
        print(f"| {r['name']} | {r['rise_mm']:.1f} | {r['swing_deg']:.1f} | {err} | {part} |")
    print(frame_summary(raw, art))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
