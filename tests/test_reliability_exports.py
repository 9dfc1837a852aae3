"""Issue #29 D: exports and releases are atomic and locked: a kill -9 leaves the old export or the new one.

Each test is named after the behaviour it guards; the defect it reproduces is in its docstring.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from surrogate.errors import ForeignOutputError, LockedError
from surrogate.model.checkpoint import export_checkpoint, load_checkpoint
from surrogate.model.contact_law import ContactLawGNN

# Exports the same folder over and over (each time another friction, so each export differs); prints "ready"
# once the first is complete, so that the kills below land in the loop, not in the imports.
_EXPORT_LOOP = """
import sys, torch
from surrogate.model.checkpoint import export_checkpoint
from surrogate.model.contact_law import ContactLawGNN
torch.manual_seed(0)
models = [ContactLawGNN(hidden=64, steps=2, prior={"friction": 0.2 + 0.01 * i}).eval() for i in range(8)]
export_checkpoint(models[0], sys.argv[1])
print("ready", flush=True)
i = 0
while True:
    i += 1
    export_checkpoint(models[i % 8], sys.argv[1])
"""


def _start_loop(folder):
    proc = subprocess.Popen([sys.executable, "-c", _EXPORT_LOOP, str(folder)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.stdout.readline().strip() == "ready"
    return proc


@pytest.mark.parametrize("delays", [(0.0, 0.005, 0.013, 0.03, 0.06, 0.1)])
def test_a_killed_export_leaves_the_old_or_the_new_export_never_neither(tmp_path, delays):
    """Defect D: the weights were written in place before the card; a kill -9 while an export was rewritten left
    a folder that no longer loaded (hash mismatch). Killed at six points of a loop of exports, it always loads."""
    folder = tmp_path / "export"
    for d in delays:
        proc = _start_loop(folder)
        time.sleep(d)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        model, card = load_checkpoint(folder)  # the old export or the new one, whole
        assert 0.19 < model.prior().friction < 0.28, card["model"]["hparams"]["prior"]
    # the next export takes over the dead process's lock and removes its temporary folders
    export_checkpoint(ContactLawGNN(corrections=False), folder)
    load_checkpoint(folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"], list(tmp_path.iterdir())


def test_a_second_writer_of_an_export_is_refused_naming_the_pid(tmp_path):
    """Defect D: two trainings into one folder both said "exported"; one result was silently lost."""
    folder = tmp_path / "export"
    export_checkpoint(ContactLawGNN(corrections=False), folder)
    live = subprocess.Popen(["sleep", "60"])
    try:
        (tmp_path / "export.lock").write_text(f"{live.pid}\n")
        with pytest.raises(LockedError, match=f"another run \\(PID {live.pid}\\) is writing {folder}"):
            export_checkpoint(ContactLawGNN(corrections=False, prior={"friction": 0.9}), folder)
    finally:
        live.kill()
        live.wait()
    assert load_checkpoint(folder)[0].prior().friction == pytest.approx(0.3)  # the first export, untouched


def test_a_second_training_into_one_out_dir_is_refused_before_any_work(tmp_path, monkeypatch):
    """Defect D: two trainings into one ``out_dir`` both exited 0; the lock on ``out_dir`` refuses the second."""
    from surrogate.learn import fit as law_fit
    from surrogate.training.config import load_config
    from surrogate.training.run import fit

    from .test_reliability import _cube_dataset

    monkeypatch.setattr(law_fit, "fit_law", lambda *a, **k: pytest.fail("training ran"))
    ds = _cube_dataset(tmp_path)
    run = tmp_path / "run"
    cfg = load_config("cube_tosses", [f"data.root={ds}", f"out_dir={run}", "data.bench_split=null",
                                      "data.val_fraction=0.34"])
    live = subprocess.Popen(["sleep", "60"])
    try:
        (tmp_path / "run.lock").write_text(f"{live.pid}\n")
        with pytest.raises(LockedError, match=f"PID {live.pid}"):
            fit(cfg)
    finally:
        live.kill()
        live.wait()


def test_an_export_never_replaces_a_folder_of_other_files(tmp_path):
    """An export replaces a checkpoint folder whole; a folder holding anything else is refused, its files kept."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    with pytest.raises(ForeignOutputError, match="notes.txt"):
        export_checkpoint(ContactLawGNN(corrections=False), folder)
    assert (folder / "notes.txt").read_text() == "keep me" and sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


_EXPORT_REPEATEDLY = """
import sys, torch
from surrogate.model.checkpoint import export_checkpoint, read_card
from surrogate.model.contact_law import ContactLawGNN
torch.manual_seed(0)
model = ContactLawGNN(hidden=16, steps=1).eval()
for i in range(4):
    export_checkpoint(model, f"{sys.argv[1]}_{i}")
    print(read_card(f"{sys.argv[1]}_{i}")["weights_sha256"])
"""


def test_the_same_weights_export_to_the_same_bytes_in_every_process(tmp_path):
    """A checkpoint's content hash identifies its weights: the same model exported in two processes, four times
    each, gives one file and one ``weights_sha256``. (Safetensors wrote the metadata map in hash order, which
    changes between processes, so the same training hashed differently from run to run.)"""
    hashes = set()
    for k in range(2):
        out = subprocess.run([sys.executable, "-c", _EXPORT_REPEATEDLY, str(tmp_path / f"p{k}")], capture_output=True,
                             text=True, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        hashes.update(out.stdout.split())
    assert len(hashes) == 1
    files = {(tmp_path / f"p{k}_{i}" / "weights.safetensors").read_bytes() for k in range(2) for i in range(4)}
    assert len(files) == 1
