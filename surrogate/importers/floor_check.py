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
