"""Does training's gradient point where its loss goes down? (issue 24)

Training fits the law's parameters and the network by the gradient of a window loss (pose error plus the pad forces'
error) through one of two rollouts: the twin, whose hand follows the recorded joints (``data.hand: kinematic``), or
the hybrid stepper itself, the hand on its servos (``data.hand: actuated``, ``learn.actuated``: the stepper's values
with straight-through gradients). A gradient that does not match the loss it differentiates trains nothing, and a
training that then fails says nothing about the dynamics it trains in.

This compares, for each of the law's global parameters (log stiffness, damping and friction of the table and the pads),
the gradient that training computes with a central finite difference of the very same loss, evaluated by the same
rollout (values, not gradients: the stepper's own, for the actuated hand)::

    python eval/gradient_check.py DATASET CKPT --hand actuated --episodes 4 [--offset 0] [--step 0.02] [--out J.json]

It prints one row per parameter and the cosine between the two vectors. The windows are training's (frames and
stride as the ``grasps`` preset: 64 and 120), with the pad forces in the loss at its weight (0.5).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def window_loss_fn(model, capture, episodes, *, hand: str, frames: int = 64, stride: int = 120, substeps: int = 4,
                   margin: float = 0.005, rot_weight: float = 0.25, force_weight: float = 0.5):
    """(a function returning training's window loss of ``episodes``' windows under ``model``'s current parameters,
    the number of windows), ``hand`` as ``data.hand``."""
    from surrogate.learn.actuated import actuated_window_loss, episode_scene
    from surrogate.learn.objective import window_loss
    from surrogate.learn.windows import episode_windows, group_episodes
    from surrogate.sim.twin import Twin

    kw = dict(frames=frames, stride=stride, substeps=substeps, init_frames=5, with_force=True)
    if hand == "actuated":
        scenes, wins = [], []
        for e in episodes:
            s = episode_scene(e, capture.meta, margin=margin, substeps=substeps)
            ws = episode_windows(e, capture.meta, s, **kw)
            wins += ws
            scenes += [s] * len(ws)
        return (lambda: actuated_window_loss(scenes, model, wins, substeps=substeps, rot_weight=rot_weight,
                                             force_weight=force_weight)), len(wins)
    groups = group_episodes(list(episodes), capture.meta, margin=margin, substeps=substeps)
    twins = [Twin(g.scene) for g in groups]
    wins = [w for gi, g in enumerate(groups) for e in g.episodes
            for w in episode_windows(e, capture.meta, g.scene, group=gi, **kw)]
    return (lambda: window_loss(twins, model, wins, substeps=substeps, rot_weight=rot_weight,
                                force_weight=force_weight)), len(wins)


def gradient_check(loss, model, *, step: float = 0.02) -> list[dict]:
    """[{parameter, gradient, finite_difference}] for every element of the law's global parameters
    (``log_stiffness``, ``log_damping``, ``log_friction``: [surface, body] each): ``loss()``'s gradient by backward,
    and ``(loss(p + h) - loss(p - h)) / 2h`` with gradients on (the actuated rollout records its solves only then, and
    its pad forces come from those records) but never used."""
    import torch

    params = {k: getattr(model, k) for k in ("log_stiffness", "log_damping", "log_friction")}
    model.zero_grad()
    loss().backward()
    grads = {k: p.grad.detach().clone() for k, p in params.items()}
    rows = []
    for k, p in params.items():
        for i, group in enumerate(("table", "pads")):
            with torch.no_grad():
                p.view(-1)[i] += step
            up = float(loss().detach())
            with torch.no_grad():
                p.view(-1)[i] -= 2 * step
            down = float(loss().detach())
            with torch.no_grad():
                p.view(-1)[i] += step
            rows.append({"parameter": f"{k}[{group}]", "gradient": float(grads[k].view(-1)[i]),
                         "finite_difference": (up - down) / (2 * step)})
    return rows


def cosine(rows: list[dict]) -> float:
    """The cosine between the gradient and the finite-difference vector."""
    g = np.array([r["gradient"] for r in rows])
    f = np.array([r["finite_difference"] for r in rows])
    return float(g @ f / max(np.linalg.norm(g) * np.linalg.norm(f), 1e-300))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("checkpoint", help="a law checkpoint (its global parameters are checked)")
    ap.add_argument("--hand", choices=("kinematic", "actuated"), default="actuated")
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--offset", type=int, default=0, help="the first episode (in the dataset's order)")
    ap.add_argument("--step", type=float, default=0.02, help="finite-difference step in log space")
    ap.add_argument("--out", default=None, help="write the rows and the cosine as JSON")
    a = ap.parse_args(argv)
    import torch

    from surrogate.learn.episodes import load_capture
    from surrogate.model.checkpoint import load_checkpoint

    torch.set_num_threads(1)
    cap = load_capture(a.dataset)
    eps = cap.episodes[a.offset:a.offset + a.episodes]
    if not eps:
        print(f"{a.dataset}: no episodes from {a.offset}", file=sys.stderr)
        return 2
    model, _ = load_checkpoint(a.checkpoint)
    loss, n = window_loss_fn(model, cap, eps, hand=a.hand)
    rows = gradient_check(loss, model, step=a.step)
    print(f"{a.hand} hand, {n} windows of {len(eps)} episodes, step {a.step}")
    print(f"{'parameter':<24}{'gradient':>12}{'finite diff.':>14}")
    for r in rows:
        print(f"{r['parameter']:<24}{r['gradient']:>+12.4f}{r['finite_difference']:>+14.4f}")
    c = cosine(rows)
    print(f"cosine {c:+.3f}")
    if a.out:
        from surrogate.atomic import write_json_atomic

        write_json_atomic(a.out, {"hand": a.hand, "windows": n, "step": a.step, "rows": rows, "cosine": c})
    return 0


if __name__ == "__main__":
    sys.exit(main())
