"""The stepper's numpy copy of a contact network (``model.network_numpy``) gives the torch model's law parameters: the
same features, normalizers, message passing and bounded corrections, for every switch of the model; it follows the
weights when they change, stands aside in training mode, and a rollout of the hybrid stepper (its input-range check
included) is the same either way."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from surrogate.bench.speed import grasped_state
from surrogate.model import graph as G
from surrogate.model import network_numpy
from surrogate.model.batch_graph import GraphBuilder
from surrogate.model.contact_law import ContactLawGNN
from surrogate.model.history import ContactState
from surrogate.objects import make_object
from surrogate.scenes import build_scene
from surrogate.sim.stepper import Stepper, step

from .conftest import use_torch_network

torch.set_num_threads(1)
LAW = dict(stiffness=1.0e6, exponent=1.5, damping=5.0, friction=0.8, slip_eps=1e-4, units="si")
PAD = dict(LAW, stiffness=1.0e5, friction=1.0)


def _grasp():
    """(scene, MjData of a box held between the pads: contacts with the table and both pads)."""
    scene = build_scene(make_object("box", 0), hand="parallel_jaw", setting="table")
    return scene, grasped_state(scene, seconds=0.6)


def _graph(scene, d):
    g = GraphBuilder.from_scene(scene).build(scene.model, [d], dtype=torch.float64).graph
    assert g.edge_index.shape[1] >= 4 and len(set(g.edge_index[0].tolist())) >= 2  # pads and table: several senders
    return g


def _trained_net(g, seed: int = 0, **kw) -> ContactLawGNN:
    """A network with random weights whose normalizers saw ``g`` (in training mode), then in eval mode."""
    torch.manual_seed(seed)
    net = ContactLawGNN(prior=kw.pop("prior", LAW), prior_body=kw.pop("prior_body", PAD), hidden=16, **kw)
    with torch.no_grad():
        for p in net.correction_parameters():
            p.copy_(0.5 * torch.randn(p.shape))
        net.train()
        for _ in range(3):
            net.law_parameters(g, state=_state(g) if net.history else None)
    return net.eval()


def _state(g, seed: int = 1):
    rng = np.random.default_rng(seed)
    E = g.edge_index.shape[1]
    return ContactState(rng.normal(0, 1e-4, (E, 3)), rng.uniform(0, 0.2, E), rng.uniform(0, 3, E), np.full(E, 1e4))


@pytest.mark.parametrize("kw", [
    {},
    {"history": True},
    {"history": True, "prior_body": dict(PAD, presliding_stiffness=2e4)},
    {"prior_body": dict(PAD, torsional_friction=2e-3, rolling_friction=1e-4)},
    {"prior": dict(LAW, static_friction=1.3, stribeck_speed=0.01), "prior_body": dict(PAD, static_friction=1.2,
                                                                                      stribeck_speed=0.02),
     "stribeck": True, "steps": 3},
], ids=["plain", "history", "presliding", "spin", "stribeck-3-steps"])
def test_the_numpy_network_gives_the_torch_models_law_parameters(kw):
    scene, d = _grasp()
    g = _graph(scene, d)
    net = _trained_net(g, **kw)
    fast = network_numpy.numpy_network(net)
    for state in ([None, _state(g)] if net.history else [None]):
        with torch.no_grad():
            ref = net.law_parameters(g, state=None if state is None else
                                     ContactState(*(torch.from_numpy(x) for x in state))).numpy()
        got = fast.law_parameters(g, state=state)
        assert got.shape == ref.shape and got.dtype == np.float64
        assert not np.allclose(ref[:, :3], ref[:1, :3])  # the corrections differ per contact: a real test
        np.testing.assert_allclose(got, ref, rtol=2e-5, atol=0)
        # the features the stepper checks, passed in, give the same
        feats = network_numpy.features(g)
        with torch.no_grad():
            ef, nf = net.features(g)
        np.testing.assert_allclose(feats[0], ef.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(feats[1], nf.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(fast.law_parameters(g, features=feats, state=state), got, rtol=1e-6, atol=0)


def test_the_numpy_copy_follows_the_weights_and_stands_aside_in_training():
    scene, d = _grasp()
    g = _graph(scene, d)
    net = _trained_net(g)
    first = network_numpy.numpy_network(net)
    assert network_numpy.numpy_network(net) is first  # cached while nothing changed
    with torch.no_grad():
        net.decoder[-1].bias.add_(0.3)  # an optimizer step writes in place
        ref = net.law_parameters(g).numpy()
    again = network_numpy.numpy_network(net)
    assert again is not first
    np.testing.assert_allclose(again.law_parameters(g), ref, rtol=2e-5)
    assert network_numpy.numpy_network(net.train()) is None  # its normalizers still accumulate: torch's path
    assert network_numpy.numpy_network(ContactLawGNN(prior=LAW, corrections=False).eval()) is None


def test_a_hybrid_rollout_is_the_same_with_the_numpy_network_or_torch(monkeypatch):
    scene, d = _grasp()
    net = _trained_net(_graph(scene, d), history=True)

    def roll():
        st, d2 = Stepper(scene, net), mujoco.MjData(scene.model)
        mujoco.mj_copyData(d2, scene.model, d)
        qpos = []
        for _ in range(40):
            step(scene.model, d2, st)
            qpos.append(d2.qpos.copy())
        return np.array(qpos), st.stats()

    fast, fast_stats = roll()
    use_torch_network(monkeypatch)
    slow, slow_stats = roll()
    assert fast_stats["network_calls"] > 0
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-7)
    # the input-range check on the numpy features (``InputRange._check_numpy``) flags what the torch check flags
    ood = [k for k in slow_stats if k.startswith("ood")]
    assert ood and slow_stats["ood_edges"] > 0  # this random network's normalizers saw one state: the grasp moves out
    assert {k: fast_stats[k] for k in ood} == {k: slow_stats[k] for k in ood}
    assert np.abs(slow[-1] - slow[0]).max() > 1e-6  # the grasp moves: the rollout is not trivially equal


def test_the_compiled_network_matches_torch_on_a_batch_of_many_environments():
    """Hundreds of contacts in 24 graphs (each environment its own state and, here, its own length and mass scales):
    the compiled pass's matrix products over all rows and its per-graph units give the torch model's parameters."""
    scene, d = _grasp()
    rng = np.random.default_rng(3)
    datas = []
    for _ in range(24):
        d2 = mujoco.MjData(scene.model)
        mujoco.mj_copyData(d2, scene.model, d)
        d2.qvel[:] += rng.normal(0, 0.05, scene.model.nv)
        mujoco.mj_forward(scene.model, d2)
        datas.append(d2)
    g = GraphBuilder.from_scene(scene).build(scene.model, datas, dtype=torch.float64).graph
    assert g.edge_index.shape[1] > 256 and int(g.batch.max()) == 23
    g.length = g.length * torch.linspace(0.7, 1.3, 24, dtype=g.length.dtype)  # each graph its own units
    g.mass_ref = g.mass_ref * torch.linspace(1.4, 0.6, 24, dtype=g.mass_ref.dtype)
    tilt = torch.linspace(-0.3, 0.3, 24, dtype=g.gravity.dtype)  # and its own gravity, in size and direction
    g.gravity = (g.gravity + torch.stack([tilt, -tilt, torch.zeros_like(tilt)], 1) * 9.81) * (1.0 + tilt[:, None])
    net = _trained_net(g, seed=4, history=True)
    state = _state(g, seed=5)
    with torch.no_grad():
        ref = net.law_parameters(g, state=ContactState(*(torch.from_numpy(x) for x in state))).numpy()
    got = network_numpy.numpy_network(net).law_parameters(g, state=state)
    assert np.ptp(ref[:, 2]) > 1e-3  # the friction corrections differ between contacts
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=0)


def test_an_mlp_the_kernel_cannot_run_is_refused():
    with pytest.raises(TypeError, match="compiled copy"):
        network_numpy._mlp(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)))
    with pytest.raises(TypeError, match="compiled copy"):
        network_numpy._mlp(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2)))  # no SiLU between


def test_history_features_match_torch_up_to_the_age_clip():
    scene, d = _grasp()
    g = _graph(scene, d)
    E = g.edge_index.shape[1]
    rng = np.random.default_rng(7)
    z, age, fn = rng.normal(0, 1e-3, (E, 3)), np.linspace(0.0, 20.0, E), rng.uniform(0, 30, E)
    got = network_numpy.history_features(network_numpy.graph_arrays(g), z, age, fn)
    ref = G.history_features(g, *(torch.from_numpy(x) for x in (z, age, fn))).numpy()
    assert (ref[:, 2] == G.HISTORY_AGE_CLIP).any() and (ref[:, 2] < G.HISTORY_AGE_CLIP).any()  # both sides of it
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7)


def test_non_finite_inputs_give_non_finite_parameters_where_torch_does():
    """The stepper's force guard reads NaN: a contact with NaN features gives NaN parameters in the compiled pass
    exactly where the torch model gives them (itself and what message passing reaches)."""
    scene, d = _grasp()
    g = _graph(scene, d)
    net = _trained_net(g)
    with torch.no_grad():
        ef, nf = net.features(g)
        ef[1, 3] = float("nan")
        ref = net.law_parameters(g, features=(ef, nf)).numpy()
    got = network_numpy.numpy_network(net).law_parameters(g, features=(ef.numpy(), nf.numpy()))
    assert not np.isfinite(ref).all() and np.isfinite(ref).any()
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(ref))


def test_a_stepper_with_a_network_limits_the_kernels_blas_threads(monkeypatch):
    from threadpoolctl import threadpool_info, threadpool_limits

    from surrogate.model import network_kernel

    def blas_threads():
        return {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

    scene, d = _grasp()
    net = _trained_net(_graph(scene, d))
    import scipy.linalg.cython_blas  # noqa: F401  the BLAS the kernel calls, loaded

    with threadpool_limits(limits=2, user_api="blas"):  # restored on exit
        monkeypatch.setattr(network_kernel, "_blas_threads", None)  # as in a fresh process
        Stepper(scene, net, num_threads=None)  # leaves BLAS alone
        Stepper(scene, ContactLawGNN(prior=LAW, corrections=False).eval(), num_threads=1)  # no network: alone too
        assert set(blas_threads().values()) == {2}
        Stepper(scene, net, num_threads=1)
        assert blas_threads() and set(blas_threads().values()) == {1}
