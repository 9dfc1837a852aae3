"""Contact graph, GNN, training and checkpoints (tiny models, synthetic scenes and captures)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import mujoco
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from surrogate.capture import DatasetMeta, Environment, Episode, ObjectSpec, Provenance, write_dataset
from surrogate.errors import CaptureError
from surrogate.model.checkpoint import CheckpointError, export_checkpoint, load_checkpoint
from surrogate.model.gnn import ContactGNN, body_wrenches, model_cost, predict_contact_forces
from surrogate.model.graph import SceneInfo, batch_graphs, graph_from_mjdata, relative_velocity, units
from surrogate.objects import make_object
from surrogate.scenes import build_scene, set_contact_mode

from .conftest import needs_shared

REPO = Path(__file__).resolve().parent.parent
TINY = dict(hidden=16, steps=2, mlp_layers=2)
torch.set_num_threads(1)


def _quat(axis, angle):
    q = np.zeros(4)
    mujoco.mju_axisAngle2Quat(q, np.asarray(axis, float) / np.linalg.norm(axis), angle)
    return q


def _box_scene():
    return build_scene(make_object("box", 0), setting="ground", owned_margin=0.01, contact_mode="external")


def _place(scene, d, pos, quat, vel, omega_b):
    qa, da = scene.object_qpos_adr, scene.object_dof_adr
    d.qpos[qa:qa + 3], d.qpos[qa + 3:qa + 7] = pos, quat
    d.qvel[da:da + 3], d.qvel[da + 3:da + 6] = vel, omega_b
    mujoco.mj_forward(scene.model, d)


def _tilted_graphs(scene, n, seed=0):
    rng = np.random.default_rng(seed)
    d = mujoco.MjData(scene.model)
    info = SceneInfo.from_scene(scene)
    out = []
    h = scene.obj.size
    while len(out) < n:
        q = _quat(rng.normal(size=3), rng.uniform(0.1, 0.6))
        _place(scene, d, [rng.uniform(-.1, .1), rng.uniform(-.1, .1), h * 0.5], q, rng.normal(size=3) * 0.3, rng.normal(size=3) * 2)
        # lower the box until its lowest corner is 2 mm inside the ground
        verts = np.asarray(scene.obj.pieces[0].vertices) @ d.xmat[scene.object_body_id].reshape(3, 3).T
        d.qpos[scene.object_qpos_adr + 2] -= d.xipos[scene.object_body_id][2] + verts[:, 2].min() + 0.002
        mujoco.mj_forward(scene.model, d)
        g = graph_from_mjdata(scene.model, d, info)
        if g.edge_index.shape[1]:
            out.append(g)
    return out


@torch.no_grad()
def test_forces_invariant_to_rigid_motion_of_scene():
    torch.manual_seed(0)
    model = ContactGNN(**TINY).eval()
    scene = _box_scene()
    m, d = scene.model, mujoco.MjData(scene.model)
    info = SceneInfo.from_scene(scene)
    pos0, q0 = np.array([0.02, -0.03, 0.0]), _quat([1, 2, 0.5], 0.4)
    v0, w0 = np.array([0.3, -0.1, -0.5]), np.array([1.0, -2.0, 0.5])
    _place(scene, d, pos0, q0, v0, w0)
    verts = np.asarray(scene.obj.pieces[0].vertices) @ d.xmat[scene.object_body_id].reshape(3, 3).T
    pos0[2] = -verts[:, 2].min() - 0.003
    _place(scene, d, pos0, q0, v0, w0)
    g1 = graph_from_mjdata(m, d, info)
    assert g1.edge_index.shape[1] >= 1
    f1, w1, fr1 = predict_contact_forces(model, g1)

    # rotate and translate everything: the ground plane, the object, its velocity, gravity
    R = np.zeros(9)
    qR = _quat([0.3, -1.0, 0.7], 1.1)
    mujoco.mju_quat2Mat(R, qR)
    R = R.reshape(3, 3)
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
    g2 = graph_from_mjdata(m, d, info)
    f2, w2, fr2 = predict_contact_forces(model, g2)
    assert g2.edge_index.shape[1] == g1.edge_index.shape[1]
    # match contacts by their point in the object's body frame
    key = lambda g, q: np.round(g.r_obj.numpy() @ _mat(q), 4).tolist()  # noqa: E731
    o1, o2 = np.lexsort(np.array(key(g1, q0)).T), np.lexsort(np.array(key(g2, q1)).T)
    assert torch.abs(f1).max() > 1e-3
    np.testing.assert_allclose(f1[o1].numpy(), f2[o2].numpy(), rtol=1e-3, atol=1e-4)
    # per-body wrenches rotate with the scene
    np.testing.assert_allclose(w2[0, :3].numpy(), R @ w1[0, :3].numpy(), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(w2[0, 3:].numpy(), R @ w1[0, 3:].numpy(), rtol=1e-3, atol=1e-4)


def _mat(q):
    r = np.zeros(9)
    mujoco.mju_quat2Mat(r, q)
    return r.reshape(3, 3)


def test_structure_friction_cone_and_reactions():
    model = ContactGNN(**TINY).eval()
    b = batch_graphs(_tilted_graphs(_box_scene(), 6))
    f = model(b)
    fn = (f * b.normal).sum(-1)
    ft = (f - fn[:, None] * b.normal).norm(dim=-1)
    assert (fn >= 0).all() and (ft <= model.mu_max * fn + 1e-6).all()
    w = body_wrenches(b, f)
    # equal and opposite: forces over all nodes sum to zero
    assert torch.allclose(w[:, :3].sum(0), torch.zeros(3), atol=1e-4)


@torch.no_grad()
def test_dissipative_friction_never_pushes_along_the_slip():
    model = ContactGNN(**TINY, dissipative=True).eval()
    b = batch_graphs(_tilted_graphs(_box_scene(), 6, seed=1))
    f = model(b)
    fn = (f * b.normal).sum(-1)
    ft = f - fn[:, None] * b.normal
    v, _ = relative_velocity(b)
    vt = v - (v * b.normal).sum(-1, keepdim=True) * b.normal
    assert ((ft * vt).sum(-1) <= 1e-9).all()  # F_t . v_t <= 0 for every contact
    assert (ft.norm(dim=-1) <= model.mu_max * fn + 1e-6).all()


@torch.no_grad()
def test_distance_gate_removes_push_across_a_gap():
    gated = ContactGNN(**TINY, gate_distance=0.02, gate_width=0.005).eval()
    b = batch_graphs(_tilted_graphs(_box_scene(), 4, seed=2))
    base = ContactGNN(**TINY).eval()
    base.load_state_dict(gated.state_dict())
    lifted = b.clone()
    lifted.dist = b.dist.abs() + 0.1 * lifted.length[lifted.batch[lifted.edge_index[1]]]  # 10 % of the size apart
    fn_gated = (gated(lifted) * lifted.normal).sum(-1)
    fn_base = (base(lifted) * lifted.normal).sum(-1)
    assert (fn_gated <= 1e-3 * fn_base.abs().max()).all() and (fn_base > 0).any()


@torch.no_grad()
def test_penetration_barrier_adds_a_stiff_floor_beyond_its_depth():
    barred = ContactGNN(**TINY, barrier_depth=0.02, barrier_stiffness=100.0).eval()
    base = ContactGNN(**TINY).eval()
    base.load_state_dict(barred.state_dict())
    b = batch_graphs(_tilted_graphs(_box_scene(), 4, seed=3))
    L = b.length[b.batch[b.edge_index[1]]]
    shallow, deep = b.clone(), b.clone()
    shallow.dist = -0.01 * L                      # inside the barrier depth: no change
    deep.dist = -0.05 * L                         # 0.03 L past it: + 3 F0 per contact
    fn = lambda m, g: (m(g) * g.normal).sum(-1)  # noqa: E731
    assert torch.allclose(fn(barred, shallow), fn(base, shallow))
    extra = fn(barred, deep) - fn(base, deep)
    _, _, F0 = units(deep)
    assert torch.allclose(extra, 3.0 * F0[deep.batch[deep.edge_index[1]]], rtol=1e-4)
    assert barred.hparams["barrier_depth"] == 0.02


def test_edge_and_node_latents_change_each_step():
    model = ContactGNN(**TINY)
    b = batch_graphs(_tilted_graphs(_box_scene(), 3))
    hist = model.latents(b, return_all=True)
    for k, ((x0, e0), (x1, e1)) in enumerate(zip(hist[:-1], hist[1:])):
        assert not torch.allclose(e0, e1)
        if k < len(hist) - 2:  # the last step updates edges only
            assert not torch.allclose(x0, x1)


def test_cost_function():
    c = model_cost(ContactGNN(**TINY))
    assert c["parameters"] == sum(p.numel() for p in ContactGNN(**TINY).parameters())
    assert c["flops_per_contact"] > 0


def test_overfits_one_small_batch():
    torch.manual_seed(0)
    b = batch_graphs(_tilted_graphs(_box_scene(), 8, seed=1))
    teacher = ContactGNN(hidden=16, steps=1).eval()
    with torch.no_grad():
        target = body_wrenches(b, teacher(b))[b.object_index]
    student = ContactGNN(**TINY)
    opt = torch.optim.Adam(student.parameters(), lr=3e-3)
    scale = torch.tensor([1.0] * 3 + [0.1] * 3)
    losses = []
    for _ in range(300):
        opt.zero_grad()
        loss = (((body_wrenches(b, student(b))[b.object_index] - target) / scale) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] / 10, (losses[0], losses[-1])


# ---- captures, Lightning, train.py ---------------------------------------------------------
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


def _cfg(root, out, **over):
    from surrogate import training as train  # the package's training entry point (train.py wraps it)
    cfg = train.load_config(None, [
        f"data.root={root}", "data.val_fraction=0.25", "data.batch_size=16", "data.margin=0.01",
        "model.hidden=16", "model.steps=2", f"out_dir={out}", "trainer.enable_progress_bar=false",
        "trainer.max_epochs=1", *[f"{k}={v}" for k, v in over.items()]])
    return train, cfg


def test_fast_dev_run(tiny_capture, tmp_path):
    import lightning as L

    from surrogate.model.lightning import CaptureDataModule, ContactLightning
    dm = CaptureDataModule(root=tiny_capture, val_fraction=0.25, batch_size=16, margin=0.01, unroll_frames=2)
    module = ContactLightning(model=TINY, loss={"unroll_frames": 2, "noise_vel": 0.01})
    L.Trainer(fast_dev_run=True, accelerator="cpu", logger=False, enable_progress_bar=False, default_root_dir=tmp_path).fit(module, datamodule=dm)
    assert len(dm.train_set) > 0 and len(dm.val_set) > 0


def test_train_export_resume_and_checkpoint_round_trip(tiny_capture, tmp_path):
    train, cfg = _cfg(tiny_capture, tmp_path / "run", **{"export.dir": tmp_path / "ckpt"})
    res = train.fit(cfg)
    assert (tmp_path / "run" / "checkpoints" / "last.ckpt").is_file()
    assert list((tmp_path / "run" / "csv").rglob("metrics.csv")) and list((tmp_path / "run" / "tb").rglob("events.*"))
    assert res["steps"] > 0
    # resume from last: continues from the stored step
    train2, cfg2 = _cfg(tiny_capture, tmp_path / "run", **{"trainer.max_epochs": 2, "ckpt_path": "last"})
    res2 = train2.fit(cfg2)
    assert res2["steps"] == 2 * res["steps"]

    model, card = load_checkpoint(tmp_path / "ckpt")
    assert card["data"]["train_episodes"] and card["data"]["val_episodes"] and card["data"]["sha256"]
    b = batch_graphs(_tilted_graphs(_box_scene(), 4))
    again, _ = load_checkpoint(tmp_path / "ckpt")
    assert torch.equal(model(b), again(b))
    assert not list((tmp_path / "ckpt").glob("*.ckpt")) and not list((tmp_path / "ckpt").glob("*.pt"))
    # a card of another schema version is refused, with the version in the message
    p = tmp_path / "ckpt" / "card.json"
    c = json.loads(p.read_text())
    c["schema_version"] = "0.9"
    p.write_text(json.dumps(c))
    with pytest.raises(CheckpointError, match="schema version '0.9'"):
        load_checkpoint(tmp_path / "ckpt")
    c["schema_version"] = "1.0"
    c["features"]["edge"] = c["features"]["edge"][:-1]
    p.write_text(json.dumps(c))
    with pytest.raises(CheckpointError, match="feature definitions"):
        load_checkpoint(tmp_path / "ckpt")


def test_export_round_trip_identical_outputs(tmp_path):
    model = ContactGNN(**TINY)
    b = batch_graphs(_tilted_graphs(_box_scene(), 4))
    model.train()
    model(b)  # accumulate normalization statistics
    model.eval()
    export_checkpoint(model, tmp_path)
    loaded, _ = load_checkpoint(tmp_path)
    assert torch.equal(model(b), loaded(b))


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
    root = tmp_path / "bad"
    shutil.copytree(tiny_capture, root)
    _corrupt(root, how)
    train, cfg = _cfg(root, tmp_path / "run")
    with pytest.raises(CaptureError) as e:
        train.fit(cfg)
    assert e.value.episode == "2" and "episode 2" in str(e.value)
    assert not (tmp_path / "run").exists()  # nothing was trained or logged


def test_ddp_two_cpu_processes(tiny_capture, tmp_path):
    cmd = [sys.executable, str(REPO / "train.py"), "fit", "--set", f"data.root={tiny_capture}", "--set", "data.val_fraction=0.25",
           "--set", "data.batch_size=8", "--set", "data.margin=0.01", "--set", "model.hidden=8", "--set", "model.steps=1",
           "--set", f"out_dir={tmp_path}/run", "--set", "trainer.enable_progress_bar=false", "--set", "trainer.max_epochs=1",
           "--set", "trainer.strategy=ddp_spawn", "--set", "trainer.devices=2", "--set", "trainer.limit_train_batches=2",
           "--set", "trainer.limit_val_batches=1", "--set", f"export.dir={tmp_path}/ckpt"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "distributed_backend=gloo" in r.stderr + r.stdout
    assert (tmp_path / "ckpt" / "weights.safetensors").is_file()


@needs_shared("contactnets_cube")
def test_real_toss_graphs_and_targets(tmp_path):
    from surrogate.importers.contactnets import import_contactnets
    from surrogate.model.data import episode_graphs, load_capture
    from .conftest import SHARED
    import shutil
    src = tmp_path / "src"
    src.mkdir()
    for n in ("0.pt", "1.pt"):
        shutil.copy(SHARED / "contactnets_cube" / n, src / n)
    import_contactnets(src, tmp_path / "cap", progress=False)
    cap = load_capture(tmp_path / "cap")
    gs = episode_graphs(cap.episodes[0], cap.meta)
    assert gs and all(torch.isfinite(g.wrench).all() for g in gs)
    # at rest at the end of the toss the net contact force carries the weight
    w = gs[-1].wrench[0]
    mg = cap.episodes[0].object.mass * 9.81
    assert abs(w[2].item() - mg) < 0.1 * mg
