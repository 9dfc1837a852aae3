"""Whether a toss suite's rows depend on the tracker's frame: every row of a `cube-real` or `elbow-real` ledger scored
again on its own test tosses turned about the vertical.

    python eval/frame_check.py LEDGER [--angles 22.5 45 67.5] [--test-data DIR] [--max-tosses N]

A recording's horizontal axes are the tracker's choice; the floor and gravity do not care. A contact model whose
error changes when the whole recording is turned about the vertical answers to that choice, not to the toss: its
per-toss errors carry noise no other row has, and its mean over a test set can sit a few points up or down by the
frame's luck. MuJoCo's pyramidal friction cone is such a model (its pyramid's edges lie along the contact frame's
tangent axes, which for a floor are the world's x and y); its elliptic cone and the surrogate are not.

Each row is rebuilt from the ledger (an analytic row from its ``params``, an ensemble from its ``members``, a learned
row from its ``checkpoint``, a fine-tuned one from the checkpoint and its fitted ``law``) and scored by the suite's
scorer on the test tosses as the suite prepared them, turned by each angle (deg) about the vertical through the
origin (positions, orientations and world-frame velocities; body rates and joints unchanged). The unturned frame is
scored too and printed beside the ledger's mean, which it must equal: a check that the row was rebuilt faithfully.
Printed per row: the mean position error (% of size) in each frame, their mean, and per toss the range over the
frames (median and largest). ``--other-cone`` adds each analytic row with its other friction cone (its other
parameters kept). Writes nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation

INVARIANT_POINTS = 0.5  # a row whose per-toss error moves less than this over every frame answers to the toss only


def yawed(ep, deg: float, suffix: str):
    """``ep`` turned by ``deg`` about the vertical through the origin, its id + ``suffix``."""
    turn = Rotation.from_euler("z", deg, degrees=True)
    pose, twist = ep.object_pose.copy(), ep.object_twist.copy()
    pose[:, :3] = turn.apply(pose[:, :3])
    pose[:, 3:7] = (turn * Rotation.from_quat(pose[:, 3:7], scalar_first=True)).as_quat(scalar_first=True)
    twist[:, :3] = turn.apply(twist[:, :3])  # linear velocity, world frame; the angular one is in the body frame
    return dataclasses.replace(ep, episode_id=f"{ep.episode_id}{suffix}", object_pose=pose, object_twist=twist)


def learned_model(row: dict):
    """(the row's contact model, its contact margin): the checkpoint, with a fine-tuned row's fitted law set in it."""
    import torch

    from surrogate.bench.predictors import DEFAULT_MARGIN
    from surrogate.model.checkpoint import load_checkpoint

    model, card = load_checkpoint(row["checkpoint"])
    names = ("stiffness", "damping", "friction", "static_friction", "stribeck_speed")
    with torch.no_grad():
        for name in names:
            if row.get("law", {}).get(name) is not None and hasattr(model, f"log_{name}"):
                getattr(model, f"log_{name}").fill_(math.log(float(row["law"][name])))
    return model, float(card.get("data", {}).get("margin_m", DEFAULT_MARGIN))


def predictor(row: dict, sim: dict, scorer_of):
    """A function (episodes -> per-episode scores) of one ledger row, or None for a row it cannot rebuild."""
    from surrogate.bench.analytic import AnalyticParams
    from surrogate.bench.elbow_fewshot import predict_groups
    from surrogate.bench.predictors import predict_analytic, surrogate_predict

    kw = {"substeps": sim["substeps"], "init_frames": sim["init_frames"]}
    if row.get("params"):
        p = AnalyticParams.from_json(row["params"])
        return lambda eps: scorer_of(eps).score(predict_analytic([p], eps, **kw)[0])
    if (row.get("ensemble") or {}).get("members"):
        ps = [AnalyticParams.from_json(m) for m in row["ensemble"]["members"]]

        def ensemble(eps):
            sc = scorer_of(eps)
            return sc.ensemble([sc.score(pr) for pr in predict_analytic(ps, eps, **kw)])

        return ensemble
    if row.get("checkpoint") and "overall" in row:
        model, margin = learned_model(row)

        def learned(eps):
            if eps[0].object_joint_pos is None:  # a rigid toss: the suite's own learned predictor
                return scorer_of(eps).score(surrogate_predict(row["checkpoint"], eps, progress=False, **kw)[0])
            return scorer_of(eps).score(predict_groups(model, eps, margin=margin, **kw)[0])

        return learned
    return None


def test_episodes(ledger: dict, test_data, max_tosses):
    """(the suite's config, its test tosses as it prepared them) for ``ledger``."""
    from surrogate.bench.cube_real import suite_test_episodes
    from surrogate.bench.elbow_real import articulated_tests
    from surrogate.bench.run import CACHE_DIR
    from surrogate.bench.toss_data import load_tosses
    from surrogate.splits import suite_split

    cfg, data = ledger["config"], ledger["config"]["data"]
    ds = load_tosses(data["source"], cache_dir=CACHE_DIR, urdf=data.get("urdf"), progress=False)
    eps, sp = suite_split(ds.episodes, data, [])
    if test_data is None and [str(i) for i in sp["test"]] != [str(i) for i in ledger["split"]["test"]]:
        raise SystemExit("the suite's split today is not the ledger's: rerun the suite")
    if data.get("urdf"):
        test = articulated_tests(cfg, eps, sp, test_data, CACHE_DIR)[0]
    else:
        test = suite_test_episodes(cfg, sp, {e.episode_id: e for e in eps}, test_data, CACHE_DIR)[0]
    return cfg, test[:max_tosses]


def check(ledger: dict, angles: list[float], test_data=None, max_tosses=None, other_cone: bool = False) -> list[dict]:
    """Per rebuildable row: {"name", "ledger" (its mean, None for an added row), "by_angle" {deg: mean}, "mean",
    "range_median", "range_max", "cone"}; with ``other_cone`` each single analytic row also with the other cone."""
    from surrogate.bench.cube_real import toss_scorer

    cfg, test = test_episodes(ledger, test_data, max_tosses)
    frames = [0.0] + [float(a) for a in angles]
    turned = {a: test if a == 0.0 else [yawed(e, a, f"_yaw{a:g}") for e in test] for a in frames}
    out, rows = [], dict(ledger["models"])
    if other_cone:  # each single analytic row again with the other friction cone, its other parameters kept
        for name, row in ledger["models"].items():
            if row.get("params"):
                cone = "elliptic" if row["params"].get("cone", "pyramidal") == "pyramidal" else "pyramidal"
                rows[f"{name}, {cone} cone"] = {"params": {**row["params"], "cone": cone}, "overall": None}
    for name, row in rows.items():
        f = predictor(row, cfg["simulation"], lambda eps: toss_scorer(eps, cfg))
        if f is None:
            continue
        errs = np.array([[s["pos_pct_size"] for s in f(turned[a])] for a in frames])  # [frames, tosses]
        spread = errs.max(axis=0) - errs.min(axis=0)
        out.append({"name": name, "ledger": row["overall"]["pos_pct_size"]["mean"] if row["overall"] else None,
                    "per_toss": [{"id": e.episode_id, "pos_pct_size": float(v)} for e, v in zip(test, errs.mean(0))],
                    "by_angle": {a: float(errs[i].mean()) for i, a in enumerate(frames)}, "mean": float(errs.mean()),
                    "range_median": float(np.median(spread)), "range_max": float(spread.max()),
                    "cone": (row.get("params") or {}).get("cone")})
    return out


def copy_spread(ledger: dict) -> list[dict]:
    """For a ledger whose test data are `eval/turned_tosses.py` copies (copy c of toss N is 100000 + 10 N + c): per
    row, the range of each toss's error over its copies (median / largest) and the mean, from the ledger alone."""
    out = []
    for name, row in ledger["models"].items():
        groups: dict = {}
        for e in row.get("per_episode") or []:
            if str(e["id"]).isdigit() and int(e["id"]) >= 100000 and e.get("pos_pct_size") is not None:
                groups.setdefault((int(e["id"]) - 100000) // 10, []).append(e["pos_pct_size"])
        spread = [max(v) - min(v) for v in groups.values() if len(v) > 1]
        if spread:
            out.append({"name": name, "tosses": len(spread), "range_median": float(np.median(spread)),
                        "range_max": float(max(spread)), "cone": (row.get("params") or {}).get("cone")})
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("ledger", help="a cube-real or elbow-real ledger.json")
    p.add_argument("--angles", type=float, nargs="+", default=[22.5, 45.0, 67.5],
                   help="turns about the vertical (deg; a pyramid's anisotropy repeats every 90)")
    p.add_argument("--test-data", nargs="*", default=None, help="the run's --test-data, if it had one")
    p.add_argument("--max-tosses", type=int, default=None, help="the first N test tosses only")
    p.add_argument("--other-cone", action="store_true",
                   help="also each analytic row with the other friction cone (pyramidal <-> elliptic)")
    p.add_argument("--turned-copies", action="store_true",
                   help="the ledger's test data are eval/turned_tosses.py copies: each toss's range over its copies, "
                        "read from the ledger (nothing rolled out)")
    args = p.parse_args(argv)
    ledger = json.loads(Path(args.ledger).read_text())
    if ledger.get("suite") not in ("cube-real", "cube-real-small", "elbow-real", "elbow-real-small"):
        p.error(f"{args.ledger}: a toss suite's ledger is needed, this one is {ledger.get('suite')!r}")
    if args.turned_copies:
        print("| row | tosses | per toss, range of the position error (% of size) over its copies: median / largest |")
        print("|---|---:|---|")
        for r in copy_spread(ledger):
            cone = f" ({r['cone']} cone)" if r["cone"] else ""
            print(f"| {r['name']}{cone} | {r['tosses']} | {r['range_median']:.2f} / {r['range_max']:.2f} |")
        return 0
    rows = check(ledger, args.angles, args.test_data or None, args.max_tosses, args.other_cone)
    angles = [0.0] + args.angles
    print(f"{ledger.get('suite_name', ledger['suite'])}: position % of size (an articulated object's first link), each "
          "row on its test tosses turned about the vertical")
    print(f"| row | ledger | {' | '.join(f'{a:g} deg' for a in angles)} | mean over the frames | per toss, range over "
          "the frames: median / largest |")
    print("|---|---:|" + "---:|" * len(angles) + "---:|---|")
    for r in rows:
        cells = " | ".join(f"{r['by_angle'][a]:.2f}" for a in angles)
        flag = "" if r["range_max"] < INVARIANT_POINTS else " (depends on the frame)"
        cone = f" ({r['cone']} cone)" if r["cone"] and not r["name"].endswith("cone") else ""
        led = "-" if r["ledger"] is None else f"{r['ledger']:.2f}"
        print(f"| {r['name']}{cone} | {led} | {cells} | {r['mean']:.2f} | "
              f"{r['range_median']:.2f} / {r['range_max']:.2f}{flag} |")
    print_pairs(ledger, rows)
    return 0


def print_pairs(ledger: dict, rows: list[dict]) -> None:
    """The ledger's paired position differences beside the same differences of the rows' errors averaged over the
    frames (per toss), where both rows were rebuilt."""
    from surrogate.metrics import paired_difference, signed_interval

    by_name = {r["name"]: r for r in rows}
    lines = []
    for name, row in ledger["models"].items():
        for d in row.get("paired") or []:
            ref = by_name.get(d["vs"])
            if d.get("metric") != "pos_pct_size" or ref is None or name not in by_name or d.get("mean") is None:
                continue
            avg = paired_difference(ref["per_toss"], by_name[name]["per_toss"], "pos_pct_size")
            lines.append(f"| {name} − {d['vs']} | {signed_interval(d['mean'], d['ci95'])} | "
                         f"{signed_interval(avg['mean'], avg['ci95'])} |")
    if lines:
        print("\n| paired, position points | the ledger (the recording's frame) | averaged over the frames |")
        print("|---|---|---|")
        print("\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
