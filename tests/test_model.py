"""The contact network (``ContactLawGNN`` with its corrections on, random weights), its building blocks, the
graph features, checkpoints (v1 refused) and training's capture checks (tiny models, synthetic scenes)."""

from __future__ import annotations

import json

import mujoco
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from surrogate.capture import DatasetMeta, Environment, Episode, ObjectSpec, Provenance, write_dataset
from surrogate.errors import CaptureError
from surrogate.model.batch_graph import GraphBuilder
from surrogate.model.checkpoint import CheckpointError, export_checkpoint, load_checkpoint
from surrogate.model.contact_law import ContactLawGNN
from surrogate.model.layers import InteractionLayer
from surrogate.objects import make_object
from surrogate.scenes import build_scene, set_contact_mode

TINY = dict(hidden=16, steps=2, mlp_layers=2)
CUBE = dict(stiffness=150.0, damping=2.0, friction=0.2, slip_eps=1e-3)
torch.set_num_threads(1)


def _quat(axis, angle):
    q = np.zeros(4)
    mujoco.mju_axisAngle2Quat(q, np.asarray(axis, float) / np.linalg.norm(axis), angle)
    return q


def _mat(q):
    r = np.zeros(9)
    mujoco.mju_quat2Mat(r, q)
    return r.reshape(3, 3)


def _box_scene():
    return build_scene(make_object("box", 0), setting="ground", owned_margin=0.01, contact_mode="external")


def _place(scene, d, pos, quat, vel, omega_b):
    qa, da = scene.object_qpos_adr, scene.object_dof_adr
    d.qpos[qa:qa + 3], d.qpos[qa + 3:qa + 7] = pos, quat
    d.qvel[da:da + 3], d.qvel[da + 3:da + 6] = vel, omega_b
    mujoco.mj_forward(scene.model, d)


def _graph(scene, d):
    """The stepper's float64 contact graph of one MjData (the one builder)."""
    return GraphBuilder.from_scene(scene).build(scene.model, [d], dtype=torch.float64).graph


def _random_net(seed=0, scale=0.5):
    """Corrections on, every correction weight random (the heads' last layers start at zero otherwise)."""
    torch.manual_seed(seed)
    net = ContactLawGNN(prior=CUBE, **TINY)
    with torch.no_grad():
        for p in net.correction_parameters():
            p.copy_(scale * torch.randn(p.shape))
    return net.eval()


@torch.no_grad()
def test_law_forces_invariant_to_rigid_motion_of_scene():
    """Rotating and translating the whole scene (ground, object, its velocity, gravity) rotates the forces of the
    law with random corrections and changes nothing else: the network sees invariant features only."""
    model = _random_net()
    scene = _box_scene()
    m, d = scene.model, mujoco.MjData(scene.model)
    pos0, q0 = np.array([0.02, -0.03, 0.0]), _quat([1, 2, 0.5], 0.4)
    v0, w0 = np.array([0.3, -0.1, -0.5]), np.array([1.0, -2.0, 0.5])
    _place(scene, d, pos0, q0, v0, w0)
    verts = np.asarray(scene.obj.pieces[0].vertices) @ d.xmat[scene.object_body_id].reshape(3, 3).T
    pos0[2] = -verts[:, 2].min() - 0.003
    _place(scene, d, pos0, q0, v0, w0)
    g1 = _graph(scene, d)
    assert g1.edge_index.shape[1] >= 1
    f1, prm1 = model(g1), model.law_parameters(g1)
    assert not torch.allclose(prm1, model.law_parameters(g1).new_tensor([CUBE[k] for k in ("stiffness", "damping",
                                                                                           "friction")]))

    R = _mat(_quat([0.3, -1.0, 0.7], 1.1))
    qR = _quat([0.3, -1.0, 0.7], 1.1)
    t = np.array([1.5, -2.0, 0.7])
    # MuJoCo computes world-geom poses at compile time: move the ground in the spec and recompile
    gs = scene.spec.geom("ground")
    gs.pos = R @ np.asarray(gs.pos) + t
    qg = np.zeros(4)
    mujoco.mju_mulQuat(qg, qR, np.asarray(gs.quat, float))
    gs.quat = qg
    grav = R @ m.opt.gravity
    m = scene.spec.compile()
    set_contact_mode(m, scene, "external")
    scene.model = m
    d = mujoco.MjData(m)
    m.opt.gravity[:] = grav
    q1 = np.zeros(4)
    mujoco.mju_mulQuat(q1, qR, q0)
    _place(scene, d, R @ pos0 + t, q1, R @ v0, w0)  # body-frame angular velocity is unchanged
    g2 = _graph(scene, d)
    assert g2.edge_index.shape[1] == g1.edge_index.shape[1]
    f2, prm2 = model(g2), model.law_parameters(g2)
    # match contacts by their point in the object's body frame
    key = lambda g, q: np.round(g.r_obj.numpy() @ _mat(q), 4).tolist()  # noqa: E731
    o1, o2 = np.lexsort(np.array(key(g1, q0)).T), np.lexsort(np.array(key(g2, q1)).T)
    assert torch.abs(f1).max() > 1e-3
    np.testing.assert_allclose(prm1[o1].numpy(), prm2[o2].numpy(), rtol=1e-4)  # the corrected law: invariant
    np.testing.assert_allclose(f2[o2].numpy(), f1[o1].numpy() @ R.T, rtol=1e-4, atol=1e-6)  # forces: rotate


def test_interaction_layer_keeps_edge_and_node_updates():
    """Both updates reach the output (PyG's ``update()`` would drop an edge update made in ``message()``); the
    last layer updates edges only."""
    torch.manual_seed(0)
    x, e = torch.randn(5, 8), torch.randn(6, 8)
    edge_index = torch.tensor([[1, 2, 3, 4, 1, 2], [0, 0, 0, 0, 3, 4]])
    x1, e1 = InteractionLayer(8)(x, edge_index, e)
    assert not torch.allclose(e1, e) and not torch.allclose(x1, x)
    x2, e2 = InteractionLayer(8, update_nodes=False)(x, edge_index, e)
    assert torch.equal(x2, x) and not torch.allclose(e2, e)


def test_corrections_fit_a_teachers_law_on_one_small_batch():
    """Gradients reach every head through message passing: a student fits a random teacher's law parameters."""
    scene = _box_scene()
    d = mujoco.MjData(scene.model)
    _place(scene, d, [0.0, 0.0, 0.0], _quat([1, 2, 0.5], 0.4), [0.3, -0.1, -0.5], [1.0, -2.0, 0.5])
    verts = np.asarray(scene.obj.pieces[0].vertices) @ d.xmat[scene.object_body_id].reshape(3, 3).T
    d.qpos[scene.object_qpos_adr + 2] = -verts[:, 2].min() - 0.002
    mujoco.mj_forward(scene.model, d)
    g = _graph(scene, d)
    with torch.no_grad():
        target = _random_net(seed=1, scale=0.3).law_parameters(g).log()
    torch.manual_seed(0)
    student = ContactLawGNN(prior=CUBE, **TINY)
    opt = torch.optim.Adam(student.correction_parameters(), lr=3e-3)
    losses = []
    for _ in range(200):
        opt.zero_grad()
        loss = ((student.law_parameters(g).log() - target) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] / 10, (losses[0], losses[-1])


def test_export_round_trip_identical_outputs_and_normalizers(tmp_path):
    scene = _box_scene()
    d = mujoco.MjData(scene.model)
    _place(scene, d, [0.0, 0.0, 0.05], _quat([1, 0.3, 0], 0.5), [0.2, 0, -0.4], [1.0, 0, 0])
    g = _graph(scene, d)
    model = _random_net()
    model.train()
    model.law_parameters(g)  # accumulate normalization statistics
    model.eval()
    assert float(model.edge_norm.count) > 0
    export_checkpoint(model, tmp_path)
    loaded, card = load_checkpoint(tmp_path)
    assert torch.equal(model(g), loaded(g))
    assert card["features"]["normalization"]["samples"] == float(model.edge_norm.count)
    assert not list(tmp_path.glob("*.ckpt")) and not list(tmp_path.glob("*.pt"))


def test_cards_of_v1_other_schemas_or_features_are_refused(tmp_path):
    export_checkpoint(_random_net(), tmp_path)
    p = tmp_path / "card.json"
    good = json.loads(p.read_text())
    for edit, match in ((lambda c: c["model"].update({"class": "surrogate.model.gnn.ContactGNN"}), "v1 raw-force"),
                        (lambda c: c["model"].pop("class"), "v1 raw-force"),  # v1 cards named no class
                        (lambda c: c.update(schema_version="0.9"), "schema version '0.9'"),
                        (lambda c: c["features"].update(edge=c["features"]["edge"][:-1]), "feature definitions")):
        c = json.loads(json.dumps(good))
        edit(c)
        p.write_text(json.dumps(c))
        with pytest.raises(CheckpointError, match=match) as e:
            load_checkpoint(tmp_path)
        assert str(tmp_path) in str(e.value)
    msg = str(e.value)
    c = json.loads(json.dumps(good))
    c["model"]["class"] = "surrogate.model.gnn.ContactGNN"
    p.write_text(json.dumps(c))
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(tmp_path)
    assert "model.kind: law" in str(e.value) and msg != str(e.value)  # says what to do


def test_smoothed_pose_of_a_ballistic_toss_is_exact():
    """The training windows' later initial states (``estimate.smooth_pose``): a cubic fit of a parabola and of a
    constant spin is exact, tracking dropouts included."""
    from surrogate.estimate import smooth_pose
    from surrogate.quat import quat_exp, quat_mul

    t = np.arange(40) / 148.0
    g, v0, w = np.array([0, 0, -9.81]), np.array([0.5, -0.2, 2.0]), np.array([3.0, -1.0, 2.0])
    pos = v0 * t[:, None] + 0.5 * g * t[:, None] ** 2
    q = quat_mul(np.repeat(_quat([0, 1, 1], 0.3)[None], len(t), 0), quat_exp(w * t[:, None]))
    valid = np.ones(len(t), bool)
    valid[[7, 8, 20]] = False
    sm = smooth_pose(t, np.concatenate([pos, q], 1), valid)
    ok = sm["ok"]
    assert ok.sum() == valid.sum()
    np.testing.assert_allclose(sm["vel"][ok], (v0 + g * t[:, None])[ok], atol=1e-9)
    np.testing.assert_allclose(sm["acc"][ok], np.repeat(g[None], len(t), 0)[ok], atol=1e-6)
    np.testing.assert_allclose(sm["omega_b"][ok], np.repeat(w[None], len(t), 0)[ok], atol=1e-8)


# ---- captures: bad input stops training before any work ----------------------------------------
def _drop_episode(scene, ep_id, seed, frames=50, rate=100.0):
    rng = np.random.default_rng(seed)
    m = scene.model
    d = mujoco.MjData(m)
    _place(scene, d, [0, 0, 0.08], _quat(rng.normal(size=3), rng.uniform(0, 1)), rng.normal(size=3) * 0.3, rng.normal(size=3) * 3)
    n_sub = int(round(1 / rate / m.opt.timestep))
    poses = []
    for _ in range(frames):
        poses.append(d.qpos[scene.object_qpos_adr:scene.object_qpos_adr + 7].copy())
        for _ in range(n_sub):
            mujoco.mj_step(m, d)
    ext = scene.obj.extents
    obj = ObjectSpec(name="box_s0", mass=float(scene.obj.mass), inertia=np.asarray(scene.obj.inertia).tolist(), size=float(scene.obj.size),
                     geometry={"kind": "box", "half_extents": (ext / 2).tolist()}, friction=0.8)
    return Episode(episode_id=str(ep_id), timestamps=np.arange(frames) / rate, object_pose=np.array(poses), object=obj,
                   provenance=Provenance(source="test: MuJoCo drop", real=False, capture_rate_hz=rate),
                   environment=Environment(kind="ground", height=0.0, gravity=[0, 0, -9.81]), task="toss")


@pytest.fixture(scope="module")
def tiny_capture(tmp_path_factory):
    scene = build_scene(make_object("box", 0), setting="ground", timestep=0.0025, contact_mode="analytic")
    eps = [_drop_episode(scene, i, i) for i in range(4)]
    root = tmp_path_factory.mktemp("cap") / "drops"
    write_dataset(root, eps, DatasetMeta(name="test_drops", angular_frame="body"))
    return root


def _corrupt(root, how):
    if how == "nan":
        path = next((root / "data").rglob("*.parquet"))
        t = pq.read_table(path)
        col = t["observation.object_pose"].combine_chunks()
        vals = col.flatten().to_numpy(zero_copy_only=False).reshape(-1, 7).copy()
        ep = t["episode_index"].to_numpy()
        vals[np.flatnonzero(ep == 2)[5], 0] = np.nan
        arr = pa.FixedSizeListArray.from_arrays(pa.array(vals.ravel(), type=col.type.value_type), 7)
        pq.write_table(t.set_column(t.column_names.index("observation.object_pose"), "observation.object_pose", arr), path)
    else:
        p = root / "meta" / "contact.json"
        c = json.loads(p.read_text())
        del c["episodes"][2]["provenance"]
        p.write_text(json.dumps(c))


@pytest.mark.parametrize("how", ["nan", "missing"])
def test_bad_capture_rejected_before_training(tiny_capture, tmp_path, how):
    import shutil

    from surrogate import training as train

    root = tmp_path / "bad"
    shutil.copytree(tiny_capture, root)
    _corrupt(root, how)
    cfg = train.load_config(None, [f"data.root={root}", "data.val_min=1", "data.margin=0.01", "stages.prior.epochs=1",
                                   "stages.corrections.epochs=0", f"out_dir={tmp_path / 'run'}"])
    assert cfg["model"] == {} and train.resolved_config(cfg)["model"]["kind"] == "law"  # the default kind
    with pytest.raises(CaptureError) as e:
        train.fit(cfg)
    assert e.value.episode == "2" and "episode 2" in str(e.value)
    assert not (tmp_path / "run").exists()  # nothing was trained or logged
