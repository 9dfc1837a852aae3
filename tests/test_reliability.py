"""Issue #13, "nothing lost, nothing mixed, every bad input named": one test per reported case.

Each test is named for the behaviour it guards (the issue's case numbers are gone from the names). Rig tests use the analytic fixture of
``test_rig_generate`` (fast, seeded), except the orphan test, whose fixture sleeps so that a
worker is surely busy when its run is killed; training tests use ``test_model``'s tiny capture.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from surrogate.atomic import pid_lock
from surrogate.capture import read_dataset
from surrogate.cli import main
from surrogate.errors import ConfigError, ForeignOutputError, LockedError
from surrogate.rig.generate import generate, shard_path

from .conftest import SHARED, needs_shared
from .test_rig_generate import REPO, analytic_simulate, assert_same_dataset, fake, gen


def _parts(tmp_path, name="ds") -> Path:
    return Path(f"{tmp_path / name}.parts")


# ----------------------------------------------------------------------------- case 2: resume checks its shards; one writer


def test_resume_refuses_shards_of_another_run(tmp_path):
    gen(tmp_path, "ds", **fake(), episodes=3, workers=0, keep_parts=True)  # seed 3
    shutil.rmtree(tmp_path / "ds")
    (_parts(tmp_path) / "run.json").unlink()  # the manifest is gone: only the shards can tell
    with pytest.raises(ConfigError, match="another run") as e:
        gen(tmp_path, "ds", **fake(), episodes=3, workers=0, seed=4, overwrite=True)
    assert "episode_000000.npz" in str(e.value) and e.value.location.field == "seed"
    assert not (tmp_path / "ds").exists() and not (_parts(tmp_path) / "run.json").exists()
    report = gen(tmp_path, "ds", **fake(), episodes=3, workers=0)  # the original arguments resume it
    assert report.reused == 3 and report.simulated == 0 and report.written == 3


def test_second_concurrent_writer_is_refused(tmp_path):
    lock = Path(f"{tmp_path / 'ds'}.lock")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        lock.write_text(f"{sleeper.pid}\n")
        with pytest.raises(LockedError, match=f"PID {sleeper.pid}"):
            gen(tmp_path, "ds", **fake(), episodes=2, workers=0)
        assert not (tmp_path / "ds").exists() and lock.read_text().strip() == str(sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait()
    report = gen(tmp_path, "ds", **fake(), episodes=2, workers=0)  # its process is gone: the stale lock is taken over
    assert report.written == 2 and not lock.exists()


@pytest.mark.parametrize("text", ["my notes about ds\n", "", "123 and some notes\n"])
def test_a_users_file_named_like_the_lock_is_refused_and_left_alone(tmp_path, text):
    lock = Path(f"{tmp_path / 'ds'}.lock")
    lock.write_text(text)  # a file of the user's that happens to have the lock's name: no PID of ours in it
    with pytest.raises(ForeignOutputError, match="is not a lock of contact-surrogate") as e:
        gen(tmp_path, "ds", **fake(), episodes=2, workers=0)
    assert str(lock) in str(e.value) and lock.read_text() == text and sorted(os.listdir(tmp_path)) == ["ds.lock"]


def test_a_lock_is_written_whole_and_a_dead_writers_temporary_file_is_removed(tmp_path):
    """The PID is linked into place with the lock (a kill never leaves an empty lock, which is refused as foreign)."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / f".ds.lock.{dead.pid}.tmp").write_text(f"{dead.pid}\n")  # killed between its write and its link
    with pid_lock(tmp_path / "ds") as lock:
        assert lock.read_text() == f"{os.getpid()}\n" and sorted(os.listdir(tmp_path)) == ["ds.lock"]
    assert os.listdir(tmp_path) == []


# ----------------------------------------------------------------------------- case 3: a corrupt shard is regenerated


def test_corrupt_shard_is_regenerated(tmp_path):
    gen(tmp_path, "ds", **fake(), episodes=4, workers=0, keep_parts=True)
    shutil.rmtree(tmp_path / "ds")  # as if the run had been killed before assembling
    shard_path(_parts(tmp_path), 0).write_bytes(b"garbage")
    report = gen(tmp_path, "ds", **fake(), episodes=4, workers=0)
    assert report.written == 4 and not report.skipped, report.summary()
    assert report.regenerated == [0] and report.reused == 3 and report.simulated == 1
    assert "regenerated 1" in report.summary()
    gen(tmp_path, "ref", **fake(), episodes=4, workers=0)
    assert_same_dataset(tmp_path / "ds", tmp_path / "ref")


# ----------------------------------------------------------------------------- case 4: no orphaned workers


def slow_simulate(cfg, obj, *, hand, seed, duration=None):
    """The analytic fixture, after announcing itself and sleeping long (a worker busy in an episode)."""
    marker = Path(cfg["test"]["marker_dir"]) / f"worker_{os.getpid()}"
    marker.write_text("started")
    time.sleep(float(cfg["test"].get("sleep", 60)))
    return analytic_simulate(cfg, obj, hand=hand, seed=seed, duration=duration)


def slow_gen(tmp: str) -> None:
    generate({"recorder": {}, "test": {"marker_dir": tmp, "sleep": 60}}, objects="heldout", episodes=2,
             out=Path(tmp) / "ds", workers=1, seed=3, progress=False, simulate_fn=slow_simulate, duration=0.4)


def _gone(proc) -> bool:
    import psutil

    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_workers_exit_when_the_run_is_killed(tmp_path):
    psutil = pytest.importorskip("psutil")
    code = f"from tests.test_reliability import slow_gen; slow_gen({str(tmp_path)!r})"
    child = subprocess.Popen([sys.executable, "-c", code], cwd=REPO)
    try:
        deadline = time.time() + 60
        while not list(tmp_path.glob("worker_*")) and time.time() < deadline and child.poll() is None:
            time.sleep(0.05)
        assert list(tmp_path.glob("worker_*")), "the worker never started"
        descendants = psutil.Process(child.pid).children(recursive=True)
        worker_pids = {int(p.name.split("_")[1]) for p in tmp_path.glob("worker_*")}
        assert worker_pids <= {p.pid for p in descendants}
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    deadline = time.time() + 5
    while time.time() < deadline and not all(_gone(p) for p in descendants):
        time.sleep(0.1)
    left = [p.pid for p in descendants if not _gone(p)]
    for p in descendants:  # clean up on failure: only the processes this test started
        if not _gone(p):
            p.kill()
    assert not left, f"processes still alive after their run was killed: {left}"


# ----------------------------------------------------------------------------- case 1: --overwrite only replaces our datasets


def _toss_folder(folder, n=2):
    from .test_import_contactnets import _toss, _write_folder

    _write_folder(folder, {f"{i}.pt": _toss(seed=i) for i in range(1, n + 1)})
    return folder


def test_overwrite_refuses_a_foreign_folder(tmp_path, capsys):
    src = _toss_folder(tmp_path / "src")
    x = tmp_path / "X"
    x.mkdir()
    (x / "notes.txt").write_text("precious\n")
    assert main(["import", "contactnets", str(src), "--out", str(x), "--overwrite", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert (x / "notes.txt").read_text() == "precious\n" and str(x) in err and "not a capture dataset" in err
    assert "Traceback" not in err
    # our own dataset is still replaced, and then only that
    assert main(["import", "contactnets", str(src), "--out", str(tmp_path / "ds"), "--quiet"]) == 0
    assert main(["import", "contactnets", str(src), "--out", str(tmp_path / "ds"), "--overwrite", "--quiet"]) == 0
    # a user's own file beside our dataset's meta/ and data/: replacing the folder would delete it (it did)
    (tmp_path / "ds" / "my_analysis.txt").write_text("mine\n")
    assert main(["import", "contactnets", str(src), "--out", str(tmp_path / "ds"), "--overwrite", "--quiet"]) == 2
    assert "my_analysis.txt" in capsys.readouterr().err and (tmp_path / "ds" / "my_analysis.txt").is_file()


def test_writer_and_rig_refuse_a_foreign_folder(tmp_path):
    from surrogate.capture import write_dataset

    x = tmp_path / "X"
    x.mkdir()
    (x / "notes.txt").write_text("precious\n")
    gen(tmp_path, "ok", **fake(), episodes=1, workers=0)
    ds = read_dataset(tmp_path / "ok")
    with pytest.raises(ForeignOutputError, match="not a capture dataset"):
        write_dataset(x, ds.episodes, ds.meta, overwrite=True)
    with pytest.raises(ForeignOutputError, match="not a capture dataset"):
        gen(tmp_path, "X", **fake(), episodes=1, workers=0, overwrite=True)
    (x / "meta").mkdir()
    (x / "meta" / "contact.json").write_text('{"schema": "someone-else"}')
    with pytest.raises(ForeignOutputError):
        write_dataset(x, ds.episodes, ds.meta, overwrite=True)
    assert (x / "notes.txt").read_text() == "precious\n"
    assert not list(tmp_path.glob(".X.*"))  # no temporary tree left behind either
    write_dataset(tmp_path / "ok", ds.episodes, ds.meta, overwrite=True)  # ours: replaced


# ----------------------------------------------------------------------------- case 6: contactnets bad toss files and parameters


def _skips(report):
    return {s["episode"]: s for s in report.skipped}


def test_directory_named_pt_is_skipped(tmp_path):
    from surrogate.importers.contactnets import import_contactnets

    src = _toss_folder(tmp_path / "src")
    (src / "7.pt").mkdir()
    report = import_contactnets(src, tmp_path / "out", progress=False)
    assert report.kept == 2 and _skips(report)["7"]["field"] == "file" and "folder" in _skips(report)["7"]["reason"]
    assert [e.episode_id for e in read_dataset(tmp_path / "out").episodes] == ["1", "2"]


def test_symlink_loop_and_dangling_link_are_skipped(tmp_path):
    from surrogate.importers.contactnets import import_contactnets

    src = _toss_folder(tmp_path / "src")
    os.symlink("8.pt", src / "8.pt")  # a loop
    os.symlink(tmp_path / "missing.pt", src / "9.pt")  # dangling
    report = import_contactnets(src, tmp_path / "out", progress=False)
    skips = _skips(report)
    assert report.kept == 2 and set(skips) == {"8", "9"}
    assert all(s["field"] == "file" and "symlink" in s["reason"] for s in skips.values())
    assert skips["8"]["file"].endswith("8.pt") and skips["9"]["file"].endswith("9.pt")


def _tar_gz(path, members: dict):
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return path


def _toss_bytes(seed, **kw):
    import io

    import torch

    from .test_import_contactnets import _toss

    buf = io.BytesIO()
    torch.save(_toss(seed=seed, **kw), buf)
    return buf.getvalue()


def test_same_toss_twice_in_an_archive_keeps_the_first(tmp_path):
    from surrogate.importers.contactnets import import_contactnets

    archive = _tar_gz(tmp_path / "up.tar.gz", {
        "a/data/tosses_processed/3.pt": _toss_bytes(3), "a/data/tosses_processed/4.pt": _toss_bytes(4),
        "b/data/tosses_processed/3.pt": _toss_bytes(5)})
    report = import_contactnets(archive, tmp_path / "out", progress=False)
    skips = _skips(report)
    assert report.kept == 2 and set(skips) == {"3"} and "appears twice" in skips["3"]["reason"]
    assert skips["3"]["file"].endswith("b/data/tosses_processed/3.pt")
    assert [e.episode_id for e in read_dataset(tmp_path / "out").episodes] == ["3", "4"]


def test_truncated_tar_gz_stops_naming_the_archive(tmp_path, capsys):
    members = {f"a/data/tosses_processed/{i}.pt": _toss_bytes(i, T=400) for i in range(1, 5)}
    archive = _tar_gz(tmp_path / "up.tar.gz", members)
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) * 2 // 3])
    assert main(["import", "contactnets", str(archive), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "up.tar.gz: field 'archive': unreadable archive" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("params, field", [
    ({"dt": 0}, "dt"), ({"dt": "abc"}, "dt"), ({"mass": "x"}, "mass"), ({"mu": None}, "mu"), ([0.01, 0.37], None)])
def test_bad_experiment_json_stops_naming_the_field(tmp_path, capsys, params, field):
    src = _toss_folder(tmp_path / "src")
    (src / "experiment.json").write_text(json.dumps(params))
    assert main(["import", "contactnets", str(src), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "experiment.json" in err and "Traceback" not in err
    assert (f"field '{field}'" in err) if field else "JSON object" in err
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- case 8: every input bad: say why for each


def test_all_bad_inputs_print_each_reason(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    (src / "1.pt").write_bytes(b"garbage")
    (src / "2.pt").mkdir()
    assert main(["import", "contactnets", str(src), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "no valid episodes to write" in err
    assert "1.pt: episode 1: field 'tensor': not a readable torch tensor" in err
    assert "2.pt: episode 2: field 'file': is a folder" in err


# ----------------------------------------------------------------------------- case 9: values that must be rejected


def _consistent_tosses(folder, dt=1 / 148, n=3):
    """Tosses whose velocity columns are the backward differences of their positions (as upstream)."""
    import torch

    folder.mkdir()
    for i in range(1, n + 1):
        T = 60
        t = np.arange(T) * dt
        a = np.zeros((1, T, 19))
        a[0, :, 0] = 0.5 * t / 0.0524
        a[0, :, 2] = (1.0 + 2.0 * t - 0.5 * 9.81 * t**2) / 0.0524 + i
        a[0, :, 3] = 1.0
        a[0, 1:, 7:10] = np.diff(a[0, :, 0:3], axis=0) / dt
        a[0, 0, 7:10] = a[0, 1, 7:10]
        torch.save(torch.from_numpy(a), folder / f"{i}.pt")
    return folder


def test_dt_contradicting_the_tosses_is_rejected(tmp_path, capsys):
    src = _consistent_tosses(tmp_path / "src")
    (src / "experiment.json").write_text(json.dumps({"dt": 1.0}))
    assert main(["import", "contactnets", str(src), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "experiment.json: field 'dt'" in err and "148" in err
    (src / "experiment.json").write_text(json.dumps({"dt": 1 / 148}))
    assert main(["import", "contactnets", str(src), "--out", str(tmp_path / "out"), "--quiet"]) == 0


# ----------------------------------------------------------------------------- case 7: poses importer files and config values


@pytest.fixture
def poses_setup(tmp_path):
    """(src folder with one good CSV, config path) for the poses importer."""
    import trimesh

    from .test_import_poses import _config, _trajectory, _write_csv

    mesh = tmp_path / "box.stl"
    trimesh.creation.box(extents=[40, 60, 80]).export(mesh)
    src = tmp_path / "tracks"
    src.mkdir()
    t, pos, rot = _trajectory()
    _write_csv(src / "good.csv", t, pos, rot)
    return src, _config(tmp_path, mesh)


def test_non_utf8_and_header_only_csv_are_skipped(tmp_path, poses_setup):
    from surrogate.importers.poses import import_poses

    src, cfg = poses_setup
    good = (src / "good.csv").read_text()
    (src / "latin1.csv").write_bytes(good.replace("time_ms", "t\u00e9mps_ms").encode("latin-1"))
    (src / "header_only.csv").write_text(good.splitlines()[0] + "\n")
    report = import_poses(src, tmp_path / "out", config=cfg, progress=False)
    skips = _skips(report)
    assert report.kept == 1 and set(skips) == {"latin1", "header_only"}
    assert skips["latin1"]["field"] == "encoding" and "UTF-8" in skips["latin1"]["reason"]
    assert skips["header_only"]["field"] == "rows" and "no data rows" in skips["header_only"]["reason"]


def test_utf8_bom_header_is_accepted(tmp_path, poses_setup):
    from surrogate.importers.poses import import_poses

    src, cfg = poses_setup
    (src / "bom.csv").write_bytes(b"\xef\xbb\xbf" + (src / "good.csv").read_bytes())
    report = import_poses(src, tmp_path / "out", config=cfg, progress=False)
    assert report.kept == 2 and not report.skipped, report.summary()


@pytest.mark.parametrize("override, key", [
    ("environment.height=abc", "environment.height"), ("environment.height=1e9", "environment.height"),
    ("environment.foo=1", "environment.foo"), ("environment.gravity=abc", "environment.gravity"),
    ("object.mass=heavy", "object.mass"), ("rate_hz=-5", "rate_hz"), ("provenance.real=maybe", "provenance.real")])
def test_bad_config_values_name_the_key(tmp_path, poses_setup, capsys, override, key):
    src, cfg = poses_setup
    rc = main(["import", "poses", str(src), "--out", str(tmp_path / "out"), "--config", str(cfg), "--set", override, "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and f"field '{key}'" in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


def test_numeric_text_is_read_as_a_number(tmp_path, poses_setup):
    from surrogate.importers.poses import load_config

    _, cfg = poses_setup
    c = load_config(cfg, ["environment.height=1e-1", "environment.gravity=[0, 0, -9.8]"])
    assert c["environment"]["height"] == 0.1 and isinstance(c["environment"]["height"], float)


def _cube_dataset(tmp_path, name="ds"):
    from surrogate.importers.contactnets import import_contactnets

    src = tmp_path / f"{name}_src"
    if not src.exists():
        _consistent_tosses(src)
    import_contactnets(src, tmp_path / name, progress=False)
    return tmp_path / name


def _edit_json(path, fn):
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("fps", [0, -5, "148"])
def test_info_fps_must_be_positive(tmp_path, fps):
    from surrogate.errors import CaptureError

    ds = _cube_dataset(tmp_path)
    _edit_json(ds / "meta/info.json", lambda d: d.update(fps=fps))
    with pytest.raises(CaptureError, match="info.json: field 'fps'"):
        read_dataset(ds)


def test_capture_rate_hz_must_be_positive(tmp_path):
    from surrogate.errors import CaptureError

    ds = _cube_dataset(tmp_path)
    _edit_json(ds / "meta/contact.json", lambda d: d.update(capture_rate_hz=0))
    with pytest.raises(CaptureError, match="contact.json: field 'capture_rate_hz'"):
        read_dataset(ds)


def test_removed_feature_description_is_rejected(tmp_path):
    from surrogate.errors import CaptureError

    ds = _cube_dataset(tmp_path)
    _edit_json(ds / "meta/contact.json", lambda d: d["features"].pop("observation.object_twist"))
    with pytest.raises(CaptureError, match="contact.json: field 'features.observation.object_twist'"):
        read_dataset(ds)


@pytest.mark.parametrize("missing", ["meta/stats.json", "meta/episodes/chunk-000/file-000.parquet"])
def test_missing_stats_or_episodes_parquet_is_rejected(tmp_path, missing):
    from surrogate.errors import CaptureError

    ds = _cube_dataset(tmp_path)
    (ds / missing).unlink()
    with pytest.raises(CaptureError, match=f"{missing}: missing"):
        read_dataset(ds)


def test_absurd_twist_is_rejected(tmp_path):
    import torch

    from surrogate.importers.contactnets import import_contactnets

    src = _consistent_tosses(tmp_path / "src")
    a = torch.load(src / "2.pt", weights_only=True)
    a[0, 10, 7] = 1e22
    torch.save(a, src / "2.pt")
    report = import_contactnets(src, tmp_path / "out", progress=False)
    s = _skips(report)["2"]
    assert report.kept == 2 and s["field"] == "object_twist" and "frame 10" in s["reason"] and "m/s" in s["reason"]


# ----------------------------------------------------------------------------- case 13: modes, stale temporary trees, messages


def test_datasets_get_the_users_umask(tmp_path):
    old = os.umask(0o022)
    try:
        ds = _cube_dataset(tmp_path)
    finally:
        os.umask(old)
    modes = {p.relative_to(ds).as_posix(): p.stat().st_mode & 0o777 for p in [ds, *ds.rglob("*")]}
    assert modes["."] == 0o755 and modes["meta"] == 0o755
    assert modes["meta/contact.json"] == modes["meta/info.json"] == modes["meta/stats.json"] == 0o644
    assert set(modes.values()) <= {0o755, 0o644}, modes


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_stale_partial_folders_are_cleaned_up(tmp_path):
    from surrogate.atomic import PARTIAL_MARKER

    ours = tmp_path / ".ds.crashed1.partial"  # left by a write whose process died
    ours.mkdir()
    (ours / PARTIAL_MARKER).write_text(f"{_dead_pid()}\n")
    (ours / "meta").mkdir()
    live = tmp_path / ".ds.running.partial"  # another process is building it right now
    live.mkdir()
    (live / PARTIAL_MARKER).write_text(f"{os.getppid()}\n")
    foreign = tmp_path / ".ds.someone.partial"  # no marker: not ours, left alone
    foreign.mkdir()
    (foreign / "keep.txt").write_text("x")
    ds = _cube_dataset(tmp_path)
    assert not ours.exists() and live.exists() and (foreign / "keep.txt").exists()
    assert not (ds / PARTIAL_MARKER).exists()  # the marker never ships in a dataset


def test_messages_print_plain_numbers(tmp_path, poses_setup, capsys):
    src, cfg = poses_setup
    text = (src / "good.csv").read_text().splitlines()
    text[11] = text[10]  # a repeated timestamp
    (src / "repeated.csv").write_text("\n".join(text) + "\n")
    assert main(["import", "poses", str(src), "--out", str(tmp_path / "out"), "--config", str(cfg), "--quiet"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "repeated.csv" in x)
    assert "np.float" not in line and "not strictly increasing: frame 10 at 0.075 s follows 0.075 s" in line, line


# ----------------------------------------------------------------------------- case 10: checkpoint cards with bad hyperparameters


def _tiny_checkpoint(folder):
    import torch

    from surrogate.model.checkpoint import export_checkpoint
    from surrogate.model.contact_law import ContactLawGNN

    torch.manual_seed(0)
    return export_checkpoint(ContactLawGNN(hidden=8, steps=1, mlp_layers=1).eval(), folder)


@pytest.mark.parametrize("key, value", [
    ("hidden", 1e7), ("steps", -1), ("steps", 100), ("hidden", "abc"), ("mlp_layers", 17), ("mu_max", 0),
    ("bounds", [1.0, 2.0]), ("bounds", [1.0, 2.0, 1e3]), ("friction_iterations", 1000), ("prior", "stiff")])
def test_bad_card_hyperparameters_are_refused_naming_the_key(tmp_path, key, value):
    from surrogate.model.checkpoint import CheckpointError, load_checkpoint

    ckpt = _tiny_checkpoint(tmp_path / "ckpt")
    load_checkpoint(ckpt)  # as exported: loads
    _edit_json(ckpt / "card.json", lambda c: c["model"]["hparams"].update({key: value}))
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(ckpt)
    assert str(ckpt / "card.json") in str(e.value) and f"model.hparams.{key}" in str(e.value), str(e.value)


def test_bench_with_a_corrupt_checkpoint_fails_before_any_baseline(tmp_path, monkeypatch):
    from surrogate.bench import cube_real
    from surrogate.bench.run import run_suite
    from surrogate.model.checkpoint import CheckpointError

    def never(*a, **k):
        pytest.fail("baseline work ran before the checkpoint was checked")

    monkeypatch.setattr(cube_real, "load_tosses", never)
    monkeypatch.setattr(cube_real, "identify", never)
    ckpt = _tiny_checkpoint(tmp_path / "ckpt")
    (ckpt / "weights.safetensors").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="weights.safetensors"):
        run_suite("cube-real-small", out=tmp_path / "report", checkpoint=ckpt, progress=False, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "report").exists()


# ----------------------------------------------------------------------------- case 12: environments MuJoCo resets are counted


def _reset_count_run(stepper, scene, ds, nstep=3):
    import warnings

    from surrogate.sim import step

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        step(scene.model, ds, stepper, nstep=nstep)
    return [str(x.message) for x in w if "MuJoCo reset" in str(x.message)]


def test_mujoco_resets_are_counted_per_environment():
    from surrogate.objects import make_object
    from surrogate.scenes import build_scene
    from surrogate.sim import MuJoCoContact, Stepper

    s = build_scene(make_object("box", 0), hand="parallel_jaw", setting="table")
    for contact in ("surrogate", "analytic"):
        st = Stepper(s, MuJoCoContact(s), contact=contact)
        ds = [s.make_data(), s.make_data()]
        _reset_count_run(st, s, ds)
        assert st.stats()["mujoco_resets"] == 0 and st.stats()["mujoco_reset_envs"] == {}
        ds[1].qvel[s.object_dof_adr] = np.nan  # MuJoCo resets env 1 in its next step
        msgs = _reset_count_run(st, s, ds)
        assert st.stats()["mujoco_resets"] == 1 and st.stats()["mujoco_reset_envs"] == {1: 1}, contact
        assert len(msgs) == 1 and "env 1" in msgs[0] and "qvel" in msgs[0]
        ds[1].qvel[s.object_dof_adr] = np.nan  # the same kind again: MuJoCo's counter stays at 1, still counted
        assert _reset_count_run(st, s, ds) == []  # warned once
        assert st.stats()["mujoco_resets"] == 2 and st.stats()["mujoco_reset_envs"] == {1: 2}
        assert np.isfinite(ds[0].qvel).all() and ds[0].time == pytest.approx(9 * s.model.opt.timestep)


def test_a_huge_finite_force_reset_is_counted_for_that_env_only():
    import torch

    from surrogate.objects import make_object
    from surrogate.scenes import build_scene
    from surrogate.sim import Stepper

    class HugeOnEnv1:
        def __call__(self, graph):
            f = torch.zeros((graph.edge_index.shape[1], 3))
            f[graph.env == 1, 2] = 1e12  # finite, below the raised max_force: MuJoCo's qacc check resets it
            return f

    s = build_scene(make_object("box", 0), hand="parallel_jaw", setting="table")
    st = Stepper(s, HugeOnEnv1(), max_force=1e20)
    ds = [s.make_data(), s.make_data()]
    msgs = _reset_count_run(st, s, ds, nstep=4)
    stats = st.stats()
    assert stats["mujoco_resets"] == 4 and stats["mujoco_reset_envs"] == {1: 4} and stats["fallbacks"] == 0
    assert len(msgs) == 1 and "env 1" in msgs[0] and "qacc" in msgs[0]


@needs_shared("contactnets_cube")
def test_downloaded_archive_is_removed(tmp_path, monkeypatch):
    """An import from a URL downloads the archive into a temporary folder of its own and removes it."""
    import io
    import tempfile
    import urllib.request
    import zipfile

    from surrogate.importers.contactnets import import_contactnets

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for p in sorted((SHARED / "contactnets_cube").glob("*.pt"))[:3]:
            z.write(p, f"contact-nets/data/tosses_processed/{p.name}")
    made = []
    real_mkdtemp = tempfile.mkdtemp

    def mkdtemp(*a, **k):
        made.append(Path(real_mkdtemp(*a, dir=tmp_path, **{k_: v for k_, v in k.items() if k_ != "dir"})))
        return str(made[-1])

    class Response(io.BytesIO):
        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout=60: Response(buf.getvalue()))
    report = import_contactnets("https://example.invalid/contact-nets.zip", tmp_path / "out", progress=False)
    assert made and not any(d.exists() for d in made)
    assert (tmp_path / "out" / "meta" / "contact.json").exists() and report is not None


def test_flipped_bytes_and_non_finite_weights_are_refused(tmp_path):
    """A checkpoint records its weights' content hash; flipped bytes, and non-finite weights, are refused naming the file."""
    import torch
    from safetensors.torch import load_file, save_file

    from surrogate.model.checkpoint import CheckpointError, export_checkpoint, load_checkpoint
    from surrogate.model.contact_law import ContactLawGNN

    export_checkpoint(ContactLawGNN(), tmp_path / "a")
    w = tmp_path / "a" / "weights.safetensors"
    data = bytearray(w.read_bytes())
    data[-2] ^= 0x01
    w.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"weights\.safetensors: content hash"):
        load_checkpoint(tmp_path / "a")
    export_checkpoint(ContactLawGNN(), tmp_path / "b")
    w = tmp_path / "b" / "weights.safetensors"
    state = load_file(str(w))
    state["log_friction"] = torch.tensor([float("nan"), 0.0])
    save_file(state, str(w))
    card = json.loads((tmp_path / "b" / "card.json").read_text())
    card.pop("weights_sha256")  # a card without the hash had switched the check off
    (tmp_path / "b" / "card.json").write_text(json.dumps(card))
    with pytest.raises(CheckpointError, match="no weights_sha256"):
        load_checkpoint(tmp_path / "b")
    from surrogate.paths import file_sha256

    card["weights_sha256"] = file_sha256(w)  # the hash made to match: the weights still get the finiteness check
    (tmp_path / "b" / "card.json").write_text(json.dumps(card))
    with pytest.raises(CheckpointError, match="non-finite values in \\['log_friction'\\]"):
        load_checkpoint(tmp_path / "b")


@pytest.mark.parametrize("section", ["data", "training"])
def test_a_card_section_that_is_not_a_mapping_is_named_not_a_traceback(tmp_path, section):
    from surrogate.model.checkpoint import CheckpointError, export_checkpoint, load_checkpoint
    from surrogate.model.contact_law import ContactLawGNN

    export_checkpoint(ContactLawGNN(), tmp_path / "c")
    card = json.loads((tmp_path / "c" / "card.json").read_text())
    card[section] = [1, 2]
    (tmp_path / "c" / "card.json").write_text(json.dumps(card))
    with pytest.raises(CheckpointError, match=f"corrupt card \\({section} is a list, not a mapping\\)"):
        load_checkpoint(tmp_path / "c")
