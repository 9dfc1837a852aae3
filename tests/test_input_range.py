"""The stepper's input-range check of a contact network (``sim.contact.InputRange``): a box-trained network's range
flags the same contacts on a shape it never saw (its shape descriptors are out of range) and not the box's own."""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from surrogate.model.batch_graph import GraphBuilder
from surrogate.model.contact_law import ContactLawGNN
from surrogate.objects import make_object
from surrogate.scenes import build_scene
from surrogate.sim.contact import InputRange

from .test_contact_law import _perturbed

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


def test_a_box_trained_range_flags_a_shape_it_never_saw():
    g = _resting_box_graph()
    net = _perturbed(ContactLawGNN(prior=CUBE, hidden=16, steps=2, mlp_layers=2), scale=0.5).train()
    with torch.no_grad():
        for _ in range(3):  # the normalizers see the box only
            net.law_parameters(g)
    rng = InputRange.from_model(net.eval())
    assert not rng.check(g)["edge"].any()
    assert rng.check(_as_capsule(g))["edge"].all()
