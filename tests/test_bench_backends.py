"""Suites on the local and the Ray backend (the same ledger), several test datasets at once, and the
task executor's contract (results in submission order, a task's error raised as itself)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from surrogate.bench.ledger import validate_ledger
from surrogate.bench.run import run_suite
from surrogate.bench.testsets import set_names
from surrogate.capture import read_dataset
from surrogate.capture.writer import write_dataset
from surrogate.errors import ConfigError
from surrogate.parallel import executor
from surrogate.suites import load_suite

from .conftest import SHARED, needs_shared

CKPT = "checkpoints/cube_tosses"
# cube-real-small shrunk to seconds: 4 test tosses, one training size, a one-generation identification.
TINY = ["data.n_test=4", "data.train_sizes=[8]", "baselines.identified.sizes=[8]", "baselines.identified.max_episodes=8",
        "baselines.identified.maxiter=1", "baselines.identified.popsize=3", "baselines.identified.cones=[elliptic]",
        "baselines.randomized.n=2"]
TIMING = {"wall_s", "created", "execution"}


def _numbers(x):
    """A ledger without what differs between two runs of the same computation (times, the backend)."""
    if isinstance(x, dict):
        return {k: _numbers(v) for k, v in x.items() if k not in TIMING}
    if isinstance(x, list):
        return [_numbers(v) for v in x]
    return x


@pytest.fixture(scope="module")
def tiny_tosses(tmp_path_factory):
    """12 real cube tosses (and the experiment file) as a raw ContactNets folder."""
    src = SHARED / "contactnets_cube"
    if not src.exists():
        pytest.skip(f"sample data {src} is absent (set SURROGATE_DATA to the shared data folder)")
    out = tmp_path_factory.mktemp("tosses") / "contactnets_tiny"
    out.mkdir()
    for p in sorted(src.glob("*.pt"), key=lambda p: int(p.stem))[:12]:
        shutil.copy(p, out / p.name)
    for p in src.glob("*.json"):
        shutil.copy(p, out / p.name)
    return out


def _ray_ready():
    pytest.importorskip("ray", reason="ray is not installed (pip install 'contact-surrogate[ray]')")


def test_set_names_of_several_test_datasets(tmp_path):
    assert set_names([tmp_path / "x"]) == ["test_data"]  # one dataset keeps the name it always had
    assert set_names([tmp_path / "a" / "cube", tmp_path / "b" / "cube", tmp_path / "mugs"]) == ["cube", "cube_2", "mugs"]


@needs_shared("contactnets_cube")
def test_cube_real_small_gives_the_same_ledger_on_local_and_ray(tmp_path, tiny_tosses):
    _ray_ready()
    kw = dict(overrides=[f"data.source={tiny_tosses}", *TINY], checkpoint=CKPT, progress=False, video=False,
              cache_dir=tmp_path / "cache")
    local = run_suite("cube-real-small", out=tmp_path / "local", **kw)
    ray = run_suite("cube-real-small", out=tmp_path / "ray", backend="ray", workers=2, **kw)
    assert local["execution"]["backend"] == "local" and ray["execution"] == {"backend": "ray", "workers": 2, "address": None}
    assert "overall" in ray["models"]["surrogate"] and ray["models"]["analytic_randomized"]["ensemble"]["n"] == 2
    assert _numbers(json.loads((tmp_path / "ray" / "ledger.json").read_text())) == \
        _numbers(json.loads((tmp_path / "local" / "ledger.json").read_text()))


@needs_shared("contactnets_cube")
def test_cube_real_scores_several_test_datasets_per_set_and_per_object(tmp_path, tiny_tosses):
    from surrogate.importers.contactnets import import_contactnets

    # test tosses the suite never trains on: four shared tosses that are not in its tiny source
    src = SHARED / "contactnets_cube"
    raw = tmp_path / "raw"
    raw.mkdir()
    for p in sorted(src.glob("*.pt"), key=lambda p: int(p.stem))[12:16] + list(src.glob("*.json")):
        shutil.copy(p, raw / p.name)
    import_contactnets(raw, tmp_path / "all", progress=False)
    ds = read_dataset(tmp_path / "all")
    eps = sorted(ds.episodes, key=lambda e: int(e.episode_id))
    # a second dataset of another "object" (the cube under another name) that repeats an episode id of the first
    other = [dataclasses.replace(e, object=dataclasses.replace(e.object, name="cube_b")) for e in eps[2:4]]
    write_dataset(tmp_path / "a" / "tosses", eps[:3], ds.meta)
    write_dataset(tmp_path / "b" / "tosses", other, ds.meta)
    ledger = run_suite("cube-real-small", out=tmp_path / "report", test_data=[tmp_path / "a" / "tosses", tmp_path / "b" / "tosses"],
                       overrides=[f"data.source={tiny_tosses}", *TINY], progress=False, video=False, cache_dir=tmp_path / "cache")
    validate_ledger(json.loads((tmp_path / "report" / "ledger.json").read_text()))
    assert set(ledger["data"]["test_data"]) == {"tosses", "tosses_2"}
    assert ledger["data"]["test_data"]["tosses_2"]["objects"] == ["cube_b"]
    for name in ("analytic_nominal", "analytic_identified", "analytic_randomized"):
        m = ledger["models"][name]
        assert m["overall"]["episodes"] == 5, name
        assert {k: v["episodes"] for k, v in m["per_set"].items()} == {"tosses": 3, "tosses_2": 2}, name
        assert {k: v["episodes"] for k, v in m["per_object"].items()} == {ds.episodes[0].object.name: 3, "cube_b": 2}, name
    ids = [s["id"] for s in ledger["models"]["analytic_nominal"]["per_episode"]]
    assert ids == [f"tosses/{e.episode_id}" for e in eps[:3]] + [f"tosses_2/{e.episode_id}" for e in eps[2:4]]
    assert ledger["split"]["sets"]["tosses_2"] == ids[3:]
    # the toss in both datasets is scored twice, once under each key, with the same error
    twice = eps[2].episode_id
    for name in ("analytic_nominal", "analytic_identified"):
        per = {s["id"]: s for s in ledger["models"][name]["per_episode"]}
        assert per[f"tosses/{twice}"]["pos_m"] == per[f"tosses_2/{twice}"]["pos_m"], name
        assert per[f"tosses/{twice}"]["object"] != per[f"tosses_2/{twice}"]["object"]
    report = (tmp_path / "report" / "report.md").read_text()
    assert "Per test set" in report and "Per object" in report and "cube_b" in report
    # the header names every figure of a cell: mean [interval] / median over the episode; the horizon's after ";"
    assert "over the episode mean [95 % interval] / median; at 1 s" in report
    row = next(r for r in report.splitlines() if r.startswith("| tosses_2 |"))
    assert all(c.count(";") == 1 and c.count(" / ") == 1 for c in row.split(" | ")[2:]), row


@needs_shared("contactnets_cube")
def test_a_learned_row_of_another_model_class_plugs_in_through_its_card(tmp_path, tiny_tosses, monkeypatch):
    """The suite runs a checkpoint by its card's ``model.class`` (``predictors.LEARNED``); here a class whose
    predictor is nominal analytic MuJoCo, so its row must equal the analytic_nominal row."""
    from surrogate.bench.predictors import LEARNED, Learned, predict_analytic
    from surrogate.bench.rows import nominal_params

    card = json.loads((Path(CKPT) / "card.json").read_text())
    card["model"]["class"] = "elsewhere.peer.NominalPeer"
    (tmp_path / "peer").mkdir()
    (tmp_path / "peer" / "card.json").write_text(json.dumps(card))
    nominal = load_suite("cube-real-small")["baselines"]["nominal"]

    def predict(checkpoint, episodes, *, substeps, init_frames, progress):
        params = [nominal_params(episodes[0], nominal)]
        return predict_analytic(params, episodes, substeps=substeps, init_frames=init_frames)[0], card

    monkeypatch.setitem(LEARNED, card["model"]["class"], Learned(predict, "peer model: {structure}", check=lambda p: None))
    ledger = run_suite("cube-real-small", out=tmp_path / "report", checkpoint=tmp_path / "peer", progress=False, video=False,
                       overrides=[f"data.source={tiny_tosses}", *TINY], cache_dir=tmp_path / "cache")
    row, nom = ledger["models"]["surrogate"], ledger["models"]["analytic_nominal"]
    assert row["description"] == "peer model: NominalPeer" and row["card"]["model"]["class"] == card["model"]["class"]
    assert row["per_episode"] == nom["per_episode"] and row["overall"] == nom["overall"]


def _slow_square(common, x):
    time.sleep(common["delay"] * (3 - x))  # later items finish first
    if x == common["bad"]:
        raise ConfigError(f"item {x} is bad", key="x")
    return x * x


def test_executor_keeps_submission_order_and_raises_a_tasks_error_as_itself():
    _ray_ready()
    with executor("ray", workers=2, progress=False) as ex:
        assert ex.map(_slow_square, [0, 1, 2, 3], common={"delay": 0.2, "bad": None}) == [0, 1, 4, 9]
        with pytest.raises(ConfigError, match="item 2 is bad"):
            ex.map(_slow_square, [0, 1, 2], common={"delay": 0.0, "bad": 2})
    with executor("local", progress=False) as ex:
        assert ex.map(_slow_square, [2, 3], common={"delay": 0.0, "bad": None}) == [4, 9]
    with pytest.raises(ConfigError, match="needs --backend ray"):
        with executor("local", address="127.0.0.1:6379"):
            pass


def test_the_process_backend_keeps_submission_order_and_raises_a_tasks_error_as_itself():
    with executor("process", workers=2, progress=False) as ex:
        assert ex.map(_slow_square, [0, 1, 2, 3], common={"delay": 0.2, "bad": None}) == [0, 1, 4, 9]
        with pytest.raises(ConfigError, match="item 2 is bad"):
            ex.map(_slow_square, [0, 1, 2], common={"delay": 0.0, "bad": 2})
        assert ex.threads == 1 and ex.info() == {"backend": "process", "workers": 2, "address": None}


@needs_shared("contactnets_cube")
def test_cube_real_small_gives_the_same_ledger_on_local_and_processes(tmp_path, tiny_tosses):
    kw = dict(overrides=[f"data.source={tiny_tosses}", *TINY], checkpoint=CKPT, progress=False, video=False,
              cache_dir=tmp_path / "cache")
    local = run_suite("cube-real-small", out=tmp_path / "local", **kw)
    procs = run_suite("cube-real-small", out=tmp_path / "procs", backend="process", workers=2, **kw)
    assert local["execution"]["backend"] == "local" and procs["execution"]["backend"] == "process"
    assert _numbers(json.loads((tmp_path / "procs" / "ledger.json").read_text())) == \
        _numbers(json.loads((tmp_path / "local" / "ledger.json").read_text()))


def test_the_local_backend_never_imports_ray():
    code = ("import sys; from surrogate.parallel import executor; import surrogate.bench.run, surrogate.bench.cube_real, "
            "surrogate.bench.rig_grasp, surrogate.bench.policy, surrogate.cli\n"
            "with executor('local', progress=False) as ex: assert ex.map(lambda c, x: x + c, [1, 2], common=1) == [2, 3]\n"
            "assert 'ray' not in sys.modules, 'ray imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_process_backend_keeps_the_address_space_of_many_scenes_near_what_they_use():
    # Without a fixed mmap threshold a hand scene and its MjData left ~9 MB of reserved address space each (a
    # 1,440-grasp suite reached 27 GB and its fork failed); with it, under 1 MB. A fresh process: heap history counts.
    code = ("import re, mujoco\n"
            "from surrogate.parallel import executor\n"
            "from surrogate.objects import load_split\n"
            "from surrogate.scenes.builder import build_scene\n"
            "vm = lambda: int(re.search(r'VmSize:\\s+(\\d+)', open('/proc/self/status').read()).group(1)) / 1e3\n"
            "with executor('process', workers=1, progress=False):\n"
            "    objs, keep = load_split('heldout_wide')[:40], []\n"
            "    v0 = vm()\n"
            "    for o in objs:\n"
            "        s = build_scene(o, hand='parallel_jaw', setting='table')\n"
            "        d = mujoco.MjData(s.model); mujoco.mj_forward(s.model, d); keep.append(s)\n"
            "    print((vm() - v0) / len(objs))\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert float(out.split()[-1]) < 3.0, f"{out.split()[-1]} MB of address space per scene"


@needs_shared("contactnets_cube")
def test_cube_real_leaves_out_test_tosses_that_its_rows_train_on(tmp_path, tiny_tosses):
    """``--test-data`` holding the suite's own training tosses (here its whole source) scores only those the split
    holds out; the others are left out and named, by their recordings, not their ids."""
    from surrogate.bench.toss_data import drop_seen, toss_fingerprint
    from surrogate.importers.contactnets import import_contactnets

    ledger = run_suite("cube-real-small", out=tmp_path / "report", test_data=tiny_tosses,
                       overrides=[f"data.source={tiny_tosses}", *TINY], progress=False, video=False,
                       cache_dir=tmp_path / "cache")
    info = ledger["data"]["test_data"]
    assert info["episodes"] == 4 == ledger["models"]["analytic_nominal"]["overall"]["episodes"]  # data.n_test=4
    assert sorted(s["id"] for s in ledger["models"]["analytic_nominal"]["per_episode"]) == sorted(ledger["split"]["test"])
    assert len(info["left_out"]) == 8 and all("trained, identified and selected on" in x["reason"]
                                              for x in info["left_out"])
    # the recording is what counts: a copy in float32 under another id is the same toss, another toss is not
    import_contactnets(tiny_tosses, tmp_path / "ds", progress=False)
    eps = read_dataset(tmp_path / "ds").episodes
    twin = dataclasses.replace(eps[0], episode_id="renamed", object_pose=eps[0].object_pose.astype(np.float32))
    assert toss_fingerprint(twin) == toss_fingerprint(eps[0]) != toss_fingerprint(eps[1])
    kept, out = drop_seen([twin, eps[1]], [eps[0]], why="seen")
    assert kept == [eps[1]] and out == [{"episode": "renamed", "reason": "seen"}]


@needs_shared("contactnets_cube")
def test_cube_real_identifies_mujoco_on_the_checkpoints_own_tosses_with_test_data_too(tmp_path, tiny_tosses):
    """With ``--test-data`` as on the suite's own split, MuJoCo is identified on the tosses the checkpoint was
    trained on (those the suite has, outside its test split): the verdict compares like with like. The checkpoint
    here is the release's law with a card naming the tiny dataset (its content hash), as one trained on it would:
    ids are matched only in the dataset the card names (``given_training``)."""
    from surrogate.capture import dataset_hash
    from surrogate.importers.contactnets import import_contactnets

    src = SHARED / "contactnets_cube"
    raw = tmp_path / "raw"
    raw.mkdir()
    for p in sorted(src.glob("*.pt"), key=lambda p: int(p.stem))[12:15] + list(src.glob("*.json")):
        shutil.copy(p, raw / p.name)
    import_contactnets(tiny_tosses, tmp_path / "tiny_import", progress=False)  # as the suite imports its source
    ck = tmp_path / "ck"
    shutil.copytree(Path("checkpoints/cube_tosses"), ck)
    card = json.loads((ck / "card.json").read_text())
    card["data"]["sha256"] = dataset_hash(tmp_path / "tiny_import")
    (ck / "card.json").write_text(json.dumps(card))
    ledger = run_suite("cube-real-small", out=tmp_path / "report", test_data=raw, checkpoint=ck,
                       overrides=[f"data.source={tiny_tosses}", *TINY], progress=False, video=False,
                       cache_dir=tmp_path / "cache")
    tiny = {p.stem for p in tiny_tosses.glob("*.pt")}
    own = [i for i in card["data"]["train_episodes"] if i in tiny and i not in ledger["split"]["test"]]
    assert own, "the tiny source holds none of the release's training tosses outside its test split"
    fits = ledger["models"]["analytic_identified"]["by_train_size"]
    mine = fits[str(len(own))]
    assert mine["identified_on"] == len(own) and "own training tosses" in mine["on"]
    assert ledger["data"]["test_data"]["episodes"] == 3
