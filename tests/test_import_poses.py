"""Generic pose-trajectory importer: columns, units, rotation conventions, COM shift, bad files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import trimesh
import yaml
from scipy.spatial.transform import Rotation

from surrogate.capture import read_dataset
from surrogate.cli import main
from surrogate.errors import ConfigError
from surrogate.importers.poses import import_poses, load_config


@pytest.fixture
def offset_box(tmp_path):
    """A 4 x 6 x 8 cm box whose mesh origin is 1 cm off its centre (as scans often are)."""
    m = trimesh.creation.box(extents=[40, 60, 80])  # millimetres, as many scanners export
    m.apply_translation([10.0, 0.0, 0.0])
    path = tmp_path / "box.stl"
    m.export(path)
    return path


def _trajectory(T=60, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(T) / 120.0
    pos = np.stack([0.3 * t, 0.1 * t, 0.5 - 4.9 * t**2], 1) + rng.normal(size=3) * 0.01
    rot = Rotation.from_rotvec(np.outer(t, [1.0, 2.0, 0.5]))
    return t, pos, rot


def _config(tmp_path, mesh, **extra):
    cfg = {
        "columns": {"time": "time_ms", "position": ["px", "py", "pz"], "orientation": ["qx", "qy", "qz", "qw"]},
        "orientation": "quat_xyzw",
        "units": {"time": "ms", "length": "mm", "angle": "rad"},
        "object": {"mesh": str(mesh), "mass": 0.25, "scale": 0.001},
        "provenance": {"source": "test rig, synthetic tracks", "real": False},
    }
    cfg.update(extra)
    path = tmp_path / "import.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _write_csv(path, t, pos, rot):
    q = rot.as_quat()  # x y z w
    rows = np.concatenate([t[:, None] * 1000, pos * 1000, q], 1)
    header = "time_ms,px,py,pz,qx,qy,qz,qw"
    np.savetxt(path, rows, delimiter=",", header=header, comments="")


def test_csv_in_mm_and_ms_with_xyzw_quaternions(tmp_path, offset_box):
    src = tmp_path / "tracks"
    src.mkdir()
    t, pos, rot = _trajectory()
    _write_csv(src / "throw_01.csv", t, pos, rot)
    _write_csv(src / "throw_02.csv", t, pos + 0.01, rot)
    cfg = _config(tmp_path, offset_box)
    assert main(["import", "poses", str(src), "--out", str(tmp_path / "out"), "--config", str(cfg), "--quiet"]) == 0
    ds = read_dataset(tmp_path / "out")
    assert [e.episode_id for e in ds.episodes] == ["throw_01", "throw_02"]
    ep = ds.episodes[0]
    assert ep.provenance.capture_rate_hz == pytest.approx(120.0, rel=1e-3)
    np.testing.assert_allclose(ep.timestamps, t - t[0], atol=1e-5)
    # The pose is of the centre of mass: the mesh origin plus the rotated 1 cm offset.
    expected = pos + rot.apply([0.01, 0.0, 0.0])
    np.testing.assert_allclose(ep.object_pose[:, :3], expected, atol=1e-5)
    q = ep.object_pose[:, 3:]
    dots = np.abs(np.sum(q * rot.as_quat(scalar_first=True), axis=1))
    np.testing.assert_allclose(dots, 1.0, atol=1e-5)
    assert ep.object.mass == pytest.approx(0.25)
    assert ep.object.size == pytest.approx(0.08, rel=1e-3)
    assert ep.object.geometry["kind"] == "mesh" and len(ep.object.geometry["sha256"]) == 64


def test_npz_and_torch_with_euler_degrees(tmp_path, offset_box):
    src = tmp_path / "tracks"
    src.mkdir()
    t, pos, rot = _trajectory(seed=1)
    eul = rot.as_euler("xyz", degrees=True)
    rows = np.concatenate([t[:, None], pos, eul], 1)
    np.savez(src / "a.npz", rows=rows)
    torch.save(torch.from_numpy(rows), src / "b.pt")
    cfg = _config(tmp_path, offset_box, columns={"time": 0, "position": [1, 2, 3], "orientation": [4, 5, 6]},
                  orientation="euler_xyz", units={"time": "s", "length": "m", "angle": "deg"}, tracked_frame="com")
    report = import_poses(src, tmp_path / "out", config=cfg, progress=False)
    assert report.kept == 2 and not report.skipped
    for ep in read_dataset(tmp_path / "out").episodes:
        np.testing.assert_allclose(ep.object_pose[:, :3], pos, atol=1e-6)
        got = Rotation.from_quat(ep.object_pose[:, 3:], scalar_first=True)
        assert np.degrees((got.inv() * rot).magnitude()).max() < 1e-3


def test_bad_files_are_skipped_with_reasons(tmp_path, offset_box):
    src = tmp_path / "tracks"
    src.mkdir()
    t, pos, rot = _trajectory()
    _write_csv(src / "good.csv", t, pos, rot)
    bad_t = t.copy()
    bad_t[10] = bad_t[9]
    _write_csv(src / "repeated_time.csv", bad_t, pos, rot)
    nan_pos = pos.copy()
    nan_pos[5, 1] = np.nan
    _write_csv(src / "nan.csv", t, nan_pos, rot)
    text = (src / "good.csv").read_text().splitlines()
    (src / "truncated.csv").write_text("\n".join(text[:20] + [text[20][:12]]))
    (src / "renamed.csv").write_text(text[0].replace("px", "pos_x") + "\n" + "\n".join(text[1:]))
    report = import_poses(src, tmp_path / "out", config=_config(tmp_path, offset_box), progress=False)
    assert report.kept == 1
    skipped = {s["episode"]: s for s in report.skipped}
    assert skipped["repeated_time"]["field"] == "timestamps"
    assert skipped["nan"]["field"] == "py"
    assert "truncated" in skipped["truncated"]["reason"]
    assert skipped["renamed"]["field"] == "position" and "'px' not found" in skipped["renamed"]["reason"]


def test_config_errors_name_the_key(tmp_path, offset_box):
    cfg = _config(tmp_path, offset_box)
    with pytest.raises(ConfigError, match="units.length") as e:
        load_config(cfg, ["units.length=furlong"])
    assert e.value.location.file == "command line (--set)"  # the override's mistake, not the file's
    with pytest.raises(ConfigError, match="unitz") as e:
        load_config(cfg, ["unitz.length=mm"])
    assert e.value.location.file == "command line (--set)"
    bad = tmp_path / "bad_units.yaml"
    bad.write_text(Path(cfg).read_text().replace("units:", "units:\n  speed: fast", 1))
    with pytest.raises(ConfigError, match="units") as e:
        load_config(bad, ["rate_hz=100"])
    assert e.value.location.file == bad  # a mistake in the file names the file
    with pytest.raises(ConfigError, match="orientation"):
        load_config(cfg, ["orientation=quaternion"])
    with pytest.raises(ConfigError, match="provenance.source"):
        load_config(cfg, ["provenance.source=null"])
    with pytest.raises(ConfigError, match="columns.orientation"):
        load_config(cfg, ["orientation=euler_xyz"])


def test_an_object_that_rests_inside_its_surface_is_imported_with_a_warning(tmp_path, offset_box, capsys):
    """Positions in metres declared as millimetres put the box 4 cm into the ground at rest; it was imported without
    a word (inspect printed a rest height of 0.0000 m). The same tracks in the declared unit rest on the ground."""
    t = np.arange(40) / 120.0
    z = np.where(t < 1 / 6, 0.2 - (0.2 - 0.04) * t * 6, 0.04)  # the 8 cm tall box drops and comes to rest
    pos, rot = np.stack([np.full_like(t, 0.1), np.zeros_like(t), z], 1), Rotation.identity(len(t))
    for name, scale in (("right", 1000.0), ("metres", 1.0)):  # _write_csv writes millimetres; "metres" does not
        src = tmp_path / name
        src.mkdir()
        _write_csv(src / "drop.csv", t, pos * scale / 1000.0, rot)
        cfg = _config(tmp_path, offset_box, tracked_frame="com")
        assert main(["import", "poses", str(src), "--out", str(tmp_path / f"out_{name}"), "--config", str(cfg),
                     "--quiet"]) == 0
        printed = capsys.readouterr().out
        assert ("warning: at rest, the object's lowest point lies" in printed) == (name == "metres"), printed
    assert main(["inspect", str(tmp_path / "out_metres")]) == 0
    assert "inside its surface" in capsys.readouterr().out
