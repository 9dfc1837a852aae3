"""Issue #29 E, F, G: data of the wrong kind, unreadable inputs and inconsistent metadata.

Each test is named after the behaviour it guards; the defect it reproduces is in its docstring.
"""

from __future__ import annotations

import pytest

from surrogate.errors import ConfigError

from .test_reliability import _cube_dataset
from .test_rig_generate import fake, gen


@pytest.fixture(scope="module")
def tosses_and_grasps(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kinds")
    gen(tmp, "grasps", episodes=2, **fake())
    return _cube_dataset(tmp, "tosses"), tmp / "grasps"


def test_a_toss_suite_refuses_grasp_captures_before_any_baseline(tosses_and_grasps):
    """Defect G: ``cube-real-small --test-data <grasp captures>`` scored them (about 100 % error) and gave a verdict."""
    from surrogate.bench.cube_real import _test_episodes

    tosses, grasps = tosses_and_grasps
    with pytest.raises(ConfigError) as e:
        _test_episodes({"suite": "cube-real", "data": {}}, {"test": []}, {}, grasps)
    msg = str(e.value)
    assert str(grasps) in msg and "holds grasps, not tosses" in msg and "joint positions in 2 of 2" in msg, msg
    assert e.value.location.field == "test_data"
    assert len(_test_episodes({"suite": "cube-real", "data": {}}, {"test": []}, {}, tosses)[0]) == 3  # tosses pass


def test_a_grasp_suite_refuses_tosses_before_any_baseline(tosses_and_grasps):
    """Defect G: ``rig-grasp-small --test-data <cube tosses>`` scored them (268 % error) and gave a verdict."""
    from surrogate.bench.rig_data import load_sets

    tosses, grasps = tosses_and_grasps
    with pytest.raises(ConfigError) as e:
        load_sets({"suite": "rig-grasp"}, test_data=tosses, rig=None, cache_dir=None, workers=1, progress=False)
    msg = str(e.value)
    assert str(tosses) in msg and "holds no grasps: 3 of 3 episodes have no hand joint positions" in msg, msg
    sets, _ = load_sets({"suite": "rig-grasp"}, test_data=grasps, rig=None, cache_dir=None, workers=1, progress=False)
    assert len(sets["test_data"].episodes) == 2
