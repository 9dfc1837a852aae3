"""``surrogate inspect``: what a capture dataset holds, for humans (text) or tools (JSON)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

from .capture import read_dataset
from .errors import SurrogateError
from .importers.floor_check import episode_warnings, rest_frames, rest_gap_warnings
from .importers.report import skipped_lines


def rest_height(ep) -> float | None:
    """Height (m) of the object's centre above the environment surface at the end of the episode, if it ends at rest
    on it (``floor_check.rest_frames``)."""
    idx = rest_frames(ep)
    return None if idx is None else float(np.median(ep.object_pose[idx, 2]) - ep.environment.height)


def _rest_warnings(episodes) -> list[str]:
    """``floor_check.rest_gap_warnings`` of each box or mesh object's episodes, as ``[object] warning`` (procedural
    objects are the rig's own, built as recorded; a mesh whose file is not here is passed over)."""
    from .scenes.from_capture import asset_from_spec

    by_object = {}
    for e in episodes:
        if isinstance(e.object.geometry, dict) and e.object.geometry.get("kind") in ("box", "mesh"):
            by_object.setdefault(e.object.name, []).append(e)
    out = []
    for name, eps in by_object.items():
        try:
            asset = asset_from_spec(eps[0].object)
        except SurrogateError:
            continue
        vertices = np.concatenate([np.asarray(p.vertices) for p in asset.pieces])
        out += [f"[{name}] {w}" for w in rest_gap_warnings(vertices, asset.size, eps)]
    return out


def _articulation(geo) -> dict:
    """An articulated object's links and joints (``{"links": [names], "joints": [[name, type]]}``); {} for a rigid one."""
    if not isinstance(geo, dict) or geo.get("kind") != "articulated":
        return {}
    return {"links": [lk.get("name") for lk in geo.get("links", [])],
            "joints": [[j.get("name"), j.get("type")] for j in geo.get("joints", [])]}


def summarize(root: str | Path) -> dict:
    """Summary dict of the dataset at ``root`` (the JSON ``inspect --json`` prints)."""
    ds = read_dataset(root, on_error="skip")
    eps = ds.episodes
    frames = np.array([e.num_frames for e in eps]) if eps else np.zeros(0, int)
    durations = np.array([e.duration for e in eps]) if eps else np.zeros(0)
    rates = [e.provenance.capture_rate_hz for e in eps]
    rests = [h for h in (rest_height(e) for e in eps) if h is not None]
    objects = Counter(e.object.name for e in eps)
    labels = Counter()
    for e in eps:
        for k, v in e.labels.items():
            if isinstance(v, bool) and v:
                labels[k] += 1
    fields = {
        key: {"dtype": f["dtype"], "shape": f["shape"],
              "units": ds.contact["features"].get(key, {}).get("units"),
              "frame": ds.contact["features"].get(key, {}).get("frame"),
              "evaluation_only": ds.contact["features"].get(key, {}).get("evaluation_only", False)}
        for key, f in ds.info["features"].items()
    }
    def stats(x):
        return None if len(x) == 0 else {"min": float(np.min(x)), "median": float(np.median(x)), "max": float(np.max(x))}
    return {
        "path": str(Path(root)),
        "name": ds.meta.name,
        "schema_version": ds.contact.get("schema_version"),
        "episodes": len(eps),
        "frames": int(frames.sum()),
        "duration_s": {"total": float(durations.sum()), **(stats(durations) or {})},
        "frames_per_episode": stats(frames),
        "rate_hz": float(np.median(rates)) if rates else None,
        "real": sorted({e.provenance.real for e in eps}),
        "sources": sorted({e.provenance.source for e in eps}),
        "fields": fields,
        "objects": [{"name": n, "episodes": c, "mass_kg": ds.episodes[[e.object.name for e in eps].index(n)].object.mass,
                     "size_m": ds.episodes[[e.object.name for e in eps].index(n)].object.size,
                     **_articulation(ds.episodes[[e.object.name for e in eps].index(n)].object.geometry)}
                    for n, c in sorted(objects.items())],
        "rest_height_m": None if not rests else {"episodes_at_rest": len(rests), "median": float(np.median(rests)),
                                                 "p10": float(np.percentile(rests, 10)), "p90": float(np.percentile(rests, 90))},
        "labels": dict(labels),
        "grasp_types": dict(Counter(str(e.grasp_type) for e in eps if e.grasp_type is not None)),
        "robot": _robot(ds.meta),
        "skipped": ds.skipped,
        # does each articulated object's URDF describe it? does each box or mesh object rest on its surface?
        "floor_warnings": episode_warnings(eps) + _rest_warnings(eps),
    }


def _robot(meta) -> dict | None:
    """The robot the dataset names: its name, recorded joints, and its MJCF and files if it carries them."""
    if meta.hand_name is None:
        return None
    return {"name": meta.hand_name, "joints": list(meta.joint_names or []), "mjcf": meta.hand.get("mjcf"),
            "files": sorted(meta.robot_files)}


def format_summary(s: dict) -> str:
    lines = [
        f"{s['path']}  ({s['name']}, capture schema {s['schema_version']})",
        f"episodes: {s['episodes']}   frames: {s['frames']}   rate: {s['rate_hz']:.4g} Hz" if s["rate_hz"] else f"episodes: {s['episodes']}",
    ]
    d = s["duration_s"]
    if "median" in d:
        lines.append(f"duration: {d['total']:.1f} s in all; per episode min {d['min']:.2f} / median {d['median']:.2f} / max {d['max']:.2f} s")
    lines.append(f"data: {'real' if s['real'] == [True] else 'generated' if s['real'] == [False] else 'real and generated'}; sources: {', '.join(s['sources'])}")
    lines.append("fields:")
    for k, f in s["fields"].items():
        units = "" if not f["units"] else " [" + ", ".join(dict.fromkeys(f["units"])) + "]"
        extra = " (evaluation only)" if f["evaluation_only"] else ""
        lines.append(f"  {k:34s} {f['dtype']:8s} {str(f['shape']):6s}{units}{extra}")
    lines.append("objects:")
    for o in s["objects"]:
        lines.append(f"  {o['name']:28s} {o['episodes']:5d} episodes   mass {o['mass_kg']:.3g} kg   size {o['size_m']:.3g} m"
                     + (f"   (base link) links {', '.join(o['links'])}; joints "
                        + ", ".join(f"{n} ({t})" for n, t in o["joints"]) if "links" in o else ""))
    if s["rest_height_m"]:
        r = s["rest_height_m"]
        lines.append(f"rest height above surface: median {r['median']:.4f} m (p10 {r['p10']:.4f}, p90 {r['p90']:.4f}) over {r['episodes_at_rest']} episodes ending at rest")
    if s["labels"]:
        lines.append("labels: " + ", ".join(f"{k} {v}/{s['episodes']}" for k, v in s["labels"].items()))
    r = s.get("robot")
    if r:
        lines.append(f"robot: {r['name']}, {len(r['joints'])} recorded joints"
                     + (f"; MJCF {r['mjcf']} with {len(r['files']) - 1} asset files" if r["mjcf"] else "; no MJCF"))
    if s["grasp_types"]:
        lines.append("grasp types: " + ", ".join(f"{k}: {v}" for k, v in s["grasp_types"].items()))
    lines += [f"warning: {w}" for w in s["floor_warnings"]]
    lines.append(f"skipped: {len(s['skipped'])}")
    lines += skipped_lines(s["skipped"], limit=len(s["skipped"]))  # the parts an entry has (no 'episode None')
    return "\n".join(lines)


def inspect(root, *, as_json: bool = False) -> str:
    s = summarize(root)
    return json.dumps(s, indent=2) if as_json else format_summary(s)
