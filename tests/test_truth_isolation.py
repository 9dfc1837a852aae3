"""The exact physical state of generated captures (``truth.*``) never reaches training code."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

import surrogate.capture.reader as reader
from surrogate.paths import REPO_ROOT
from surrogate.rig.generate import generate

TRAINING_CODE = [REPO_ROOT / "train.py", *sorted((REPO_ROOT / "surrogate" / "model").glob("*.py")),
                 *sorted((REPO_ROOT / "surrogate" / "learn").glob("*.py")), *sorted((REPO_ROOT / "surrogate" / "training").glob("*.py")),
                 REPO_ROOT / "surrogate" / "sim" / "twin.py", REPO_ROOT / "surrogate" / "sim" / "rollout.py",
                 REPO_ROOT / "surrogate" / "splits.py"]


def test_training_code_never_asks_for_truth():
    for path in TRAINING_CODE:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "include_truth":
                raise AssertionError(f"{path}: passes include_truth")
            if isinstance(node, ast.Attribute) and node.attr == "truth":
                raise AssertionError(f"{path}:{node.lineno}: reads .truth")
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("truth."):
                raise AssertionError(f"{path}:{node.lineno}: names a truth.* feature")


def test_training_windows_from_a_rig_capture_hold_no_truth(tmp_path, monkeypatch):
    out = tmp_path / "rig"
    generate(None, objects="train", episodes=2, out=out, workers=0, seed=3, duration=1.0, progress=False)
    calls = []
    real = reader.read_dataset

    def spy(root, **kw):
        calls.append(kw.get("include_truth", False))
        return real(root, **kw)

    monkeypatch.setattr("surrogate.learn.episodes.read_dataset", spy)
    from surrogate.learn.lightning import RolloutData

    rd = RolloutData(root=str(out), val_fraction=0.5, val_min=0, margin=0.005, window_frames=16, window_stride=16)
    rd.setup()
    assert calls and not any(calls)  # the dataset was read, never with the truth
    assert all(ep.truth == {} for ep in rd.capture.episodes)
    # and the measured poses it trains on are not the exact ones (the recorder's noise is there)
    with_truth = real(out, include_truth=True)
    e0 = with_truth.episodes[0]
    assert not np.allclose(rd.capture.episodes[0].object_pose, e0.truth["object_pose"], atol=1e-5)
    assert Path(out, "meta", "contact.json").exists()
    assert rd.n_windows > 0 and all(w.qpos is not None for w in rd.windows)  # the recorded hand joints drive the twin
