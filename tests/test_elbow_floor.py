"""``eval/elbow_floor.py``: what the first-state estimate's own uncertainty leaves to a perfect contact model on the
real elbow tosses (a parametric bootstrap of the suite's estimate, each model scored against its own rollout)."""

from __future__ import annotations

import numpy as np
import pytest

from surrogate.bench.elbow_real import articulated_tests
from surrogate.bench.toss_data import load_tosses
from surrogate.splits import suite_split
from surrogate.suites import load_suite

from .conftest import SHARED, eval_script, needs_shared


@pytest.fixture(scope="module")
def elbow(tmp_path_factory):
    cfg = load_suite("elbow-real-small", ["data.n_test=10"])
    cache = tmp_path_factory.mktemp("cache")
    src = SHARED / "contactnets_elbow"
    ds = load_tosses(src, cache_dir=cache, urdf=src / "contactnets_elbow.urdf", progress=False)
    eps, sp = suite_split(ds.episodes, cfg["data"], [])
    return cfg, articulated_tests(cfg, eps, sp, None, cache)[0]


@needs_shared("contactnets_elbow")
def test_redrawn_first_frames_carry_the_noise_the_fits_then_measure(elbow):
    floor = eval_script("elbow_floor")
    cfg, test = elbow
    k = int(cfg["simulation"]["init_frames"])
    base = floor.fit_noise(test, k)
    assert 1e-5 < base["pos_m"] < 3e-3 and 0 < base["rot_rad"] < 0.05 and 0 < base["joint_rad"] < 0.05
    extra = {"pos_m": 2e-3, "rot_rad": 0.02, "joint_rad": 0.03}
    rng = np.random.default_rng(0)
    copies = [floor.redrawn(e, extra, k, rng, f"#{i}") for i in range(20) for e in test]
    got = floor.fit_noise(copies, k)
    for key in extra:  # independent noise adds in variance
        assert got[key] == pytest.approx(np.hypot(base[key], extra[key]), rel=0.15), key
    e, c = test[0], copies[0]
    assert c.episode_id == f"{e.episode_id}#0" and np.array_equal(c.object_pose[k:], e.object_pose[k:])
    assert not np.allclose(c.object_pose[:k, :3], e.object_pose[:k, :3])


@needs_shared("contactnets_elbow")
def test_a_model_from_its_own_start_has_no_floor_and_a_redrawn_start_has_one(elbow):
    floor = eval_script("elbow_floor")
    cfg, test = elbow
    zero = {"pos_m": 0.0, "rot_rad": 0.0, "joint_rad": 0.0}
    none = floor.floor("nominal", None, cfg, test, zero, draws=1, seed=0)
    assert none["floor"]["pos_pct_size"]["mean"] == pytest.approx(0.0, abs=1e-9)
    assert none["floor"]["joint_deg"]["mean"] == pytest.approx(0.0, abs=1e-9)
    noisy = floor.floor("nominal", None, cfg, test, floor.fit_noise(test, 5), draws=2, seed=0)
    assert 0.0 < noisy["floor"]["pos_pct_size"]["mean"] < noisy["model"]["pos_pct_size"]["mean"]
    assert noisy["model"]["pos_pct_size"]["mean"] == none["model"]["pos_pct_size"]["mean"]  # the row's own score
    assert len(noisy["hinge_travel"]) == len(test) and all(r >= 0 and p >= 0 for r, p in noisy["hinge_travel"])
