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

A URDF without a movable joint (one link, or links welded by ``fixed`` joints; J = 0, tosses [T, 13], e.g. dair_pll's
own ``contactnets_cube.urdf``) is a rigid object: it is stored as the cube importer stores its cube, a free body whose
pose is that of its centre of mass (``objects.urdf.load_urdf_object``'s frame: the link's axes, the origin moved to
the centre of mass of its collision geometry), no joint columns; one unrotated box is stored as a box, as the cube
is, any other shape as its URDF file (``poses.object_from_config``). Objects resting inside or above the floor are
warned about as for any rigid object (``floor_check.rest_gap_warnings``, which ``surrogate inspect`` runs too).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
from scipy.spatial.transform import Rotation

from ..capture import DatasetMeta, Environment, Episode, ObjectSpec, Provenance, validate_episode
from ..errors import AssetError, CaptureError
from .contactnets import _read_tosses, _sources, split_sources
from .floor_check import floor_warnings, rest_gap_warnings
from .report import ImportReport, skipped_lines
from .toss_checks import check_dt, check_toss_dt, check_toss_frames, check_toss_gravity

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


class RigidObject(NamedTuple):
    """A URDF object without a movable joint as a capture stores it: ``spec``, ``com`` [3] (its centre of mass in the
    link frame the tosses track, m) and ``vertices`` [V, 3] of its shape about that centre (for the floor check)."""

    spec: ObjectSpec
    com: np.ndarray
    vertices: np.ndarray


def rigid_object(urdf, art) -> RigidObject:
    """The rigid object of ``urdf`` (``art``, its articulation, has no joint) as the capture of a free body holds it:
    shape, mass and inertia as ``objects.urdf.load_urdf_object`` reads them (through ``poses.object_from_config``,
    the URDF stored as ``surrogate import poses`` stores it), friction the URDF's ``drake:mu_static``, named after the
    URDF as articulated objects are. One collision box not rotated in the link frame is stored as the cube importer
    stores its cube (``kind: box``): the suites' box-only measures (penetration, the GNS peer) then take it too."""
    from .poses import object_from_config

    asset, spec = object_from_config({"urdf": str(urdf), "friction": art.friction}, file=urdf)
    shapes, geometry = art.links[0].shapes, spec.geometry
    if len(shapes) == 1 and shapes[0]["kind"] == "box" and not any(shapes[0]["rpy"]):
        geometry = {"kind": "box", "half_extents": [float(s) / 2.0 for s in shapes[0]["size"]]}
    return RigidObject(dataclasses.replace(spec, name=Path(urdf).stem, geometry=geometry),
                       np.asarray(asset.params["com_in_source_frame"], float),
                       np.concatenate([np.asarray(p.vertices) for p in asset.pieces]))


def link_to_com(pose: np.ndarray, twist: np.ndarray, com: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pose [T, 7], twist [T, 6]) of the centre of mass ``com`` [3] (link frame) from the tracked link frame's: the
    orientation and body-frame angular velocity are the link's; the point moves with v + R (w_body x com)."""
    R = Rotation.from_quat(pose[:, 3:7], scalar_first=True)
    out_pose, out_twist = pose.copy(), twist.copy()
    out_pose[:, :3] = pose[:, :3] + R.apply(com)
    out_twist[:, :3] = twist[:, :3] + R.apply(np.cross(twist[:, 3:6], com))
    return out_pose, out_twist


def toss_to_episode(a: np.ndarray, toss_id: str, spec: ObjectSpec, J: int, *, file: str, dt: float,
                    com: np.ndarray | None = None) -> Episode:
    """One toss [T, 13 + 2J] (SI already) as an Episode with the object's joint positions and rates; ``com``: a rigid
    object's (J = 0) centre of mass in the link frame, whose pose the episode holds (``rigid_object``)."""
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
    wrapped = np.abs(a[:, c["joint_position"]]) <= math.pi + 1e-3
    if not wrapped.all():
        f, j = np.argwhere(~wrapped)[0]
        raise CaptureError(f"joint {j}'s angle at frame {f} is {a[f, c['joint_position']][j]:.4g}, outside [-pi, pi]: "
                           "the layout's angles are radians wrapped to (-pi, pi] (degrees?)", file=file,
                           episode=toss_id, field="joint_position")
    pose = np.concatenate([a[:, c["position"]], q / n[:, None]], axis=1)
    twist = np.concatenate([a[:, c["linear_velocity"]], a[:, c["angular_velocity"]]], axis=1)
    joints = {"object_joint_pos": a[:, c["joint_position"]].copy(),
              "object_joint_vel": a[:, c["joint_velocity"]].copy()}
    notes = (f"{UPSTREAM} ({UPSTREAM_REF}), {toss_id}.pt; AprilTag tracking; velocities are differences of "
             "tracked poses; the floor was set per toss at z = 0 on the last frame")
    if com is not None:  # a rigid object: a free body, posed at its centre of mass as the cube is, without joints
        (pose, twist), joints = link_to_com(pose, twist, com), {}
        # UPSTREAM_REF names the elbow's folder, not where another object's tosses come from
        notes = (f"{UPSTREAM} toss layout, {toss_id}.pt; velocities are differences of tracked poses; poses of the "
                 f"centre of mass, {[round(float(x), 6) for x in com]} m from the tracked link frame")
    return Episode(
        episode_id=toss_id,
        timestamps=np.arange(T) * dt,
        object_pose=pose,
        object_twist=twist,
        **joints,
        object=spec,
        environment=Environment(kind="ground", height=0.0, gravity=[0.0, 0.0, -GRAVITY]),
        provenance=Provenance(
            source=f"DAIR Lab tosses of {spec.name}", real=True, capture_rate_hz=1.0 / dt, upstream_id=toss_id,
            license="BSD-3-Clause", notes=notes,
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
    rigid = None if J else rigid_object(urdf, art)  # no joint: a free rigid body, as the cube importer writes one
    spec = rigid.spec if rigid else object_spec(art)
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
            ep = toss_to_episode(a, toss_id, spec, J, file=name, dt=dt, com=rigid.com if rigid else None)
            validate_episode(ep, file=name)
            check_toss_dt(a, dt, file=name, episode=toss_id, pos=4, vel=10 + J)
            check_toss_frames(a, dt, file=name, episode=toss_id, pos=4, vel=10 + J, steps=False)
            if rigid:  # a rigid body's centre of mass falls at gravity in flight; an articulated link's frame need not
                check_toss_gravity(ep, file=name)
        except CaptureError as e:
            report.skip(e, file=name, episode=toss_id)
            continue
        episodes.append(ep)
    # the floor tells a wrong URDF: links below it (articulated), or a rigid object resting inside or above it
    report.warnings += (rest_gap_warnings(rigid.vertices, spec.size, episodes) if rigid
                        else floor_warnings(art, episodes))
    meta = DatasetMeta(name=spec.name, robot_type="none", angular_frame="body",
                       object_joint_names=None if rigid else art.joint_names)  # rigid: no joint key, as the cube
    return report.write(episodes, meta, overwrite=overwrite)
