"""The command line refuses what it cannot use at parse time, one line naming the flag (exit 2): bad durations and
seeds, flags of another mode; every command takes ``--verbose`` (the warnings say so); unit hints say what the
caller of the mesh loader can do."""

from __future__ import annotations

import argparse
import logging

import pytest

from surrogate.cli import build_parser, main

ENV = ["render", "--env", "ContactSurrogate/GripperGrasp-v0", "--out", "r.mp4"]
GENERATE = ["rig", "generate", "--objects", "heldout", "--episodes", "1", "--out", "g1", "--workers", "0"]


def _usage_error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as ei:
        main(argv)
    err = capsys.readouterr().err
    assert ei.value.code == 2 and "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize("argv, flag", [
    (ENV + ["--duration", "-1"], "--duration"), (ENV + ["--duration", "nan"], "--duration"),
    (ENV + ["--duration", "0"], "--duration"), (ENV + ["--duration", "inf"], "--duration"),
    (ENV + ["--seed", "-5"], "--seed"), (ENV + ["--object-seed", "-1"], "--object-seed"),
    (GENERATE + ["--seed", "-1"], "--seed"), (GENERATE + ["--duration", "0"], "--duration"),
    (["rig", "gap", "--out", "g", "--seed", "-2"], "--seed"),
    (["rig", "gap", "--out", "g", "--duration", "nan"], "--duration"),
    (["scene", "--family", "box", "--seed", "-1"], "--seed"),
])
def test_a_bad_duration_or_seed_is_a_usage_error_naming_the_flag(capsys, argv, flag):
    line = _usage_error(capsys, argv)
    assert f"argument {flag}: must be a " in line
    assert ("finite number above 0" if flag == "--duration" else "whole number of 0 or more") in line


def test_good_durations_and_seeds_parse():
    a = build_parser().parse_args(ENV + ["--duration", "0.5", "--seed", "0", "--object-seed", "7"])
    assert (a.duration, a.seed, a.object_seed) == (0.5, 0, 7)
    assert build_parser().parse_args(GENERATE + ["--seed", "3", "--duration", "2"]).seed == 3


@pytest.mark.parametrize("argv", [
    ["--verbose", "render", "--env", "E", "--out", "x"], ["render", "--verbose", "--env", "E", "--out", "x"],
    ["--verbose", "bench", "s", "--out", "o"], ["bench", "s", "--out", "o", "--verbose"],
    ["quickstart", "--verbose"], ["speed", "--verbose"], ["rig", "generate", "--objects", "o", "--episodes", "1",
                                                          "--out", "x", "--verbose"],
])
def test_verbose_is_taken_before_and_after_the_command(argv):
    assert build_parser().parse_args(argv).verbose is True
    assert build_parser().parse_args([x for x in argv if x != "--verbose"]).verbose is False


def _commands(parser):
    """The parsers of the commands that run, not of the groups (``rig``, ``import``)."""
    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return [c for g in groups for sub in g.choices.values() for c in _commands(sub)] if groups else [parser]


def test_every_command_takes_verbose_as_its_warnings_say():
    """``(first of its kind; --verbose shows each)``: true of every command, render and speed included."""
    commands = _commands(build_parser())
    assert len(commands) > 15
    assert [c.prog for c in commands if "--verbose" not in c._option_string_actions] == []


def test_verbose_shows_trimeshs_messages_in_the_commands_own_process(monkeypatch, caplog, tmp_path):
    """The filter of trimesh's "only got N/M samples!" is installed when ``surrogate`` is imported, before ``--verbose``
    is read: in the command's own process it had stayed on."""
    monkeypatch.setenv("SURROGATE_VERBOSE", "")  # unset again after the test (main sets it)
    sample = logging.getLogger("trimesh.sample")
    with caplog.at_level(logging.WARNING, logger="trimesh.sample"):
        sample.warning("only got 3/5 samples!")
        assert caplog.messages == []  # filtered without --verbose
        assert main(["--verbose", "inspect", str(tmp_path / "none")]) == 2  # any command: the flag is read first
        sample.warning("only got 4/5 samples!")
    assert caplog.messages == ["only got 4/5 samples!"]


@pytest.mark.parametrize("argv, flag, mode", [
    (ENV + ["--which", "worst"], "--which", "--env"), (ENV + ["--analytic", "nominal"], "--analytic", "--env"),
    (ENV + ["--set", "a=1"], "--set", "--env"), (ENV + ["--test-data", "d"], "--test-data", "--env"),
    (ENV + ["--episode", "3"], "--episode", "--env"),
    (["render", "--ledger", "L", "--out", "x", "--seed", "1"], "--seed", "--ledger"),
    (["render", "--ledger", "L", "--out", "x", "--set", "a=1"], "--set", "--ledger"),
    (["render", "--suite", "S", "--episode", "1", "--out", "x", "--duration", "2"], "--duration", "--suite"),
    (["render", "--suite", "S", "--episode", "1", "--out", "x", "--analytic", "nominal"], "--analytic", "--suite"),
    (["speed", "--env", "--robot", "jaco"], "--env", "--robot jaco"),
    (["speed", "--robot", "jaco", "--hand", "three_finger"], "--hand", "--robot jaco"),
    (["speed", "--robot", "jaco", "--batches", "4"], "--batches", "--robot jaco"),
    (["speed", "--env", "--steps", "3"], "--steps", "--env"),
])
def test_a_flag_its_mode_ignores_is_a_usage_error_naming_it(capsys, argv, flag, mode):
    assert _usage_error(capsys, argv).endswith(f"error: argument {flag}: does not apply with {mode}")


@pytest.mark.parametrize("argv", [
    ["render", "--ledger", "L", "--out", "x", "--which", "worst", "--analytic", "nominal", "--checkpoint", "c"],
    ["render", "--suite", "S", "--episode", "1", "--out", "x", "--set", "a=1", "--test-data", "d"],
    ENV + ["--object", "capsule", "--object-seed", "1", "--seed", "2", "--duration", "1", "--checkpoint", "c"],
    ["speed", "--env", "--hand", "three_finger", "--family", "box", "--batches", "1", "2"],
    ["speed", "--robot", "jaco", "--min-seconds", "1", "--threads", "2"],
    ["speed", "--steps", "2", "--hand", "three_finger", "--batches", "1"],
])
def test_the_flags_of_each_mode_pass_the_check(argv):
    a = build_parser().parse_args(argv)
    a.check_args(a)


def test_speed_fills_the_defaults_of_the_flags_left_out():
    from surrogate.bench import speed

    p = speed.build_parser(argparse.ArgumentParser())
    a = p.parse_args([])
    speed.check_args(p, a)
    assert (a.batches, a.steps, a.hand, a.family) == (None, None, None, None)  # left out: nothing to refuse
    assert speed.DEFAULTS == {"batches": [1, 64, 256, 1024], "steps": 20, "hand": "parallel_jaw", "family": "box"}


def test_the_millimetre_hint_says_how_a_folder_for_rig_generate_takes_a_scale(tmp_path):
    """A loose mesh of a folder (``rig generate --objects DIR``) cannot be passed ``scale=``: the hint says what works
    there, and the URDF it suggests loads the object at the right size."""
    import trimesh

    from surrogate.objects import load_object_folder

    trimesh.creation.box(extents=(40.0, 60.0, 30.0)).export(tmp_path / "box_mm.stl")
    objs, skipped = load_object_folder(tmp_path)
    assert objs == [] and len(skipped) == 1
    reason = skipped[0][1]
    assert "pass scale=0.001" in reason and "re-export it in metres" in reason and "rig generate --objects" in reason
    assert '<mesh scale="0.001 0.001 0.001">' in reason
    (tmp_path / "box.urdf").write_text(
        '<robot name="box_m"><link name="box"><inertial><mass value="0.1"/></inertial><collision><geometry>'
        '<mesh filename="box_mm.stl" scale="0.001 0.001 0.001"/></geometry></collision></link></robot>')
    objs, skipped = load_object_folder(tmp_path)
    assert skipped == [] and [o.name for o in objs] == ["box_m"]
    assert sorted(objs[0].extents) == pytest.approx([0.03, 0.04, 0.06])


def test_objects_and_scene_take_a_folder_of_meshes_as_rig_generate_does(tmp_path, capsys):
    """``surrogate objects --split DIR`` and ``scene --split DIR`` refused the folder ``rig generate --objects``
    takes: a user could not preview their own objects."""
    import trimesh

    from surrogate.cli import main

    trimesh.creation.box(extents=[0.04, 0.05, 0.06]).export(tmp_path / "box.stl")
    assert main(["objects", "--split", str(tmp_path)]) == 0
    assert "1 objects" in capsys.readouterr().out
    assert main(["scene", "--split", str(tmp_path), "--hand", "none"]) == 0
    assert "scene: object box (mesh)" in capsys.readouterr().out
