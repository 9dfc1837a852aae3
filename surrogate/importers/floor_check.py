"""Does a URDF describe the object that was tossed? Its links, placed by the recorded poses and joint angles, must
stay out of the floor.

A recording of an articulated object tracks one link's pose and the joint angles; where the other links are comes
from the URDF (joint origins and axes, link shapes) and from the joint columns' sign and zero. If those do not match
the recording, nothing in the columns themselves is inconsistent, and the import succeeds: every model trained or
scored on it then meets a different object than the one tossed. The floor tells: a real link does not go through
it. On the shared elbow tosses (61, ``contactnets_elbow.urdf`` or ``contactnets_elbow_mesh.urdf``) no link goes more
than 12.3 mm below the floor's surface (5th percentile 6.3 mm: frames during impacts sink a few mm); with the hinge's
axis flipped, its zero turned by pi, its origin mirrored along the link or moved to link 1's other side, link 2 sinks
more than 20 mm in 18 to 41 of the 61 tosses (``docs/importers.md``). The check warns, it does not refuse: the
recording is imported as it is.
"""

from __future__ import annotations

import numpy as np

from ..quat import quat_to_mat

SINK_M = 0.02  # a link deeper than this below the floor is not a tracking error of a real link (12.3 mm at worst)
MISMATCH_SHARE = 0.2  # a link that sinks that far in more than this share of the tosses: the URDF does not match
MAX_TOSSES_LISTED = 10


def deepest_per_link(art, episode) -> tuple[np.ndarray, np.ndarray]:
    """[L] how far each link's lowest vertex goes below the floor over the toss (m; 0 if it never does) and [L] the
    frame of its lowest point. The floor is the episode's ground, at ``environment.height``."""
    floor = float(episode.environment.height)
    low = np.stack([v[..., 2].min(axis=1) for v in art.link_vertices(episode.object_pose, episode.object_joint_pos)])
    frame = low.argmin(axis=1)
    return np.maximum(0.0, floor - low.min(axis=1)), frame


def floor_warnings(art, episodes) -> list[str]:
    """Warnings when the URDF ``art`` and the recorded ``episodes`` disagree about where the links are: a link that
    sinks more than ``SINK_M`` below the floor in more than ``MISMATCH_SHARE`` of the tosses (the URDF or the joint
    columns' convention), otherwise each toss where a link does (a tracking glitch of that toss)."""
    if not episodes:
        return []
    rows = [(ep.episode_id, *deepest_per_link(art, ep)) for ep in episodes]
    depth = np.stack([d for _, d, _ in rows])  # [N, L]
    out = []
    for li, link in enumerate(art.links):
        sunk = depth[:, li] > SINK_M
        if sunk.mean() > MISMATCH_SHARE:
            out.append(f"link {link.name!r} sinks more than {SINK_M * 1e3:.0f} mm below the floor in {int(sunk.sum())} "
                       f"of {len(episodes)} tosses (median deepest {np.median(depth[:, li]) * 1e3:.1f} mm): the URDF's "
                       "joint origins, axes or link shapes, or the joint columns' sign or zero, do not match the "
                       "recording")
    if out:
        return out
    for toss, d, frame in rows:
        li = int(np.argmax(d))
        if d[li] > SINK_M:
            out.append(f"toss {toss}: link {art.links[li].name!r} sinks {d[li] * 1e3:.1f} mm below the floor at "
                       f"frame {int(frame[li])} (a tracking glitch?)")
    if len(out) > MAX_TOSSES_LISTED:
        out = out[:MAX_TOSSES_LISTED] + [f"... and {len(out) - MAX_TOSSES_LISTED} more tosses"]
    return out


def episode_warnings(episodes) -> list[str]:
    """``floor_warnings`` for the episodes of each articulated object among ``episodes`` (by name and URDF hash),
    each warning as ``[object] warning``; rigid objects' episodes are passed over."""
    from ..objects.articulated import articulation_from_json

    by_object = {}
    for e in episodes:
        geo = e.object.geometry
        if isinstance(geo, dict) and geo.get("kind") == "articulated" and e.object_joint_pos is not None:
            by_object.setdefault((e.object.name, geo.get("sha256", "")), []).append(e)
    return [f"[{name}] {w}" for (name, _), eps in by_object.items()
            for w in floor_warnings(articulation_from_json(eps[0].object.geometry), eps)]


# -- rigid objects at rest: on their surface? -------------------------------------------------------------------------
REST_SPEED = 0.05  # m/s: below this over the last frames an object counts as at rest
REST_FRAMES = 10
HELD_RISE = 0.01  # m: an object still that ends this much above where it started is held (lifted), not resting
# at rest, a tracked object's lowest point lies within this of its surface (m, or this share of its size if larger);
# positions in another unit than declared, or a wrong surface height, put it centimetres inside or above
REST_GAP_M, REST_GAP_SIZE = 0.005, 0.1


def rest_frames(ep) -> np.ndarray | None:
    """[n] the last frames of ``ep`` if it ends at rest on its surface (mean speed over the last REST_FRAMES frames
    below REST_SPEED, and not HELD_RISE above its first frame: a grasp that ends with the object held still in the
    air is no rest on the surface); None otherwise."""
    n = min(REST_FRAMES, ep.num_frames - 1)
    if n < 2 or ep.environment.kind == "none":
        return None
    idx = np.arange(ep.num_frames - n - 1, ep.num_frames)
    p = ep.object_pose[idx, :3]
    speed = np.linalg.norm(np.diff(p, axis=0), axis=1) / np.diff(ep.timestamps[idx])
    if speed.mean() >= REST_SPEED or float(np.median(p[:, 2])) > float(ep.object_pose[0, 2]) + HELD_RISE:
        return None
    return idx


def rest_gap(vertices: np.ndarray, ep) -> float | None:
    """Height (m) of a rigid object's lowest point above ``ep``'s surface, median over its rest frames
    (``rest_frames``; None when it does not end at rest). ``vertices``: [V, 3] of its shape in the body frame."""
    idx = rest_frames(ep)
    if idx is None:
        return None
    pose = ep.object_pose[idx]
    low = (np.einsum("tij,vj->tvi", quat_to_mat(pose[:, 3:7]), vertices)[..., 2] + pose[:, None, 2]).min(axis=1)
    return float(np.median(low) - ep.environment.height)


def rest_gap_warnings(vertices: np.ndarray, size: float, episodes) -> list[str]:
    """Warnings where episodes of a rigid object (``vertices`` [V, 3] in its body frame, ``size`` m) end at rest but
    not on their surface: its lowest point more than max(REST_GAP_M, REST_GAP_SIZE x size) inside or above it. One
    warning when more than MISMATCH_SHARE of them do (the units of the positions, or the surface's height), else one
    per episode."""
    gaps = [(ep.episode_id, g) for ep in episodes if (g := rest_gap(vertices, ep)) is not None]
    tol = max(REST_GAP_M, REST_GAP_SIZE * float(size))
    bad = [(i, g) for i, g in gaps if abs(g) > tol]
    if not bad:
        return []
    if len(bad) > MISMATCH_SHARE * len(gaps):
        med = float(np.median([g for _, g in bad]))
        return [f"at rest, the object's lowest point lies {abs(med) * 1e3:.1f} mm {'inside' if med < 0 else 'above'} "
                f"its surface (median) in {len(bad)} of the {len(gaps)} episodes that end at rest (more than "
                f"{tol * 1e3:.0f} mm): positions in another unit than declared (units.length), the surface's height, "
                "or the tracked frame"]
    out = [f"episode {i}: at rest {abs(g) * 1e3:.1f} mm {'inside' if g < 0 else 'above'} its surface" for i, g in bad]
    return out[:MAX_TOSSES_LISTED] + ([f"... and {len(out) - MAX_TOSSES_LISTED} more"] if len(out) > MAX_TOSSES_LISTED
                                      else [])
