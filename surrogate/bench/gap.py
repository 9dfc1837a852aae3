"""``surrogate rig gap``: how far the rig's physics is from MuJoCo's analytic family.

For each variant of the rig (all effects off, each effect alone, all on) the study records
grasp episodes, fits MuJoCo's analytic contact (friction, solref, solimp, friction cone and
the object's mass) to them by differential evolution (replaying the recorded commands in the
same scene), and reports the residual pose error of the best fit. The rig's repeatability is
the error between two recordings of the same physics with independent sensor noise: a residual
clearly above it is a gap that no tuning of MuJoCo's parameters closes; one at its level means
tuned MuJoCo reproduces the rig as well as a second recording does.
"""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path

import numpy as np

from ..atomic import write_json_atomic, write_text_atomic
from ..metrics import geodesic_deg
from .replay import identify_replays, prepare_replay, replay_errors, simulate_replay
from ..capture import read_dataset
from ..rig.config import effect_names, load_rig_config, only_effect
from ..rig.generate import generate

log = logging.getLogger(__name__)


def repeatability(a, b) -> tuple[float, float]:
    """Mean position (m) and rotation (deg) difference between two recordings of one episode
    (frames tracked in both)."""
    n = min(a.num_frames, b.num_frames)
    v = np.ones(n, bool)
    for e in (a, b):
        if e.object_pose_valid is not None:
            v &= e.object_pose_valid[:n].astype(bool)
    pa, pb = a.object_pose[:n][v], b.object_pose[:n][v]
    return float(np.linalg.norm(pa[:, :3] - pb[:, :3], axis=1).mean()), float(geodesic_deg(pa[:, 3:], pb[:, 3:]).mean())


def variants(cfg: dict) -> dict:
    out = {"all_off": only_effect(cfg, None)}
    for name in effect_names():
        out[name] = only_effect(cfg, name)
    out["all_on"] = cfg
    return out


def study(config=None, *, objects: str = "train", episodes: int = 6, hand: str = "parallel_jaw", duration: float = 3.0,
          seed: int = 0, workers: int = 2, maxiter: int = 5, popsize: int = 5, only=None, work_dir=None,
          progress: bool = True) -> dict:
    """Run the gap study; returns {"rows": [...], "settings": {...}}."""
    t0 = time.time()
    base = load_rig_config(config)
    work = Path(work_dir or tempfile.mkdtemp(prefix="rig-gap-"))
    rows = []
    for name, cfg in variants(base).items():
        if only and name not in only:
            continue
        recs = {}
        for tag, noise_seed in (("a", None), ("b", 1)):
            out = work / f"{name}-{tag}"
            generate(cfg, objects=objects, episodes=episodes, out=out, workers=workers, seed=seed, hand=hand,
                     duration=duration, noise_seed=noise_seed, progress=progress, overwrite=True)
            recs[tag] = read_dataset(out)
        eps_a = recs["a"].episodes
        eps_b = {e.episode_id: e for e in recs["b"].episodes}
        rep = [repeatability(e, eps_b[e.episode_id]) for e in eps_a if e.episode_id in eps_b]
        replays = [prepare_replay(e, recs["a"].meta) for e in eps_a]
        params, info = identify_replays(replays, fit_mass=True, maxiter=maxiter, popsize=popsize, seed=seed,
                                        progress=progress, what=f"fit {name}")
        pos, rot = [], []
        for r in replays:
            e_pos, e_rot = replay_errors(simulate_replay(r, [params]), r.episode)  # fraction of size, deg
            pos.append(float(e_pos[0]) * r.episode.object.size)
            rot.append(float(e_rot[0]))
        row = {
            "variant": name, "episodes": len(replays),
            "residual_pos_mm": 1e3 * float(np.mean(pos)), "residual_rot_deg": float(np.mean(rot)),
            "repeat_pos_mm": 1e3 * float(np.mean([r[0] for r in rep])), "repeat_rot_deg": float(np.mean([r[1] for r in rep])),
            "fitted": params.to_json(), "fit": {k: v for k, v in info.items() if k != "per_cone"} | {
                "per_cone_loss": {c: v["loss"] for c, v in info["per_cone"].items()}},
        }
        row["ratio_pos"] = row["residual_pos_mm"] / max(row["repeat_pos_mm"], 1e-9)
        rows.append(row)
        log.info(format_row(row))
    return {"rows": rows, "settings": {"objects": objects, "episodes": episodes, "hand": hand, "duration_s": duration,
                                       "seed": seed, "maxiter": maxiter, "popsize": popsize, "wall_s": time.time() - t0}}


HEADER = ("| rig variant | residual position, mm | residual rotation, deg | repeatability position, mm | "
          "repeatability rotation, deg | residual / repeatability (position) | fitted cone, friction, mass scale |\n"
          "|---|---|---|---|---|---|---|")


def format_row(r: dict) -> str:
    f = r["fitted"]
    return (f"| {r['variant']} | {r['residual_pos_mm']:.1f} | {r['residual_rot_deg']:.1f} | {r['repeat_pos_mm']:.2f} | "
            f"{r['repeat_rot_deg']:.2f} | {r['ratio_pos']:.1f}x | {f['cone']}, {f['friction']:.2f}, {f['mass_scale']:.2f} |")


def write_study(result: dict, out: str | Path) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "gap.json", result)
    s = result["settings"]
    md = [f"Rig gap study: {s['episodes']} {s['hand']} episodes of {s['duration_s']} s over split `{s['objects']}` per variant, "
          f"MuJoCo fitted by differential evolution (popsize {s['popsize']}, maxiter {s['maxiter']}) over friction, solref, "
          f"solimp, cone and mass; {s['wall_s'] / 60:.1f} min.", "", HEADER] + [format_row(r) for r in result["rows"]]
    path = out / "gap.md"
    write_text_atomic(path, "\n".join(md) + "\n")
    return path
