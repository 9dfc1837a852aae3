"""The one rollout API: its analytic backend (``mujoco.rollout``) and its surrogate backend (the hybrid
stepper) agree when the surrogate is MuJoCo's own contact (``MuJoCoContact``), on a toss and on a hand
replay of a rig episode.

Tolerance: 1e-9 (m, and quaternion components) on the object's pose; measured 3e-15 on the toss and on
the replay (the hybrid step feeds back the very forces ``mj_step`` solves; what differs is the warm start
of the next solve, see ``tests/test_stepper.py``). The hand's joints, whose solves stop at the solver
tolerance (1e-8), get 1e-6 (measured 8e-10).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from surrogate.bench.replay import delayed_control, prepare_replay
from surrogate.capture import read_dataset
from surrogate.errors import ConfigError
from surrogate.objects import make_object
from surrogate.rig.generate import generate
from surrogate.scenes import build_scene
from surrogate.sim import MuJoCoContact, Stepper, ZeroContact
from surrogate.sim.rollout import object_states, rollout

torch.set_num_threads(1)
POSE_TOL, QPOS_TOL = 1e-9, 1e-6


def _toss():
    """A box thrown twice onto the ground (1 s at 148 Hz, 4 substeps): bounces, tumbles, comes to rest."""
    scene = build_scene(make_object("box", 0), hand="none", setting="ground", timestep=1 / 148 / 4)
    q0 = np.array([[0, 0, 0.3, 0.9, 0.3, 0.2, 0.1], [0.1, 0, 0.2, 0.7, -0.2, 0.5, 0.3]])
    q0[:, 3:] /= np.linalg.norm(q0[:, 3:], axis=1, keepdims=True)
    v0 = np.array([[1.0, 0.5, 1.0, 4, -8, 3], [-0.5, 1.0, 0.0, 10, 2, -5]])
    return scene, object_states(scene, q0, v0)


def _pose_error(a, b, qa):
    e = np.abs(a - b)
    return e[..., qa:qa + 3].max(), e[..., qa + 3:qa + 7].max()


def test_toss_analytic_equals_surrogate_with_mujoco_contact():
    scene, s0 = _toss()
    qa = scene.object_qpos_adr
    ana = rollout(scene, s0, substeps=4, frames=149)
    st = Stepper(scene, MuJoCoContact(scene))
    sur = rollout(scene, s0, contact=st, substeps=4, frames=149)
    assert ana.qpos.shape == sur.qpos.shape == (2, 149, 7)
    np.testing.assert_array_equal(ana.state[:, 0], s0)
    assert st.stats()["contacts"] > 1000  # impacts and resting contact, all through the contact model
    assert np.all(ana.qpos[:, -1, qa + 2] < 0.06) and np.all(ana.qpos[:, 0, qa + 2] > 0.15)  # it landed
    assert max(_pose_error(ana.qpos, sur.qpos, qa)) < POSE_TOL
    # the comparison can fail: a contact model that never pushes lets the box fall through the ground
    none = rollout(scene, s0, contact=ZeroContact(), substeps=4, frames=149)
    assert _pose_error(ana.qpos, none.qpos, qa)[0] > 0.1


@pytest.fixture(scope="module")
def rig_episode(tmp_path_factory):
    out = tmp_path_factory.mktemp("rig") / "ds"
    generate(None, objects="heldout", episodes=1, out=out, workers=0, seed=5, progress=False, duration=2.0)
    ds = read_dataset(out)
    return ds.episodes[0], ds.meta


def test_hand_replay_analytic_equals_surrogate_with_mujoco_contact(rig_episode):
    """Both backends replay the recorded commands, as recorded and 3 physics steps late (a command that
    changes inside a frame), as one batch of two."""
    ep, meta = rig_episode
    ra = prepare_replay(ep, meta, substeps=4, mode="analytic")
    rs = prepare_replay(ep, meta, substeps=4, mode="external")
    qa = ra.scene.object_qpos_adr
    controls = np.stack([ra.control, delayed_control(ra.control, 3)])
    s0 = np.tile(ra.init_state, (2, 1))
    ana = rollout(ra.scene, s0, controls, substeps=4)
    st = Stepper(rs.scene, MuJoCoContact(rs.scene))
    sites = [site for _, site, _ in rs.sensors]
    sur = rollout(rs.scene, s0, controls, contact=st, substeps=4, pad_sites=sites)
    assert ana.qpos.shape == sur.qpos.shape == (2, ep.num_frames, ra.scene.model.nq)
    assert np.all(ana.qpos[:, -1, qa + 2] - ana.qpos[:, 0, qa + 2] > 0.05)  # both replays lift the object
    assert max(_pose_error(ana.qpos, sur.qpos, qa)) < POSE_TOL
    assert np.abs(ana.qpos - sur.qpos).max() < QPOS_TOL
    assert _pose_error(ana.qpos[0], ana.qpos[1], qa)[0] > 1e-4  # the late commands did change the replay
    # the pads squeeze the held object: the force on each pad is along its sensor's x axis, opposite ways
    held = sur.pad_force[0, -20:]
    assert held.shape == (20, 2, 3) and np.all(np.abs(held[:, :, 0]) > 1.0)
    assert np.all(np.sign(held[:, 0, 0]) != np.sign(held[:, 1, 0]))


def test_bad_inputs_name_the_field():
    scene, s0 = _toss()
    with pytest.raises(ConfigError) as e:
        rollout(scene, s0[:, :5], substeps=4, frames=3)
    assert e.value.location.field == "state0"
    with pytest.raises(ConfigError) as e:
        rollout(scene, s0, np.zeros((2, 4, 3)), substeps=4, frames=3)
    assert e.value.location.field == "controls"
    with pytest.raises(ConfigError) as e:
        rollout(scene, s0, contact=ZeroContact(), substeps=4, frames=3, models=[scene.model] * 2)
    assert e.value.location.field == "models"
    with pytest.raises(ConfigError) as e:
        rollout(scene, s0, substeps=4, frames=3, pad_sites=[0])
    assert e.value.location.field == "pad_sites"
    assert rollout(scene, s0, substeps=4, frames=1).state.shape == (2, 1, s0.shape[1])
