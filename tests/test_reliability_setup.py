"""Issue #29 C: a training set-up that cannot validate or cannot write is refused before any work; strict JSON.

Each test is named after the behaviour it guards; the defect it reproduces is in its docstring.
"""

from __future__ import annotations

import json
import os

import pytest

from surrogate.errors import ConfigError
from surrogate.training.config import load_config

from .test_reliability import _cube_dataset


@pytest.mark.parametrize("value", [0, 1, -0.5, 1.5, "half"])
def test_val_fraction_outside_0_1_is_refused_naming_the_key(value):
    """Defect C: ``val_fraction=0`` exported all-NaN metrics, ``1`` the untrained prior (exit 0), ``-0.5`` was accepted."""
    with pytest.raises(ConfigError) as e:
        load_config("rig_default", [f"data.val_fraction={value}"])
    assert e.value.location.field == "data.val_fraction" and "(0, 1)" in str(e.value)


def test_a_split_without_validation_episodes_is_refused_before_any_work(tmp_path, monkeypatch):
    """Defect C: one episode (or a fraction rounding to none) trained, then wrote a card of NaN metrics."""
    from surrogate.learn import fit as law_fit
    from surrogate.training.run import fit

    monkeypatch.setattr(law_fit, "fit_law", lambda *a, **k: pytest.fail("training ran"))
    ds = _cube_dataset(tmp_path)  # 3 tosses
    cfg = load_config("cube_tosses", [f"data.root={ds}", f"out_dir={tmp_path / 'run'}", "data.bench_split=null",
                                      "data.val_fraction=0.1"])
    with pytest.raises(ConfigError, match=r"data\.val_fraction=0\.1 of the 3 episode\(s\).*no validation episode") as e:
        fit(cfg)
    assert e.value.location.field == "data.val_fraction"
    cfg = load_config("cube_tosses", [f"data.root={ds}", f"out_dir={tmp_path / 'run'}", "data.bench_split=null",
                                      "data.val_fraction=0.9"])
    with pytest.raises(ConfigError, match="leaves no training episode"):
        fit(cfg)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("key", ["out_dir", "export.dir", "export.prior_dir", "export.network_dir"])
def test_an_output_folder_that_is_a_file_is_refused_naming_the_key(tmp_path, key):
    """Defect C: ``out_dir`` a file gave a traceback; ``export.dir`` a file failed only after training."""
    f = tmp_path / "a_file"
    f.write_text("not a folder")
    with pytest.raises(ConfigError) as e:
        load_config("cube_tosses", [f"{key}={f}"])
    assert e.value.location.field == key and "is a file" in str(e.value)
    with pytest.raises(ConfigError, match="is a file") as e:  # a folder to be made under a file
        load_config("cube_tosses", [f"{key}={f / 'sub'}"])
    assert f.read_text() == "not a folder"


def test_an_output_folder_that_cannot_be_written_is_refused_naming_the_key(tmp_path):
    """Defect C: an unwritable ``out_dir`` gave a traceback (a read-only filesystem refuses root too)."""
    with pytest.raises(ConfigError, match="cannot be written") as e:
        load_config("cube_tosses", ["out_dir=/proc/surrogate-run"])
    assert e.value.location.field == "out_dir"
    if os.geteuid() != 0:  # root passes permission bits
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        with pytest.raises(ConfigError, match="cannot be written"):
            load_config("cube_tosses", [f"out_dir={ro / 'run'}"])
    assert not list(tmp_path.glob("**/.surrogate-write-probe*"))  # the probe leaves nothing


def test_every_json_the_project_writes_is_strict(tmp_path):
    """Defect C: a card held bare ``NaN`` (invalid strict JSON). The one JSON writer writes non-finite as null."""
    from surrogate.atomic import write_json_atomic

    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")

    write_json_atomic(tmp_path / "x.json", {"nan": float("nan"), "list": [float("inf"), 1.5, -float("inf")],
                                            "nested": {"v": float("nan")}, "ok": 2})
    data = json.loads((tmp_path / "x.json").read_text(), parse_constant=refuse)
    assert data == {"nan": None, "list": [None, 1.5, None], "nested": {"v": None}, "ok": 2}
