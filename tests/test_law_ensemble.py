"""An ensemble of networks on one law (``model.ensemble``): its law parameters are the law's times the geometric mean
of the members' corrections, in torch and in the stepper's compiled copy; it exports, loads and refuses members that
are not on the same law; saturated members keep it passive; one member is the model before ensembles."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from surrogate.cli import main
from surrogate.errors import ConfigError
from surrogate.model import network_numpy
from surrogate.model.checkpoint import export_checkpoint, load_checkpoint
from surrogate.model.contact_law import ContactLawGNN
from surrogate.model.ensemble import ensemble

from .test_network_numpy import LAW, PAD, _graph, _grasp, _state, _trained_net

torch.set_num_threads(1)


@pytest.mark.parametrize("kw", [{}, {"history": True}, {"prior_body": dict(PAD, torsional_friction=2e-3)}],
                         ids=["plain", "history", "spin"])
def test_an_ensemble_is_the_law_times_the_geometric_mean_of_its_members_corrections(kw):
    scene, d = _grasp()
    g = _graph(scene, d)
    members = [_trained_net(g, seed=s, **kw) for s in (0, 1, 2)]
    ens = ensemble(members)
    assert ens.hparams["members"] == 3 and len(ens.members) == 3
    law = ContactLawGNN(prior=LAW, prior_body=kw.get("prior_body", PAD), corrections=False).eval()
    state = _state(g) if ens.history else None
    tstate = None if state is None else type(state)(*(torch.from_numpy(x) for x in state))
    with torch.no_grad():
        base = law.law_parameters(g).numpy()
        each = np.stack([m.law_parameters(g, state=tstate).numpy() for m in members])
        got = ens.law_parameters(g, state=tstate).numpy()
    on = base > 0  # columns a group does not have stay 0
    unclamped = (each[:, :, 2] < members[0].mu_max).all(0)
    want = base.copy()
    want[on] = base[on] * np.exp(np.log(each[:, on] / base[on]).mean(0))
    np.testing.assert_allclose(got[unclamped], want[unclamped], rtol=1e-9)
    assert (np.abs(got - each[0]) > 1e-6 * np.abs(got)).any()  # not the first member's parameters
    fast = network_numpy.numpy_network(ens)  # the stepper's compiled copy runs every member
    np.testing.assert_allclose(fast.law_parameters(g, state=state), got, rtol=2e-5, atol=1e-12)


def test_one_member_builds_the_model_before_ensembles():
    net = ContactLawGNN(prior=LAW, prior_body=PAD, hidden=16)
    assert "members" not in net.hparams and not any(k.startswith("extra") for k in net.state_dict())
    with pytest.raises(ValueError, match="members"):
        ContactLawGNN(prior=LAW, corrections=False, members=2)


def test_saturated_members_keep_every_correction_inside_the_bounds():
    scene, d = _grasp()
    g = _graph(scene, d)
    members = [_trained_net(g, seed=s) for s in (0, 1)]
    with torch.no_grad():
        for m, sign in zip(members, (1.0, -1.0)):  # decoders at opposite saturations
            m.decoder[-1].bias.fill_(sign * 50.0)
            m.stiffness_mlp[-1].bias.fill_(sign * 50.0)
    ens = ensemble(members)
    law = ContactLawGNN(prior=LAW, prior_body=PAD, corrections=False).eval()
    with torch.no_grad():
        ratio = np.log(ens.law_parameters(g).numpy()[:, :3] / law.law_parameters(g).numpy())
    assert np.all(np.abs(ratio) <= np.array(ens.bounds) + 1e-9)
    np.testing.assert_allclose(ratio[:, :2], 0.0, atol=1e-6)  # opposite saturations average to the law


def test_members_on_another_law_or_architecture_are_refused():
    scene, d = _grasp()
    g = _graph(scene, d)
    a = _trained_net(g, seed=0)
    with pytest.raises(ConfigError, match="member 1.*prior_body"):
        ensemble([a, _trained_net(g, seed=1, prior_body=dict(PAD, friction=0.5))])
    with pytest.raises(ConfigError, match="member 1.*hidden"):
        ensemble([a, ContactLawGNN(prior=LAW, prior_body=PAD, hidden=8).eval()])
    with pytest.raises(ConfigError, match="one network"):
        ensemble([a, ContactLawGNN(prior=LAW, prior_body=PAD, corrections=False).eval()])
    with pytest.raises(ConfigError, match="at least 2"):
        ensemble([a])


def test_the_ensemble_command_exports_a_checkpoint_that_loads_and_names_its_members(tmp_path, capsys):
    scene, d = _grasp()
    g = _graph(scene, d)
    paths = []
    for s in (0, 1):
        paths.append(str(export_checkpoint(_trained_net(g, seed=s), tmp_path / f"m{s}", data={"source": "test"})))
    assert main(["ensemble", *paths, "--out", str(tmp_path / "ens")]) == 0
    model, card = load_checkpoint(tmp_path / "ens")
    assert card["model"]["hparams"]["members"] == 2 and card["data"] == {"source": "test"}
    assert [m["checkpoint"] for m in card["training"]["ensemble_of"]] == ["m0", "m1"]  # no machine paths on cards
    assert card["model"]["flops_per_contact"] > json.loads((tmp_path / "m0" / "card.json").read_text())["model"][
        "flops_per_contact"]
    want = ensemble([load_checkpoint(p)[0] for p in paths])
    with torch.no_grad():
        np.testing.assert_array_equal(model.law_parameters(g).numpy(), want.law_parameters(g).numpy())
    assert main(["ensemble", paths[0], paths[0], "--out", str(tmp_path / "twice")]) != 0
    assert "same weights" in capsys.readouterr().err and not (tmp_path / "twice").exists()


def test_the_ensemble_command_never_replaces_a_release_nor_a_folder_without_overwrite_nor_mixes_training_data(
        tmp_path, capsys, monkeypatch):
    """A release under checkpoints/ had been replaced without a word, as had any existing --out; and a member trained
    on other episodes (the benchmark's test families) went unnamed, the card naming the first member's data."""
    import shutil

    import surrogate.paths

    releases = tmp_path / "checkpoints"  # a copy of the releases stands in for them: a regression cannot hurt them
    shutil.copytree(surrogate.paths.checkpoints_dir() / "rig_default", releases / "rig_default")
    monkeypatch.setattr(surrogate.paths, "checkpoints_dir", lambda: releases)
    scene, d = _grasp()
    g = _graph(scene, d)
    data = {"name": "caps", "sha256": "a" * 64, "train_episodes": ["0", "1"]}
    paths = [str(export_checkpoint(_trained_net(g, seed=s), tmp_path / f"m{s}", data=data)) for s in (0, 1)]
    release = releases / "rig_default"
    before = (release / "weights.safetensors").read_bytes()
    assert main(["ensemble", *paths, "--out", str(release), "--overwrite"]) == 2
    assert "is a release (checkpoints/rig_default)" in capsys.readouterr().err
    assert (release / "weights.safetensors").read_bytes() == before
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    assert main(["ensemble", *paths, "--out", str(tmp_path / "mine")]) == 2
    assert "pass --overwrite" in capsys.readouterr().err and (tmp_path / "mine" / "notes.txt").read_text() == "keep"
    other = export_checkpoint(_trained_net(g, seed=2), tmp_path / "m2", data={**data, "sha256": "b" * 64})
    assert main(["ensemble", paths[0], str(other), "--out", str(tmp_path / "mixed")]) == 2
    err = capsys.readouterr().err
    assert "trained on 'caps' (sha256 bbbbbbbbbbbb" in err and "members are trained on the same episodes" in err
    assert not (tmp_path / "mixed").exists()
