"""Stretches of a recorded toss: from its free-flight start, and around its first floor impact.

Why impact windows: a few-shot fit on 8-16 real tosses of the whole toss learns which tosses it saw. After the first
impact every model's rollout parts from the recording (chaotically: an edge lands a little earlier, the object turns
the other way), so the whole-toss loss is decided by where each training toss happened to go. On four folds of the
elbow's few-shot pool (``eval/elbow_fewshot_folds.py``, the thirty-sixth session) neither MuJoCo identified nor the
law fitted on whole tosses carried to the pool's other tosses; both fitted on these windows were below the release
there in three or four folds of four. A window starts ``lead`` frames before the recording's first impact (the
suite's first-state estimate reads the last free-flight frames before it) and ends ``after_s`` after it: the impact,
what a handful of tosses can pin down.
"""

from __future__ import annotations

import dataclasses

import numpy as np

TOUCH_M = 0.02  # the lowest vertex within this of the floor: the frames where the first impact is looked for
SETTLE = 4  # frames after the first touch in which the impact's lowest frame is looked for
LEAD_FRAMES = 7  # a window starts this many frames before the impact: the first-state estimate's 5 and 2 to spare
AFTER_S = 0.1  # and ends this long after it
TOSS_FIELDS = ("timestamps", "object_pose", "object_pose_valid", "object_twist", "object_joint_pos",
               "object_joint_vel")


def toss_stretch(ep, start: int, stop: int | None = None, labels: dict | None = None):
    """``ep``'s frames ``start:stop`` (every per-frame field of a toss), ``labels`` added to its own."""
    keep = slice(int(start), None if stop is None else int(stop))
    cut = {f: None if getattr(ep, f) is None else getattr(ep, f)[keep] for f in TOSS_FIELDS}
    return dataclasses.replace(ep, **cut, labels={**ep.labels, **(labels or {})})


def corner_points(art, base_pose: np.ndarray, joints: np.ndarray) -> np.ndarray:
    """[T, P, 3] every vertex of every link's collision pieces in the world (m), from an ``Articulation``'s base link
    pose [T, 7] and its joint coordinates [T, J]."""
    return np.concatenate(art.link_vertices(base_pose, joints), axis=1)


def first_impact(lowest: np.ndarray, touch_m: float = TOUCH_M, settle: int = SETTLE) -> int | None:
    """The frame of the first impact: the lowest of the ``settle`` frames from the first one whose lowest point
    [T] (m, the floor at 0) is within ``touch_m`` of the floor (at 148 Hz a falling corner moves ~1 cm a frame, so the
    touch itself falls between frames); None if the object never comes that close."""
    near = np.flatnonzero(lowest <= touch_m)
    if not len(near):
        return None
    i = int(near[0])
    return i + int(np.argmin(lowest[i:i + settle]))


def impact_window(ep, art, *, lead: int, after: int):
    """``ep`` from ``lead`` frames before its first impact to ``after`` frames after it (labels ``window_start`` and
    ``first_impact``, frames of ``ep``) and None, or ``(None, why)`` where it has no impact or its impact comes
    fewer than ``lead`` frames after its start."""
    i = first_impact(corner_points(art, ep.object_pose, ep.object_joint_pos)[..., 2].min(axis=1))
    if i is None:
        return None, f"no vertex comes within {TOUCH_M} m of the floor"
    if i - lead < 0:
        return None, f"its first impact (frame {i}) comes fewer than {lead} frames after its start"
    return toss_stretch(ep, i - lead, i + after + 1, {"window_start": i - lead, "first_impact": i}), None


def impact_windows(episodes: list, *, lead: int = LEAD_FRAMES, after_s: float = AFTER_S,
                   init_frames: int = 5) -> tuple[list, dict]:
    """(the windows of ``episodes`` (``impact_window``), {episode id: why it has none}) for tosses of one articulated
    object (its ``ObjectSpec.geometry``); ``after_s`` at each toss's capture rate."""
    from ..objects.articulated import articulation_from_json

    if lead < init_frames + 2:
        raise ValueError(f"an impact window's lead ({lead} frames) must leave init_frames + 2 = {init_frames + 2} "
                         "frames of flight for the first-state estimate")
    if not episodes:
        return [], {}
    if episodes[0].object_joint_pos is None or episodes[0].object.geometry.get("kind") != "articulated":
        raise ValueError(f"impact windows need tosses of an articulated object; episode {episodes[0].episode_id} "
                         f"has geometry {episodes[0].object.geometry.get('kind')!r}")
    art = articulation_from_json(episodes[0].object.geometry)
    out, skipped = [], {}
    for ep in episodes:
        after = int(round(after_s * ep.provenance.capture_rate_hz))
        w, why = impact_window(ep, art, lead=lead, after=after)
        if w is None:
            skipped[str(ep.episode_id)] = why
        else:
            out.append(w)
    return out, skipped
