"""Checkpoints that carry what their law assumes (issue 26, item 4): the card's ``data.contact_groups`` says which
contact groups the training data held, against what and in which units; a stepper refuses owned pairs of a group the
law never saw, and says when a pad law fitted to one hand acts on another."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

from surrogate.errors import ConfigError
from surrogate.model.checkpoint import CheckpointError, load_checkpoint
from surrogate.objects import make_object
from surrogate.scenes import build_scene
from surrogate.sim import Stepper, step
from surrogate.sim.hybrid_step import SurrogateWarning

RELEASES = Path(__file__).resolve().parents[1] / "checkpoints"


def test_the_releases_state_their_contact_groups():
    cube, _ = load_checkpoint(RELEASES / "cube_tosses")
    rig, _ = load_checkpoint(RELEASES / "rig_default")
    assert cube.contact_groups["surface"]["trained"] and not cube.contact_groups["body"]["trained"]
    assert cube.contact_groups["surface"]["units"] == "weight"  # the toss law scales with the object
    assert rig.contact_groups["body"] == {**rig.contact_groups["body"], "trained": True, "hand": "parallel_jaw", "units": "si"}


def test_a_law_that_never_saw_pads_is_refused_on_a_hand_with_the_reason():
    cube, _ = load_checkpoint(RELEASES / "cube_tosses")
    grasp = build_scene(make_object("box", 0), hand="parallel_jaw")
    with pytest.raises(ConfigError, match=r"never saw a 'body' contact.*contactnets_cube.*owned pair") as e:
        Stepper(grasp, cube)
    assert e.value.location.field == "untrained_groups"
    # its own kind of scene, the pads kept analytic, or the prior allowed explicitly: stepped
    toss = build_scene(make_object("box", 0), hand="none", setting="ground")
    step(toss.model, toss.make_data(), Stepper(toss, cube), nstep=2)
    step(grasp.model, grasp.make_data(), Stepper(grasp, cube, roles=("object-table",)), nstep=2)
    step(grasp.model, grasp.make_data(), Stepper(grasp, cube, untrained_groups="allow"), nstep=2)
    with pytest.raises(ConfigError, match="untrained_groups"):
        Stepper(toss, cube, untrained_groups="maybe")


def test_a_pad_law_on_another_hand_says_what_it_assumes():
    rig, _ = load_checkpoint(RELEASES / "rig_default")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # its own hand: nothing to say
        Stepper(build_scene(make_object("box", 0), hand="parallel_jaw"), rig)
    with pytest.warns(SurrogateWarning, match=r"fitted against the pads of hand 'parallel_jaw'.*'three_finger'.*si units"):
        Stepper(build_scene(make_object("box", 0), hand="three_finger"), rig)


def test_a_malformed_contact_groups_field_is_refused_naming_it(tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(RELEASES / "rig_default", ckpt)
    card = json.loads((ckpt / "card.json").read_text())
    card["data"]["contact_groups"] = {"body": {"trained": "yes"}}
    (ckpt / "card.json").write_text(json.dumps(card))
    with pytest.raises(CheckpointError, match=r"card.json: data.contact_groups"):
        load_checkpoint(ckpt)
    del card["data"]["contact_groups"]  # a card written before the field: loads, nothing is checked
    (ckpt / "card.json").write_text(json.dumps(card))
    assert load_checkpoint(ckpt)[0].contact_groups is None
