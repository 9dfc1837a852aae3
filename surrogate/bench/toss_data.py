"""The toss suites' data: a capture dataset as it is, or raw DAIR Lab tosses imported once into the cache.

``cube-real`` and ``elbow-real`` read their training tosses (``data.source``, ``cube.source``) and their
``--test-data`` through ``load_tosses``, so a folder of upstream ``N.pt`` files works wherever a capture dataset
does. The cache entry is named by the source's content (``importers.contactnets.source_fingerprint``) and, for a URDF
object, by the URDF's bytes: another folder of the same name, or the same folder with tosses added, is imported
afresh rather than served the tosses of the first.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from ..capture import read_dataset
from ..config import expand_env
from ..errors import CaptureError, ConfigError
from .testsets import as_paths, describe, keyed, long_enough, set_names


def is_capture_dataset(path: Path) -> bool:
    return (Path(path) / "meta" / "contact.json").exists()


def cache_entry(src: Path, cache_dir: Path, urdf: Path | None = None) -> Path:
    """Where the import of ``src`` (with ``urdf``) lives in ``cache_dir``: ``<name>[_urdf]-<12 hex of the content and
    the importers' ``IMPORT_VERSION``>``."""
    from ..importers.contactnets import IMPORT_VERSION, source_fingerprint

    h = hashlib.sha256(f"{source_fingerprint(src)} import {IMPORT_VERSION}".encode())
    if urdf is not None:
        try:
            h.update(Path(urdf).read_bytes())
        except OSError as e:
            raise CaptureError(f"cannot read the URDF ({e.strerror or e})", file=urdf) from None
    return Path(cache_dir) / f"{Path(src).name}{'_urdf' if urdf is not None else ''}-{h.hexdigest()[:12]}"


def load_tosses(source, *, cache_dir: Path, urdf=None, progress: bool = True, key: str = "data.source"):
    """The ``CaptureDataset`` at ``source`` (``${VAR}`` expanded): read as it is when it is a capture dataset, else the
    DAIR tosses there (a folder or archive of ``N.pt``; ``urdf``: of that URDF object, else the cube) imported into
    the cache on first use, bad files skipped and listed in its ``skipped``. ``key``: the setting named by errors."""
    src = Path(expand_env(str(source), key=key))
    if is_capture_dataset(src):
        return read_dataset(src)
    from ..importers.contactnets import import_contactnets

    urdf = None if urdf is None else Path(expand_env(str(urdf), key="data.urdf"))
    target = cache_entry(src, cache_dir, urdf)
    if not is_capture_dataset(target):
        try:
            import_contactnets(src, target, overwrite=True, progress=progress, urdf=urdf)
        except CaptureError as e:  # the cache folder is this suite's: the user's folder is the one to name
            if e.file is None or Path(e.file) != target:
                raise
            raise CaptureError(e.reason, file=src, field=key) from None
    return read_dataset(target)


def toss_fingerprint(ep) -> str:
    """A key of a toss's recording: its tracked poses (and joint positions) rounded to 1e-5 (10 um, 1e-5 of a
    quaternion) after a float32 round trip, so that one recording imported twice, or stored in float32, has one key."""
    h = hashlib.sha1()
    for a in (ep.object_pose, getattr(ep, "object_joint_pos", None)):
        if a is not None:
            h.update(np.round(np.asarray(a, np.float32).astype(np.float64), 5).tobytes())
    return h.hexdigest()


HEIGHT_FRAMES = 16  # the frames of ``height_key``: a toss's flight, before any impact, which two throws never share
# (fewer than the suites' min_frames, 20, so that every scored toss has one)


def height_key(ep) -> str | None:
    """A key of a toss's recording that another export of it keeps: the first ``HEIGHT_FRAMES`` heights of its
    (first) body, rounded to 1e-5 m after a float32 round trip. A re-export in another world frame (dair_pll's
    copies of the ContactNets cube tosses: turned about the vertical, moved, in another body frame, a few frames
    shorter) changes every pose column but the height above the floor; None for a toss of fewer frames or with a
    height that is not finite."""
    z = np.asarray(ep.object_pose, np.float32)[:HEIGHT_FRAMES, 2]
    if len(z) < HEIGHT_FRAMES or not np.all(np.isfinite(z)):  # a tracker's lost frames would make tosses alike
        return None
    return hashlib.sha1(np.round(z.astype(np.float64), 5).tobytes()).hexdigest()


def seen_recordings(episodes: list, seen: list) -> list[bool]:
    """Per episode of ``episodes``: whether its recording is one of ``seen``'s, the same poses (``toss_fingerprint``)
    or the same flight in another frame (``height_key``)."""
    keys = {toss_fingerprint(e) for e in seen} | {k for k in map(height_key, seen) if k is not None}
    return [toss_fingerprint(e) in keys or height_key(e) in keys for e in episodes]


def drop_seen(episodes: list, seen: list, *, why: str) -> tuple[list, list[dict]]:
    """(the ``episodes`` whose recording is not one of ``seen``'s (``seen_recordings``), the others as {"episode",
    "reason": ``why``}): a toss that a row was trained, identified or selected on is no test toss of that row."""
    drop = seen_recordings(episodes, seen)
    return ([e for e, d in zip(episodes, drop) if not d],
            [{"episode": e.episode_id, "reason": why} for e, d in zip(episodes, drop) if d])


def test_tosses(test_data, *, cache_dir: Path, min_frames: int, urdf=None, check=None, seen=(),
                seen_why: str = "") -> tuple[list, dict, dict | None]:
    """The toss suites' ``--test-data``: every dataset or raw folder loaded (``load_tosses``), its tosses shorter than
    ``min_frames`` left out and named (``testsets.long_enough``), and those whose recording is one of ``seen``'s (the
    suite's own tosses that its rows train, identify or select on: ``drop_seen``, named with ``seen_why``),
    ``check(dataset, kept)`` (a suite's own requirement) raising before any baseline runs. Returns (the tosses, keyed
    by set where there are several; the ledger's ``data.test_data``: one dataset's entry, or {set: entry}; {episode
    key: set} or None for one dataset)."""
    paths = as_paths(test_data)
    test, info, set_of = [], {}, {}
    for name, path in zip(set_names(paths), paths):
        tds = load_tosses(path, cache_dir=cache_dir, urdf=urdf, progress=False, key="test_data")
        kept, left_out = long_enough(tds, min_frames)
        if kept and seen:
            kept, dropped = drop_seen(kept, list(seen), why=seen_why)
            left_out = left_out + dropped
            if not kept:
                raise ConfigError(f"every toss of at least data.min_frames={min_frames} frames is one the suite's "
                                  f"rows train, identify or select on ({seen_why}): nothing is left to test",
                                  file=tds.root, key="test_data")
        if not kept:
            raise ConfigError(f"no episode of at least data.min_frames={min_frames} frames", file=tds.root,
                              key="test_data")
        if check is not None:
            check(tds, kept)
        if len(paths) > 1:  # ids are unique within a dataset only
            kept = keyed(kept, name)
            set_of.update({e.episode_id: name for e in kept})
        test += kept
        info[name] = describe(tds, kept, source=path, left_out=left_out)
    if len(paths) == 1:
        return test, {k: v for k, v in info["test_data"].items() if k != "objects"}, None
    return test, info, set_of
