"""The hand's command latency identified from recorded hand joints (``bench.command_delay``), and replays that
apply it.

Rig grasps are generated with the rig's actuator latency fixed (no backlash) at 10 and at 30 ms: the identified
latencies must differ by 20 ms to within two physics steps (4 ms), whatever the offset between the rig's servos and
the scene's (both latencies are away from the candidates' bounds, 0 and 40 ms, so the offset cancels). The object's
pose plays no part, so the same holds for any contact model.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from surrogate.bench.command_delay import NOMINAL, command_delay, identify_command_delay
from surrogate.bench.replay import prepare_replay, replay_with_model
from surrogate.capture import read_dataset
from surrogate.errors import ConfigError
from surrogate.model.checkpoint import load_checkpoint
from surrogate.parallel import Executor
from surrogate.rig.generate import generate

REPO = Path(__file__).resolve().parent.parent
SIM = {"substeps": 4, "margin": 0.005}


def _rig(delay_s: float) -> list[str]:
    e = "effects.actuator_delay_backlash."
    return [f"{e}delay_min={delay_s}", f"{e}delay_max={delay_s}", f"{e}backlash_slide_min=0.0",
            f"{e}backlash_slide_max=0.0", f"{e}backlash_hinge_min=0.0", f"{e}backlash_hinge_max=0.0"]


@pytest.fixture(scope="module")
def grasps(tmp_path_factory):
    """{latency: dataset} of three short rig grasps each (approach, close and the start of the lift)."""
    out = {}
    for delay in (0.01, 0.03):
        path = tmp_path_factory.mktemp("delay") / f"d{delay}"
        generate(None, objects="heldout", episodes=3, out=path, workers=0, seed=5, overrides=_rig(delay),
                 duration=1.4, progress=False)
        out[delay] = read_dataset(path)
    return out


def test_the_identified_latency_follows_the_rigs(grasps):
    found = {}
    ex = Executor(progress=False)
    for delay, ds in grasps.items():
        found[delay] = identify_command_delay(ex, ds.episodes, ds.meta, nominal=NOMINAL, **SIM)
    dt = found[0.01]["candidates_s"][1]
    assert found[0.03]["delay_s"] - found[0.01]["delay_s"] == pytest.approx(0.02, abs=2.01 * dt)
    for f in found.values():  # every candidate up to 40 ms; the curve rises on both sides of the kept latency
        assert f["candidates_s"][-1] == pytest.approx(0.04, abs=dt) and f["episodes"] == 3 and not f["at_bound"]
        assert len(f["per_episode_best_s"]) == 3 and f["skipped"] == []
    late = found[0.03]["loss"]
    assert late[0] > min(late) + 1.0 and late[-1] > min(late) + 0.1


def test_the_suite_setting(grasps):
    ds = grasps[0.03]
    ids = [e.episode_id for e in ds.episodes[:2]]
    ex = Executor(progress=False)
    assert command_delay(ex, {}, ds, ids, sim={**SIM, "command_delay": 0}) == {"delay_s": 0.0, "how": "none"}
    assert command_delay(ex, {}, ds, ids, sim={**SIM, "command_delay": 0.01})["delay_s"] == 0.01
    got = command_delay(ex, {"baselines": {"nominal": NOMINAL}}, ds, ids, sim={**SIM, "command_delay": "identify"})
    assert got["episode_ids"] == ids and got["how"].startswith("identified")
    with pytest.raises(ConfigError, match="simulation.command_delay"):
        command_delay(ex, {}, ds, ids, sim={**SIM, "command_delay": "soon"})
    with pytest.raises(ConfigError, match="no training episodes"):
        identify_command_delay(ex, [], ds.meta, **SIM)
    # training grasps without recorded commands: nothing to identify on, said in the record (the run goes on)
    bare = SimpleNamespace(episodes=[dataclasses.replace(e, joint_cmd=None) for e in ds.episodes], meta=ds.meta)
    none = command_delay(ex, {}, bare, ids, sim={**SIM, "command_delay": "identify"})
    assert none["delay_s"] == 0.0 and none["how"].startswith("none: no training episode")
    with pytest.raises(ConfigError, match="no recorded hand joints \\(joint_pos\\) or commands"):
        identify_command_delay(ex, bare.episodes, ds.meta, **SIM)


def test_episodes_that_say_nothing_are_skipped_and_a_blown_up_candidate_never_wins(grasps, monkeypatch):
    ds = grasps[0.03]
    ex = Executor(progress=False)
    # a grasp whose hand joints do not move (none the scene has moves): skipped and named, the others decide
    still = dataclasses.replace(ds.episodes[0], episode_id="still",
                                joint_pos=np.repeat(ds.episodes[0].joint_pos[:1], ds.episodes[0].num_frames, axis=0))
    f = identify_command_delay(ex, [still, *ds.episodes[1:]], ds.meta, **SIM)
    assert f["skipped"] == [{"episode": "still", "reason": "no moving hand joint the scene has"}]
    assert f["episodes"] == 2 and "still" not in f["episode_ids"]
    with pytest.raises(ConfigError, match="no episode to identify"):
        identify_command_delay(ex, [still], ds.meta, **SIM)
    alone = SimpleNamespace(episodes=[still], meta=ds.meta)  # in a suite: said in the record, the run goes on
    none = command_delay(ex, {}, alone, ["still"], sim={**SIM, "command_delay": "identify"})
    assert none["delay_s"] == 0.0 and none["how"].startswith("none:") and "no episode to identify" in none["how"]
    # a candidate whose replay blows up scores +inf: it cannot be kept, whatever its place
    import surrogate.bench.command_delay as cd

    real, kept = cd.simulate_replay_qpos, identify_command_delay(ex, ds.episodes, ds.meta, **SIM)["delay_s"]

    def blow_up_the_kept_latency(replay, params, threads=1):
        q = real(replay, params, threads=threads)
        q[[i for i, p in enumerate(params) if p.delay_s == kept]] = np.nan
        return q

    monkeypatch.setattr(cd, "simulate_replay_qpos", blow_up_the_kept_latency)
    g = identify_command_delay(ex, ds.episodes, ds.meta, **SIM)
    assert g["delay_s"] != kept and g["loss"].count(None) == 1  # the ledger's JSON has no inf
    assert g["loss"][g["candidates_s"].index(kept)] is None


def test_a_bad_setting_is_refused_before_any_work():
    from surrogate.bench.command_delay import checked_simulation

    for bad in ("identfy", 5.0, -0.01, True):
        with pytest.raises(ConfigError, match="simulation.command_delay"):
            checked_simulation({"command_delay": bad})
    assert checked_simulation({"command_delay": 0.01}) == {"command_delay": 0.01}


def test_a_delayed_replay_moves_the_hand_later(grasps):
    ds = grasps[0.03]
    ep = ds.episodes[0]
    model, _ = load_checkpoint(REPO / "checkpoints" / "rig_default")
    r = prepare_replay(ep, ds.meta, **SIM)
    z = r.scene.model.jnt_qposadr[r.scene.model.joint("hand_z").id]
    _, now, _, _ = replay_with_model(ep, ds.meta, model, **SIM)
    _, late, _, _ = replay_with_model(ep, ds.meta, model, **SIM, delay_s=0.03)
    rec = ep.joint_pos[:, list(ds.meta.joint_names).index("hand_z")]
    err = [float(np.sqrt(np.mean((q[:, z] - rec[:len(q)]) ** 2))) for q in (now, late)]
    assert err[1] < 0.7 * err[0]  # the rig's hand is 30 ms late: the delayed replay follows it
