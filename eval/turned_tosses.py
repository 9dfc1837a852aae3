"""Copies of DAIR Lab tosses turned about the vertical: a stand-in for a large hidden test set, and a frame check.

    python eval/turned_tosses.py SRC OUT [--copies 8] [--seed 7] [--shift 0.3]

Writes ``--copies`` copies of every ``N.pt`` in ``SRC`` into the new folder ``OUT`` as upstream files (the elbow's
[T, 13 + 2J] layout of a URDF object, or the cube's [1, T, 19] in half-widths), each turned by a random angle about
the vertical through the origin and shifted horizontally by up to ``--shift`` m: positions, orientations and
world-frame linear velocities move; body-frame angular velocities and joints do not. Copy ``c`` of toss ``N`` is
``100000 + 10 N + c`` (so ``--copies`` is at most 10). Every copy is the same toss in another frame: a model that
answers to the toss scores it as it scores the toss (`eval/frame_check.py` says which rows do), and no copy matches
a recording a suite's rows were trained on, so a suite scores them all (`docs/benchmarks.md`).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
import torch
from scipy.spatial.transform import Rotation

TOSS = re.compile(r"^(\d+)\.pt$")
CUBE_HALF_WIDTH_M = 0.0524  # the cube's files are in half-widths


def turn(a: np.ndarray, deg: float, shift_m: np.ndarray) -> np.ndarray:
    """One toss ``a`` turned by ``deg`` about the vertical and shifted by ``shift_m`` [2] (m): [1, T, 19] cube
    (position, quaternion w x y z, linear velocity, body rates, control) or [T, 13 + 2J] URDF object (quaternion,
    position, joints, body rates, linear velocity, joint rates)."""
    r = Rotation.from_euler("z", deg, degrees=True)
    b = np.array(a, dtype=np.float64, copy=True)
    if b.ndim == 3:  # the cube
        t = b[0]
        q, p, v, scale = slice(3, 7), slice(0, 3), slice(7, 10), CUBE_HALF_WIDTH_M
    else:
        t, J = b, (b.shape[1] - 13) // 2
        q, p, v, scale = slice(0, 4), slice(4, 7), slice(10 + J, 13 + J), 1.0
    t[:, q] = (r * Rotation.from_quat(t[:, q], scalar_first=True)).as_quat(scalar_first=True)
    t[:, p] = r.apply(t[:, p])
    t[:, p.start:p.start + 2] += np.asarray(shift_m) / scale
    t[:, v] = r.apply(t[:, v])
    return b


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", type=Path, help="a folder of upstream N.pt tosses")
    ap.add_argument("out", type=Path, help="a new folder")
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--shift", type=float, default=0.3, help="largest horizontal shift, m")
    args = ap.parse_args(argv)
    if not 1 <= args.copies <= 10:
        ap.error("--copies must be 1 to 10 (copy c of toss N is 100000 + 10 N + c)")
    if args.out.exists():
        ap.error(f"{args.out} exists: give a new folder (nothing is overwritten)")
    files = sorted((p for p in args.src.iterdir() if TOSS.match(p.name)), key=lambda p: int(p.stem))
    if not files:
        ap.error(f"{args.src}: no N.pt toss files")
    rng, tmp = np.random.default_rng(args.seed), args.out.with_name(args.out.name + ".partial")
    if tmp.exists():
        ap.error(f"{tmp} exists (an interrupted run's?): remove it or give another folder")
    tmp.mkdir(parents=True)
    for f in files:
        a = torch.load(f, weights_only=True).numpy()
        for c in range(args.copies):
            b = turn(a, rng.uniform(-180.0, 180.0), rng.uniform(-args.shift, args.shift, 2))
            torch.save(torch.from_numpy(b), tmp / f"{100000 + 10 * int(f.stem) + c}.pt")
    tmp.rename(args.out)  # all copies or none
    print(f"{len(files) * args.copies} turned copies of {len(files)} tosses in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
