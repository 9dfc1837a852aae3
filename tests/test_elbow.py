"""Articulated objects: the real elbow tosses' importer, the multi-link URDF loader, scenes, estimates and metrics."""

from __future__ import annotations

import json
import shutil

import mujoco
import numpy as np
import pytest
import torch

from surrogate.bench.evaluate import score_episode
from surrogate.capture import read_dataset
from surrogate.cli import main
from surrogate.estimate import free_flight_start, initial_joint_state
from surrogate.metrics import joint_errors
from surrogate.objects.articulated import articulation_from_json, load_articulation
from surrogate.scenes import build_scene
from surrogate.scenes.from_capture import scene_for_episode

from .conftest import SHARED, needs_shared

ELBOW = SHARED / "contactnets_elbow"
URDF = ELBOW / "contactnets_elbow.urdf"


@pytest.fixture(scope="module")
def elbow_ds(tmp_path_factory):
    if not ELBOW.exists():
        pytest.skip(f"sample data {ELBOW} is absent (set SURROGATE_DATA to the shared data folder)")
    out = tmp_path_factory.mktemp("elbow") / "ds"
    assert main(["import", "contactnets", str(ELBOW), "--urdf", str(URDF), "--out", str(out), "--quiet"]) == 0
    return read_dataset(out)


def test_import_real_elbow_tosses(elbow_ds):
    ds = elbow_ds
    assert len(ds.episodes) == 61 and not ds.skipped
    assert ds.meta.object_joint_names == ["hinge_1_to_2"]
    assert ds.contact["object_joint_names"] == ["hinge_1_to_2"]
    assert "observation.object_joint_pos" in ds.info["features"]
    ep = next(e for e in ds.episodes if e.episode_id == "0")
    raw = torch.load(ELBOW / "0.pt", weights_only=True).numpy()
    np.testing.assert_allclose(ep.object_pose[:, :3], raw[:, 4:7], atol=1e-6)  # metres, link 1
    np.testing.assert_allclose(ep.object_pose[:, 3:7], raw[:, 0:4], atol=1e-6)  # w x y z
    np.testing.assert_allclose(ep.object_joint_pos[:, 0], raw[:, 7], atol=1e-6)
    np.testing.assert_allclose(ep.object_joint_vel[:, 0], raw[:, 14], atol=1e-5)
    np.testing.assert_allclose(np.diff(ep.timestamps), 1 / 148, atol=1e-5)
    geo = ep.object.geometry
    assert geo["kind"] == "articulated" and [lk["name"] for lk in geo["links"]] == ["elbow_1", "elbow_2"]
    # inertia from the 0.1 x 0.05 x 0.05 m box of 0.37 kg, not the URDF's 0.1 m cube (6.167e-4)
    np.testing.assert_allclose(np.diag(geo["links"][0]["inertia"]), 0.37 / 12 * np.array([0.005, 0.0125, 0.0125]), rtol=1e-6)
    assert ep.object.size == pytest.approx(0.1) and ep.object.friction == pytest.approx(0.3)
    # a flat link 1 rests about half its 0.05 m height above the floor at the end of most tosses
    assert np.median([e.object_pose[-1, 2] for e in ds.episodes]) == pytest.approx(0.027, abs=0.003)


@needs_shared("contactnets_elbow")
def test_bad_elbow_files_named_and_skipped(tmp_path, capsys):
    src = tmp_path / "tosses"
    src.mkdir()
    for n in ("0", "9", "18"):
        shutil.copy(ELBOW / f"{n}.pt", src / f"{n}.pt")
    (src / "27.pt").write_bytes((ELBOW / "27.pt").read_bytes()[:200])  # truncated
    torch.save(torch.zeros(121, 19, dtype=torch.float64), src / "36.pt")  # the cube's width, not the elbow's
    a = torch.load(ELBOW / "45.pt", weights_only=True).clone()
    a[10, 7] = float("nan")
    torch.save(a, src / "45.pt")
    out = tmp_path / "ds"
    assert main(["import", "contactnets", str(src), "--urdf", str(URDF), "--out", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    ds = read_dataset(out)
    assert sorted(e.episode_id for e in ds.episodes) == ["0", "18", "9"]
    skipped = {s["episode"]: s for s in ds.skipped}
    assert set(skipped) == {"27", "36", "45"}
    assert "not a readable torch tensor" in skipped["27"]["reason"] and skipped["27"]["file"].endswith("27.pt")
    assert "expected [T, 15]" in skipped["36"]["reason"]
    assert skipped["45"]["field"] == "joint_position" and "frame 10" in skipped["45"]["reason"]
    assert "27.pt" in text and "45.pt" in text


def test_rigid_dataset_has_no_object_joint_key(tmp_path):
    """Rigid datasets are written as before: no ``object_joint_names`` in meta/contact.json, no joint features."""
    from surrogate.capture import DatasetMeta, Environment, Episode, ObjectSpec, Provenance, write_dataset

    T = 5
    pose = np.zeros((T, 7))
    pose[:, 3] = 1.0
    pose[:, 2] = 0.1
    ep = Episode("a", np.arange(T) * 0.01, pose, ObjectSpec("box", 1.0, (np.eye(3) * 1e-3).tolist(), 0.1,
                                                             {"kind": "box", "half_extents": [0.05] * 3}),
                 Provenance("test", False, 100.0), Environment())
    write_dataset(tmp_path / "ds", [ep], DatasetMeta())
    contact = json.loads((tmp_path / "ds/meta/contact.json").read_text())
    assert "object_joint_names" not in contact and not any("joint" in k for k in contact["features"])


def test_urdf_articulated_scene_settles():
    if not URDF.exists():
        pytest.skip(f"sample data {URDF} is absent")
    art = load_articulation(URDF)
    assert [j.type for j in art.joints] == ["continuous"] and art.links[1].com == pytest.approx([0.035, 0, 0])
    s = build_scene(art.asset(), setting="ground", timestep=1 / 148 / 4)
    m = s.model
    assert m.nq == 8 and m.nv == 7 and s.meta["object_joint_qpos_adr"] == [7]
    assert len(s.owned_pairs) == 2 and {s.pair_roles[p] for p in s.owned_pairs} == {"object-ground"}
    d = s.make_data(drop_height=0.1)
    d.qpos[7] = 0.6
    for _ in range(148 * 4 * 2):
        mujoco.mj_step(m, d)
    assert np.abs(d.qvel).max() < 1e-4  # at rest
    assert d.qpos[2] == pytest.approx(0.025, abs=2e-3)  # flat on the floor: half the 0.05 m height
    lows = [d.geom_xpos[g][2] for g in s.object_geom_ids]
    assert min(lows) == pytest.approx(0.025, abs=2e-3)  # both links down


def test_link_poses_and_json_round_trip():
    if not URDF.exists():
        pytest.skip(f"sample data {URDF} is absent")
    art = load_articulation(URDF)
    back = articulation_from_json(json.loads(json.dumps(art.to_json())), pieces=False)
    base = np.array([[0.1, 0.2, 0.3, np.cos(0.2), 0, 0, np.sin(0.2)]])
    q = np.array([[0.7]])
    np.testing.assert_allclose(back.link_poses(base, q), art.link_poses(base, q))
    # hinge about link 1's y axis at (-0.035, 0.06, 0): at +pi/2 link 2's centre swings from x = 0 to z = -0.035
    com = art.com_positions(np.array([[0, 0, 0, 1.0, 0, 0, 0]]), np.array([[np.pi / 2]]))[0, 1]
    np.testing.assert_allclose(com, [-0.035, 0.06, -0.035], atol=1e-12)


def _toss_episode(held: int, T: int = 40):
    """A synthetic articulated toss: ``held`` frames accelerating upwards, then free flight."""
    from surrogate.capture import Environment, Episode, ObjectSpec, Provenance

    dt = 1 / 148
    t = np.arange(T) * dt
    z = np.where(np.arange(T) < held, 0.2 + 10 * t**2, 0.0)
    th = t[held] if held else 0.0
    z0, v0 = 0.2 + 10 * th**2, 20 * th
    z = np.where(np.arange(T) < held, z, z0 + v0 * (t - th) - 4.905 * (t - th) ** 2)
    pose = np.zeros((T, 7))
    pose[:, 2], pose[:, 3] = z, 1.0
    geo = load_articulation(URDF).to_json() if URDF.exists() else {"kind": "articulated", "joints": [{}]}
    return Episode("e", t, pose, ObjectSpec("elbow", 0.37, (np.eye(3) * 1e-4).tolist(), 0.1, geo),
                   Provenance("test", False, 148.0), Environment(), object_joint_pos=(0.5 + 2.0 * t)[:, None])


def test_free_flight_start_and_joint_estimate():
    if not URDF.exists():
        pytest.skip(f"sample data {URDF} is absent")
    assert free_flight_start(_toss_episode(0))["start"] == 0
    held = free_flight_start(_toss_episode(8))
    assert held["start"] in (7, 8) and held["accel_dev0"] > 15.0  # within a frame: the fit window straddles the release
    q, qd = initial_joint_state(_toss_episode(0), k=5)
    assert q == pytest.approx([0.5]) and qd == pytest.approx([2.0])


def test_articulated_scores_and_wrapped_joint_error():
    if not URDF.exists():
        pytest.skip(f"sample data {URDF} is absent")
    assert joint_errors(np.array([[np.pi - 0.01]]), np.array([[-np.pi + 0.01]]), [True])[0, 0] == pytest.approx(np.degrees(0.02))
    ep = _toss_episode(0)
    pred = np.concatenate([ep.object_pose, ep.object_joint_pos], axis=1)
    kw = dict(size=0.1, horizons=[0.1], divergence={"pos_frac": 0.1, "rot_deg": 15.0, "joint_deg": 15.0})
    s = score_episode(pred, ep, **kw)
    assert s["joint_deg"] == pytest.approx(0.0, abs=1e-9) and s["links"]["elbow_2"]["pos_pct_size"] == pytest.approx(0, abs=1e-9)
    pred[:, 7] += np.radians(20)  # link 2 turned 20 deg about the hinge: link 1 exact, link 2 off
    s = score_episode(pred, ep, **kw)
    assert s["pos_pct_size"] == 0 and s["joint_deg"] == pytest.approx(20.0)
    assert s["links"]["elbow_2"]["rot_deg"] == pytest.approx(20.0) and s["links"]["elbow_2"]["pos_pct_size"] > 5
    assert s["divergence_which"] == "joint" and s["divergence_step"] == 0
    rigid = score_episode(pred[:, :7], ep, **kw)  # a rigid prediction: the free-body figures, nothing added
    assert set(rigid) == {"id", "object", "pos_m", "pos_pct_size", "rot_deg", "final_pos_pct_size", "penetration_m",
                          "horizon_pos_pct_size", "horizon_rot_deg", "integrated_pos_pct_size", "divergence_step",
                          "divergence_time_s", "divergence_which", "unstable", "unstable_at_s"}


def test_scene_for_captured_elbow_episode(elbow_ds):
    ep = elbow_ds.episodes[0]
    from surrogate.capture import DatasetMeta

    s = scene_for_episode(ep, DatasetMeta(), margin=0.02, substeps=4, contact_mode="analytic")
    assert s.model.nq == 8 and s.model.body_mass[s.meta["object_link_bodies"]].tolist() == [0.37, 0.37]
    assert s.model.opt.timestep == pytest.approx(1 / 148 / 4)


def test_inspect_names_links_and_joints(elbow_ds, capsys):
    assert main(["inspect", str(elbow_ds.root)]) == 0
    text = capsys.readouterr().out
    assert "links elbow_1, elbow_2; joints hinge_1_to_2 (continuous)" in text
    assert "observation.object_joint_pos" in text


def test_elbow_dataset_has_lerobots_feature_mapping(elbow_ds):
    """The joint features (shape (1,) for one hinge: scalar columns) are what LeRobot 0.4.x loads."""
    from .test_lerobot_compat import layout_problems

    assert layout_problems(elbow_ds.root) == []


@needs_shared("contactnets_elbow")
def test_tosses_at_another_rate_are_refused_and_taken_with_rate_hz(tmp_path, capsys):
    src = tmp_path / "tosses_74hz"
    src.mkdir()
    for n in ("0", "9", "18", "27"):  # every second frame: 74 Hz, the velocities still 148 Hz differences x 2
        torch.save(torch.load(ELBOW / f"{n}.pt", weights_only=True)[::2].clone(), src / f"{n}.pt")
    args = ["import", "contactnets", str(src), "--urdf", str(URDF), "--out", str(tmp_path / "ds"), "--quiet"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "(74." in err and "--rate-hz" in err and not (tmp_path / "ds").exists()
    assert main(args + ["--rate-hz", "74"]) == 0
    ep = read_dataset(tmp_path / "ds").episodes[0]
    np.testing.assert_allclose(np.diff(ep.timestamps), 1 / 74, atol=1e-6)
    assert main(["import", "contactnets", str(src), "--out", str(tmp_path / "cube"), "--rate-hz", "74"]) == 2
    assert "rate_hz" in capsys.readouterr().err  # the cube's rate is its experiment file's


def test_tosses_of_a_urdf_without_joints_import_as_a_rigid_object(tmp_path):
    """No movable joint: a rigid object, no joint columns (``tests/test_import_rigid_urdf.py`` checks it fully)."""
    urdf = tmp_path / "box.urdf"
    urdf.write_text('<robot name="box"><link name="box"><inertial><mass value="0.37"/></inertial><collision>'
                    '<geometry><box size="0.1 0.05 0.05"/></geometry></collision></link></robot>')
    src = tmp_path / "tosses"
    src.mkdir()
    toss = torch.zeros(40, 13, dtype=torch.float64)  # the dair_pll layout of an object without joints
    toss[:, 0] = 1.0
    t = torch.arange(40, dtype=torch.float64) / 148.0
    toss[:, 6] = 0.5 + t - 0.5 * 9.81 * t**2  # in free flight: a toss's lengths are checked against gravity
    toss[1:, 12] = torch.diff(toss[:, 6]) * 148.0
    toss[0, 12] = toss[1, 12]
    torch.save(toss, src / "0.pt")
    assert main(["import", "contactnets", str(src), "--urdf", str(urdf), "--out", str(tmp_path / "ds"), "--quiet"]) == 0
    (ep,) = read_dataset(tmp_path / "ds").episodes
    assert ep.object_joint_pos is None and ep.object.geometry["kind"] == "box"


@needs_shared("contactnets_elbow")
def test_a_toss_held_past_the_frames_searched_is_scored_from_its_start_and_named():
    from surrogate.bench.elbow_real import from_flight_start
    from surrogate.bench.report_tables import articulated_lines

    cfg = {"free_flight": {"window": 7, "tol_ms2": 6.0, "max_start": 20}}
    released, held = from_flight_start([_toss_episode(8, T=60), _toss_episode(30, T=60)], cfg)
    assert released.labels["free_flight_start"] in (7, 8) and not released.labels["no_free_flight"]
    assert held.labels["free_flight_start"] == 0 and held.labels["no_free_flight"] and held.num_frames == 60
    summary = {"mean": 1.0, "mean_ci95": [0.5, 1.5], "median": 1.0, "n": 2}
    row = {"overall": {"pos_pct_size": summary, "joint_deg": summary, "horizons_joint_deg": {},
                       "links": {"elbow_1": {"pos_pct_size": summary, "rot_deg": summary}}}}
    text = "\n".join(articulated_lines({"models": {"surrogate": row}, "data": {"no_free_flight": ["e"]}}))
    assert "1 test toss(es) without a free-flight start" in text and "first frame" in text
