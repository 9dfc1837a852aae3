"""Importer for the DAIR Lab's real tosses of a URDF object (dair_pll layout), e.g. the ContactNets "elbow".

Upstream: the dair_pll repository (BSD-3-Clause), ``assets/contactnets_elbow`` on branch ``ebianchi/downstream``
(commit b5d0a2f): files ``N.pt``, each a float64 tensor [T, 13 + 2J] of a URDF object with J joints, in Drake's
state order: base link quaternion w, x, y, z (4), base link position in metres (3), joint positions (J, rad;
revolute angles wrapped to (-pi, pi]), base link angular velocity in its body frame (3), linear velocity in the
world frame (3), joint rates (J). 148 Hz; the floor is at z = 0. For the elbow (one hinge): [121, 15].

``surrogate import contactnets SRC --urdf URDF --out DATASET``: ``SRC`` a folder of ``N.pt`` files. The object
(links, joints, masses; inertia from the collision geometry: ``objects.articulated``) comes from the URDF, and is
stored in the dataset (``ObjectSpec.geometry``, ``kind: articulated``) with the joint names
(``meta/contact.json``'s ``object_joint_names``). Bad files are skipped and named as the cube importer does. A URDF
that does not match the recording (its links sink into the floor) is warned about (``floor_check``).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..capture import DatasetMeta, Environment, Episode, ObjectSpec, Provenance, validate_episode
from ..errors import AssetError, CaptureError
from .contactnets import _read_tosses, _sources, split_sources
from .floor_check import floor_warnings
from .report import ImportReport, skipped_lines
from .toss_checks import check_dt, check_toss_dt

UPSTREAM = "https://github.com/DAIRLab/dair_pll"
UPSTREAM_REF = "branch ebianchi/downstream @ b5d0a2f, assets/contactnets_elbow"
RATE_HZ = 148.0
GRAVITY = 9.81


def columns(J: int) -> dict:
    """Column slices of a [T, 13 + 2J] toss of an object with J joints."""
    return {"quaternion": slice(0, 4), "position": slice(4, 7), "joint_position": slice(7, 7 + J),
            "angular_velocity": slice(7 + J, 10 + J), "linear_velocity": slice(10 + J, 13 + J),
            "joint_velocity": slice(13 + J, 13 + 2 * J)}


def object_spec(art) -> ObjectSpec:
    """The tossed object as a capture describes it: mass, inertia and size of its BASE link (the tracked one; errors
    are reported in % of its size), every link and joint in ``geometry`` (``Articulation.to_json``)."""
    base = art.links[0]
    return ObjectSpec(name=Path(art.source).stem, mass=float(base.mass), inertia=np.asarray(base.inertia, float).tolist(),
                      size=float(base.size), geometry=art.to_json(), friction=art.friction)


def toss_to_episode(a: np.ndarray, toss_id: str, spec: ObjectSpec, J: int, *, file: str, dt: float) -> Episode:
    """One toss [T, 13 + 2J] (SI already) as an Episode with the object's joint positions and rates."""
    T = len(a)
    if T < 2:
        raise CaptureError(f"has {T} frames, need at least 2", file=file, episode=toss_id, field="tensor")
    c = columns(J)
    bad = ~np.isfinite(a)
    if bad.any():
        f, col = np.argwhere(bad)[0]
        field = next(k for k, s in c.items() if s.start <= col < s.stop)
        raise CaptureError(f"non-finite value at frame {f}, column {col}", file=file, episode=toss_id, field=field)
    q = a[:, c["quaternion"]]
    n = np.linalg.norm(q, axis=1)
    if (np.abs(n - 1.0) > 1e-2).any():
        f = int(np.argmax(np.abs(n - 1.0) > 1e-2))
        raise CaptureError(f"quaternion at frame {f} has norm {n[f]:.4f}, not 1 (column order: quaternion w x y z first)",
                           file=file, episode=toss_id, field="quaternion")
    return Episode(
        episode_id=toss_id,
        timestamps=np.arange(T) * dt,
        object_pose=np.concatenate([a[:, c["position"]], q / n[:, None]], axis=1),
        object_twist=np.concatenate([a[:, c["linear_velocity"]], a[:, c["angular_velocity"]]], axis=1),
        object_joint_pos=a[:, c["joint_position"]].copy(),
        object_joint_vel=a[:, c["joint_velocity"]].copy(),
        object=spec,
        environment=Environment(kind="ground", height=0.0, gravity=[0.0, 0.0, -GRAVITY]),
        provenance=Provenance(
            source=f"DAIR Lab tosses of {spec.name}", real=True, capture_rate_hz=1.0 / dt, upstream_id=toss_id,
            license="BSD-3-Clause",
            notes=f"{UPSTREAM} ({UPSTREAM_REF}), {toss_id}.pt; AprilTag tracking; velocities are differences of "
                  "tracked poses; the floor was set per toss at z = 0 on the last frame",
        ),
        task="toss",
    )


def import_urdf_tosses(src, out, urdf, *, overwrite: bool = False, progress: bool = True,
                       rate_hz: float = RATE_HZ) -> ImportReport:
    """Convert the tosses of the URDF object ``urdf`` at ``src`` (a folder of ``N.pt``) into a capture dataset."""
    from ..objects.articulated import load_articulation

    report = ImportReport(out=Path(out))
    report.check_output(overwrite=overwrite)
    try:
        art = load_articulation(urdf)
    except AssetError as e:
        raise CaptureError(e.reason, file=urdf, field=e.location.field or "urdf") from None
    J = len(art.joints)
    if not J:  # the capture's articulated object has joints; a rigid one's pose is of its centre of mass, not a link
        raise CaptureError("the URDF has no movable joint (one link, or links welded by fixed joints): its tosses are "
                           "of a rigid object, which this importer does not take (the ContactNets cube imports "
                           "without --urdf)", file=urdf, field="joint")
    spec = object_spec(art)
    tosses = split_sources(list(_sources(src)), report)[0]
    if not tosses:
        raise CaptureError("\n".join(["no toss files (N.pt) found"] + skipped_lines(report.skipped)), file=src)
    arrays = _read_tosses(tosses, report, progress=progress, columns=13 + 2 * J)
    dt = 1.0 / float(rate_hz)
    if not (math.isfinite(dt) and dt > 0):
        raise CaptureError(f"capture rate must be positive Hz, got {rate_hz!r}", field="rate_hz")
    try:
        check_dt({"dt": dt, "file": str(src)}, [a for _, _, a in arrays], pos=4, vel=10 + J)
    except CaptureError as e:  # the user's way out: the rate the tosses say
        raise CaptureError(f"{e.reason}; if the tosses were recorded at another rate, pass it (--rate-hz)",
                           file=e.file, field="rate_hz") from None
    episodes = []
    for name, toss_id, a in arrays:
        try:
            ep = toss_to_episode(a, toss_id, spec, J, file=name, dt=dt)
            validate_episode(ep, file=name)
            check_toss_dt(a, dt, file=name, episode=toss_id, pos=4, vel=10 + J)
        except CaptureError as e:
            report.skip(e, file=name, episode=toss_id)
            continue
        episodes.append(ep)
    report.warnings += floor_warnings(art, episodes)
    meta = DatasetMeta(name=spec.name, robot_type="none", angular_frame="body", object_joint_names=art.joint_names)
    return report.write(episodes, meta, overwrite=overwrite)
