"""The clean data-efficiency sweep (``eval/cube_sweep.py``): a size's starting law comes from a grid scored on its
own training tosses, and its epochs and corrections are selected on them too, so it has seen exactly N tosses."""

from __future__ import annotations

from pathlib import Path

import pytest

from surrogate.errors import ConfigError

from .conftest import SHARED, eval_script, needs_shared

REPO_ROOT = Path(__file__).resolve().parents[1]
CUBE = dict(stiffness=3000.0, exponent=1.5, damping=3.65, friction=0.16, slip_eps=1e-3)



def test_the_sweeps_overrides_are_valid_training_keys(tmp_path):
    """Both protocols' ``--set`` lines load against the packaged cube config (every key checked); the clean one
    validates on the training tosses and scans the grid, the earlier one does neither."""
    from surrogate.training.config import load_config

    sweep = eval_script("cube_sweep")
    for clean in (True, False):
        sets = sweep.train_overrides(8, out=tmp_path, suite="cube-real", data_root=str(tmp_path / "d"), steps=16,
                                     clean=clean)
        cfg = load_config("cube_tosses", sets)
        assert cfg["data"]["bench_split"] == {"suite": "cube-real", "size": 8,
                                              "validation": "training" if clean else "pool"}
        grid = cfg["stages"].get("grid") or {}
        assert bool(grid.get("friction")) is clean and (grid.get("max_episodes") == 64) is clean


@needs_shared("contactnets_cube")
def test_a_clean_size_fits_selects_and_starts_on_its_own_tosses_only(tmp_path):
    """``bench_split.validation: training`` validates on exactly the N training tosses (no pool toss beyond them);
    ``stages.grid.max_episodes`` scores the grid on the first of them; bad values are refused naming the key."""
    from surrogate.importers.contactnets import import_contactnets
    from surrogate.learn.episodes import bench_split_ids, load_capture
    from surrogate.learn.fit import fit_law

    root = tmp_path / "cube"
    import_contactnets(SHARED / "contactnets_cube", root, progress=False)
    episodes = load_capture(root).episodes
    train, val = bench_split_ids(episodes, {"suite": "cube-real", "size": 8, "validation": "training"}, val_fraction=0.2)
    pool_train, pool_val = bench_split_ids(episodes, {"suite": "cube-real", "size": 8}, val_fraction=0.2)
    assert val == train == pool_train and len(train) == 8 and not set(pool_val) & set(train)
    with pytest.raises(ConfigError, match="bench_split.validation"):
        bench_split_ids(episodes, {"suite": "cube-real", "size": 8, "validation": "test"}, val_fraction=0.2)

    cfg = {"data": {"root": str(root), "bench_split": {"suite": "cube-real", "size": 8, "validation": "training"},
                    "window_frames": 0, "batch_size": 8},
           "model": {"kind": "law", "prior": CUBE, "corrections": False, "friction_iterations": 1},
           "stages": {"grid": {"friction": [0.1, 0.3], "max_episodes": 3}, "prior": {"epochs": 0}},
           "trainer": {"enable_progress_bar": False}}
    res = fit_law(cfg, out=tmp_path / "run")
    m = res["metrics"]
    assert m["train_episodes"] == m["val_episodes"] == 8
    assert all(r["n"] == 3 for r in m["grid"]["rows"])
    assert m["prior"]["initial"]["n"] == 8  # validated on the 8 training tosses, each once
    cfg["stages"]["grid"]["max_episodes"] = 0
    with pytest.raises(ConfigError, match="stages.grid.max_episodes"):
        fit_law(cfg, out=tmp_path / "run2")


@needs_shared("contactnets_cube")
def test_cube_real_pairs_each_training_size_with_mujoco_identified_at_that_size(tmp_path):
    """A data-efficiency curve is compared size by size in one run: every learned size has its paired difference
    against MuJoCo identified on the same size, over the same test tosses (mean of differences = difference of means
    there), and no per-episode scratch data is left in the ledger."""
    from surrogate.bench.run import run_suite

    ckpt = str(REPO_ROOT / "checkpoints" / "cube_tosses")
    over = ["data.n_test=6", "data.train_sizes=[8, 16]", "baselines.identified.sizes=[8, 16]",
            "baselines.identified.maxiter=1", "baselines.identified.popsize=3", "baselines.identified.cones=[elliptic]",
            "baselines.randomized.n=2", f'surrogate.checkpoints={{"8": "{ckpt}", "16": "{ckpt}"}}']
    ledger = run_suite("cube-real-small", out=tmp_path / "report", overrides=over, progress=False,
                       cache_dir=tmp_path / "cache", video=False)
    learned, ident = ledger["models"]["surrogate"]["by_train_size"], ledger["models"]["analytic_identified"]["by_train_size"]
    for k in ("8", "16"):
        for key in ("pos_pct_size", "rot_deg"):
            d = learned[k]["paired_minus_identified"][key]
            assert d["n"] == 6
            assert d["mean"] == pytest.approx(learned[k]["overall"][key]["mean"] - ident[k]["overall"][key]["mean"])
            assert d["ci95"][0] <= d["mean"] <= d["ci95"][1]
    assert ident["8"]["overall"]["pos_pct_size"]["mean"] != ident["16"]["overall"]["pos_pct_size"]["mean"]
    assert '"_per_episode"' not in (tmp_path / "report" / "ledger.json").read_text()
