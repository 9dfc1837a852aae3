"""``eval/cube_impacts.py``: the real cube's tosses restarted before their first impact, the release's damping moved
(the rollouts through the benchmarks' own surrogate predictor, a loaded variant in place of a checkpoint folder)."""

from __future__ import annotations

import numpy as np
import pytest

from .conftest import eval_script, needs_shared


def test_box_corners_follow_the_pose():
    imp = eval_script("cube_impacts")
    half = [0.05, 0.02, 0.01]
    level = imp.box_corners(np.array([[0.0, 0.0, 0.01, 1.0, 0.0, 0.0, 0.0]]), half)
    assert level.shape == (1, 8, 3)
    assert level[0, :, 2].min() == pytest.approx(0.0) and level[0, :, 0].max() == pytest.approx(0.05)
    # a quarter turn about x stands the 2 cm side upright: the lowest corner is 2 cm below the centre
    c, s = np.cos(np.pi / 4), np.sin(np.pi / 4)
    turned = imp.box_corners(np.array([[1.0, 2.0, 0.3, c, s, 0.0, 0.0]]), half)
    assert turned[0, :, 2].min() == pytest.approx(0.28) and turned[0, :, 1].max() == pytest.approx(2.01)
    assert turned[0, :, 0].min() == pytest.approx(0.95)


@needs_shared("contactnets_cube")
def test_a_loaded_variant_rolls_out_as_its_checkpoint_and_a_bouncier_one_rises(tmp_path):
    from surrogate.bench.predictors import surrogate_predict
    from surrogate.bench.toss_data import load_tosses
    from surrogate.model.checkpoint import load_checkpoint

    from .conftest import SHARED

    imp, sens = eval_script("cube_impacts"), eval_script("elbow_sensitivity")
    eps = load_tosses(SHARED / "contactnets_cube", cache_dir=tmp_path, progress=False).episodes[:6]
    hits, cut = imp.restarts(eps, lead=7, init_frames=5)
    assert cut and all(7 < len(e.timestamps) for e in cut.values())
    for i, ep in cut.items():  # the restart starts in flight: its first frames are clear of the floor
        corners = imp.box_corners(ep.object_pose[:5], ep.object.geometry["half_extents"])
        assert corners[..., 2].min() > 0.0 and hits[i] >= 7
    ck = "checkpoints/cube_tosses"
    by_path = surrogate_predict(ck, list(cut.values()), substeps=4, init_frames=5, progress=False)[0]
    loaded = surrogate_predict(load_checkpoint(ck), list(cut.values()), substeps=4, init_frames=5, progress=False)[0]
    for i in cut:
        np.testing.assert_array_equal(loaded[i], by_path[i])
    bouncy = sens.law_variant(ck, {"damping": sens.law_values(ck)["damping"] / 64})
    again = surrogate_predict((bouncy, load_checkpoint(ck)[1]), list(cut.values()), substeps=4, init_frames=5,
                              progress=False)[0]
    rise = {name: [r["rise_mm"] for r in imp.row_scores(p, cut, lead=7, frames=15)]
            for name, p in (("release", by_path), ("bouncy", again))}
    assert np.median(rise["bouncy"]) > np.median(rise["release"])
