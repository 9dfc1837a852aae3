"""The one YAML parser of config files and ``--set`` values (``surrogate.config.parse_yaml``): a number with an
exponent is a float (``1e5``: PyYAML's YAML 1.1 had read the string '1e5', which a range check then refused as
"outside its physical range"); everything else parses as ``yaml.safe_load`` does. Training, bench (and quickstart,
which runs the benchmarks), the rig and the pose importer read their files and ``--set`` values with it."""

from __future__ import annotations

import math

import pytest
import yaml

from surrogate.config import apply_overrides, dump_yaml, load_yaml, parse_yaml
from surrogate.errors import ConfigError

FLOATS = [("1e5", 1.0e5), ("-2E-3", -2.0e-3), ("+3e+2", 300.0), ("1.0e5", 1.0e5), ("1.e5", 1.0e5), (".5e3", 500.0),
          ("0e0", 0.0), ("1.0e+5", 1.0e5), ("3.0e-4", 3.0e-4)]
UNCHANGED = ["12", "-7", "1.5", ".inf", ".nan", "0x1e5", "017", "1:20", "abc", "'1e5'", '"2e-3"', "1e", "e5", "1e5x",
             "1_0e5", "1e5.0", "1.2.3e4", "true", "null", "2024-01-02", "[1, 'a']", "{a: 1.5}"]


@pytest.mark.parametrize("text, value", FLOATS)
def test_a_number_with_an_exponent_is_a_float(text, value):
    for parsed in (parse_yaml(text), parse_yaml(f"[{text}]")[0], parse_yaml(f"k: {text}  # c")["k"]):
        assert isinstance(parsed, float) and parsed == value, (text, parsed)


@pytest.mark.parametrize("text", UNCHANGED)
def test_everything_else_parses_as_safe_load_does(text):
    mine, theirs = parse_yaml(text), yaml.safe_load(text)
    assert type(mine) is type(theirs)
    assert mine == theirs or (isinstance(theirs, float) and math.isnan(theirs) and math.isnan(mine))


def test_safe_load_itself_is_left_as_it_was():
    assert yaml.safe_load("1e5") == "1e5"  # the resolver is the project loader's own, not added to SafeLoader


def test_files_and_overrides_read_the_same_and_a_dump_reads_back(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("a: {k: 1e5, n: 12, s: '1e5'}\n")
    cfg = load_yaml(path)
    assert cfg == {"a": {"k": 1.0e5, "n": 12, "s": "1e5"}} and isinstance(cfg["a"]["k"], float)
    cfg = apply_overrides(cfg, ["a.k=-2E-3", "a.n=7", "a.s=2e-3x", "a.l=[1e1, 2]"])
    assert cfg["a"] == {"k": -2.0e-3, "n": 7, "s": "2e-3x", "l": [10.0, 2]}
    back = {"s": "1e5", "f": 1.0e5, "t": "x"}
    assert parse_yaml(dump_yaml(back)) == back  # the string '1e5' is quoted in what --print-config writes


def test_bench_and_the_rig_take_exponents_on_the_command_line():
    """``bench --set`` (``suites.load_suite``; quickstart passes its ``--set`` there) and ``rig generate --set``
    (``rig.config.load_rig_config``) parse with ``apply_overrides``: 2e0 was the string '2e0' in a suite (accepted,
    to fail where it was used) and '1e5' refused by the rig as not a number."""
    from surrogate.rig.config import load_rig_config
    from surrogate.suites import load_suite

    suite = load_suite("cube-real-small", ["metrics.max_error_m=2e0"])
    assert suite["metrics"]["max_error_m"] == 2.0 and isinstance(suite["metrics"]["max_error_m"], float)
    rig = load_rig_config(None, ["physics.point_stiffness=1e5"])
    assert rig["physics"]["point_stiffness"] == 1.0e5
    with pytest.raises(ConfigError, match="point_stiffness"):  # a number out of its range is still refused
        load_rig_config(None, ["physics.point_stiffness=1e9"])


def test_a_key_given_twice_in_a_file_or_a_set_is_refused_where_it_stands(tmp_path):
    """PyYAML keeps the last of two equal keys without a word: a file with ``data.root`` twice ran on the second."""
    f = tmp_path / "dup.yaml"
    f.write_text("data:\n  root: a\n  split_seed: 1\n  root: b\n")
    with pytest.raises(ConfigError, match=r"(?s)invalid YAML .*key 'root' is given twice in one mapping.*line 4"):
        load_yaml(f)
    with pytest.raises(ConfigError, match="given twice"):
        apply_overrides({"stages": {"prior": {"epochs": 1}}}, ["stages.prior={epochs: 1, epochs: 5}"])
    assert parse_yaml("a: {b: 1}\nb: {b: 2}") == {"a": {"b": 1}, "b": {"b": 2}}  # one key in two mappings is fine


def test_a_config_file_that_is_not_text_is_named_not_a_traceback(tmp_path):
    f = tmp_path / "binary.yaml"
    f.write_bytes(b"data:\n  root: \xff\xfe\n")
    with pytest.raises(ConfigError, match="not a text file in UTF-8") as err:
        load_yaml(f)
    assert err.value.location.file == f


def test_a_merge_may_override_the_keys_it_brings_and_an_unhashable_key_is_invalid_yaml(tmp_path):
    assert parse_yaml("base: &b {epochs: 1, lr: 2}\nprior: {<<: *b, epochs: 5}")["prior"] == {"epochs": 5, "lr": 2}
    f = tmp_path / "odd.yaml"
    f.write_text("? [a, b]\n: 1\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_yaml(f)
    assert apply_overrides({"name": "x"}, ["name=!important"]) == {"name": "!important"}  # text, as before
