"""The rig-grasp floor (``bench.rig_floor``): redraws keep the script and change only the hidden draws, and a
redrawn trace becomes a prediction scored exactly as a model's replay."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from surrogate.bench.replay import prepare_replay
from surrogate.bench.rig_floor import floor_settings, medoid, redrawn_config, trace_prediction, unavailable
from surrogate.capture import read_dataset
from surrogate.config import config_hash
from surrogate.errors import ConfigError
from surrogate.paths import config_dir
from surrogate.rig.generate import generate, load_config
from surrogate.rig.simulate import simulate_episode
from surrogate.scenes.from_capture import asset_from_spec

DURATION = 1.5


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    out = tmp_path_factory.mktemp("floor") / "ds"
    generate(None, objects="heldout", episodes=1, out=out, workers=0, seed=3, progress=False, duration=DURATION)
    ds = read_dataset(out, include_truth=True)
    return ds, ds.episodes[0]


def _trace(ep, cfg, redraw=None):
    g = ep.provenance.generator
    return simulate_episode(cfg, asset_from_spec(ep.object), hand=g["hand"], seed=int(g["seed"]), duration=DURATION,
                            redraw=redraw)


def _drawn(trace) -> dict:
    """The hidden per-episode values a rig trace drew, by effect."""
    return {k: e.get("drawn") for k, e in trace.effects.items() if isinstance(e, dict) and e.get("drawn")}


def test_the_episodes_own_draw_as_a_prediction_is_its_exact_state(captured):
    ds, ep = captured
    cfg = load_config(None)
    replay = prepare_replay(ep, ds.meta, substeps=4, margin=0.005)
    q, force = trace_prediction(replay, ds.meta, _trace(ep, cfg))
    a = replay.scene.object_qpos_adr
    # the capture stores float32: the rebuilt object and the same seed give the recorded truth to its precision
    np.testing.assert_allclose(q[:, a:a + 7], ep.truth["object_pose"], atol=1e-6)
    cols = [c for c, _, _ in replay.sensors]
    np.testing.assert_allclose(force, ep.truth["pad_wrench"][:, cols, :3], atol=1e-4)
    short = dataclasses.replace(ep, timestamps=ep.timestamps[:-1], object_pose=ep.object_pose[:-1])
    with pytest.raises(ValueError, match=f"episode {ep.episode_id}: the rig trace has"):
        trace_prediction(dataclasses.replace(replay, episode=short), ds.meta, _trace(ep, cfg))
    scripted_otherwise = dataclasses.replace(ep, joint_cmd=ep.joint_cmd + 1e-3)  # another version of the rig's script
    with pytest.raises(ValueError, match=f"episode {ep.episode_id}: the rig's commands for its seed differ"):
        trace_prediction(dataclasses.replace(replay, episode=scripted_otherwise), ds.meta, _trace(ep, cfg))


def test_a_redraw_keeps_the_script_and_draws_the_hidden_values_again(captured):
    _, ep = captured
    cfg = load_config(None)
    own, r0, r0b, r1 = _trace(ep, cfg), _trace(ep, cfg, 0), _trace(ep, cfg, 0), _trace(ep, cfg, 1)
    for r in (r0, r1):  # the same grasp: script, commands and the object's start
        assert r.script == own.script
        np.testing.assert_array_equal(r.joint_cmd, own.joint_cmd)
        np.testing.assert_array_equal(r.object_pose[0], own.object_pose[0])
    assert _drawn(r0) != _drawn(own) and _drawn(r1) != _drawn(r0)
    np.testing.assert_array_equal(r0b.object_pose, r0.object_pose)  # a redraw is reproducible
    assert not np.array_equal(r0.object_pose, own.object_pose)
    with pytest.raises(ConfigError, match="redraw"):
        _trace(ep, cfg, -1)


def test_the_rig_with_fixed_draws_leaves_nothing_to_redraw(captured):
    """configs/rig/fixed_draws.yaml fixes every hidden per-episode draw: a redraw is the episode itself."""
    _, ep = captured
    cfg = load_config(config_dir() / "rig" / "fixed_draws.yaml")
    own, again = _trace(ep, cfg), _trace(ep, cfg, 1)
    assert again.script == own.script
    assert own.object_true["mass"] == pytest.approx(own.object_nominal.mass)  # the capture's mass is the true one
    assert own.object_true["com_offset"] == [0.0, 0.0, 0.0]
    assert _drawn(own) and _drawn(again) == _drawn(own)  # the fingertip effects' values are drawn, and the same
    np.testing.assert_array_equal(again.object_pose, own.object_pose)
    np.testing.assert_array_equal(again.pad_wrench, own.pad_wrench)


def test_redrawn_config_moves_only_the_friction_field_seed():
    cfg = load_config(None)
    out = redrawn_config(cfg, 2)
    assert out["effects"]["friction_map"]["seed"] == cfg["effects"]["friction_map"]["seed"] + 3
    out["effects"]["friction_map"]["seed"] = cfg["effects"]["friction_map"]["seed"]
    assert config_hash(out) == config_hash(cfg)


def test_the_floor_says_why_it_cannot_run(captured):
    ds, ep = captured
    h = config_hash(load_config(None))
    test = [("heldout_families/x", ep, ds.meta)]
    assert unavailable(test, h) is None  # the suite's own set or --test-data recorded by the suite's rig config
    assert "another rig config" in unavailable(test, "0" * 64)


@pytest.mark.parametrize("bad", [{"redraws": -1}, {"redraws": 1.5}, {"redraws": True}, {"redraws": "2"},
                                 {"redraws": 2, "by_source": "yes"}])
def test_floor_settings_are_checked(bad):
    assert floor_settings({}) == (0, False) and floor_settings({"floor": {"redraws": 3, "by_source": True}}) == (3, True)
    with pytest.raises(ConfigError, match="floor."):
        floor_settings({"floor": bad})


def test_redraw_only_draws_the_named_purposes_again(captured):
    _, ep = captured
    cfg = load_config(None)
    own, only = _trace(ep, cfg), _trace_only(ep, cfg, ("actuator",))
    assert only.effects["actuator_delay_backlash"]["drawn"] != own.effects["actuator_delay_backlash"]["drawn"]
    assert only.effects["mass_mismatch"]["drawn"] == own.effects["mass_mismatch"]["drawn"]
    assert all(only.effects[n].get("drawn") == own.effects[n].get("drawn") for n in ("pad_relaxation", "presliding_friction"))
    # nothing named: the episode's own draw, bit for bit (the surface-only row relies on it)
    np.testing.assert_array_equal(_trace_only(ep, cfg, ()).object_pose, own.object_pose)
    with pytest.raises(ConfigError, match="redraw_only"):
        _trace_only(ep, cfg, ("script",))


def _trace_only(ep, cfg, only):
    g = ep.provenance.generator
    return simulate_episode(cfg, asset_from_spec(ep.object), hand=g["hand"], seed=int(g["seed"]), duration=DURATION,
                            redraw=0, redraw_only=only)


def test_the_medoid_is_the_path_closest_to_the_others():
    F, nq, adr = 5, 9, 2
    q = [np.zeros((F, nq)) for _ in range(4)]
    for k, x in enumerate([0.0, 1.0, 1.5, 5.0]):  # object x: summed distances 7.5, 5.5, 5.5, 13.5
        q[k][:, adr] = x
    assert medoid(q, adr) == 1  # the lowest index among equals
    q.append(np.zeros((F, nq)))
    for k, x in enumerate([0.0, 1.0, 3.0, 10.0, 1.5]):  # summed distances 15.5, 12.5, 15.5, 36.5, 12.0
        q[k][:, adr] = x
    q[1][:, adr + 3] = 100.0  # a column that is not the object's position does not count
    assert medoid(q, adr) == 4


def test_the_floor_sources_are_the_rigs_hidden_purposes_and_the_surface():
    from surrogate.bench.rig_floor import SOURCES
    from surrogate.rig.simulate import HIDDEN_PURPOSES

    assert set(SOURCES) == {*HIDDEN_PURPOSES, "surface"}


def test_a_trace_maps_to_the_capture_by_joint_and_sensor_name(captured):
    """A trace whose joints and sensors come in another order than the dataset's: the prediction still puts each
    joint and each pad's force where the capture has it."""
    import types

    ds, ep = captured
    replay = prepare_replay(ep, ds.meta, substeps=4, margin=0.005)
    own = _trace(ep, load_config(None))
    jo, so = list(own.joint_names)[::-1], list(own.sensor_names)[::-1]
    flipped = types.SimpleNamespace(
        times=own.times, object_pose=own.object_pose, joint_names=jo, sensor_names=so,
        joint_pos=np.asarray(own.joint_pos)[:, [list(own.joint_names).index(n) for n in jo]],
        joint_cmd=np.asarray(own.joint_cmd)[:, [list(own.joint_names).index(n) for n in jo]],
        pad_wrench=np.asarray(own.pad_wrench)[:, [list(own.sensor_names).index(n) for n in so]])
    q0, f0 = trace_prediction(replay, ds.meta, own)
    q1, f1 = trace_prediction(replay, ds.meta, flipped)
    assert len(jo) > 1 and len(so) > 1 and jo != list(own.joint_names)
    np.testing.assert_array_equal(q1, q0)
    np.testing.assert_array_equal(f1, f0)


def test_by_source_skips_a_source_whose_effect_is_off():
    from surrogate.bench.rig_floor import SOURCES, source_enabled
    from surrogate.paths import config_dir

    cfg = load_config(None)
    assert all(source_enabled(cfg, s) for s in SOURCES)
    v1 = load_config(str(config_dir() / "rig" / "v1.yaml"))  # v1: none of the fingertip effects
    assert not source_enabled(v1, "fingertips") and source_enabled(v1, "surface")


class _KeptPredictions:
    """The suite's scorer as far as the floor uses it: it keeps the predictions it is given, in order."""

    def __init__(self):
        self.given = []

    def score(self, preds):
        self.given.append(dict(preds))
        return [{"unstable": False} for _ in preds]

    def metrics(self, scores):
        return {}

    def coverage(self, members):
        return 0.0

    def ensemble(self, scores):
        return scores[0]


def test_the_exact_row_reads_the_state_the_rig_recorded_and_simulates_only_what_lacks_it(captured):
    """``rig_exact`` from the capture's ``truth.*`` (no simulation) equals the episode simulated again to the float32
    it is stored in; an episode without it (another source) is simulated again as before."""
    from surrogate.bench.rig_floor import EXACT_ROW, floor_rows, recorded_truths, truth_prediction
    from surrogate.parallel import Executor

    ds, ep = captured
    replay = prepare_replay(ep, ds.meta, substeps=4, margin=0.005)
    key = f"heldout/{ep.episode_id}"
    truths = recorded_truths({"heldout": ds})
    assert set(truths) == {key} and truth_prediction(replay, ds.meta, {}) is None
    for name in ("object_pose", "joint_pos", "pad_wrench"):  # a frame short, or a column: simulated again instead
        assert truth_prediction(replay, ds.meta, {**ep.truth, name: ep.truth[name][:-1]}) is None
        assert truth_prediction(replay, ds.meta, {**ep.truth, name: ep.truth[name][:, :-1]}) is None
    ex = Executor(progress=False)
    ex.share(("test", key), replay)
    test, sim = [(key, ep, ds.meta)], {"substeps": 4, "margin": 0.005}
    rows = {}
    for name, given in (("recorded", truths), ("simulated", None)):
        kept = _KeptPredictions()
        rows[name] = floor_rows(ex, test, rig={"config": None, "overrides": ()}, redraws=1, sim=sim, scorer=kept,
                                replays={key: replay}, truths=given)
        rows[name]["exact"] = kept.given[0][key]
    assert rows["recorded"][EXACT_ROW]["simulated_again"] == 0 and rows["simulated"][EXACT_ROW]["simulated_again"] == 1
    (q0, f0), (q1, f1) = rows["recorded"]["exact"], rows["simulated"]["exact"]
    np.testing.assert_allclose(q0, q1, atol=1e-6)
    np.testing.assert_allclose(f0, f1, atol=1e-4)
    assert np.array_equal(q0, truth_prediction(replay, ds.meta, ep.truth)[0])
