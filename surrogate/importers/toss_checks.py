"""What a folder of tosses says about its own time step and gravity, checked against the experiment's values.

The tosses' velocity columns are backward differences of their positions, so each toss implies its time step
(``check_dt``); their free flight implies gravity (``check_gravity``). A value the tosses contradict would make every
velocity, acceleration or contact force derived from them wrong.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from ..errors import CaptureError
from ..estimate import FREE_FLIGHT_TOL, FREE_FLIGHT_WINDOW, free_flight_start

EXPERIMENT = "experiment.json"
# relative: the velocities in the files are backward differences of the positions, so each toss implies its step to
# 0.3 % (the cube's 450) or 1.1 % (the elbow's 541, ``_implied_dt``); at 0.5 a rate off by 2x passed
DT_TOLERANCE = 0.1
# relative: the cube's tosses imply gravity (median over tosses of a parabola fitted to each one's first frames) 2 %
# below experiment.json's 187.2 half-widths/s^2 (AprilTag tracking, a few tosses still held); a value in m/s^2 by
# mistake (9.81) is 95 % off
G_TOLERANCE = 0.25


def _implied_dt(a: np.ndarray, pos: int = 0, vel: int = 7) -> float | None:
    """The time step the toss's own velocities imply (they are backward differences of its positions, columns
    ``pos:pos+3`` and ``vel:vel+3``): the median of each frame's least-squares step (dp . v / v . v) weighted by v . v
    (the weights of one least-squares fit over all frames, whose mean it replaces); None when the object hardly
    moves. A median, because a few frames where the tracker jitters while the velocity column lags a frame (1-3 cm at
    an impact in three of the elbow's 541 tosses) pulled the fit 11 % off, and those 148 Hz tosses were skipped as
    165 Hz ones; weighted, so that a long rest's noisy frames do not outvote the flight (an unweighted median let
    some tosses decimated by 3 pass as 148 Hz)."""
    dp, v = np.diff(a[:, pos:pos + 3], axis=0), a[1:, vel:vel + 3]
    if len(v) < 2 or not (np.isfinite(dp).all() and np.isfinite(v).all()):  # a bad toss, skipped by name later
        return None
    vv = (v * v).sum(axis=1)
    if float(vv.sum()) < 1e-6 * len(v):
        return None
    moving = vv > 0
    step, weight = (dp[moving] * v[moving]).sum(axis=1) / vv[moving], vv[moving]
    order = np.argsort(step)
    cumulative = np.cumsum(weight[order])
    d = float(step[order][np.searchsorted(cumulative, 0.5 * cumulative[-1])])
    return d if math.isfinite(d) else None


def check_dt(params: dict, arrays: list, *, pos: int = 0, vel: int = 7) -> None:
    """Stop if ``dt`` contradicts the tosses ``arrays`` as a whole (e.g. dt = 1 s for 148 Hz data: every velocity and
    acceleration would be off by 148x): their median implied step must be within DT_TOLERANCE of it."""
    implied = [d for d in (_implied_dt(a, pos, vel) for a in arrays) if d is not None and d > 0]
    if not implied:
        return
    med, dt = float(np.median(implied)), float(params["dt"])
    if abs(dt / med - 1.0) > DT_TOLERANCE:
        raise CaptureError(f"dt = {dt:g} s contradicts the tosses: their velocities (backward differences of the "
                           f"positions) imply dt = {med:.6g} s ({1.0 / med:.4g} Hz)",
                           file=params.get("file", EXPERIMENT), field="dt")


def check_toss_dt(a: np.ndarray, dt: float, *, file, episode, pos: int = 0, vel: int = 7) -> None:
    """Stop (the toss is skipped) if this toss's own velocities imply a step more than DT_TOLERANCE off ``dt``, the
    dataset's: a toss recorded or decimated at another rate would be imported at the dataset's. A toss that hardly
    moves implies nothing. Run after the episode's validation, which names absurd values more precisely."""
    d = _implied_dt(a, pos, vel)
    if d is not None and (d <= 0 or abs(dt / d - 1.0) > DT_TOLERANCE):
        hz = f" ({1.0 / d:.4g} Hz)" if d > 0 else ""
        raise CaptureError(f"its velocities (backward differences of its positions) imply a step of {d:.6g} s{hz}, "
                           f"not the dataset's {dt:.6g} s ({1.0 / dt:.4g} Hz): a toss at another rate",
                           file=file, episode=episode, field="linear_velocity")


def check_gravity(params: dict, arrays: list, *, unit: tuple[str, float], pos: int = 0) -> None:
    """Stop if ``params["g"]`` contradicts the tosses' free flight by more than G_TOLERANCE (relative).

    Each toss of at least FREE_FLIGHT_WINDOW frames implies the size of gravity as ``estimate.free_flight_start``
    measures it (a parabola fitted to its first frames, positions columns ``pos:pos+3``, steps ``params["dt"]``);
    their median is compared. ``unit``: (name, metres per unit) of the files' lengths, for the message."""
    dt, g = float(params["dt"]), float(params["g"])
    implied = []
    for a in arrays:
        if len(a) >= FREE_FLIGHT_WINDOW and np.isfinite(a[:, pos:pos + 3]).all():
            toss = SimpleNamespace(timestamps=np.arange(len(a)) * dt, object_pose=a[:, pos:pos + 3], num_frames=len(a))
            implied.append(free_flight_start(toss, max_start=0, gravity=np.zeros(3))["accel_dev0"])
    if not implied:
        return
    med = float(np.median(implied))
    if med > 0 and abs(g / med - 1.0) <= G_TOLERANCE:
        return
    name, metres = unit
    raise CaptureError(f"g = {g:g} {name} ({g * metres:.3g} m/s^2) contradicts the tosses: their free flight (a "
                       f"parabola fitted to each toss's first {FREE_FLIGHT_WINDOW} frames, median over {len(implied)} "
                       f"tosses) implies g = {med:.4g} {name} ({med * metres:.3g} m/s^2); g is in {name}",
                       file=params.get("file", EXPERIMENT), field="g")


# per frame: a toss's velocity column is the backward difference of its positions, so each moving frame's own step
# (dp . v / v . v) is the dataset's dt. On the cube's 555 real tosses (ContactNets' and dair_pll's copies) every frame
# faster than FAST_MPS lies within 0.78-1.15 steps; a dropped frame reads 2, a repeated one 0
FAST_MPS = 0.3
STEP_TOLERANCE = 0.5
MOVING_MPS = 0.05  # a frame whose position repeats the last one exactly while its velocity is above this: a copy


def check_toss_frames(a: np.ndarray, dt: float, *, file, episode, metres: float = 1.0, pos: int = 0, vel: int = 7,
                      steps: bool = True) -> None:
    """Stop (the toss is skipped) at the first frame that repeats the previous frame's position exactly while its
    velocity says it moves (a duplicated frame: none of 1,096 real cube and elbow tosses has one), and, with
    ``steps``, at the first frame faster than FAST_MPS whose own step is more than STEP_TOLERANCE off ``dt`` (a
    dropped or repeated frame: every later frame would be stamped at the wrong time). ``a`` [T, n]: positions in
    columns ``pos:pos+3`` and linear velocities in ``vel:vel+3``, in units of ``metres``. The elbow's velocities are
    not per-frame differences (131 of its 541 tosses have a fast frame off by more than half a step, at impacts), so
    its import checks repeats only (``steps`` False)."""
    dp, v = np.diff(a[:, pos:pos + 3], axis=0), a[1:, vel:vel + 3]
    speed = np.linalg.norm(v, axis=1) * metres
    repeat = np.flatnonzero((dp == 0).all(axis=1) & (speed > MOVING_MPS))
    if repeat.size:
        k = int(repeat[0]) + 1
        raise CaptureError(f"frame {k} repeats frame {k - 1}'s position exactly while its velocity is "
                           f"{speed[k - 1]:.2f} m/s: a duplicated frame", file=file, episode=episode, field="position")
    if not steps:
        return
    fast = speed > FAST_MPS
    ratio = (dp * v).sum(axis=1) / np.maximum((v * v).sum(axis=1), 1e-300) / dt
    off = np.flatnonzero(fast & (np.abs(ratio - 1.0) > STEP_TOLERANCE))
    if off.size:
        k = int(off[0]) + 1
        raise CaptureError(f"frame {k}: its position moved {ratio[k - 1]:.2f} steps of {dt:.6g} s at its velocity "
                           f"(the velocities are backward differences of the positions): a dropped or repeated frame",
                           file=file, episode=episode, field="linear_velocity")


def check_toss_gravity(ep, *, file) -> None:
    """Stop (the toss is skipped) if no part of a rigid object's toss falls at its gravity: every window of
    FREE_FLIGHT_WINDOW frames fits an acceleration farther than FREE_FLIGHT_TOL from ``ep``'s gravity. A toss in
    another length unit than the dataset's falls at that unit's gravity (a cube toss in mm read as half-widths: 52x;
    in metres: 1/19x), and its velocities may still be under the validator's bound. On the cube's 555 real tosses
    the best window lies within 4.1 m/s^2 (median 0.19). A toss too short for a window is not checked."""
    W, t, p = FREE_FLIGHT_WINDOW, ep.timestamps, ep.object_pose[:, :3]
    if ep.num_frames < W:
        return
    g = np.asarray(ep.environment.gravity, float)
    A = np.vander(t[:W] - t[0], 3, increasing=True)
    windows = np.lib.stride_tricks.sliding_window_view(p, W, axis=0)  # [T - W + 1, 3, W]
    coef = np.linalg.lstsq(A, windows.transpose(2, 1, 0).reshape(W, -1), rcond=None)[0]  # [3, 3 (T - W + 1)]
    accel = 2.0 * coef[2].reshape(3, -1).T  # [T - W + 1, 3]
    dev = np.linalg.norm(accel - g, axis=1)
    best = int(np.argmin(dev))
    if dev[best] > FREE_FLIGHT_TOL:
        a, gn = np.linalg.norm(accel[best]), np.linalg.norm(g)
        raise CaptureError(f"no part of the toss falls at gravity ({gn:.3g} m/s^2): the closest {W}-frame window "
                           f"(from frame {best}) accelerates at {a:.3g} m/s^2, {a / gn:.3g}x gravity: its lengths are "
                           "in another unit than the dataset's?", file=file, episode=ep.episode_id, field="position")
