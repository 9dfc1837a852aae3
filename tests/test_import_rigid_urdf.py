"""DAIR Lab tosses (dair_pll layout) of a URDF object without a movable joint: J = 0, [T, 13], a free rigid body.

The tosses are written here: a box's centre of mass flies a parabola, turning at a constant rate about the vertical,
lands and rests on the floor; the columns hold the tracked LINK frame, whose origin is not the centre of mass (the
URDF's collision box is offset), so the import must move poses and velocities to the centre of mass."""

from __future__ import annotations

import hashlib
import json
import re

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from surrogate.capture import DatasetMeta, Environment, Episode, Provenance, read_dataset, write_dataset
from surrogate.cli import main
from surrogate.importers.contactnets import import_contactnets
from surrogate.scenes.from_capture import asset_from_spec, scene_for_episode

from .conftest import SHARED, needs_shared

DT = 1.0 / 148.0
G = 9.81
HALF = np.array([0.05, 0.03, 0.02])  # the box's half sizes (m)
OFFSET = np.array([0.02, -0.01, 0.0])  # the collision box's origin in the link frame: its centre of mass
URDF = """<?xml version="1.0"?>
<robot name="{robot}" xmlns:drake="https://drake.mit.edu/">
  <link name="body">
    <inertial><mass value="0.5"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial>
    <collision>
      <origin xyz="{xyz}" rpy="0 0 0"/>
      <geometry><box size="{size}"/></geometry>
      <drake:proximity_properties><drake:mu_static value="0.25"/></drake:proximity_properties>
    </collision>
  </link>{extra}
</robot>
"""
# a second box welded on top by a fixed joint: one rigid object of two links, not a box
WELDED = """
  <link name="lid">
    <inertial><mass value="0.1"/></inertial>
    <collision><geometry><box size="0.1 0.06 0.01"/></geometry></collision>
  </link>
  <joint name="weld" type="fixed"><parent link="body"/><child link="lid"/><origin xyz="0.02 -0.01 0.025"/></joint>"""


def write_urdf(path, *, size=2 * HALF, extra=""):
    path.write_text(URDF.format(robot="test_box", xyz=" ".join(map(str, OFFSET)), size=" ".join(map(str, size)),
                                extra=extra))
    return path


def com_motion(seed: int, T: int = 70, land: int = 40):
    """(COM positions [T, 3], quaternions w x y z [T, 4], COM velocities [T, 3], body rates [T, 3]): free flight for
    ``land`` frames ending on the floor (the box flat, its centre HALF[2] above it), then at rest."""
    rng = np.random.default_rng(seed)
    t = np.arange(T) * DT
    tl = t[land]
    p0 = np.array([*rng.uniform(-0.2, 0.2, 2), rng.uniform(0.2, 0.4)])
    v0 = np.array([*rng.uniform(-0.5, 0.5, 2), 0.0])
    v0[2] = (HALF[2] - p0[2] + 0.5 * G * tl**2) / tl  # lands flat on the floor at frame ``land``
    w, yaw0 = rng.uniform(-6.0, 6.0), rng.uniform(-np.pi, np.pi)
    tf = np.minimum(t, tl)  # still from the landing on
    flying = (t < tl)[:, None]
    p = p0 + np.outer(tf, v0) - 0.5 * G * np.outer(tf**2, [0, 0, 1])
    v = (v0 - G * np.outer(t, [0, 0, 1])) * flying
    q = Rotation.from_euler("z", (yaw0 + w * tf)[:, None]).as_quat(scalar_first=True)
    rate = np.outer(flying[:, 0] * w, [0, 0, 1.0])
    return p, q, v, rate


def dair_toss(seed: int, com=OFFSET, **kw) -> torch.Tensor:
    """The toss of ``com_motion`` as dair_pll stores it: [T, 13], the link frame tracked (``com`` in its frame)."""
    p, q, v, rate = com_motion(seed, **kw)
    R = Rotation.from_quat(q, scalar_first=True)
    link_p = p - R.apply(com)
    link_v = v - R.apply(np.cross(rate, com))
    return torch.as_tensor(np.concatenate([q, link_p, rate, link_v], axis=1), dtype=torch.float64)


@pytest.fixture
def tosses(tmp_path):
    src = tmp_path / "tosses"
    src.mkdir()
    for n in range(4):
        torch.save(dair_toss(n), src / f"{n}.pt")
    return src


def test_a_one_link_urdf_imports_as_a_free_rigid_body_at_its_centre_of_mass(tmp_path, tosses):
    urdf = write_urdf(tmp_path / "test_box.urdf")
    out = tmp_path / "ds"
    assert main(["import", "contactnets", str(tosses), "--urdf", str(urdf), "--out", str(out), "--quiet"]) == 0
    ds = read_dataset(out)
    assert sorted(e.episode_id for e in ds.episodes) == ["0", "1", "2", "3"] and not ds.skipped
    assert ds.meta.name == "test_box" and ds.meta.angular_frame == "body" and ds.meta.object_joint_names is None
    for ep in ds.episodes:
        p, q, v, rate = com_motion(int(ep.episode_id))
        np.testing.assert_allclose(ep.object_pose[:, :3], p, atol=1e-6)  # the centre of mass, not the link frame
        np.testing.assert_allclose(np.abs((ep.object_pose[:, 3:7] * q).sum(axis=1)), 1.0, atol=1e-6)
        np.testing.assert_allclose(ep.object_twist[:, :3], v, atol=1e-5)  # the centre of mass's velocity
        np.testing.assert_allclose(ep.object_twist[:, 3:6], rate, atol=1e-5)
        np.testing.assert_allclose(np.diff(ep.timestamps), DT, atol=1e-7)
        assert ep.object_joint_pos is None and ep.object_joint_vel is None
        assert ep.provenance.capture_rate_hz == pytest.approx(148.0) and ep.provenance.real
        assert ep.environment.kind == "ground" and ep.environment.height == 0.0
    obj = ds.episodes[0].object
    # the box as the cube importer stores its cube: half extents about the centre of mass, the URDF's mass and
    # mu_static, inertia of the box at uniform density (the URDF's tensor is ignored, as the URDF loader does)
    assert obj.name == "test_box" and obj.geometry == {"kind": "box", "half_extents": pytest.approx(list(HALF))}
    assert obj.mass == pytest.approx(0.5) and obj.friction == pytest.approx(0.25) and obj.size == pytest.approx(0.1)
    side = 2 * HALF
    want = 0.5 / 12 * np.array([side[1] ** 2 + side[2] ** 2, side[0] ** 2 + side[2] ** 2, side[0] ** 2 + side[1] ** 2])
    np.testing.assert_allclose(np.asarray(obj.inertia), np.diag(want), rtol=1e-6, atol=1e-12)
    # what a free-body capture holds: the features of a rigid episode written directly, no joint key; a free joint
    contact = json.loads((out / "meta" / "contact.json").read_text())
    ep0 = ds.episodes[0]
    write_dataset(tmp_path / "direct", [Episode("0", ep0.timestamps, ep0.object_pose, obj, Provenance("t", True, 148.0),
                                                Environment(), object_twist=ep0.object_twist)],
                  DatasetMeta(angular_frame="body"))
    direct = json.loads((tmp_path / "direct" / "meta" / "contact.json").read_text())
    assert contact["features"] == direct["features"] and "object_joint_names" not in contact
    scene = scene_for_episode(ep0, ds.meta, margin=0.01, substeps=2)
    assert scene.model.nq == 7 and scene.model.nv == 6
    np.testing.assert_allclose(asset_from_spec(obj).extents, 2 * HALF, atol=1e-9)


def test_bad_rigid_tosses_are_skipped_and_named(tmp_path, tosses, capsys):
    urdf = write_urdf(tmp_path / "test_box.urdf")
    torch.save(torch.zeros(70, 15, dtype=torch.float64), tosses / "4.pt")  # a one-hinge object's width
    nan = dair_toss(5)
    nan[12, 8] = float("nan")
    torch.save(nan, tosses / "5.pt")
    torch.save(dair_toss(6, T=120, land=90)[::3].clone(), tosses / "6.pt")  # every third frame: 49 Hz
    torch.save(dair_toss(7)[:1].clone(), tosses / "7.pt")  # one frame
    out = tmp_path / "ds"
    assert main(["import", "contactnets", str(tosses), "--urdf", str(urdf), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    ds = read_dataset(out)
    assert sorted(e.episode_id for e in ds.episodes) == ["0", "1", "2", "3"]
    skipped = {s["episode"]: s for s in ds.skipped}
    assert set(skipped) == {"4", "5", "6", "7"} and all(s["file"].endswith(f"{k}.pt") for k, s in skipped.items())
    assert "expected [T, 13]" in skipped["4"]["reason"]
    assert skipped["5"]["field"] == "angular_velocity" and "frame 12" in skipped["5"]["reason"]
    assert "another rate" in skipped["6"]["reason"]
    assert float(re.search(r"\(([\d.]+) Hz\)", skipped["6"]["reason"]).group(1)) == pytest.approx(148 / 3, rel=0.05)
    assert "1 frames" in skipped["7"]["reason"]
    assert all(f"{n}.pt" in text for n in (4, 5, 6, 7))


def test_a_rigid_object_resting_inside_the_floor_is_warned_about(tmp_path, tosses):
    """The tosses rest 2 cm above the floor; a URDF whose box is 12 cm tall puts it 4 cm into it: the floor check of
    rigid objects (``rest_gap_warnings``, as ``surrogate inspect``) warns, and the import keeps the tosses."""
    urdf = write_urdf(tmp_path / "tall.urdf", size=[0.1, 0.06, 0.12])
    report = import_contactnets(tosses, tmp_path / "ds", urdf=urdf, progress=False)
    assert report.kept == 4
    (warning,) = report.warnings
    assert "40.0 mm inside its surface" in warning and "4 of the 4" in warning


def test_links_welded_by_fixed_joints_import_as_one_rigid_object(tmp_path):
    """Two links welded: a rigid object of two boxes, stored as its URDF file (kind mesh) as ``import poses`` stores
    a URDF object, posed at the centre of mass of both boxes."""
    urdf = write_urdf(tmp_path / "lidded.urdf", extra=WELDED)
    # the URDF loader's centre of mass is the shapes' at uniform density (the links' masses summed): the lid, a fifth
    # of the volume, its centre 0.025 above the body box's, moves it up by 0.025 / 5
    com = OFFSET + np.array([0.0, 0.0, 0.025 / 5])
    src = tmp_path / "tosses"
    src.mkdir()
    torch.save(dair_toss(0, com=com), src / "0.pt")
    ds = read_dataset(import_contactnets(src, tmp_path / "ds", urdf=urdf, progress=False).out)
    (ep,) = ds.episodes
    geo = ep.object.geometry
    assert geo["kind"] == "mesh" and geo["path"] == str(urdf.resolve())
    np.testing.assert_allclose(geo["com_in_mesh_frame"], com, atol=1e-9)
    assert ep.object.mass == pytest.approx(0.6) and ep.object_joint_pos is None
    np.testing.assert_allclose(ep.object_pose[:, :3], com_motion(0)[0], atol=1e-6)
    assert asset_from_spec(ep.object).mass == pytest.approx(0.6)


# -- the articulated import is unchanged by the rigid one: its output pinned, byte for byte ----------------------------
ELBOW = SHARED / "contactnets_elbow"
# the content hash below of the shared elbow's import, as written before rigid URDF objects were taken
ELBOW_IMPORT_SHA256 = "c6533bc64de87d5660396db09177f5f3cf4b52a115bb3969df77bed809a99e39"


def content_hash(root, urdf) -> str:
    """sha256 of a capture's files: JSON bytes with the URDF's path and the writer's version named alike (they
    depend on the machine and the release), parquet tables by their schema and rows (not pyarrow's own bytes)."""
    import pyarrow.parquet as pq

    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if not p.is_file():
            continue
        h.update(p.relative_to(root).as_posix().encode())
        if p.suffix == ".parquet":
            t = pq.read_table(p)
            h.update(t.schema.to_string(show_schema_metadata=True).encode())
            h.update(json.dumps(t.to_pylist()).encode())
        else:
            text = p.read_text().replace(json.dumps(str(urdf))[1:-1], "<urdf>")
            text = text.replace(json.loads((root / "meta" / "contact.json").read_text())["writer"], "<writer>")
            h.update(text.encode())
    return h.hexdigest()


@needs_shared("contactnets_elbow")
def test_the_articulated_import_is_byte_for_byte_as_before(tmp_path):
    urdf = ELBOW / "contactnets_elbow.urdf"
    report = import_contactnets(ELBOW, tmp_path / "elbow", urdf=urdf, progress=False)
    assert report.kept == 61
    assert content_hash(tmp_path / "elbow", urdf) == ELBOW_IMPORT_SHA256


def test_the_centre_of_mass_of_a_body_turning_about_a_tilted_axis_moves_with_the_body_rate():
    """``link_to_com`` reads the recorded angular velocity in the body frame (dair_pll's layout): for a body turning
    about a tilted axis, the body- and world-frame rates differ, and only the body's gives the centre's velocity."""
    from surrogate.importers.dair_urdf import link_to_com

    t = np.arange(50) * DT
    w_body, c = np.array([2.0, -3.0, 1.5]), np.array([0.03, -0.01, 0.02])
    R = Rotation.from_euler("xyz", [0.4, -0.7, 1.1]) * Rotation.from_rotvec(np.outer(t, w_body))
    com = np.array([0.1, 0.2, 0.5]) + np.outer(t, [0.4, -0.3, 1.0])
    link = com - R.apply(c)
    v_link = np.gradient(link, DT, axis=0)
    pose, twist = link_to_com(np.concatenate([link, R.as_quat(scalar_first=True)], 1),
                              np.concatenate([v_link, np.tile(w_body, (len(t), 1))], 1), c)
    np.testing.assert_allclose(pose[:, :3], com, atol=1e-12)
    np.testing.assert_allclose(twist[1:-1, :3], np.tile([0.4, -0.3, 1.0], (len(t) - 2, 1)), atol=2e-3)
