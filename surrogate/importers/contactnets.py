"""Importer for the real ContactNets cube tosses (Pfrommer, Halm, Posa, CoRL 2020).

Upstream: the DAIR Lab ContactNets repository (BSD-3-Clause), folder
``data/tosses_processed`` (files ``N.pt``) and ``data/params_processed/experiment.json``.
Each file is a float64 tensor [1, T, 19]: position (3), quaternion w,x,y,z (4), linear
velocity (3), body-frame angular velocity (3), control (6, zero). Lengths and linear
velocities are in cube half-widths; the cube is 0.1048 m wide, so x 0.0524 gives metres.
dt = 1/148 s. Poses are AprilTag tracks (3-sample median filter): real measurements.

``SRC`` may be that folder (with or without experiment.json beside the tosses), the
upstream repository archive (.zip / .tar.gz) or an http(s) URL of that archive.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
import tempfile
import urllib.request
import zipfile
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from ..capture import DatasetMeta, Environment, Episode, ObjectSpec, Provenance, validate_episode
from ..errors import CaptureError
from .report import ImportReport

UPSTREAM = "https://github.com/DAIRLab/contact-nets"
UPSTREAM_COMMIT = "c3dc21c"
HALF_WIDTH_M = 0.0524  # cube half-width: lengths in the files are in these units
CUBE_WIDTH_M = 0.1048
DEFAULTS = {"dt": 1.0 / 148.0, "mass": 0.37, "mu": 0.18, "restitution": 0.125, "g": 9.81 / HALF_WIDTH_M, "inertia": None}
N_COLUMNS = 19
TOSS_FILE = re.compile(r"^(\d+)\.pt$")


def _read_tensor(raw: bytes, name: str) -> np.ndarray:
    try:
        t = torch.load(io.BytesIO(raw), weights_only=True, map_location="cpu")
    except Exception as e:  # truncated or corrupt zip/pickle, or a non-tensor object
        raise CaptureError(f"not a readable torch tensor file ({type(e).__name__}: {str(e)[:120]})", file=name, field="tensor") from None
    if not isinstance(t, torch.Tensor):
        raise CaptureError(f"holds a {type(t).__name__}, expected a tensor", file=name, field="tensor")
    a = t.detach().to(torch.float64).numpy()
    if a.ndim == 3 and a.shape[0] == 1:
        a = a[0]
    if a.ndim != 2 or a.shape[1] != N_COLUMNS:
        raise CaptureError(f"shape {list(t.shape)}, expected [1, T, {N_COLUMNS}]", file=name, field="tensor")
    return a


def _sources(src: str | Path):
    """Yield (name, bytes) for every toss file and ('experiment.json', bytes) if present."""
    src_s = str(src)
    if src_s.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(src_s, timeout=60) as r:
                data = r.read()
        except OSError as e:
            raise CaptureError(f"cannot download ({e}); download the archive elsewhere and pass its path", file=src_s) from None
        tmp = Path(tempfile.mkdtemp()) / ("upstream.zip" if src_s.endswith(".zip") else "upstream.tar.gz")
        tmp.write_bytes(data)
        src = tmp
    src = Path(src)
    if src.is_dir():
        folder = src / "data" / "tosses_processed" if (src / "data" / "tosses_processed").is_dir() else src
        for p in folder.iterdir():
            if TOSS_FILE.match(p.name):
                yield str(p), p.read_bytes()
        for cand in (folder / "experiment.json", src / "data" / "params_processed" / "experiment.json"):
            if cand.is_file():
                yield "experiment.json", cand.read_bytes()
                break
        return
    if not src.exists():
        raise CaptureError("no such file or folder", file=src)
    if zipfile.is_zipfile(src):
        with zipfile.ZipFile(src) as z:
            for info in z.infolist():
                yield from _archive_member(info.filename, lambda i=info: z.read(i), src)
    elif tarfile.is_tarfile(src):
        with tarfile.open(src) as t:
            for m in t.getmembers():
                if m.isfile():
                    yield from _archive_member(m.name, lambda m=m: t.extractfile(m).read(), src)
    else:
        raise CaptureError("expected a folder of N.pt files, a .zip/.tar.gz archive of the upstream repository, or a URL", file=src)


def _archive_member(name: str, read, archive):
    parts = name.split("/")
    if len(parts) >= 2 and parts[-2] == "tosses_processed" and TOSS_FILE.match(parts[-1]):
        yield f"{archive}!{name}", read()
    elif parts[-1] == "experiment.json" and "params_processed" in parts:
        yield "experiment.json", read()


def _load_experiment(raw: bytes | None) -> dict:
    params = dict(DEFAULTS)
    if raw is not None:
        try:
            params.update({k: v for k, v in json.loads(raw).items() if k in DEFAULTS})
        except json.JSONDecodeError as e:
            raise CaptureError(f"corrupt JSON ({e})", file="experiment.json") from None
    return params


def cube_object(params: dict) -> ObjectSpec:
    """The tossed cube as a user would describe it (the authors' nominal values)."""
    m = float(params["mass"])
    if params.get("inertia") is not None:
        # experiment.json's inertia is in kg * half-width^2 (the files' length unit).
        i = float(params["inertia"]) * HALF_WIDTH_M**2
    else:
        i = m * CUBE_WIDTH_M**2 / 6.0  # solid cube
    return ObjectSpec(
        name="contactnets_cube", mass=m, inertia=(np.eye(3) * i).tolist(), size=CUBE_WIDTH_M,
        geometry={"kind": "box", "half_extents": [HALF_WIDTH_M] * 3}, friction=float(params["mu"]),
    )


def toss_to_episode(a: np.ndarray, toss_id: str, params: dict, *, file: str) -> Episode:
    """Convert one toss [T, 19] (cube half-width units) to an SI Episode."""
    T = len(a)
    if T < 2:
        raise CaptureError(f"has {T} frames, need at least 2", file=file, episode=toss_id, field="tensor")
    bad = ~np.isfinite(a)
    if bad.any():
        f, c = np.argwhere(bad)[0]
        raise CaptureError(f"non-finite value at frame {f}, column {c}", file=file, episode=toss_id,
                           field=["position", "quaternion", "linear_velocity", "angular_velocity", "control"][np.searchsorted([3, 7, 10, 13, 19], c, side="right")])
    dt = float(params["dt"])
    pose = np.concatenate([a[:, 0:3] * HALF_WIDTH_M, a[:, 3:7]], axis=1)
    twist = np.concatenate([a[:, 7:10] * HALF_WIDTH_M, a[:, 10:13]], axis=1)
    g = float(params["g"]) * HALF_WIDTH_M
    return Episode(
        episode_id=toss_id,
        timestamps=np.arange(T) * dt,
        object_pose=pose,
        object_twist=twist,
        object=cube_object(params),
        environment=Environment(kind="ground", height=0.0, gravity=[0.0, 0.0, -g]),
        provenance=Provenance(
            source="ContactNets cube tosses (DAIR Lab)", real=True, capture_rate_hz=1.0 / dt,
            upstream_id=toss_id, license="BSD-3-Clause",
            notes=f"{UPSTREAM} @ {UPSTREAM_COMMIT}, data/tosses_processed/{toss_id}.pt; AprilTag tracking, "
                  "3-sample median filter; velocities are backward differences of tracked poses",
        ),
        task="toss",
    )


def import_contactnets(src, out, *, overwrite: bool = False, progress: bool = True) -> ImportReport:
    """Convert ContactNets tosses at ``src`` into a capture dataset at ``out``.

    Upstream toss numbers are kept as episode ids; bad files are skipped and reported
    (and listed under ``skipped`` in meta/contact.json). Returns the ImportReport.
    """
    items = list(_sources(src))
    experiment = next((raw for name, raw in items if name == "experiment.json"), None)
    params = _load_experiment(experiment)
    tosses = sorted(((name, raw) for name, raw in items if name != "experiment.json"),
                    key=lambda x: int(TOSS_FILE.match(Path(x[0].split("!")[-1]).name).group(1)))
    if not tosses:
        raise CaptureError("no toss files (N.pt) found", file=src)
    report = ImportReport(out=Path(out))
    episodes = []
    for name, raw in tqdm(tosses, desc="contactnets", unit="toss", disable=not progress):
        toss_id = TOSS_FILE.match(Path(name.split("!")[-1]).name).group(1)
        try:
            ep = toss_to_episode(_read_tensor(raw, name), toss_id, params, file=name)
            validate_episode(ep, file=name)
        except CaptureError as e:
            report.skip(e, file=name, episode=toss_id)
            continue
        episodes.append(ep)
    meta = DatasetMeta(name="contactnets_cube", robot_type="none", angular_frame="body")
    return report.write(episodes, meta, overwrite=overwrite)
