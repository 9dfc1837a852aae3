"""``surrogate.bench.toss_windows``: stretches of a recorded toss, and the few-shot fits' choice of what they see of
each training toss (``few_shot.fit_on``: the window around its first impact, or the whole toss)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from surrogate.bench.elbow_fewshot import fit_settings, fitting_tosses, surrogate_settings
from surrogate.bench.toss_windows import TOSS_FIELDS, corner_points, first_impact, impact_windows, toss_stretch
from surrogate.errors import ConfigError

from .conftest import eval_script, needs_shared


@pytest.fixture(scope="module")
def pool():
    """(the suite's config, its first 6 pool tosses from their free-flight start)."""
    cfg, _, tosses = eval_script("elbow_sensitivity").suite_tosses("elbow-real", "pool", 6)
    return cfg, tosses


def test_the_first_impact_is_the_lowest_frame_just_after_the_first_touch():
    lowest = np.array([0.2, 0.1, 0.03, 0.012, 0.004, 0.006, 0.02, 0.03, 0.001])
    assert first_impact(lowest) == 4  # not frame 8, lower but later: the first impact
    assert first_impact(lowest, settle=1) == 3
    assert first_impact(lowest + 1.0) is None


@needs_shared("contactnets_elbow")
def test_impact_windows_start_in_flight_before_the_first_impact_and_are_a_stretch_of_the_toss(pool):
    from surrogate.objects.articulated import articulation_from_json

    _, tosses = pool
    windows, skipped = impact_windows(tosses, lead=7, after_s=0.1, init_frames=5)
    assert len(windows) + len(skipped) == len(tosses) and len(windows) >= 4
    art = articulation_from_json(tosses[0].object.geometry)
    by_id = {e.episode_id: e for e in tosses}
    for w in windows:
        assert w.num_frames == 7 + 15 + 1  # 0.1 s at 148 Hz after the impact
        low = corner_points(art, w.object_pose, w.object_joint_pos)[..., 2].min(axis=1)
        assert low[:4].min() > 0.02 >= low[7]  # the first frames in flight (the touch is at most 3 before the impact)
        whole, s = by_id[w.episode_id], w.labels["window_start"]
        assert w.labels["first_impact"] == s + 7
        assert w.labels["free_flight_start"] == whole.labels["free_flight_start"]  # the toss's own labels kept
        for f in TOSS_FIELDS:
            if getattr(whole, f) is not None:
                np.testing.assert_array_equal(getattr(w, f), getattr(whole, f)[s:s + w.num_frames])


@needs_shared("contactnets_elbow")
def test_a_toss_without_an_impact_is_named_not_windowed(pool):
    _, tosses = pool
    up = tosses[0].object_pose + [0, 0, 1.0, 0, 0, 0, 0]
    lifted = dataclasses.replace(tosses[0], episode_id="lifted", object_pose=up)
    early = toss_stretch(tosses[1], first_impact_of(tosses[1]) - 2)  # lands two frames after its start
    windows, skipped = impact_windows([lifted, early, tosses[2]], init_frames=5)
    assert [w.episode_id for w in windows] == [tosses[2].episode_id]
    assert "within 0.02 m of the floor" in skipped["lifted"]
    assert "fewer than 7 frames after its start" in skipped[str(early.episode_id)]
    with pytest.raises(ValueError, match="init_frames"):
        impact_windows(tosses, lead=5, init_frames=5)  # no flight left for the first-state estimate
    rigid = dataclasses.replace(tosses[0], object_joint_pos=None)
    with pytest.raises(ValueError, match="articulated"):
        impact_windows([rigid], init_frames=5)


def first_impact_of(ep) -> int:
    from surrogate.objects.articulated import articulation_from_json

    art = articulation_from_json(ep.object.geometry)
    return first_impact(corner_points(art, ep.object_pose, ep.object_joint_pos)[..., 2].min(axis=1))


@needs_shared("contactnets_elbow")
def test_each_few_shot_fit_sees_the_windows_or_the_whole_tosses_as_its_side_says(pool):
    cfg, tosses = pool
    fs = {**cfg["few_shot"], "identified": {"fit_on": "impacts"}, "surrogate": {"fit_on": "whole"}}
    cfg = {**cfg, "few_shot": fs}
    seen, record = fitting_tosses(tosses, cfg, "identified")
    assert record["fit_on"] == "impacts" and seen and all("first_impact" in w.labels for w in seen)
    assert set(record["windows"]) | set(record["without_window"]) == {str(e.episode_id) for e in tosses}
    assert all(record["windows"][str(w.episode_id)] == [w.labels["window_start"], w.num_frames] for w in seen)
    same, record = fitting_tosses(tosses, cfg, "surrogate")
    assert same is tosses and record == {"fit_on": "whole"}


def test_the_few_shot_keys_are_checked_before_any_work():
    cfg = {"simulation": {"init_frames": 5}, "few_shot": {"sizes": [8]}}
    assert fit_settings(cfg, "identified") == {"fit_on": "whole", "lead": 7, "after_s": 0.1}  # the default
    for few, key in (({"identified": {"fit_on": "impact"}}, "few_shot.identified.fit_on"),
                     ({"surrogate": {"fit_on": "windows"}}, "few_shot.surrogate.fit_on"),
                     ({"impacts": {"lead": 6}}, "few_shot.impacts.lead"),
                     ({"impacts": {"after": 0.1}}, "few_shot.impacts.after"),
                     ({"impacts": {"after_s": -1}}, "few_shot.impacts.after_s"),
                     ({"fit_on": "whole"}, "few_shot.fit_on")):
        with pytest.raises(ConfigError) as err:
            surrogate_settings({**cfg, "few_shot": {"sizes": [8], **few}})
        assert key in str(err.value), few
