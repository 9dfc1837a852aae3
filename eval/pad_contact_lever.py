"""Where a learned model's grip resists turning: the contact points MuJoCo gives each pad-object pair, and their lever.

The hybrid stepper applies the contact law at MuJoCo's contact points. Between a pad (a box) and an object's flat or
gently curved side, MuJoCo's collision clips the two faces and returns several points near the pad's corners, so
friction at those points resists a turn about the pad normal with a lever of about the pad's half width, at any
load. The capture rig's pads transmit torsion through a soft patch instead (``rig/effects/soft_finger_torsion``:
tau_max = 3 pi / 16 mu N a, a = 3-5 mm at 1 N, growing as N^0.2-0.33, at most the pad's 10 mm half width), whose
lever (3 pi / 16) a is 2-6 mm. This study replays grasps of a capture dataset with a checkpoint (the suites' replay)
and, halfway through each, counts the points per pad-object pair and their mean distance from their centroid:

    python eval/pad_contact_lever.py DATASET --checkpoint checkpoints/rig_default --episodes 60

It prints, per object family (the object's name without its seed suffix; the first ``--families``), the pairs seen,
the points per pair (median, min, max) and the median lever in mm, then the same over all pairs.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys

import mujoco
import numpy as np


def pad_levers(dataset, checkpoint, *, episodes: int, at: float = 0.5) -> dict:
    """{family: [(points, lever m)] per pad-object pair} at fraction ``at`` of each of ``episodes`` grasps spread
    over the dataset, replayed with ``checkpoint`` (``bench.replay.replay_with_model``)."""
    from surrogate.bench.replay import replay_with_model
    from surrogate.capture import read_dataset
    from surrogate.model.checkpoint import load_checkpoint

    ds = read_dataset(dataset)
    model, _ = load_checkpoint(checkpoint)
    eps = ds.episodes[:: max(1, len(ds.episodes) // episodes)][:episodes]
    out = collections.defaultdict(list)
    for ep in eps:
        r, q, _, _ = replay_with_model(ep, ds.meta, model, substeps=4, margin=0.005)
        m, d, ob = r.scene.model, mujoco.MjData(r.scene.model), r.scene.object_body_id
        d.qpos[:] = q[int(at * (len(q) - 1))]
        mujoco.mj_forward(m, d)
        per = collections.defaultdict(list)
        for c in d.contact[: d.ncon]:
            b1, b2 = m.geom_bodyid[c.geom1], m.geom_bodyid[c.geom2]
            other = b2 if b1 == ob else b1 if b2 == ob else None
            name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, other) if other is not None else None
            if name and name.startswith("pad"):
                per[name].append(np.array(c.pos))
        for pts in per.values():
            P = np.array(pts)
            out[re.sub(r"_s?\d+$", "", ep.object.name)].append((len(P), float(np.linalg.norm(P - P.mean(0), axis=1).mean())))
    return dict(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", help="a capture dataset of grasps (e.g. a suite's cached test set)")
    p.add_argument("--checkpoint", default="checkpoints/rig_default")
    p.add_argument("--episodes", type=int, default=60, help="grasps, spread over the dataset (default 60)")
    p.add_argument("--families", type=int, default=20, help="rows of families printed before the total (default 20)")
    a = p.parse_args(argv)
    rows = pad_levers(a.dataset, a.checkpoint, episodes=a.episodes)
    print("family              pairs  points per pair: median (min, max)  lever mm: median")
    everything = [x for v in rows.values() for x in v]
    for fam, v in [*sorted(rows.items())[: a.families], ("(all)", everything)]:
        n, lever = [k for k, _ in v], [x for _, x in v]
        print(f"{fam:18s} {len(v):6d}  {np.median(n):5.0f} ({min(n)}, {max(n)})  {1e3 * np.median(lever):18.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
