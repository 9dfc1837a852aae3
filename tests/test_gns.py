"""The end-to-end learned peer (GNS style, no MuJoCo): network, shape matching, invariance, training,
checkpoint, and its `cube-real` row."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation
from torch_geometric.nn import MessagePassing

from surrogate.baselines.gns import GNSNet, features, node_feature_names
from surrogate.baselines.gns_geometry import box_points, box_symmetries, history_from_state, rigid_points, shape_match
from surrogate.baselines.gns_rollout import rollout

from .conftest import SHARED, needs_shared

CUBE = box_points([0.5, 0.5, 0.5])  # the cube's corners in units of its size L
UP = np.array([0.0, 0.0, 1.0])


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One torch thread, as training runs: tiny graphs on a shared 2-core machine are slower with two."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _prepared_net(seed: int = 0, **kw) -> GNSNet:
    """A network with random weights whose normalizers hold plausible statistics (an untrained net
    would predict accelerations of order L per frame^2 and fly off at once)."""
    torch.manual_seed(seed)
    net = GNSNet(hidden=16, steps=2, **kw)
    n_node = len(node_feature_names(net.history))
    with torch.no_grad():
        for norm, size, scale in ((net.node_norm, n_node, 0.3), (net.edge_norm, 4, 0.5), (net.target_norm, 3, 2e-3)):
            norm.accumulate(torch.randn(256, size, dtype=torch.float64) * scale)
    return net.eval()


def _history(q, v, *, H=3, dt=1.0 / 148, L=0.1048, g=(0.0, 0.0, -9.81)):
    return history_from_state(np.asarray(q, float), np.asarray(v, float), CUBE * L, frames=H, dt=dt, gravity=g) / L


def test_the_network_is_pyg_message_passing():
    """Its processor is PyG MessagePassing, and a node's output depends on the other nodes only through the edges."""
    net = _prepared_net()
    assert all(isinstance(layer, MessagePassing) for layer in net.layers)
    hist = torch.as_tensor(_history([0, 0, 0.3, 1, 0, 0, 0], [0.5, 0, -1, 1, 2, 3]))[None]
    node, edge, ei, _ = features(hist, torch.as_tensor(CUBE)[None], torch.as_tensor(UP)[None], torch.zeros(1, dtype=torch.float64),
                                 floor_clip=1.0)
    assert node.shape == (8, len(node_feature_names(3))) and edge.shape == (56, 4) and ei.shape == (2, 56)
    with torch.no_grad():
        out = net(node, edge, ei)
        bumped = node.clone()
        bumped[0] += 1.0
        changed = (net(bumped, edge, ei) - out).abs().sum(-1)
        assert changed[0] > 0 and bool((changed[1:] > 0).all())  # messages carried node 0's change to every node
        alone = (net(bumped, edge[:0], ei[:, :0]) - net(node, edge[:0], ei[:, :0])).abs().sum(-1)
        assert alone[0] > 0 and float(alone[1:].abs().max()) == 0.0  # without edges nothing reaches the others


def test_shape_matching_recovers_a_rigid_pose_exactly_and_tolerates_noise():
    rng = np.random.default_rng(3)
    R = Rotation.random(16, random_state=4).as_matrix()
    p = rng.normal(size=(16, 3))
    body = torch.as_tensor(box_points([0.5, 0.3, 0.2], grid=3))
    x = rigid_points(torch.as_tensor(R), torch.as_tensor(p), body)
    R_hat, p_hat = shape_match(x, body)
    np.testing.assert_allclose(R_hat.numpy(), R, atol=1e-10)
    np.testing.assert_allclose(p_hat.numpy(), p, atol=1e-10)
    noisy = x + 1e-3 * torch.as_tensor(rng.normal(size=x.shape))
    R_n, p_n = shape_match(noisy, body)
    angle = Rotation.from_matrix(R_n.numpy() @ np.transpose(R, (0, 2, 1))).magnitude()
    assert angle.max() < 0.01 and np.abs(p_n.numpy() - p).max() < 2e-3  # mm-level noise: milliradians
    assert np.allclose(np.linalg.det(R_n.numpy()), 1.0)
    mirrored = x * torch.tensor([1.0, 1.0, -1.0], dtype=x.dtype)  # a reflection is never returned
    assert np.allclose(np.linalg.det(shape_match(mirrored, body)[0].numpy()), 1.0)
    assert len(box_symmetries(CUBE)) == 24 and len(box_symmetries(box_points([0.5, 0.3, 0.2]))) == 4


def test_predicted_motion_is_invariant_to_horizontal_translation_and_yaw():
    """The same toss shifted sideways and turned about gravity: the same motion, shifted and turned."""
    net = _prepared_net(seed=1)
    q = np.array([0.2, -0.1, 0.08, *Rotation.from_euler("xyz", [0.3, 0.2, 0.1]).as_quat(scalar_first=True)])
    v = np.array([0.6, -0.2, -0.4, 2.0, -1.0, 4.0])
    yaw = Rotation.from_euler("z", 1.1)
    q2 = np.concatenate([yaw.apply(q[:3]) + [3.0, -2.0, 0.0], (yaw * Rotation.from_quat(q[3:], scalar_first=True)).as_quat(scalar_first=True)])
    v2 = np.concatenate([yaw.apply(v[:3]), v[3:]])  # the body rate is in the body frame: unchanged
    L = 0.1048
    hist = torch.as_tensor(np.stack([_history(q, v), _history(q2, v2)]))
    body = torch.as_tensor(np.stack([CUBE, CUBE]))
    up = torch.as_tensor(np.stack([UP, UP]))
    R, p = rollout(net, hist, body, up, torch.zeros(2, dtype=torch.float64), 60)
    back = yaw.inv().apply(p[1].numpy() - np.array([3.0, -2.0, 0.0]) / L)
    np.testing.assert_allclose(back, p[0].numpy(), atol=1e-6)
    np.testing.assert_allclose(yaw.inv().as_matrix() @ R[1].numpy(), R[0].numpy(), atol=1e-6)
    free = p[0, :, 2].numpy() - p[0, 0, 2].numpy()
    assert np.abs(np.diff(free)).max() > 1e-3  # it moved (the test compares motions, not two resting cubes)
    # a model that saw absolute coordinates would differ: the floor is felt, so a vertical shift changes it
    hist3 = hist[:1] + torch.tensor([0.0, 0.0, 0.5], dtype=torch.float64)
    _, p3 = rollout(net, hist3, body[:1], up[:1], torch.zeros(1, dtype=torch.float64), 60)
    assert np.abs(p3[0].numpy() - 0.5 * UP - p[0].numpy()).max() > 1e-4


# -- training, checkpoint and the benchmark row on a few real tosses ---------------------------------
@pytest.fixture(scope="module")
def few_tosses(tmp_path_factory):
    """24 real ContactNets tosses imported into a capture dataset."""
    from surrogate.importers.contactnets import import_contactnets

    src = tmp_path_factory.mktemp("raw") / "contactnets_cube"
    src.mkdir()
    for f in sorted((SHARED / "contactnets_cube").glob("*.pt"), key=lambda f: int(f.stem))[:24]:
        shutil.copy(f, src / f.name)
    for extra in ("experiment.json",):
        if (SHARED / "contactnets_cube" / extra).exists():
            shutil.copy(SHARED / "contactnets_cube" / extra, src / extra)
    root = tmp_path_factory.mktemp("cap") / "cube"
    import_contactnets(src, root, progress=False)
    return root


def _train(root, out, *, epochs: int, seed: int = 0):
    from surrogate.training import export_dir, fit, load_config

    cfg = load_config("gns_cube", [f"data.root={root}", "data.bench_split=null", "data.val_min=0", "data.val_fraction=0.34",
                                   "data.max_val_episodes=8", "data.batch_size=32", "model.hidden=16", "model.steps=2",
                                   f"trainer.max_epochs={epochs}", "trainer.check_val_every_n_epoch=1",
                                   "trainer.enable_progress_bar=false", f"out_dir={out}", "optim.lr=0.003"],
                      options={"seed": seed})
    cfg["export"]["dir"] = export_dir(cfg)
    return fit(cfg), cfg


@needs_shared("contactnets_cube")
def test_tiny_training_lowers_the_validation_rollout_error_and_exports_the_best_epoch(few_tosses, tmp_path):
    from surrogate.baselines.gns_rollout import predict_episodes
    from surrogate.capture import read_dataset
    from surrogate.learn.objective import episode_scores
    from surrogate.model.checkpoint import load_checkpoint

    res, cfg = _train(few_tosses, tmp_path / "run", epochs=4)
    vals = [r["pos_pct"] for r in json.loads((tmp_path / "run" / "export" / "card.json").read_text())
            ["training"]["metrics"]["validation"]]
    assert len(vals) == 4 and min(vals[1:]) < vals[0]  # training lowered the whole-toss validation error
    model, card = load_checkpoint(tmp_path / "run" / "export")
    assert card["model"]["class"] == "surrogate.baselines.gns.GNSNet"
    assert card["features"]["normalization"]["samples"] > 0
    assert not set(card["data"]["train_episodes"]) & set(card["data"]["val_episodes"])
    # the exported weights are the best validation epoch's: re-scoring them gives its figure
    by_id = {e.episode_id: e for e in read_dataset(few_tosses).episodes}
    val = [by_id[i] for i in card["data"]["val_episodes"]]
    rows = episode_scores(predict_episodes(model, val, init_frames=5, gravity_nd=card["data"]["gravity_nd"], progress=False), val)
    assert np.mean([r["pos_pct"] for r in rows]) == pytest.approx(min(vals), rel=1e-5)
    assert res["best"]["pos_pct"] == pytest.approx(min(vals))


@pytest.fixture(scope="module")
def one_epoch_peer(few_tosses, tmp_path_factory):
    """The export folder of a one-epoch run on ``few_tosses`` (copy it before changing it)."""
    out = tmp_path_factory.mktemp("peer") / "run"
    _train(few_tosses, out, epochs=1)
    return out / "export"


@needs_shared("contactnets_cube")
def test_training_is_deterministic_per_seed_and_the_checkpoint_refuses_corrupt_weights(few_tosses, one_epoch_peer, tmp_path):
    from safetensors.torch import load_file

    from surrogate.model.checkpoint import CheckpointError, load_checkpoint

    shutil.copytree(one_epoch_peer, tmp_path / "a" / "export")
    _train(few_tosses, tmp_path / "b", epochs=1)
    # tensors, not file hashes: safetensors writes its metadata map in no fixed order
    a, b = (load_file(str(tmp_path / k / "export" / "weights.safetensors")) for k in "ab")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    weights = tmp_path / "a" / "export" / "weights.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[-5] ^= 0xFF
    weights.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="weights_sha256"):
        load_checkpoint(tmp_path / "a" / "export")
    card = tmp_path / "b" / "export" / "card.json"
    good = json.loads(card.read_text())
    # a card of the peer's class name before it moved to surrogate.baselines: an explicit alias of the same class
    old = json.loads(json.dumps(good))
    old["model"]["class"] = "surrogate.model.gns.GNSNet"
    del old["model_sha256"]  # written before the card hashed its model section, as such cards were
    card.write_text(json.dumps(old))
    model, _ = load_checkpoint(tmp_path / "b" / "export")
    first = next(iter(b))
    assert type(model).__module__ == "surrogate.baselines.gns" and torch.equal(model.state_dict()[first], b[first])
    for change, match in ((lambda c: c["features"]["node"].pop(), "feature definitions"),
                          (lambda c: c["model"]["hparams"].update(grid=50), r"model.hparams.grid must be an integer in \[2, 8\]"),
                          (lambda c: c["model"]["hparams"].update(history=0), "history")):
        c = json.loads(json.dumps(good))
        change(c)
        card.write_text(json.dumps(c))
        with pytest.raises(CheckpointError, match=match):
            load_checkpoint(tmp_path / "b" / "export")


@needs_shared("contactnets_cube")
def test_cube_real_scores_the_peer_as_its_own_row(few_tosses, one_epoch_peer, tmp_path):
    from surrogate.bench.run import run_suite
    from surrogate.errors import ConfigError

    ckpt = one_epoch_peer
    over = [f"data.source={few_tosses}", "data.n_test=6", "data.train_sizes=[8]", "baselines.identified.sizes=[8]",
            "baselines.identified.maxiter=1", "baselines.identified.popsize=3", "baselines.identified.cones=[elliptic]",
            "baselines.randomized.n=2", f'surrogate.rows={{"end_to_end_gns": {{"8": "{ckpt}"}}}}']
    ledger = run_suite("cube-real-small", out=tmp_path / "report", overrides=over, progress=False,
                       cache_dir=tmp_path / "cache", video=False)
    row = ledger["models"]["end_to_end_gns"]
    assert row["description"] == "end-to-end learned step (GNS, no MuJoCo)"
    assert row["overall"]["episodes"] == 6 and row["overall"]["pos_pct_size"]["mean"] > 0
    assert "end_to_end_gns" in (tmp_path / "report" / "report.md").read_text()
    with pytest.raises(ConfigError, match="hand-object coupling"):
        run_suite("rig-grasp-small", out=tmp_path / "rig", checkpoint=ckpt, progress=False, cache_dir=tmp_path / "cache")
