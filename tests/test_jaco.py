"""The Kinova Jaco arm and hand of dm_control (a robot model the scene builder did not write) under
``surrogate.hybrid`` (issue #26): the stepper's oracles on it, a scripted grasp that lifts held-out objects under
analytic and under learned contact, copies equal to separate ``MjData``, ``surrogate jaco`` and ``surrogate speed
--robot jaco``, and a clear error without the assets.

The assets come from ``pip install --no-deps dm-control`` (the README's test command installs it); without them the
tests that need them are skipped, saying so."""

from __future__ import annotations

import json

import mujoco
import numpy as np
import pytest
import torch

from surrogate.cli import main
from surrogate.errors import ConfigError
from surrogate.objects import load_split
from surrogate.scenes.jaco import ASSETS_ENV, jaco_assets, jaco_spec
from surrogate.sim import MuJoCoContact, Stepper, ZeroContact, step

from .conftest import needs_jaco as needs_assets  # skipped, saying so, without dm_control's assets

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def capsule():
    return load_split("heldout")[3]  # capsule_s103: the same object in every test


def test_missing_assets_are_refused_saying_how_to_get_them(tmp_path, monkeypatch):
    monkeypatch.setenv(ASSETS_ENV, str(tmp_path))
    with pytest.raises(ConfigError, match="jaco_arm.xml, jaco_hand.xml"):
        jaco_assets()


@needs_assets
def test_oracles_on_the_jaco_zero_force_and_mujoco_forces(capsule):
    """During the scripted grasp: (a) zero learned force equals the Jaco with the object's collisions removed;
    (b) MuJoCo's own forces through the stepper reproduce ``mj_step`` on the user's Jaco (to 1e-5 until the fingers
    touch; the exact oracle on any MJCF is ``test_hybrid_any_mjcf``). With condim 3 everywhere:
    ``MuJoCoContact`` reproduces forces at the contact points, not the torsional torque of condim 4 (the fingertips')."""
    from surrogate.bench.jaco_grasp import CONTROL_DT, grasp_controls, grasp_plan, jaco_hybrid, start_state

    js = _condim3(jaco_spec(capsule))
    h = jaco_hybrid(js)
    plan = grasp_plan(h.model, js)
    n = int(3.0 / CONTROL_DT)  # descend, close, the first half of the lift

    def run(m, stepper, data):
        out = []
        for k in range(1, n + 1):
            data.ctrl[:] = grasp_controls(k * CONTROL_DT, plan, js, h.model)
            for _ in range(10):
                mujoco.mj_step(m, data) if stepper is None else step(m, data, stepper)
            out.append(np.concatenate([data.qpos, data.qvel]))
        return np.array(out)

    def start(m):
        d = mujoco.MjData(m)
        ref = start_state(h, js, plan)
        d.qpos[:], d.ctrl[:] = ref.qpos, ref.ctrl
        mujoco.mj_forward(m, d)
        return d

    user = js.spec.compile()
    user.opt.tolerance = h.model.opt.tolerance = 0.0  # solved to the end: a resting capsule's redundant contacts
    ref = run(user, None, start(user))
    hyb = run(h.model, Stepper(h.scene, MuJoCoContact(h.scene)), start(h.model))
    # until the fingers touch (1.9 s) they agree to 1e-5 m / rad (measured 4e-6: the capsule rests on 5 table contacts,
    # a redundant set MuJoCo's solver settles differently inside a larger problem); the grasp then amplifies it (2 mm)
    touch = int(1.9 / CONTROL_DT)
    assert np.abs(hyb - ref)[:touch, :h.model.nq].max() < 1e-5
    assert ref[-1, 9 + 2] - ref[0, 9 + 2] > 0.02  # the object (after the arm's 9 joints) is being lifted
    spec = _condim3(jaco_spec(capsule)).spec
    for g in js.object_geoms:
        spec.geom(g).contype = spec.geom(g).conaffinity = 0
    cut = spec.compile()
    cut.opt.tolerance = 0.0  # as h.model's above
    zero = run(h.model, Stepper(h.scene, ZeroContact()), start(h.model))
    np.testing.assert_array_equal(zero, run(cut, None, start(cut)))
    assert zero[-1, 9 + 2] < ref[0, 9 + 2] - 0.05  # nothing holds it: it fell through the table


def _condim3(js):
    """The Jaco with condim 3 and no joint dry friction: the constraints ``MuJoCoContact`` reproduces exactly (MuJoCo
    solves the joints' frictionloss together with the contacts; forces applied from outside cannot couple to it)."""
    for g in js.spec.geoms:
        g.condim = 3
    for j in js.spec.joints:
        j.frictionloss = 0.0
    return js


@needs_assets
def test_scripted_grasp_lifts_held_out_objects_under_both_contacts(capsule):
    from surrogate.bench.jaco_grasp import LIFT, grasp_plan, jaco_hybrid, run_grasp

    for obj in (capsule, load_split("heldout")[21]):  # a capsule and a dumbbell
        js = jaco_spec(obj)
        h = jaco_hybrid(js)
        plan = grasp_plan(h.model, js)
        for contact in ("analytic", "surrogate"):
            lab = run_grasp(h, js, plan, contact=contact)["labels"]
            assert lab["lifted"] and not lab["dropped"], (obj.name, contact, lab)
            assert lab["final_rise_m"] > 0.7 * LIFT, (obj.name, contact, lab)
        st = h.stepper.stats()
        assert st["contacts"] > 0 and st["fallbacks"] == 0


@needs_assets
def test_jaco_copies_equal_separate_mjdata(capsule):
    from surrogate.bench.jaco_grasp import grasp_plan, held_state, jaco_hybrid

    js = jaco_spec(capsule)
    h = jaco_hybrid(js)
    d0 = held_state(h, js, grasp_plan(h.model, js))
    ds = [mujoco.MjData(h.model) for _ in range(2)]
    for d in ds:
        mujoco.mj_copyData(d, h.model, d0)
    ds[1].ctrl[-3:] -= 0.2  # the second hand opens a little: the copies differ
    cp = h.copies(2)
    for i, d in enumerate(ds):
        cp.set_state(i, d)
    for _ in range(100):
        h.step(ds)
        h.step(cp)
    np.testing.assert_allclose(cp.qpos, [d.qpos for d in ds], rtol=0, atol=1e-9)
    assert np.abs(ds[0].qpos - ds[1].qpos).max() > 1e-4


@needs_assets
def test_jaco_command_and_speed_print_their_rows(capsys, tmp_path):
    assert main(["jaco", "--count", "1", "--json", "--video", str(tmp_path / "jaco.mp4")]) == 0
    out = json.loads(capsys.readouterr().out)
    (row,) = out["rows"]
    assert row["object"] == "capsule_s100" and set(row["step_us"]) == {"analytic", "surrogate"}
    assert (tmp_path / "jaco.mp4").stat().st_size > 10_000
    assert main(["speed", "--robot", "jaco", "--json", "--min-seconds", "0.2"]) == 0
    (speed,) = json.loads(capsys.readouterr().out)["rows"]
    assert speed["analytic"] > 0 and speed["surrogate"] > 0 and speed["contacts"] >= 3
    assert speed["ratio"] == pytest.approx(speed["surrogate"] / speed["analytic"])


@needs_assets
def test_the_readme_jaco_example_runs_and_lifts_under_both(capsys):
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    (block,) = [b.split("```", 1)[0] for b in readme.split("```python")[1:] if "jaco_spec" in b]
    exec(compile(block, "README.md", "exec"), {})
    rises = [float(line.split()[2]) for line in capsys.readouterr().out.splitlines() if " rise " in line]
    assert len(rises) == 2 and min(rises) > 0.1  # analytic and learned both lift it by ~LIFT (0.12 m)
