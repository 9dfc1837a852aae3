"""A fingertip pad's contacts as one soft patch (``model.patches``, ``ContactLawGNN(patch_radius=...)``): lever arms
capped about the patch centre, depth and normal kept, the table's contacts untouched; the stepper and the twin build
their graphs with the model's radius; a held box twists more under a torque about the grip axis when its pads are
soft patches; the card keeps the radius; a model without it is the model before it."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from surrogate.bench.speed import grasped_state
from surrogate.model.batch_graph import GraphBuilder
from surrogate.model.checkpoint import CheckpointError, export_checkpoint, load_checkpoint
from surrogate.model.contact_law import ContactLawGNN
from surrogate.model.patches import contract_patches
from surrogate.objects import make_object
from surrogate.scenes import build_scene
from surrogate.sim import Stepper, step

torch.set_num_threads(1)
TABLE = dict(stiffness=1e6, exponent=1.5, damping=5.0, friction=0.8, slip_eps=1e-4, units="si")
PAD = dict(TABLE, stiffness=1e5, friction=0.8)


def test_points_are_drawn_in_to_the_radius_about_their_weighted_centre():
    n = np.tile([[1.0, 0.0, 0.0]], (5, 1))
    pos = np.array([[0.0, 0.01, 0.01], [0.0, -0.01, 0.01], [0.0, -0.01, -0.01], [0.0, 0.01, -0.01], [0.5, 0.3, 0.2]])
    dist = np.array([-1e-3, -1e-3, -1e-3, -1e-3, -1e-3])
    group = np.array([7, 7, 7, 7, -1])
    out = contract_patches(pos, n, dist, group, 0.002)
    np.testing.assert_allclose(out[4], pos[4])  # not a patch: where it was
    np.testing.assert_allclose(np.linalg.norm(out[:4, 1:], axis=1), 0.002)  # the arms capped
    np.testing.assert_allclose(out[:4].mean(0), pos[:4].mean(0), atol=1e-15)  # about the same centre
    np.testing.assert_allclose(out[:4, 0], pos[:4, 0])  # along the normal: unchanged
    # a point that just appeared (no penetration) weighs nothing in the centre
    w = contract_patches(pos[:4], n[:4], np.array([-2e-3, -2e-3, 0.0, 0.0]), group[:4], 0.0)
    np.testing.assert_allclose(w[:, 1:], np.tile([[0.0, 0.01]], (4, 1)), atol=1e-15)
    # inside the radius nothing moves; no penetration at all: the plain mean
    np.testing.assert_allclose(contract_patches(pos[:4], n[:4], dist[:4], group[:4], 0.05), pos[:4])
    np.testing.assert_allclose(contract_patches(pos[:4], n[:4], np.zeros(4), group[:4], 0.0)[:, 1:], 0.0, atol=1e-15)


@pytest.fixture(scope="module")
def held_box():
    scene = build_scene(make_object("box", 0), hand="parallel_jaw", setting="table")
    return scene, grasped_state(scene, seconds=0.9)


def _pad_arms(scene, d, radius):
    """(plain batch, patched batch, {pad body: arms [n] of its patched points about the penetration-weighted centre of
    MuJoCo's points, each within the plane of its normal}, pad contact mask)."""
    b = GraphBuilder.from_scene(scene)
    plain = b.build(scene.model, [d], dtype=torch.float64, dynamics=True)
    soft = b.build(scene.model, [d], dtype=torch.float64, dynamics=True, patch_radius=radius)
    g = plain.graph
    pad = ~(g.static[g.edge_index[0]] > 0.5).numpy()
    arms = {}
    for side in np.unique(g.edge_index[0][pad].numpy()):
        sel = pad & (g.edge_index[0].numpy() == side)
        n, w = g.normal.numpy()[sel], np.maximum(-g.dist.numpy()[sel], 0.0)
        p0, p = plain.dynamics[0][sel], soft.dynamics[0][sel]
        c = (w[:, None] * p0).sum(0) / w.sum() if w.sum() > 0 else p0.mean(0)  # the centre of MuJoCo's points
        r = p - c  # each moved point's arm within the plane of its own normal
        arms[int(side)] = np.linalg.norm(r - (r * n).sum(1, keepdims=True) * n, axis=1)
    return plain, soft, arms, pad


def test_the_builder_caps_the_pads_arms_and_leaves_the_table(held_box):
    scene, d = held_box
    plain, soft, arms, pad = _pad_arms(scene, d, 0.001)
    assert pad.sum() >= 4 and (~pad).sum() >= 1 and len(arms) == 2
    p0, p1 = plain.dynamics[0], soft.dynamics[0]
    np.testing.assert_array_equal(p1[~pad], p0[~pad])  # the table's contacts
    np.testing.assert_array_equal(soft.graph.dist.numpy(), plain.graph.dist.numpy())
    np.testing.assert_array_equal(soft.graph.normal.numpy(), plain.graph.normal.numpy())
    assert max(a.max() for a in arms.values()) <= 0.001 + 1e-12
    assert np.ptp(p0[pad], axis=0).max() > 0.01  # MuJoCo's points spread over the pads
    # the graph's lever arms follow the points (the network and the law see the patch)
    r = soft.graph.r_obj.numpy()
    np.testing.assert_allclose(r[pad], (p1 - d.xipos[scene.object_body_id])[pad], atol=1e-12)


def test_an_object_of_several_pieces_is_one_patch_per_pad():
    """An L-shape is two convex pieces (geoms): a pad touching both is still one patch."""
    scene = build_scene(make_object("lshape", 0), hand="parallel_jaw", setting="table")
    d = grasped_state(scene, seconds=0.9)
    b = GraphBuilder.from_scene(scene)
    g = b.build(scene.model, [d], dtype=torch.float64).graph
    pad = ~(g.static[g.edge_index[0]] > 0.5).numpy()
    geoms = {(int(s), int(gid)) for s, gid, on in zip(g.edge_index[0].numpy(), b.contact_set(
        np.array([d.ncon]), np.array([[c.geom1, c.geom2] for c in d.contact[:d.ncon]])).g_obj, pad) if on}
    assert len(geoms) > len({s for s, _ in geoms}), "no pad touches two pieces: the test needs another object"
    _, _, arms, _ = _pad_arms(scene, d, 0.0005)
    assert max(a.max() for a in arms.values()) <= 0.0005 + 1e-12


def test_the_history_keeps_mujocos_points_as_the_contacts_identity(held_box):
    scene, d = held_box
    b = GraphBuilder.from_scene(scene)
    plain = b.build(scene.model, [d], dtype=torch.float64)
    soft = b.build(scene.model, [d], dtype=torch.float64, patch_radius=0.0)
    np.testing.assert_array_equal(soft.frames[1], plain.frames[1])


def _twist(scene, d0, model, seconds=0.4, torque=0.1):
    """Rotation (deg) of the held box about the grip axis (x) after ``seconds`` of a torque about it."""
    m = scene.model
    d = mujoco.MjData(m)
    mujoco.mj_copyData(d, m, d0)
    st = Stepper(scene, model)
    q0 = d.xquat[scene.object_body_id].copy()
    for _ in range(int(seconds / m.opt.timestep)):
        d.xfrc_applied[scene.object_body_id, 3] = torque
        step(m, d, st)
    st.close()
    rel = np.zeros(4)
    mujoco.mju_mulQuat(rel, d.xquat[scene.object_body_id], np.array([q0[0], -q0[1], -q0[2], -q0[3]]))
    return np.degrees(2 * np.arctan2(abs(rel[1]), rel[0]))


def test_a_held_box_twists_more_on_soft_patches(held_box):
    scene, d = held_box
    rigid = _twist(scene, d, ContactLawGNN(prior=TABLE, prior_body=PAD, corrections=False).eval())
    soft = _twist(scene, d, ContactLawGNN(prior=TABLE, prior_body=PAD, corrections=False, patch_radius=0.0005).eval())
    # (the box also stands on the table, whose contacts keep their arms: both twist little, the soft patches 14x more)
    assert soft > 5 * rigid and soft > 0.5, (rigid, soft)


def test_the_twin_builds_its_graphs_with_the_models_radius(monkeypatch):
    from surrogate.sim.twin import Twin

    seen = []
    build = GraphBuilder.build

    def spy(self, *a, **kw):
        seen.append(kw.get("patch_radius"))
        return build(self, *a, **kw)

    monkeypatch.setattr(GraphBuilder, "build", spy)
    scene = build_scene(make_object("box", 0), setting="ground", owned_margin=0.02, contact_mode="external")
    s0 = torch.tensor([[0, 0, 0.06, 1.0, 0, 0, 0, 0.3, 0, 0, 0.0, 0.0, 1.0]], dtype=torch.float64)
    for radius in (None, 0.003):
        seen.clear()
        with torch.no_grad():
            Twin(scene).rollout(ContactLawGNN(prior=TABLE, corrections=False, patch_radius=radius).eval(), s0, 3,
                                substeps=2)
        assert seen and set(seen) == {radius}


def test_the_card_keeps_the_radius_and_refuses_a_bad_one(tmp_path):
    model = ContactLawGNN(prior=TABLE, prior_body=PAD, corrections=False, patch_radius=0.002).eval()
    export_checkpoint(model, tmp_path / "ck")
    back, card = load_checkpoint(tmp_path / "ck")
    assert back.patch_radius == 0.002 and card["model"]["hparams"]["patch_radius"] == 0.002
    export_checkpoint(ContactLawGNN(prior=TABLE, corrections=False).eval(), tmp_path / "plain")
    assert "patch_radius" not in load_checkpoint(tmp_path / "plain")[1]["model"]["hparams"]
    import json

    c = json.loads((tmp_path / "ck" / "card.json").read_text())
    c["model"]["hparams"]["patch_radius"] = 2.0
    (tmp_path / "ck" / "card.json").write_text(json.dumps(c))
    with pytest.raises(CheckpointError, match="patch_radius"):
        load_checkpoint(tmp_path / "ck")
    with pytest.raises(ValueError, match="patch_radius"):
        ContactLawGNN(prior=TABLE, patch_radius=-0.001)
