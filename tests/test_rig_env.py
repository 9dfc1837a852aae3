"""``bench.rig_env.RigGraspVectorEnv``: every episode draws its own hidden rig physics, recorder noise and episode id,
reproducibly from the last seed (an unseeded reset or an autoreset used to replay the previous episode's draws)."""

from __future__ import annotations

import numpy as np
import pytest

from surrogate.bench.rig_env import RigGraspVectorEnv
from surrogate.capture.reader import read_dataset
from surrogate.capture.writer import write_dataset
from surrogate.errors import ConfigError
from surrogate.objects import make_object


def _venv(**kw) -> RigGraspVectorEnv:
    return RigGraspVectorEnv(2, object=make_object("box", 3), hand="parallel_jaw", duration=0.1, **kw)


def _episode(venv, seed=None, options=None):
    """(episode ids, the hidden draws each copy's episode recorded, the episodes) of one reset and one step."""
    venv.reset(seed=seed, options=options)
    venv.step(np.zeros(venv.action_space.shape, np.float32))
    eps = venv.captures()
    draws = [(float(e.truth["object_mass"][0]), float(e.truth["actuator_delay_s"][0])) for e in eps]
    return [e.episode_id for e in eps], draws, eps


def test_unseeded_resets_draw_new_hidden_physics_and_ids_reproducibly_from_the_seed(tmp_path):
    venv = _venv()
    runs = [_episode(venv, 0), _episode(venv), _episode(venv)]
    ids = [i for r in runs for i in r[0]]
    draws = [d for r in runs for d in r[1]]
    assert len(set(ids)) == 6 and len(set(draws)) == 6  # every copy's every episode its own
    assert runs[0][0] == ["rig-loop-parallel_jaw-box_s3-0", "rig-loop-parallel_jaw-box_s3-1"]  # seed + i
    again = _venv()
    assert [_episode(again, 0)[:2], _episode(again)[:2], _episode(again)[:2]] == [r[:2] for r in runs]
    write_dataset(tmp_path / "cap", [e for r in runs for e in r[2]], venv.capture_meta())  # ids unique: one dataset
    assert [e.episode_id for e in read_dataset(tmp_path / "cap").episodes] == ids


def test_autoreset_starts_a_new_episode_and_a_partial_seeded_reset_keeps_the_others():
    venv = _venv(max_episode_steps=1)
    first, _, _ = _episode(venv, 7)
    loop = venv.task.physics
    assert loop.seeds == [7, 8]
    venv.step(np.zeros(venv.action_space.shape, np.float32))  # after the truncating step: both autoreset
    after = list(loop.seeds)
    assert len(set(after) | {7, 8}) == 4
    venv.reset(seed=40, options={"reset_mask": np.array([False, True])})
    assert loop.seeds == [after[0], 41]
    venv.step(np.zeros(venv.action_space.shape, np.float32))
    assert [e.episode_id for e in venv.captures()] == [f"rig-loop-parallel_jaw-box_s3-{s}" for s in (after[0], 41)]


def test_a_bad_seed_list_changes_no_copy():
    venv = _venv()
    venv.reset(seed=0)
    with pytest.raises(ConfigError, match="copy 0 has recorded one frame"):  # was numpy's NaN-to-integer error
        venv.captures()
    with pytest.raises(ValueError):
        venv.reset(seed=[5, -1])
    _episode(venv)
    assert 5 not in venv.task.physics.seeds
