"""``eval/elbow_sensitivity.py``: whether a contact law's parameters can move `elbow-real`'s error (the law moved in
the suite's own stepper path, scored by the suite's scorer, on tosses the test split never sees)."""

from __future__ import annotations

import numpy as np
import pytest

from .conftest import eval_script, needs_shared


def test_travel_counts_the_prediction_along_the_recorded_path_after_the_impact():
    sens = eval_script("elbow_sensitivity")
    t = np.arange(11) * 0.05
    rec = np.c_[np.where(t < 0.15, 0.0, t - 0.15), np.zeros_like(t)]  # still until 0.15 s, then 0.35 m along x
    half = np.c_[rec[:, 0] / 2, np.full_like(t, 0.2)]  # half as far, plus a sideways drift that does not count
    assert sens.travel_ratio(rec, half, t, 0.15) == pytest.approx(0.5)
    assert sens.travel_ratio(rec, -rec, t, 0.15) == pytest.approx(-1.0)
    assert sens.travel_ratio(rec * 0.05, rec, t, 0.15) is None  # 1.75 cm: below what a ratio can say anything of


def test_a_law_variant_changes_only_what_it_names_and_leaves_the_checkpoint_as_it_was():
    sens = eval_script("elbow_sensitivity")
    base = sens.law_values("checkpoints/cube_tosses")
    moved = sens.law_variant("checkpoints/cube_tosses", {"damping": base["damping"] / 4})
    assert float(moved.log_damping.detach().exp().mean()) == pytest.approx(base["damping"] / 4, rel=1e-5)
    assert float(moved.log_friction[0].detach().exp()) == pytest.approx(base["friction"], rel=1e-6)
    assert sens.law_values("checkpoints/cube_tosses") == base
    labels = [label for label, _ in sens.variants(base, 4.0, [0.1])]
    assert labels[0] == "the release" and "damping / 4" in labels and "friction 0.1, static = kinetic" in labels


@needs_shared("contactnets_elbow")
def test_a_slipperier_law_lets_the_elbow_go_further_after_it_lands(capsys):
    sens = eval_script("elbow_sensitivity")
    assert sens.main(["--max-tosses", "8", "--frictions", "0.05", "0.6"]) == 0
    lines = {ln.split("|")[1].strip(): ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| ")}

    def travel(name):
        return float(lines[name].split("|")[-2].split()[0])

    assert travel("friction 0.05, static = kinetic") > travel("the release") > travel("friction 0.6, static = kinetic")
    assert travel("nominal MuJoCo, friction 0.05") > travel("nominal MuJoCo, friction 0.6")


@needs_shared("contactnets_elbow")
def test_the_object_side_rows_are_the_suites_rollout_unchanged_and_another_object_changed(tmp_path):
    from surrogate.bench.analytic import AnalyticParams, TossSet, models_for
    from surrogate.bench.predictors import object_scene, predict_analytic
    from surrogate.bench.toss_data import load_tosses
    from surrogate.suites import load_suite

    from .conftest import SHARED

    sens = eval_script("elbow_sensitivity")
    src = SHARED / "contactnets_elbow"
    eps = load_tosses(src, cache_dir=tmp_path, urdf=src / "contactnets_elbow.urdf", progress=False).episodes[:3]
    cfg = load_suite("elbow-real")
    p = AnalyticParams(friction=0.3)
    scene = object_scene(eps[0], substeps=4, mode="analytic")
    tosses = TossSet.from_episodes(eps, substeps=4, k=5)
    suite = predict_analytic([p], eps, substeps=4, init_frames=5)[0]
    free = sens.hinge_friction_rollouts(scene, models_for(scene, [p])[0], tosses, 0.0, 0.0)
    for e, q in zip(eps, free):
        np.testing.assert_allclose(q, suite[e.episode_id], atol=1e-9)
    locked = sens.hinge_friction_rollouts(scene, models_for(scene, [p])[0], tosses, 100.0, 0.0)
    for lk, fr in zip(locked, free):  # 100 N m: the hinge stops within the soft friction constraint's time constant
        assert np.ptp(lk[:, 7]) < 0.25 * np.ptp(fr[:, 7])
    loaded = sens.predict_mujoco(0.3, eps, cfg, hinge=(0.0, 0.05))
    assert all(np.isfinite(v).all() for v in loaded.values())
    heavy = sens.predict_mujoco(0.3, eps, cfg, link_mass=2.0, inertia=1.6)  # another object: another toss
    assert all(np.isfinite(heavy[e.episode_id]).all() for e in eps)
    assert not all(np.allclose(heavy[e.episode_id], suite[e.episode_id], atol=1e-6) for e in eps)
    again = sens.predict_mujoco(0.3, eps, cfg)  # the scaled scene was the call's own: the suite's rollout is unchanged
    for e in eps:
        np.testing.assert_array_equal(again[e.episode_id], suite[e.episode_id])


def test_the_few_shot_folds_train_on_each_end_of_the_pool_and_hold_out_the_rest():
    folds = eval_script("elbow_fewshot_folds").folds(list(range(10)), 4)
    assert [label for label, _, _ in folds] == ["first 4", "last 4"]
    (_, a_train, a_held), (_, b_train, b_held) = folds
    assert a_train == [0, 1, 2, 3] and a_held == list(range(4, 10))
    assert b_train == [6, 7, 8, 9] and b_held == list(range(6))
    assert not set(a_train) & set(a_held) and not set(b_train) & set(b_held)


def test_the_grid_search_picks_the_law_with_the_lowest_identification_loss_on_the_fold_s_own_tosses():
    folds = eval_script("elbow_fewshot_folds")
    rows = lambda *pr: [{"pos_pct_size": p, "rot_deg": r} for p, r in pr]  # noqa: E731
    assert folds.identification_loss(rows((50.0, 20.0), (10.0, 0.0))) == pytest.approx(0.4)
    # law A is better on tosses 0-1, law B on tosses 2-3: the pick follows the training tosses only
    grid = {(1.0, 1.0, 1.0): rows((10, 0), (10, 0), (90, 0), (90, 0)),
            (0.5, 1.0, 1.0): rows((30, 0), (30, 0), (20, 0), (20, 0))}
    assert folds.grid_pick(grid, [0, 1]) == (1.0, 1.0, 1.0)
    assert folds.grid_pick(grid, [2, 3]) == (0.5, 1.0, 1.0)
    # rotation counts as MuJoCo's identification loss counts it: a degree weighs as a percent of the size
    grid[(2.0, 1.0, 1.0)] = rows((9, 5), (9, 5), (99, 0), (99, 0))
    assert folds.grid_pick(grid, [0, 1]) == (1.0, 1.0, 1.0)
    assert all(0.25 <= f <= 4.0 for axis in folds.GRID for f in axis) and 1.0 in folds.GRID[0]


def test_the_impact_pick_reads_only_the_training_tosses_that_have_a_restart():
    folds = eval_script("elbow_fewshot_folds")
    errors = {(1.0, 1.0, 1.0): {"a": 30.0, "b": 30.0, "c": 5.0},
              (0.25, 1.0, 1.0): {"a": 20.0, "b": 25.0, "c": 90.0}}
    assert folds.impact_pick(errors, ["a", "b"]) == (0.25, 1.0, 1.0)
    assert folds.impact_pick(errors, ["a", "b", "c"]) == (1.0, 1.0, 1.0)
    assert folds.impact_pick(errors, ["a", "b", "held-in-hand"]) == (0.25, 1.0, 1.0)  # no restart: not counted
