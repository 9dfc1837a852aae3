"""Captures load in LeRobot: the exact feature mapping LeRobot 0.4.x applies, checked with pyarrow only.

LeRobot (``lerobot.datasets.utils.get_hf_features_from_features``) turns each ``info.json``
feature into a Hugging Face ``datasets`` feature and casts the parquet columns to it:

* shape ``(1,)`` -> ``Value(dtype)``: a scalar column, whatever the feature's ``names``;
* shape ``(k,)`` -> ``Sequence(Value(dtype), length=k)``: a fixed-size list of k;
* ``image`` / ``video`` -> images (captures have none).

A column of another type fails the cast (``Couldn't cast array of type fixed_size_list<element:
float>[1] to float``). Its policies then classify features (``dataset_to_policy_features``):
``observation.environment_state`` is the environment state ACT and Diffusion need without images,
every other ``observation.*`` is a state, ``action`` the action; the normalizer subtracts a mean
from each, so none of them may be bool. LeRobot is not installed in CI; the last test runs it
where it is importable.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from .conftest import SHARED, needs_shared
from .test_capture import as_schema_1_0

SAMPLE = SHARED / "lerobot_v3_sample"
ARROW = {"float32": pa.float32(), "float64": pa.float64(), "int64": pa.int64(), "int32": pa.int32(),
         "bool": pa.bool_(), "string": pa.string()}


def lerobot_arrow_type(feature: dict) -> pa.DataType:
    """The column type LeRobot's ``datasets`` features require for one ``info.json`` feature."""
    shape = tuple(feature["shape"])
    if shape == (1,):
        return ARROW[feature["dtype"]]
    assert len(shape) == 1, f"captures have 1-D features only, got {shape}"
    return pa.list_(ARROW[feature["dtype"]], shape[0])


def lerobot_hf_feature(feature: dict) -> dict:
    """The ``huggingface`` schema metadata LeRobot writes for the same feature (as in its sample)."""
    if tuple(feature["shape"]) == (1,):
        return {"dtype": feature["dtype"], "_type": "Value"}
    return {"feature": {"dtype": feature["dtype"], "_type": "Value"}, "length": feature["shape"][0], "_type": "List"}


def layout_problems(root: Path) -> list[str]:
    """Every way the dataset at ``root`` differs from what LeRobot 0.4.x loads; [] when it loads."""
    features = json.loads((root / "meta/info.json").read_text())["features"]
    problems = []
    for path in sorted((root / "data").glob("chunk-*/file-*.parquet")):
        schema = pq.read_schema(path)
        hf = json.loads(schema.metadata[b"huggingface"])["info"]["features"]
        for key, f in features.items():
            want = lerobot_arrow_type(f)
            if key not in schema.names:
                problems.append(f"{path.name}: {key}: column missing")
            elif schema.field(key).type != want:
                problems.append(f"{path.name}: {key}: shape {f['shape']} needs {want}, column is {schema.field(key).type}")
            elif hf.get(key) != lerobot_hf_feature(f):
                problems.append(f"{path.name}: {key}: huggingface metadata {hf.get(key)} != {lerobot_hf_feature(f)}")
        if not problems:
            # What datasets does on load: cast the table to the features' types.
            pq.read_table(path).select(list(features)).cast(pa.schema([(k, lerobot_arrow_type(f)) for k, f in features.items()]))
    return problems


def policy_problems(root: Path) -> list[str]:
    """Why a stock ACT / Diffusion policy could not train on the dataset; [] when it can."""
    features = json.loads((root / "meta/info.json").read_text())["features"]
    stats = json.loads((root / "meta/stats.json").read_text())
    problems = []
    if "observation.environment_state" not in features:
        problems.append("no observation.environment_state (and no images)")
    for key, f in features.items():
        if key.startswith("observation.") or key == "action":
            if f["dtype"] == "bool":
                problems.append(f"{key}: bool, the normalizer cannot subtract its mean")
            if len(stats.get(key, {}).get("mean", [])) != f["shape"][0]:
                problems.append(f"{key}: stats.json mean does not have {f['shape'][0]} values")
    return problems


@pytest.fixture(scope="module")
def rig_captures(tmp_path_factory) -> dict:
    """A rig capture of each hand (real rig physics, 0.25 s episodes)."""
    from surrogate.rig.generate import generate

    out = tmp_path_factory.mktemp("rig") / "both"
    rep = generate(None, objects="heldout", episodes=2, out=out, seed=3, progress=False, duration=0.25,
                   hand="both", workers=0)
    return {p.name: p for p in rep.datasets}


@pytest.mark.parametrize("hand", ["parallel_jaw", "three_finger"])
def test_rig_capture_has_lerobots_feature_mapping(rig_captures, hand):
    root = rig_captures[hand]
    features = json.loads((root / "meta/info.json").read_text())["features"]
    schema = pq.read_schema(root / "data/chunk-000/file-000.parquet")
    # the width-1 features of the issue are scalar columns, wider ones fixed-size lists
    for key in ("truth.contact_count", "truth.object_mass", "truth.actuator_delay_s", "truth.hand_object_distance",
                "observation.object_pose_valid", "timestamp"):
        assert features[key]["shape"] == [1] and schema.field(key).type == pa.float32(), key
    assert schema.field("observation.state").type == pa.list_(pa.float32(), features["observation.state"]["shape"][0])
    assert layout_problems(root) == []
    assert policy_problems(root) == []


@needs_shared("contactnets_cube")
def test_toss_import_has_lerobots_feature_mapping(tmp_path):
    from surrogate.importers.contactnets import import_contactnets

    src = tmp_path / "tosses"
    src.mkdir()
    for p in sorted((SHARED / "contactnets_cube").glob("*.pt"))[:3]:
        shutil.copy(p, src)
    shutil.copy(SHARED / "contactnets_cube/experiment.json", src)
    import_contactnets(src, tmp_path / "toss", progress=False)
    assert layout_problems(tmp_path / "toss") == []
    features = json.loads((tmp_path / "toss/meta/info.json").read_text())["features"]
    assert features["observation.environment_state"]["shape"] == [7]


@needs_shared("lerobot_v3_sample")
def test_the_rule_holds_for_lerobots_own_output():
    # The checker above agrees with a dataset LeRobot 0.4.4 wrote itself.
    assert layout_problems(SAMPLE) == []


def test_schema_1_0_layout_is_what_lerobot_refused(rig_captures, tmp_path):
    # The old layout (width-1 features as lists of 1, a bool valid flag) is caught by the check.
    root = tmp_path / "old"
    shutil.copytree(rig_captures["parallel_jaw"], root)
    as_schema_1_0(root)
    problems = layout_problems(root)
    assert any("truth.contact_count: shape [1] needs float, column is fixed_size_list<element: float>[1]" in p
               for p in problems), problems
    assert "observation.object_pose_valid: bool, the normalizer cannot subtract its mean" in policy_problems(root)
