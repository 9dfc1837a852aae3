"""``eval/cone_choice.py``: the identification's cone chosen by its training loss as recorded, or averaged over turns
of the tosses about the vertical."""

from __future__ import annotations

import numpy as np
import pytest

from .conftest import eval_script, needs_shared


def test_the_two_rules_differ_where_a_cone_was_lucky_in_the_recorded_frame():
    cc = eval_script("cone_choice")
    # pyramidal is lowest as recorded and highest on average over the turns; elliptic is the same in every frame
    losses = {"pyramidal": np.array([0.90, 1.20, 1.30, 1.10]), "elliptic": np.array([1.00, 1.00, 1.00, 1.00])}
    assert cc.choice(losses) == ("pyramidal", "elliptic")
    losses["pyramidal"] = np.array([0.90, 0.95, 0.97, 0.92])
    assert cc.choice(losses) == ("pyramidal", "pyramidal")
    # MuJoCo's identification loss: the mean position error in sizes plus the mean rotation error in degrees / 100
    scores = np.array([[[50.0, 20.0], [30.0, 40.0]], [[10.0, 0.0], [10.0, 0.0]]])  # [turns, tosses, (pos %, rot deg)]
    np.testing.assert_allclose(cc.loss(scores), [0.7, 0.1])


@needs_shared("contactnets_elbow")
def test_turned_sets_keep_the_recording_first_and_an_elliptic_cone_answers_to_the_toss_only(tmp_path):
    from surrogate.bench.analytic import AnalyticParams
    from surrogate.bench.toss_data import load_tosses
    from surrogate.suites import load_suite

    from .conftest import SHARED

    cc = eval_script("cone_choice")
    src = SHARED / "contactnets_elbow"
    eps = load_tosses(src, cache_dir=tmp_path, urdf=src / "contactnets_elbow.urdf", progress=False).episodes[:3]
    sets = cc.turned_sets(eps, [45.0, 90.0])
    assert len(sets) == 3 and sets[0] is eps
    assert [e.episode_id for e in sets[2]] == [f"{e.episode_id}_yaw90" for e in eps]
    cfg = load_suite("elbow-real")
    ell = cc.scores_by_turn(AnalyticParams(friction=0.3, cone="elliptic"), sets, cfg)
    pyr = cc.scores_by_turn(AnalyticParams(friction=0.3, cone="pyramidal"), sets, cfg)
    assert ell.shape == (3, 3, 2)
    np.testing.assert_allclose(ell[1:], np.broadcast_to(ell[0], ell[1:].shape), atol=0.5)  # within half a point
    assert np.abs(pyr[1] - pyr[0]).max() > 0.5  # the pyramid's edges follow the world's axes...
    np.testing.assert_allclose(pyr[2], pyr[0], atol=1e-6)  # ...and it has four: a quarter turn leaves it as it was
    assert cc.loss(ell)[0] == pytest.approx(ell[0, :, 0].mean() / 100 + ell[0, :, 1].mean() / 100)
