"""System identification of MuJoCo's analytic contact on training episodes, and the
domain-randomized ensemble anchored on the identified values.

Identification is differential evolution (scipy) over friction, solref, solimp (and
optionally the mass), run once per friction-cone type; the cone with the lower training
loss wins. A quick independent check found the cone choice worth as much as the parameters
on the real cube tosses (docs/benchmarks.md, Baselines), so searching it is what makes the
baseline strong.

Loss: mean over episodes of (mean position error / object size) + (mean rotation error in
degrees) / 100 — i.e. 10 % of the object size weighs as much as 10 degrees.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.optimize import differential_evolution
from tqdm import tqdm

from ..metrics import geodesic_deg
from .analytic import AnalyticParams, TossSet, simulate_tosses

# Search space: (name, low, high, log-scale)
BOUNDS = [
    ("friction", 0.03, 1.5, True),
    ("timeconst", 0.003, 0.1, True),
    ("dampratio", 0.05, 2.0, False),
    ("d0", 0.5, 0.99, False),
    ("dwidth", 0.5, 0.999, False),
    ("width", 1e-4, 0.03, True),
]
MASS_BOUND = ("mass_scale", 0.6, 1.6, False)
DELAY_BOUND = ("delay_s", 0.0, 0.04, False)  # s of actuator latency (replays of commanded episodes)


def _space(fit_mass: bool, fit_delay: bool = False) -> list:
    return BOUNDS + ([MASS_BOUND] if fit_mass else []) + ([DELAY_BOUND] if fit_delay else [])


def _decode(x: np.ndarray, cone: str, fit_mass: bool, fit_delay: bool = False) -> AnalyticParams:
    v = {n: float(np.exp(xi) if lg else xi) for (n, _, _, lg), xi in zip(_space(fit_mass, fit_delay), x)}
    return AnalyticParams(friction=v["friction"], solref=(v["timeconst"], v["dampratio"]),
                          solimp=(v["d0"], v["dwidth"], v["width"]), cone=cone, mass_scale=v.get("mass_scale", 1.0),
                          delay_s=v.get("delay_s", 0.0))


def _bounds(fit_mass: bool, fit_delay: bool = False):
    return [(np.log(lo), np.log(hi)) if lg else (lo, hi) for _, lo, hi, lg in _space(fit_mass, fit_delay)]


def toss_errors(pred: np.ndarray, tosses: TossSet, size: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-episode mean position error (fraction of ``size``) and mean rotation error (deg).

    Args:
      pred: [P, N, F, 7] from ``simulate_tosses``.
    Returns:
      ([P, N], [P, N]).
    """
    P, N, F, _ = pred.shape
    pos = np.zeros((P, N))
    rot = np.zeros((P, N))
    for i, ep in enumerate(tosses.episodes):
        n = int(tosses.n_frames[i])
        true = ep.object_pose[:n]
        valid = np.ones(n, bool) if ep.object_pose_valid is None else ep.object_pose_valid.astype(bool)
        e_pos = np.linalg.norm(pred[:, i, :n, :3] - true[None, :, :3], axis=-1)
        e_rot = geodesic_deg(pred[:, i, :n, 3:7], true[None, :, 3:7])
        pos[:, i] = e_pos[:, valid].mean(axis=1) / size
        rot[:, i] = e_rot[:, valid].mean(axis=1)
    return pos, rot


UNSTABLE_LOSS = 1e3  # a parameter set whose rollout blew up (NaN) loses to every stable one


def loss_of(pos_frac: np.ndarray, rot_deg: np.ndarray) -> np.ndarray:
    """[P, N] errors -> [P] identification loss."""
    loss = pos_frac.mean(axis=1) + rot_deg.mean(axis=1) / 100.0
    return np.where(np.isfinite(loss), loss, UNSTABLE_LOSS)


def fit_params(evaluate, *, cones=("pyramidal", "elliptic"), fit_mass: bool = False, fit_delay: bool = False,
               maxiter: int = 20, popsize: int = 8, seed: int = 0, progress: bool = True,
               what: str = "identify") -> tuple[AnalyticParams, dict]:
    """Differential evolution over analytic contact parameters, once per cone type.

    Args:
      evaluate: ``f(list[AnalyticParams]) -> [P]`` losses (lower is better), called with a
        whole DE generation at once so that rollouts can be batched.
    Returns:
      (best parameters, info) with info = {"per_cone": {cone: {"params", "loss", "evaluations"}},
      "cone": chosen, "loss", "optimizer", "wall_s"}.
    """
    t0 = time.time()
    info = {"per_cone": {}, "optimizer": f"scipy differential_evolution (popsize {popsize}, maxiter {maxiter}, seed {seed})",
            "loss": None, "fit_mass": fit_mass, "fit_delay": fit_delay}
    best, best_loss = None, np.inf
    for cone in cones:
        evals = [0]
        bar = tqdm(total=maxiter + 1, desc=f"{what} ({cone})", unit="gen", disable=not progress)

        def f(X, cone=cone, evals=evals):
            X = X.reshape(-1, 1) if X.ndim == 1 else X  # scipy passes [ndim, S] when vectorized
            params = [_decode(X[:, s], cone, fit_mass, fit_delay) for s in range(X.shape[1])]
            evals[0] += len(params)
            return np.asarray(evaluate(params), dtype=float)

        def tick(*_a, bar=bar, **_k) -> None:
            # Returns None on purpose: scipy halts the search when the callback returns True, and
            # tqdm's update() returns True whenever it redraws -- which stopped every search after its
            # first generation (128 of 1344 evaluations on the cube tosses at popsize 8, maxiter 20).
            bar.update(1)

        res = differential_evolution(f, _bounds(fit_mass, fit_delay), maxiter=maxiter, popsize=popsize, seed=seed, tol=1e-3,
                                     polish=False, vectorized=True, updating="deferred", init="sobol", callback=tick)
        bar.close()
        p = _decode(res.x, cone, fit_mass, fit_delay)
        info["per_cone"][cone] = {"params": p.to_json(), "loss": float(res.fun), "evaluations": evals[0]}
        if res.fun < best_loss:
            best, best_loss = p, float(res.fun)
    info["cone"] = best.cone
    info["loss"] = best_loss
    info["wall_s"] = time.time() - t0
    return best, info


def _toss_errors_task(common: dict, params: list) -> tuple[np.ndarray, np.ndarray]:
    """One batch of a generation's candidates on the tosses (a task of ``identify``; ``toss_errors``)."""
    from ..parallel import task_cache
    from .predictors import object_scene

    t = common["tosses"]
    scene = task_cache(common["token"], common["key"],
                       lambda: object_scene(t.episodes[0], substeps=t.substeps, mode="analytic"))
    return toss_errors(simulate_tosses(scene, params, t, threads=common["threads"]), t, common["size"])


def identify(scene, tosses: TossSet, size: float, *, threads: int = 2, ex=None, **kw) -> tuple[AnalyticParams, dict]:
    """Fit analytic contact parameters to free-object ``tosses`` (``fit_params`` options in ``kw``).

    ``ex`` (a ``parallel.Executor``): each generation's candidates are evaluated as ``ex.workers``
    batches on its backend (a candidate's errors do not depend on its batch); Ray workers rebuild
    ``scene`` as ``predictors.object_scene(tosses.episodes[0], substeps=tosses.substeps,
    mode="analytic")``, the scene the suites identify in.
    """
    if ex is None or ex.backend == "local":
        def evaluate(params):
            pos, rot = toss_errors(simulate_tosses(scene, params, tosses, threads=threads), tosses, size)
            return loss_of(pos, rot)
    else:
        common = {"token": ex.token, "key": ("identify", time.time_ns()), "tosses": tosses, "size": size,
                  "threads": ex.threads}

        def evaluate(params):
            n = -(-len(params) // ex.workers)
            parts = ex.map(_toss_errors_task, [params[i:i + n] for i in range(0, len(params), n)], common=common,
                           progress=False)
            return loss_of(np.concatenate([p for p, _ in parts]), np.concatenate([r for _, r in parts]))

    params, info = fit_params(evaluate, **kw)
    info["episodes"] = len(tosses.episodes)
    return params, info


DEFAULT_RANGES = {"friction": (0.7, 1.3), "timeconst": (0.5, 2.0), "dampratio": (0.7, 1.3), "width": (0.5, 2.0),
                  "mass_scale": (0.9, 1.1), "delay_s": (-0.005, 0.005)}


def ensemble_ranges(ranges: dict | None = None) -> dict:
    """The randomization ranges an ensemble uses: ``DEFAULT_RANGES`` updated with a suite's ``ranges``."""
    return {**DEFAULT_RANGES, **{k: tuple(v) for k, v in (ranges or {}).items()}}


def shrunk_ranges(ranges: dict, factor: float = 0.5) -> dict:
    """``ranges`` pulled towards no change by ``factor`` (log-space for multiplicative ones, linear for the
    additive ``delay_s``): the ranges a stability pass falls back to when too many draws blow up."""
    out = {}
    for k, (lo, hi) in ranges.items():
        if k == "delay_s":
            out[k] = (lo * factor, hi * factor)
        else:
            out[k] = (float(np.exp(np.log(lo) * factor)), float(np.exp(np.log(hi) * factor)))
    return out


def stable_ensemble(center: AnalyticParams, *, n: int, seed: int, ranges: dict | None, stable, timestep: float,
                    rounds: int = 6) -> tuple[list[AnalyticParams], dict]:
    """The randomized ensemble a careful domain-randomization user runs: draws around ``center`` that MuJoCo
    integrates stably, checked before anything is scored.

    Every draw's solref time constant is bounded below by 2 x ``timestep`` (MuJoCo's stability rule for
    solref; below it MuJoCo's own safety clamp would silently make members identical). ``stable(params) ->
    [P] bool`` rolls candidates out on training episodes (never test ones) under the suites' blow-up rule;
    a candidate that blows up is rejected and redrawn; after every two rounds that leave the ensemble short,
    the ranges are halved (``shrunk_ranges``). After ``rounds`` rounds the ensemble keeps what passed (at
    least the centre).

    Returns:
      (members, info) with info = {"drawn", "rejected" (blew up on the training episodes), "shrunk" (times the
      ranges were halved), "ranges" (the final ones), "timeconst_min" (s), "checked_episodes"}.
    """
    r = ensemble_ranges(ranges)
    kept, drawn, rejected, shrunk = [], 0, 0, 0
    for k in range(rounds):
        if k and k % 2 == 0:
            r, shrunk = shrunk_ranges(r), shrunk + 1
        cand = randomized_ensemble(center, n=n, seed=seed + 1000 * k, ranges=r)
        for c in cand:
            c.solref = (max(float(c.solref[0]), 2.0 * timestep), float(c.solref[1]))
        drawn += len(cand)
        ok = [bool(x) for x in stable(cand)]
        rejected += ok.count(False)
        kept += [c for c, good in zip(cand, ok) if good][: n - len(kept)]
        if len(kept) >= n:
            break
    if not kept:
        kept = [center]
    info = {"drawn": drawn, "rejected": rejected, "shrunk": shrunk, "ranges": {k: [float(a), float(b)] for k, (a, b) in r.items()},
            "timeconst_min": 2.0 * timestep, "checked_episodes": getattr(stable, "episodes", None)}
    return kept, info


def randomized_ensemble(center: AnalyticParams, *, n: int = 16, seed: int = 0, ranges: dict | None = None) -> list[AnalyticParams]:
    """Domain-randomized parameter sets anchored on ``center`` (identified or measured values).

    ``ranges`` maps a parameter to a multiplicative range (lo, hi) around the centre
    (log-uniform for friction, timeconst and width; uniform otherwise). Defaults reflect
    what practitioners randomize: friction +-30 %, solref time constant x0.5-2, damping
    ratio +-30 %, solimp width x0.5-2, mass +-10 %, and an actuator latency of +-5 ms around the
    centre's (``delay_s`` is additive, in s, clipped at 0; it matters for commanded replays only).
    """
    r = ensemble_ranges(ranges)
    rng = np.random.default_rng(seed)

    def logu(lo, hi):
        return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))

    out = []
    for _ in range(n):
        out.append(AnalyticParams(
            friction=center.friction * logu(*r["friction"]),
            solref=(center.solref[0] * logu(*r["timeconst"]), center.solref[1] * rng.uniform(*r["dampratio"])),
            solimp=(center.solimp[0], center.solimp[1], center.solimp[2] * logu(*r["width"])),
            cone=center.cone,
            mass_scale=center.mass_scale * rng.uniform(*r["mass_scale"]),
            delay_s=max(0.0, center.delay_s + rng.uniform(*r["delay_s"])),
        ))
    return out
