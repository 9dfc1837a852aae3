"""A contact network without the shape descriptors (``ContactLawGNN(geometry=False)``): it cannot tell which object it
touches, its input-range check ignores what it does not read, and its checkpoint keeps the choice."""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from surrogate.model.batch_graph import GraphBuilder
from surrogate.model.checkpoint import export_checkpoint, load_checkpoint
from surrogate.model.contact_law import ContactLawGNN
from surrogate.objects import make_object
from surrogate.scenes import build_scene
from surrogate.sim.contact import InputRange

CUBE = dict(stiffness=150.0, damping=2.0, friction=0.2, slip_eps=1e-3)
torch.set_num_threads(1)


def _resting_box_graph():
    """The float64 contact graph of a box pressed 3 mm into the ground and sliding (several contacts)."""
    scene = build_scene(make_object("box", 0), setting="ground", owned_margin=0.01, contact_mode="external")
    d = mujoco.MjData(scene.model)
    qa, da = scene.object_qpos_adr, scene.object_dof_adr
    d.qpos[qa + 3:qa + 7] = [1.0, 0.0, 0.0, 0.0]
    half = float(np.abs(np.asarray(scene.obj.pieces[0].vertices)[:, 2]).max())
    d.qpos[qa:qa + 3] = [0.0, 0.0, half - 0.003]
    d.qvel[da:da + 6] = [0.2, -0.1, -0.05, 0.5, -0.3, 1.0]
    mujoco.mj_forward(scene.model, d)
    g = GraphBuilder.from_scene(scene).build(scene.model, [d], dtype=torch.float64).graph
    assert g.edge_index.shape[1] >= 2
    return g


def _as_capsule(g):
    """The same contacts, the object's descriptor replaced by a capsule's of another size (a type never trained on)."""
    h = type(g)(**vars(g))
    desc = h.geom_obj.clone()
    desc[:, :8] = 0.0
    desc[:, 2] = 1.0
    desc[:, 8:] *= 1.7
    h.geom_obj = desc
    return h


def _random_net(geometry: bool, seed: int = 0, history: bool = False) -> ContactLawGNN:
    torch.manual_seed(seed)
    net = ContactLawGNN(prior=CUBE, hidden=16, steps=2, mlp_layers=2, geometry=geometry, history=history)
    with torch.no_grad():
        for p in net.correction_parameters():
            p.copy_(0.5 * torch.randn(p.shape))
    return net.eval()


@torch.no_grad()
def test_a_network_without_shape_descriptors_cannot_tell_which_object_it_touches():
    g = _resting_box_graph()
    for history in (False, True):  # with history the network reads the contacts' state beside the local features
        local, full = _random_net(False, history=history), _random_net(True, history=history)
        assert torch.equal(local.law_parameters(g), local.law_parameters(_as_capsule(g)))
        assert not torch.allclose(full.law_parameters(g), full.law_parameters(_as_capsule(g)))
    # it is a network all the same: its corrections move the law away from the prior
    prior = torch.tensor([CUBE["stiffness"], CUBE["damping"], CUBE["friction"]], dtype=torch.float64)
    assert not torch.allclose(local.law_parameters(g), prior.expand(g.edge_index.shape[1], 3))


def test_the_input_range_ignores_the_columns_a_network_does_not_read():
    g = _resting_box_graph()
    flagged = {}
    for geometry in (False, True):
        net = _random_net(geometry).train()
        with torch.no_grad():
            for _ in range(3):  # the normalizers see the box only
                net.law_parameters(g)
        rng = InputRange.from_model(net.eval())
        assert not rng.check(g)["edge"].any()
        flagged[geometry] = rng.check(_as_capsule(g))
    assert flagged[True]["edge"].all()
    assert not flagged[False]["edge"].any()
    assert flagged[False]["edge_features"].sum() == 0


@torch.no_grad()
def test_the_checkpoint_keeps_a_network_without_shape_descriptors(tmp_path):
    g = _resting_box_graph()
    net = _random_net(False)
    export_checkpoint(net, tmp_path / "local")
    loaded, card = load_checkpoint(tmp_path / "local")
    assert card["model"]["hparams"]["geometry"] is False
    assert loaded.geometry is False
    assert torch.equal(loaded.law_parameters(g), net.law_parameters(g))
    assert "geometry" not in _random_net(True).hparams  # cards of models that read every feature are unchanged
