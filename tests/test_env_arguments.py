"""The grasp environments' arguments are checked at construction: a value of the wrong kind or range, or one the
environment would silently ignore, raises a ``ConfigError`` naming the argument (it used to give NaN rewards, a
string read as True, an error deep in MuJoCo, or nothing at all). Also: ``render()`` at sizes above the model's
offscreen framebuffer. Analytic contact only; each refusal comes before any scene is built."""

from __future__ import annotations

import numpy as np
import pytest

import surrogate.envs  # noqa: F401  (registers)
from surrogate.envs import GraspEnv, GraspTask, GraspVectorEnv
from surrogate.envs.grasp import _make_task
from surrogate.errors import ConfigError
from surrogate.objects import make_object
from surrogate.paths import release_checkpoint

NAN = float("nan")


def _refused(make, key: str, *words: str) -> str:
    with pytest.raises(ConfigError) as err:
        make()
    assert err.value.location.field == key, str(err.value)
    assert key in str(err.value) and all(w in str(err.value) for w in words), str(err.value)
    return str(err.value)


@pytest.mark.parametrize("kw", [
    {"lift_target": 0.0}, {"lift_target": -0.05}, {"lift_target": NAN}, {"lift_threshold": -0.02},
    {"lift_threshold": 0.001}, {"contact_tol": -1e-3}, {"contact_tol": NAN}, {"drop_penalty": NAN},
    {"drop_penalty": "5"}, {"xy_noise": -0.01}, {"timestep": 0.0}, {"timestep": -0.002}, {"control_dt": 0.0},
    {"grip_force": -5.0}, {"grip_force": "5"}, {"grip_force": np.inf}, {"num_envs": 2.5}, {"num_envs": "2"},
    {"num_envs": 0}, {"num_envs": True},
], ids=lambda kw: "-".join(f"{k}={v!r}" for k, v in kw.items()))
def test_task_numbers_of_the_wrong_kind_or_range_are_refused_naming_the_argument(kw):
    (key, _), = kw.items()
    _refused(lambda: GraspTask(**kw), key, repr(kw[key]))


@pytest.mark.parametrize("key", ["randomize", "rate_limit", "copies"])
@pytest.mark.parametrize("value", ["false", "no", "False", 0, None])
def test_flags_that_are_not_bools_are_refused(key, value):
    _refused(lambda: GraspTask(**{key: value}), key, "True or False")
    _refused(lambda: GraspVectorEnv(2, **{key: value}), key)


def test_numpy_bools_and_numbers_and_an_exact_drop_band_threshold_are_accepted():
    t = GraspTask(np.int64(2), randomize=np.False_, rate_limit=np.True_, copies=np.False_, xy_noise=0,
                  contact_tol=np.float32(0.0), lift_threshold=0.005, drop_penalty=-1, grip_force=np.float64(8.0))
    assert t.num_envs == 2 and t.randomize is False and np.isfinite(t.max_delta).all() and t.drop_penalty == -1.0


@pytest.mark.parametrize("kw", [{"checkpoint": "checkpoints/rig_default"}, {"contact_model": object()}])
def test_a_learned_model_with_analytic_contact_is_refused_pointing_to_surrogate(kw):
    (key, _), = kw.items()
    _refused(lambda: GraspTask(**kw), key, "contact='surrogate'")
    _refused(lambda: GraspEnv(**kw), key, "contact='surrogate'")


def test_checkpoint_and_contact_model_together_are_refused():
    _refused(lambda: GraspTask(contact="surrogate", checkpoint=release_checkpoint("rig_default"),
                               contact_model=object()), "checkpoint", "not both")


@pytest.mark.parametrize("kw, key", [
    ({"mass": 0.5}, "mass"), ({"object": "box", "mass": 0.5}, "mass"), ({"split_index": 3}, "split_index"),
    ({"split": "heldout", "object_seed": 5}, "object_seed"), ({"mesh": "x.stl", "object_seed": 5}, "object_seed"),
    ({"object": "box", "object_seed": 3.7}, "object_seed"), ({"object": "box", "object_seed": "3"}, "object_seed"),
    ({"split": "heldout", "split_index": "3"}, "split_index"),
])
def test_object_arguments_the_environment_would_ignore_or_misread_are_refused(kw, key):
    _refused(lambda: _make_task(1, dict(kw)), key)


def test_an_object_seed_with_an_object_asset_is_refused():
    """An ``ObjectAsset`` is already made: a seed with it had been ignored without a word."""
    asset = make_object("box", 3)
    _refused(lambda: _make_task(1, {"object": asset, "object_seed": 5}), "object_seed", "ObjectAsset")
    assert _make_task(1, {"object": asset}).obj is asset


def test_renders_larger_than_the_default_framebuffer_and_refuses_empty_sizes():
    env = GraspEnv(render_mode="rgb_array", width=1280, height=720)
    env.reset(seed=0)
    assert env.render().shape == (720, 1280, 3)
    env.close()
    venv = GraspVectorEnv(2, render_mode="rgb_array", width=700, height=500)  # copies: one MjModel for both
    venv.reset(seed=0)
    assert venv.render().shape == (2, 500, 700, 3)
    venv.step(np.zeros(venv.action_space.shape, np.float32))  # the enlarged framebuffer is no physics edit
    venv.close()
    for w, h, key in ((0, 240, "width"), (320, -5, "height"), (320.5, 240, "width")):
        _refused(lambda w=w, h=h: GraspEnv(render_mode="rgb_array", width=w, height=h), key, ">= 1")
        _refused(lambda w=w, h=h: GraspVectorEnv(2, width=w, height=h), key)
