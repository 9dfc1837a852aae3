"""A network's corrections apply only on its training support (``model.support``): in range they are the network's,
far out of range the contact gets the fitted law, between they fade; the stiffness correction's weight reads
configuration only; the torch model and the stepper's numpy copy agree; the card keeps the choice; the stepper's
input-range check reads the same training range."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from surrogate.bench.speed import grasped_state
from surrogate.model import graph as G
from surrogate.model import network_numpy
from surrogate.model.batch_graph import GraphBuilder
from surrogate.model.checkpoint import CheckpointError, export_checkpoint, load_checkpoint
from surrogate.model.contact_law import ContactLawGNN
from surrogate.model.support import STD_FLOOR, support_weights, training_range
from surrogate.objects import make_object
from surrogate.scenes import build_scene
from surrogate.sim.contact import InputRange

torch.set_num_threads(1)
LAW = dict(stiffness=1.0e6, exponent=1.5, damping=5.0, friction=0.8, slip_eps=1e-4, units="si")
PAD = dict(LAW, stiffness=1.0e5, friction=1.0)


def _graph(family: str, seed: int):
    scene = build_scene(make_object(family, seed), hand="parallel_jaw", setting="table")
    d = grasped_state(scene, seconds=0.6)
    return GraphBuilder.from_scene(scene).build(scene.model, [d], dtype=torch.float64).graph


@pytest.fixture(scope="module")
def graphs():
    return {"box": _graph("box", 0), "capsule": _graph("capsule", 100)}


def _net(g, support_std=None, **kw) -> ContactLawGNN:
    """A network with random corrections whose normalizers saw only ``g`` (a box grasp), then in eval mode."""
    torch.manual_seed(0)
    net = ContactLawGNN(prior=LAW, prior_body=PAD, hidden=16, support_std=support_std, **kw)
    with torch.no_grad():
        for p in net.correction_parameters():
            p.copy_(0.5 * torch.randn(p.shape))
        net.train()
        net.law_parameters(g)
    return net.eval()


def _law(net, g) -> np.ndarray:
    """[E, 3] the fitted law's own parameters (no correction) of ``g``'s contacts."""
    group = (g.static[g.edge_index[0]] < 0.5).long()
    return torch.stack([net.log_stiffness[group], net.log_damping[group], net.log_friction[group]], 1).double().exp().detach().numpy()


def test_in_range_the_corrections_are_the_networks_and_a_new_shape_type_gets_the_law(graphs):
    box, capsule = graphs["box"], graphs["capsule"]
    plain, held = _net(box), _net(box, support_std=6.0)
    held.load_state_dict(plain.state_dict())
    with torch.no_grad():
        # the contacts it was trained on: every weight 1, the network's corrections unchanged
        np.testing.assert_allclose(held.law_parameters(box).numpy(), plain.law_parameters(box).numpy(), rtol=1e-12)
        assert not np.allclose(plain.law_parameters(box).numpy(), _law(plain, box))  # the corrections are not nothing
        # a capsule (a type no training contact had): its contacts get the law; the others keep the corrections
        on_capsule = (capsule.static[capsule.edge_index[1]] < 0.5).numpy()  # every contact touches the object
        got, net_out = held.law_parameters(capsule).numpy(), plain.law_parameters(capsule).numpy()
    assert on_capsule.all()
    np.testing.assert_allclose(got, _law(held, capsule), rtol=1e-12)
    assert not np.allclose(net_out, got)


def test_the_weight_fades_from_k_to_2k_and_the_stiffness_weight_reads_configuration_only():
    rng = (np.zeros(3), np.ones(3))
    ef = np.array([[0.0, 0.0, 0.0], [7.5, 0.0, 0.0], [0.0, 0.0, 13.0], [0.0, -9.0, 0.0]])
    nf = np.zeros((2, 2))
    w_k, w = support_weights(6.0, ef, nf, np.array([[0, 0, 0, 0], [1, 1, 1, 1]]), rng, (np.zeros(2), np.ones(2)),
                             edge_cols=[0, 1, 2], config_cols=[0, 2])
    np.testing.assert_allclose(w, [1.0, 0.75, 0.0, 0.5])
    np.testing.assert_allclose(w_k, [1.0, 0.75, 0.0, 1.0])  # column 1 is not a configuration feature
    # a node far out of range fades the contacts at either end of it, not the stiffness
    far = np.array([[0.0, 0.0], [0.0, 20.0]])
    w_k, w = support_weights(6.0, ef[:1], far, np.array([[0], [1]]), rng, (np.zeros(2), np.ones(2)),
                             edge_cols=[0, 1, 2], config_cols=[0, 2])
    assert w_k[0] == 1.0 and w[0] == 0.0


def test_a_fast_contact_keeps_its_stiffness_correction(graphs):
    box = graphs["box"]
    held = _net(box, support_std=6.0)
    ef, nf = held.features(box)
    fast = ef.clone()
    fast[:, G.EDGE_FEATURES.index("vt")] += 1e3  # a slip speed far beyond training's
    with torch.no_grad():
        ref, got = held.law_parameters(box, features=(ef, nf)), held.law_parameters(box, features=(fast, nf))
    np.testing.assert_allclose(got[:, 0].numpy(), ref[:, 0].numpy(), rtol=1e-12)  # k: configuration only
    np.testing.assert_allclose(got[:, 1:].numpy(), _law(held, box)[:, 1:], rtol=1e-12)  # c, mu: the law


@pytest.mark.parametrize("kw", [{}, {"history": True}], ids=["plain", "history"])
def test_the_stepper_numpy_copy_applies_the_same_support(graphs, kw):
    held = _net(graphs["box"], support_std=3.0, **kw)
    fast = network_numpy.numpy_network(held)
    for g in graphs.values():
        with torch.no_grad():
            ref = held.law_parameters(g).numpy()
        np.testing.assert_allclose(fast.law_parameters(g), ref, rtol=2e-5, atol=1e-9)
    np.testing.assert_allclose(fast.law_parameters(graphs["capsule"]), _law(held, graphs["capsule"]), rtol=1e-12)


def test_training_mode_applies_every_correction(graphs):
    """In training the normalizers still accumulate: the range is not fixed, so nothing is faded."""
    box, capsule = graphs["box"], graphs["capsule"]
    plain, held = _net(box), _net(box, support_std=6.0)
    held.load_state_dict(plain.state_dict())
    plain.train(), held.train()
    for m in (plain, held):  # the same accumulation in both
        for n in (m.edge_norm, m.node_norm):
            n.max_accumulations = 0
    with torch.no_grad():
        np.testing.assert_allclose(held.law_parameters(capsule).numpy(), plain.law_parameters(capsule).numpy())


def test_the_card_keeps_the_support_and_refuses_a_bad_one(graphs, tmp_path):
    held = _net(graphs["box"], support_std=6.0)
    export_checkpoint(held, tmp_path / "ck")
    back, card = load_checkpoint(tmp_path / "ck")
    assert card["model"]["hparams"]["support_std"] == 6.0 and back.support_std == 6.0
    with torch.no_grad():
        np.testing.assert_allclose(back.law_parameters(graphs["capsule"]).numpy(),
                                   held.law_parameters(graphs["capsule"]).numpy(), rtol=1e-12)
    export_checkpoint(_net(graphs["box"]), tmp_path / "plain")
    assert "support_std" not in load_checkpoint(tmp_path / "plain")[1]["model"]["hparams"]  # cards as before
    import json

    c = json.loads((tmp_path / "ck" / "card.json").read_text())
    c["model"]["hparams"]["support_std"] = -1
    (tmp_path / "ck" / "card.json").write_text(json.dumps(c))
    with pytest.raises(CheckpointError, match="support_std"):
        load_checkpoint(tmp_path / "ck")
    with pytest.raises(ValueError, match="support_std"):
        ContactLawGNN(prior=LAW, support_std=0.0)


def test_the_input_range_check_reads_the_same_training_range(graphs):
    net = _net(graphs["box"])
    mean, std = training_range(net.edge_norm)
    rng = InputRange.from_model(net, k=6.0)
    np.testing.assert_allclose(rng.edge_band.numpy(), 6.0 * np.maximum(std, STD_FLOOR), rtol=1e-6)
    np.testing.assert_allclose(rng.edge_mean.numpy(), mean, rtol=1e-6, atol=1e-7)
