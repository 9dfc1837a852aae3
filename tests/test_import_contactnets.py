"""ContactNets importer: the real tosses, the upstream archive layout, and bad files."""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from surrogate.capture import read_dataset
from surrogate.cli import main
from surrogate.errors import CaptureError
from surrogate.importers.contactnets import HALF_WIDTH_M, _read_tensor, import_contactnets
from surrogate.importers.dair_cube import from_dair_layout
from surrogate.importers.toss_checks import _implied_dt

from .conftest import SHARED, needs_shared

CUBE = SHARED / "contactnets_cube"


@needs_shared("contactnets_cube")
def test_real_tosses_import_and_inspect(tmp_path, capsys):
    out = tmp_path / "cube"
    assert main(["import", "contactnets", str(CUBE), "--out", str(out), "--quiet"]) == 0
    assert main(["inspect", str(out), "--json"]) == 0
    s = json.loads(capsys.readouterr().out.split("skipped 0 inputs\n", 1)[1])
    assert s["episodes"] == 450
    assert s["rate_hz"] == pytest.approx(148.0)
    assert s["real"] == [True]
    # The cube rests on the ground with its centre one half-width (0.0524 m) up, within tracking noise.
    assert s["rest_height_m"]["episodes_at_rest"] > 400
    assert s["rest_height_m"]["median"] == pytest.approx(HALF_WIDTH_M, abs=0.003)
    ds = read_dataset(out)
    ids = {e.episode_id for e in ds.episodes}
    upstream = {p.stem for p in CUBE.glob("*.pt")}
    assert ids == upstream  # upstream toss numbers are the episode ids
    ep = next(e for e in ds.episodes if e.episode_id == "0")
    raw = torch.load(CUBE / "0.pt", weights_only=True)[0].numpy()
    np.testing.assert_allclose(ep.object_pose[:, :3], raw[:, :3] * HALF_WIDTH_M, atol=1e-6)
    np.testing.assert_allclose(np.diff(ep.timestamps), 1 / 148, atol=1e-5)
    assert ep.environment.gravity[2] == pytest.approx(-9.81, abs=0.01)


def _toss(T=30, seed=0, dt=1 / 148):
    """A toss [1, T, 19] in the files' units (half-widths): free flight under the authors' gravity from a random
    start high above the floor, its velocities the backward differences of its positions (the upstream files')."""
    rng = np.random.default_rng(seed)
    t = np.arange(T) * dt
    a = np.zeros((1, T, 19))
    v0 = rng.normal(size=3) * 5.0
    a[0, :, 0:3] = rng.normal(size=3) + v0 * t[:, None]
    a[0, :, 2] += 20.0 - 0.5 * 9.81 / HALF_WIDTH_M * t**2
    a[0, 1:, 7:10] = np.diff(a[0, :, 0:3], axis=0) / dt
    a[0, 0, 7:10] = a[0, 1, 7:10]
    a[0, :, 3] = 1.0
    return torch.from_numpy(a)


def _write_folder(folder, tosses):
    folder.mkdir(parents=True)
    for name, t in tosses.items():
        if isinstance(t, bytes):
            (folder / name).write_bytes(t)
        else:
            torch.save(t, folder / name)


def test_bad_files_are_skipped_and_reported(tmp_path):
    nan = _toss(seed=2)
    nan[0, 5, 1] = float("nan")
    badq = _toss(seed=3)
    badq[0, 7, 3] = 3.0
    buf = io.BytesIO()
    torch.save(_toss(seed=4), buf)
    tosses = {
        "1.pt": _toss(seed=1), "2.pt": nan, "3.pt": badq,
        "4.pt": buf.getvalue()[:200],  # truncated
        "5.pt": torch.zeros(1, 10, 12, dtype=torch.float64),  # wrong width
        "6.pt": torch.zeros(1, 1, 19, dtype=torch.float64),  # one frame
        "7.pt": _toss(seed=7).to(torch.int64),  # whole numbers: was "quaternion norm 0"
        "17.pt": _toss(seed=17),
    }
    _write_folder(tmp_path / "src", tosses)
    report = import_contactnets(tmp_path / "src", tmp_path / "out", progress=False)
    assert report.kept == 2
    by_episode = {s["episode"]: s for s in report.skipped}
    assert set(by_episode) == {"2", "3", "4", "5", "6", "7"}
    assert by_episode["7"]["field"] == "tensor" and by_episode["7"]["reason"] == "dtype int64, expected floating point"
    assert by_episode["2"]["field"] == "position" and "non-finite" in by_episode["2"]["reason"]
    assert by_episode["3"]["field"] == "object_pose" and "quaternion" in by_episode["3"]["reason"]
    assert by_episode["4"]["field"] == "tensor" and "4.pt" in by_episode["4"]["file"]
    assert "[1, T, 19]" in by_episode["5"]["reason"]
    ds = read_dataset(tmp_path / "out")
    assert [e.episode_id for e in ds.episodes] == ["1", "17"]
    assert len(ds.skipped) == 6  # the report travels with the dataset


def test_a_toss_without_its_batch_dimension_is_skipped_naming_its_shape(tmp_path):
    _write_folder(tmp_path / "src", {"1.pt": _toss(seed=1), "2.pt": _toss(seed=2)[0]})  # [T, 19]: had been read
    report = import_contactnets(tmp_path / "src", tmp_path / "out", progress=False)
    assert report.kept == 1
    assert [(s["episode"], s["field"], s["reason"]) for s in report.skipped] == [
        ("2", "tensor", "shape [30, 19], expected [1, T, 19] (or dair_pll's copy, [T, 13])")]
    assert report.skipped[0]["file"] == str(tmp_path / "src" / "2.pt")
    buf = io.BytesIO()  # a URDF object's tosses are [T, 13 + 2J]: with three joints, [T, 19] is its own shape
    torch.save(_toss(seed=3)[0], buf)
    assert _read_tensor(buf.getvalue(), "3.pt", columns=19).shape == (30, 19)


def test_upstream_archive_layout(tmp_path):
    archive = tmp_path / "contact-nets-main.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for n in (3, 11):
            buf = io.BytesIO()
            torch.save(_toss(seed=n, dt=0.01), buf)
            z.writestr(f"contact-nets-main/data/tosses_processed/{n}.pt", buf.getvalue())
        z.writestr("contact-nets-main/data/params_processed/experiment.json", json.dumps({"dt": 0.01, "mass": 0.5, "mu": 0.3}))
        z.writestr("contact-nets-main/README.md", "not a toss")
    report = import_contactnets(archive, tmp_path / "out", progress=False)
    assert report.kept == 2
    ds = read_dataset(tmp_path / "out")
    assert [e.episode_id for e in ds.episodes] == ["3", "11"]
    ep = ds.episodes[0]
    assert ep.object.mass == 0.5 and ep.object.friction == 0.3
    assert ep.provenance.capture_rate_hz == pytest.approx(100.0)


def test_nothing_to_import_and_no_partial_output(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(CaptureError, match="no toss files"):
        import_contactnets(tmp_path / "empty", tmp_path / "out", progress=False)
    # every file bad: nothing is published, and no temporary tree is left behind
    _write_folder(tmp_path / "bad", {"1.pt": b"garbage"})
    with pytest.raises(CaptureError, match="no valid episodes"):
        import_contactnets(tmp_path / "bad", tmp_path / "out", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "empty"]


def test_refuses_to_overwrite_without_flag(tmp_path):
    _write_folder(tmp_path / "src", {"1.pt": _toss()})
    import_contactnets(tmp_path / "src", tmp_path / "out", progress=False)
    assert main(["import", "contactnets", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    assert main(["import", "contactnets", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--quiet", "--overwrite"]) == 0


@needs_shared("contactnets_cube")
def test_a_time_step_half_the_tosses_own_is_refused(tmp_path):
    # the velocities in the files are differences of the positions at 148 Hz: an experiment file saying 296 Hz
    # would halve every velocity the dataset derives (a 2x error passed the check until the thirty-eighth session)
    src = tmp_path / "tosses"
    src.mkdir()
    for n in range(5):
        (src / f"{n}.pt").write_bytes((CUBE / f"{n}.pt").read_bytes())
    (src / "experiment.json").write_text(json.dumps({"dt": 1 / 296}))
    with pytest.raises(CaptureError, match=r"imply dt = 0\.0067.* \(148\.. Hz\)"):
        import_contactnets(src, tmp_path / "out", progress=False)
    (src / "experiment.json").write_text(json.dumps({"dt": 1 / 148}))
    assert import_contactnets(src, tmp_path / "out", progress=False).kept == 5


def test_torch_files_that_are_not_read_as_tosses_are_named(tmp_path):
    _write_folder(tmp_path / "src", {"1.pt": _toss(seed=1), "2.pt": _toss(seed=2), "toss_5.pt": _toss(seed=5)})
    (tmp_path / "src" / "README.md").write_text("notes, not a toss")
    _write_folder(tmp_path / "src" / "more", {"3.pt": _toss(seed=3)})
    report = import_contactnets(tmp_path / "src", tmp_path / "out", progress=False)
    assert report.kept == 2
    reasons = {Path(s["file"]).name: s["reason"] for s in read_dataset(tmp_path / "out").skipped}
    assert set(reasons) == {"toss_5.pt", "3.pt"}  # the README is no torch file: passed over
    assert "not named N.pt" in reasons["toss_5.pt"] and "in a subfolder" in reasons["3.pt"]
    _write_folder(tmp_path / "only", {"toss_5.pt": _toss(seed=5)})
    with pytest.raises(CaptureError, match=r"no toss files \(N.pt\) found\n.*toss_5.pt.*not named N.pt"):
        import_contactnets(tmp_path / "only", tmp_path / "out2", progress=False)


def test_a_toss_at_another_rate_is_skipped_naming_the_rate_it_implies(tmp_path, capsys):
    # the time-step check compared only the median over all tosses: a toss decimated by 3 (49 Hz) was imported at 148
    from .test_reliability import _consistent_tosses

    src = _consistent_tosses(tmp_path / "src", n=4)
    a = torch.load(src / "4.pt", weights_only=True)
    torch.save(a[:, ::3].clone(), src / "4.pt")
    assert main(["import", "contactnets", str(src), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    assert "4.pt: episode 4: field 'linear_velocity'" in capsys.readouterr().out
    ds = read_dataset(tmp_path / "out")
    assert [e.episode_id for e in ds.episodes] == ["1", "2", "3"]
    (s,) = ds.skipped
    assert s["file"].endswith("4.pt") and "Hz), not the dataset's 0.00675676 s (148 Hz)" in s["reason"]
    assert implied_hz(s["reason"]) == pytest.approx(148 / 3, rel=0.05)
    # a whole folder at another rate still stops the import, naming experiment.json's dt
    (src / "experiment.json").write_text(json.dumps({"dt": 3 / 148}))
    with pytest.raises(CaptureError, match="dt = 0.0202703 s contradicts the tosses") as e:
        import_contactnets(src, tmp_path / "out2", progress=False)
    assert e.value.field == "dt"


@needs_shared("contactnets_elbow")
def test_an_elbow_toss_at_another_rate_is_skipped_naming_the_rate_it_implies(tmp_path):
    elbow = SHARED / "contactnets_elbow"
    src = tmp_path / "src"
    src.mkdir()
    for n in (0, 108, 117):
        a = torch.load(elbow / f"{n}.pt", weights_only=True)
        torch.save(a[::2].clone() if n == 108 else a, src / f"{n}.pt")
    report = import_contactnets(src, tmp_path / "out", urdf=elbow / "contactnets_elbow.urdf", progress=False)
    assert report.kept == 2
    (s,) = report.skipped
    assert (s["episode"], s["field"]) == ("108", "linear_velocity")
    assert implied_hz(s["reason"]) == pytest.approx(148 / 2, rel=0.05)


def implied_hz(reason: str) -> float:
    """The rate a skipped toss's reason says its velocities imply."""
    return float(re.search(r"imply a step of \S+ s \(([\d.]+) Hz\)", reason).group(1))


@needs_shared("contactnets_elbow")
def test_a_few_glitched_frames_do_not_make_a_toss_another_rate():
    """Frames where the tracker jitters and the velocity column lags the positions by a frame (three of the elbow's
    upstream tosses, at an impact) leave the step the toss implies at its rate (a fit over all frames had read 165 Hz
    there, and reads 164 Hz here)."""
    a = torch.load(SHARED / "contactnets_elbow" / "9.pt", weights_only=True).numpy().copy()
    assert 1.0 / _implied_dt(a, 4, 11) == pytest.approx(148.0, rel=0.01)
    a[60:64, 4:7] += np.outer((-1.0) ** np.arange(4), [0.002, 0.0, 0.002])  # four frames of 2 mm jitter
    a[61:65, 11:14] = np.diff(a[:, 4:7], axis=0)[59:63] * 148.0  # the velocity column a frame late there
    assert 1.0 / _implied_dt(a, 4, 11) == pytest.approx(148.0, rel=0.02)
    a[1:, 11:14] /= 3.0  # velocities of a step three times as long: another rate, still seen
    assert 1.0 / _implied_dt(a, 4, 11) == pytest.approx(148.0 / 3, rel=0.02)


def test_a_gravity_in_the_wrong_units_is_refused_naming_what_the_tosses_imply(tmp_path):
    # experiment.json's g is in half-widths/s^2: 9.81 (m/s^2 by mistake) recorded gravity as 0.514 m/s^2
    from .test_reliability import _consistent_tosses

    src = _consistent_tosses(tmp_path / "src")  # in free flight at 9.81 m/s^2
    (src / "experiment.json").write_text(json.dumps({"dt": 1 / 148, "g": 9.81}))
    with pytest.raises(CaptureError, match=r"g = 9.81 half-widths/s\^2 \(0.514 m/s\^2\) contradicts the tosses.* "
                                           r"implies g = 187.2 half-widths/s\^2 \(9.81 m/s\^2\)") as e:
        import_contactnets(src, tmp_path / "out", progress=False)
    assert e.value.field == "g" and str(e.value.file).endswith("experiment.json")
    (src / "experiment.json").write_text(json.dumps({"dt": 1 / 148, "g": 9.81 / HALF_WIDTH_M}))
    ep = read_dataset(import_contactnets(src, tmp_path / "out", progress=False).out).episodes[0]
    assert ep.environment.gravity[2] == pytest.approx(-9.81)


def _to_dair_layout(a: np.ndarray) -> np.ndarray:
    """A ContactNets toss [T, 19] (half-widths) in dair_pll's layout [T, 13] (Drake's state order, metres): written
    here from the layout's definition, column by column, to check ``from_dair_layout`` against."""
    return np.c_[a[:, 3:7], a[:, 0:3] * HALF_WIDTH_M, a[:, 10:13], a[:, 7:10] * HALF_WIDTH_M]


@needs_shared("contactnets_cube")
def test_dair_pll_copies_of_the_cube_tosses_import_as_the_same_cube(tmp_path):
    """dair_pll stores the ContactNets tosses as [T, 13] in metres, without experiment.json: read as the same cube,
    with the authors' inertia, not a solid cube's; a file of neither shape is skipped, naming both."""
    src = tmp_path / "dair"
    src.mkdir()
    ids = ["0", "3", "10"]
    for i in ids:
        a = torch.load(CUBE / f"{i}.pt", weights_only=True)[0].numpy()
        torch.save(torch.from_numpy(_to_dair_layout(a)), src / f"{i}.pt")
    torch.save(torch.zeros(30, 14, dtype=torch.float64), src / "99.pt")
    report = import_contactnets(src, tmp_path / "out", progress=False)
    assert report.kept == 3
    assert [(s["episode"], s["field"]) for s in report.skipped] == [("99", "tensor")]
    assert "[T, 13]" in report.skipped[0]["reason"]
    import_contactnets(CUBE, tmp_path / "ref", progress=False)
    ref = {e.episode_id: e for e in read_dataset(tmp_path / "ref").episodes}
    for ep in read_dataset(tmp_path / "out").episodes:
        r = ref[ep.episode_id]
        np.testing.assert_allclose(ep.object_pose, r.object_pose, atol=1e-12)
        np.testing.assert_allclose(ep.object_twist, r.object_twist, atol=1e-12)
        np.testing.assert_allclose(ep.object.inertia, r.object.inertia, rtol=1e-12)  # the authors', from defaults
        assert ep.object.inertia[0][0] == pytest.approx(8.1e-4, rel=1e-3)
        assert "dair_pll" in ep.provenance.notes and "dair_pll" not in r.provenance.notes
    a = np.random.default_rng(0).normal(size=(5, 13))
    np.testing.assert_array_equal(_to_dair_layout(from_dair_layout(a)), a)


@pytest.mark.parametrize("experiment", [{"mass": 0.74}, {"mass": 0.74, "inertia": None}])
def test_a_mass_without_an_inertia_keeps_the_authors_radius_of_gyration(tmp_path, experiment):
    """experiment.json giving another mass and no inertia (or a null one) scales the authors' inertia with it."""
    _write_folder(tmp_path / "src", {"1.pt": _toss(seed=1)})
    (tmp_path / "src" / "experiment.json").write_text(json.dumps(experiment))
    import_contactnets(tmp_path / "src", tmp_path / "out", progress=False)
    (ep,) = read_dataset(tmp_path / "out").episodes
    assert ep.object.inertia[0][0] == pytest.approx(2 * 0.2950002913583124 * HALF_WIDTH_M**2)


def test_a_dair_copy_with_a_non_finite_value_names_its_own_column(tmp_path):
    """The column and field of a bad value are the file's (dair_pll's [T, 13]), not the converted layout's; and the
    report says that [T, 13] files were read as the cube."""
    flight = _toss(seed=1)[0].numpy() * HALF_WIDTH_M  # the same free flight in dair_pll's columns and metres
    good = np.c_[np.tile([1.0, 0, 0, 0], (30, 1)), flight[:, 0:3], np.zeros((30, 3)), flight[:, 7:10]]
    bad = good.copy()
    bad[7, 12] = np.nan
    _write_folder(tmp_path / "src", {"1.pt": torch.from_numpy(good), "2.pt": torch.from_numpy(bad)})
    report = import_contactnets(tmp_path / "src", tmp_path / "out", progress=False)
    (s,) = report.skipped
    assert (s["episode"], s["field"]) == ("2", "linear_velocity") and "frame 7, column 12" in s["reason"]
    assert any("read as the ContactNets cube" in w and "--urdf" in w for w in report.warnings)


def test_a_decimated_toss_with_a_long_rest_is_still_another_rate():
    """A toss that rests for most of its frames, kept every third frame: its flight says 49 Hz, which the many resting
    frames' noise must not outvote (an unweighted median over frames reads 169 Hz here, and read some shared tosses
    kept every third frame as 148 Hz)."""
    rng = np.random.default_rng(0)
    T, dt = 300, 1.0 / 148.0
    z = np.r_[np.maximum(2.0 + 3.0 * np.arange(100) * dt - 90.0 * (np.arange(100) * dt) ** 2, 1.0), np.ones(T - 100)]
    pos = np.c_[np.linspace(0, 1, T) * (np.arange(T) < 100), np.zeros(T), z] + rng.normal(0, 1e-3, (T, 3))
    a = np.zeros((T, 19))
    a[:, 0:3], a[:, 3] = pos, 1.0
    a[1:, 7:10] = np.diff(pos, axis=0) / dt
    assert 1.0 / _implied_dt(a) == pytest.approx(148.0, rel=0.02)
    assert 1.0 / _implied_dt(a[::3]) == pytest.approx(148.0 / 3, rel=0.1)  # more than 10 % off 148: skipped


def test_a_toss_in_another_length_unit_is_skipped_naming_the_gravity_it_falls_at(tmp_path):
    """A cube toss written in mm (or in metres) where the files hold half-widths has self-consistent velocities and
    can stay under the validator's speed bound: only its free flight, at 52x (1/19x) gravity, tells."""
    mm = _toss(T=15, seed=2).clone()  # short: its speeds stay under the validator's 100 m/s
    mm[0, :, 0:3] *= 1000 * HALF_WIDTH_M  # positions in mm
    mm[0, :, 7:10] *= 1000 * HALF_WIDTH_M
    metres = _toss(seed=3).clone()
    metres[0, :, 0:3] *= HALF_WIDTH_M
    metres[0, :, 7:10] *= HALF_WIDTH_M
    _write_folder(tmp_path / "src", {"1.pt": _toss(seed=1), "2.pt": mm, "3.pt": metres})
    report = import_contactnets(tmp_path / "src", tmp_path / "out", progress=False)
    assert report.kept == 1
    by = {s["episode"]: s for s in report.skipped}
    assert set(by) == {"2", "3"} and {s["field"] for s in by.values()} == {"position"}
    assert "52.4x gravity" in by["2"]["reason"] and "0.0524x gravity" in by["3"]["reason"]
    assert "another unit" in by["2"]["reason"]


def test_a_dropped_or_repeated_frame_is_skipped_naming_the_frame(tmp_path):
    """Timestamps are the frame count times dt: a frame missing from a file, or written twice, would shift every
    later frame in time. The toss's velocities (backward differences of its positions) show where."""
    full = _toss(T=40, seed=1)
    dropped = torch.cat([full[:, :20], full[:, 21:]], dim=1)
    repeated = torch.cat([full[:, :21], full[:, 20:]], dim=1)
    _write_folder(tmp_path / "src", {"1.pt": full, "2.pt": dropped, "3.pt": repeated})
    report = import_contactnets(tmp_path / "src", tmp_path / "out", progress=False)
    assert report.kept == 1
    by = {s["episode"]: s for s in report.skipped}
    moved = re.match(r"frame 20: its position moved (\S+) steps", by["2"]["reason"])
    assert by["2"]["field"] == "linear_velocity" and float(moved[1]) == pytest.approx(2.0, abs=0.1)
    assert by["3"]["field"] == "position" and by["3"]["reason"].startswith("frame 21 repeats frame 20's position exactly")


def test_one_toss_number_written_with_a_leading_zero_is_the_same_toss(tmp_path):
    _write_folder(tmp_path / "src", {"1.pt": _toss(seed=1), "01.pt": _toss(seed=1), "2.pt": _toss(seed=2)})
    report = import_contactnets(tmp_path / "src", tmp_path / "out", progress=False)
    assert report.kept == 2
    (s,) = report.skipped
    assert s["episode"] == "1" and "appears twice" in s["reason"]


def _zipped(path: Path, members: dict) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, t in members.items():
            buf = io.BytesIO()
            torch.save(t, buf)
            z.writestr(name, buf.getvalue())
    return path


def test_an_archive_of_one_toss_folder_is_read_and_one_of_several_is_refused_naming_them(tmp_path):
    flat = _zipped(tmp_path / "flat.zip", {"1.pt": _toss(seed=1), "2.pt": _toss(seed=2)})
    assert import_contactnets(flat, tmp_path / "a", progress=False).kept == 2
    nested = _zipped(tmp_path / "nested.zip", {"mine/tosses/1.pt": _toss(seed=1), "mine/README.pt": _toss(seed=2)})
    assert import_contactnets(nested, tmp_path / "b", progress=False).kept == 1
    two = _zipped(tmp_path / "two.zip", {"assets/cube/1.pt": _toss(seed=1), "assets/elbow/1.pt": _toss(seed=2)})
    with pytest.raises(CaptureError, match=r"2 folders \('assets/cube', 'assets/elbow'\)") as e:
        import_contactnets(two, tmp_path / "c", progress=False)
    assert e.value.field == "archive" and not (tmp_path / "c").exists()
    truncated = tmp_path / "cut.zip"
    truncated.write_bytes(flat.read_bytes()[:300])
    with pytest.raises(CaptureError, match="unreadable archive, truncated or corrupt") as e:
        import_contactnets(truncated, tmp_path / "d", progress=False)
    assert e.value.field == "archive"


def test_a_file_of_pickled_objects_is_refused_unread_and_named(tmp_path):
    import os

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {tmp_path / 'ran'}",)

    buf = io.BytesIO()
    torch.save({"toss": Payload()}, buf)
    _write_folder(tmp_path / "src", {"1.pt": _toss(seed=1), "2.pt": buf.getvalue()})
    report = import_contactnets(tmp_path / "src", tmp_path / "out", progress=False)
    (s,) = report.skipped
    assert s["field"] == "tensor" and s["reason"].startswith("holds pickled Python objects (")
    assert s["reason"].endswith("not only tensors: refused unread") and not (tmp_path / "ran").exists()


def test_a_rate_the_tosses_contradict_without_an_experiment_file_says_how_to_give_theirs(tmp_path):
    _write_folder(tmp_path / "src", {f"{i}.pt": _toss(seed=i, dt=1 / 74) for i in (1, 2, 3)})
    with pytest.raises(CaptureError, match=r"no experiment.json beside the tosses.*\"dt\"") as e:
        import_contactnets(tmp_path / "src", tmp_path / "out", progress=False)
    assert e.value.field == "dt" and Path(e.value.file) == tmp_path / "src"


def test_an_articulated_objects_toss_without_its_urdf_is_named_with_the_way_out(tmp_path):
    _write_folder(tmp_path / "src", {"1.pt": torch.zeros(30, 15, dtype=torch.float64)})
    with pytest.raises(CaptureError, match=r"1 joint\(s\).*pass its URDF \(--urdf\)"):
        import_contactnets(tmp_path / "src", tmp_path / "out", progress=False)


@needs_shared("contactnets_elbow")
def test_an_elbow_toss_with_its_hinge_in_degrees_or_a_repeated_frame_is_skipped_naming_it(tmp_path):
    """The layout's angles are radians wrapped to (-pi, pi]: one in degrees reaches 105 "rad". A frame written twice
    is named as a duplicate (the elbow's velocities do not show a dropped frame: see check_toss_frames)."""
    elbow = SHARED / "contactnets_elbow"
    urdf = elbow / "contactnets_elbow.urdf"
    files = sorted(elbow.glob("*.pt"), key=lambda p: int(p.stem))[:3]
    good, deg, rep = (torch.load(f, weights_only=True) for f in files)
    deg[:, 7] *= 180.0 / np.pi
    deg[:, 14] *= 180.0 / np.pi
    rep = torch.cat([rep[:21], rep[20:]])
    _write_folder(tmp_path / "src", {"1.pt": good, "2.pt": deg, "3.pt": rep})
    report = import_contactnets(tmp_path / "src", tmp_path / "out", progress=False, urdf=urdf)
    assert report.kept == 1
    by = {s["episode"]: s for s in report.skipped}
    assert by["2"]["field"] == "joint_position" and "outside [-pi, pi]" in by["2"]["reason"]
    assert "(degrees?)" in by["2"]["reason"]
    assert by["3"]["field"] == "position" and by["3"]["reason"].startswith("frame 21 repeats frame 20's position")
