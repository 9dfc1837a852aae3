"""Issue #29 H: user-facing errors are one clear line (``--debug`` shows the traceback), and say what is wrong.

Each test is named after the behaviour it guards; the defect it reproduces is in its docstring. (The Gymnasium
environments' cases of H are in ``tests/test_envs.py``.)
"""

from __future__ import annotations

import json

import pytest

from surrogate.cli import main
from surrogate.errors import CaptureError, ConfigError

from .test_reliability import _cube_dataset, _edit_json


def test_cli_prints_one_line_for_a_file_system_error_and_debug_shows_the_traceback(tmp_path, capsys):
    """Defect H: the CLI's handler caught only FileExistsError and FileNotFoundError: any other OSError (a folder
    where a file goes, no space, read-only) printed a traceback."""
    folder = tmp_path / "a_folder"
    folder.mkdir()
    assert main(["scene", "--family", "box", "--xml", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {folder}: Is a directory\n", err
    with pytest.raises(IsADirectoryError):
        main(["--debug", "scene", "--family", "box", "--xml", str(folder)])


def test_render_of_a_ledger_that_is_a_json_list_is_one_clear_line(tmp_path, capsys):
    """Defect H: ``surrogate render --ledger <a JSON list>`` died with an AttributeError."""
    ledger = tmp_path / "ledger.json"
    ledger.write_text(json.dumps([1, 2]))
    assert main(["render", "--ledger", str(ledger), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{ledger}: not a ledger: a JSON list" in err, err
    assert not (tmp_path / "out").exists()


def test_the_feature_mismatch_error_says_what_differs(tmp_path):
    """Defect H: a card whose feature names differ from the package's said only "feature definitions differ"."""
    from surrogate.model import graph as G
    from surrogate.model.checkpoint import CheckpointError, export_checkpoint, load_checkpoint
    from surrogate.model.contact_law import ContactLawGNN

    ckpt = export_checkpoint(ContactLawGNN(corrections=False), tmp_path / "ckpt")
    renamed = G.EDGE_FEATURES[1]
    _edit_json(ckpt / "card.json", lambda c: c["features"].update(
        edge=[("slip_speed_v2" if n == renamed else n) for n in c["features"]["edge"]]))
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(ckpt)
    msg = str(e.value)
    assert "edge features: only in the card ['slip_speed_v2']" in msg and f"only in this package ['{renamed}']" in msg, msg
    assert "version" not in msg.split("(", 1)[1]  # the version is the same: not named as a difference


def test_a_zero_mass_names_meta_contact_json(tmp_path):
    """Defect H: the zero-mass error named the data parquet, not ``meta/contact.json`` where the mass is written."""
    from surrogate.capture import read_dataset

    ds = _cube_dataset(tmp_path)
    _edit_json(ds / "meta/contact.json", lambda c: [o.update(mass=0.0) for o in c["objects"].values()])
    with pytest.raises(CaptureError) as e:
        read_dataset(ds)
    assert str(e.value.file) == str(ds / "meta/contact.json") and e.value.field == "object.mass", str(e.value)


@pytest.mark.parametrize("copies", [1.7, 0, -2, True, "4", float("nan")])
def test_copies_refuses_a_count_that_is_not_a_positive_whole_number(copies):
    """Defect H: ``Copies(scene, 1.7)`` made one copy silently."""
    from surrogate.objects import make_object
    from surrogate.scenes import build_scene
    from surrogate.sim.copies import Copies

    s = build_scene(make_object("box", 0), hand="parallel_jaw", setting="table")
    with pytest.raises(ConfigError, match="copies must be a positive whole number"):
        Copies(s, copies)
    assert Copies(s, 2.0).copies == 2 and Copies(s, 3).copies == 3
