"""Importer for the real ContactNets cube tosses (Pfrommer, Halm, Posa, CoRL 2020).

Upstream: the DAIR Lab ContactNets repository (BSD-3-Clause), folder
``data/tosses_processed`` (files ``N.pt``) and ``data/params_processed/experiment.json``.
Each file is a float64 tensor [1, T, 19]: position (3), quaternion w,x,y,z (4), linear
velocity (3), body-frame angular velocity (3), control (6, zero). Lengths and linear
velocities are in cube half-widths; the cube is 0.1048 m wide, so x 0.0524 gives metres.
dt = 1/148 s. Poses are AprilTag tracks (3-sample median filter): real measurements.

``SRC`` may be that folder (with or without experiment.json beside the tosses), the
upstream repository archive (.zip / .tar.gz) or an http(s) URL of that archive.

The DAIR Lab's dair_pll repository holds copies of these tosses in its own layout (``assets/contactnets_cube`` on its
``main`` branch): [T, 13] in Drake's state order and metres (``dair_urdf.columns(0)``). A file of that shape is read
as the same cube, converted to the layout above, so that either copy imports to one object.

Bad toss files (unreadable, a folder or a broken link named ``N.pt``, a toss that appears
twice, wrong shape, non-finite values...) are skipped and reported with file, field and
reason, and so is a toss whose own velocities imply another time step (another rate); a bad
``experiment.json`` (a value that is not a positive finite number, a ``dt`` the tosses' own
velocities contradict, a ``g`` their free flight contradicts: ``toss_checks``) or an unreadable
archive stops the import with a CaptureError naming the file and field, since every episode
would be wrong.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import pickle
import re
import shutil
import tarfile
import tempfile
import urllib.request
import warnings
import zipfile
import zlib
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from ..capture import DatasetMeta, Environment, Episode, ObjectSpec, Provenance, validate_episode
from ..errors import CaptureError, ConfigError
from .report import ImportReport, skipped_lines
from .toss_archive import TOSS_FILE, archive_members
from .toss_checks import EXPERIMENT, check_dt, check_gravity, check_toss_dt, check_toss_frames, check_toss_gravity

UPSTREAM = "https://github.com/DAIRLab/contact-nets"
UPSTREAM_COMMIT = "c3dc21c"
HALF_WIDTH_M = 0.0524  # cube half-width: lengths in the files are in these units
CUBE_WIDTH_M = 0.1048
# The authors' values (their experiment.json), used for what a source leaves out: a folder of tosses copied without
# that file, or dair_pll's copies, is the same cube (inertia in kg * half-width^2: 8.1e-4 kg m^2, not a solid cube's)
DEFAULTS = {"dt": 1.0 / 148.0, "mass": 0.37, "mu": 0.18, "restitution": 0.125, "g": 9.81 / HALF_WIDTH_M,
            "inertia": 0.2950002913583124}
N_COLUMNS = 19
# what an import writes from the same files: part of the suites' cache key (``bench.toss_data.cache_entry``), so that
# a cached import made before a change of the importers is made again (2: dair_pll's cube layout, the authors'
# inertia by default, the step check that read three 148 Hz elbow tosses as 165 Hz ones; 3: the checks per frame and of
# a toss's fall, 01.pt read as toss 1)
IMPORT_VERSION = 3
DAIR_COLUMNS = 13  # dair_pll's copy of a cube toss: [T, 13] (``dair_cube``)
DAIR_UPSTREAM = "https://github.com/DAIRLab/dair_pll (main, assets/contactnets_cube)"
TORCH_SUFFIXES = (".pt", ".pth")  # a folder's torch files that are not N.pt are named among the skipped inputs
# experiment.json keys -> (allowed range, what the value is); None values keep the default.
PARAM_RANGES = {"dt": ((1e-5, 1.0), "time step, s"), "mass": ((1e-4, 1e3), "kg"), "mu": ((0.0, 10.0), "friction coefficient"),
                "restitution": ((0.0, 1.0), "restitution coefficient"), "g": ((1e-6, 1e6), "gravity, half-widths/s^2"),
                "inertia": ((1e-9, 1e6), "kg * half-width^2")}
ARCHIVE_ERRORS = (EOFError, OSError, tarfile.TarError, zipfile.BadZipFile, zlib.error, RuntimeError)


class ExperimentFile:
    """``experiment.json``: where it was found and its bytes."""

    def __init__(self, name: str, raw: bytes):
        self.name, self.raw = name, raw


class NotAToss:
    """A torch file in a toss folder that is not read as a toss (``reason``): reported among the skipped inputs."""

    def __init__(self, name: str, reason: str):
        self.name, self.reason = name, reason


def split_sources(items, report: ImportReport) -> tuple[list, ExperimentFile | None]:
    """(the toss files sorted by toss number, the experiment file or None) of ``_sources``' items; the torch files
    that are not read as tosses reported as skipped, each with its reason."""
    for x in items:
        if isinstance(x, NotAToss):
            report.skip(CaptureError(x.reason, file=x.name, field="file"))
    tosses = [x for x in items if not isinstance(x, (ExperimentFile, NotAToss))]
    return (sorted(tosses, key=lambda x: (int(_toss_id(x[0])), x[0])),
            next((x for x in items if isinstance(x, ExperimentFile)), None))


def _read_tensor(raw: bytes, name: str, columns: int | None = None) -> np.ndarray:
    """The toss of a cube's file ([1, T, 19], or dair_pll's copy [T, 13]; ``columns`` None) or of a URDF object's
    ([T, columns]) as [T, n]."""
    try:
        with warnings.catch_warnings():  # torch's note on an old pickle protocol: the file is read, or refused below
            warnings.simplefilter("ignore", UserWarning)
            t = torch.load(io.BytesIO(raw), weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as e:  # weights_only refused an object: nothing in the file was run
        found = re.search(r"GLOBAL (\S+)", str(e))  # the object torch refused, where it names one
        raise CaptureError(f"holds pickled Python objects ({found[1]}), not only tensors: refused unread" if found
                           else "not a readable torch tensor file (corrupt, or pickled objects other than tensors: "
                           "refused unread)", file=name, field="tensor") from None
    except Exception as e:  # truncated or corrupt zip/pickle, or a non-tensor object
        raise CaptureError(f"not a readable torch tensor file ({type(e).__name__}: {str(e)[:120]})", file=name, field="tensor") from None
    if not isinstance(t, torch.Tensor):
        raise CaptureError(f"holds a {type(t).__name__}, expected a tensor", file=name, field="tensor")
    if not t.is_floating_point():  # whole numbers are no poses: an int tensor read as one gave "quaternion norm 0"
        raise CaptureError(f"dtype {str(t.dtype).removeprefix('torch.')}, expected floating point", file=name,
                           field="tensor")
    a = t.detach().to(torch.float64).numpy()
    batched = a.ndim == 3 and a.shape[0] == 1
    if batched:
        a = a[0]
    # the cube's files are [1, T, 19]: a [T, 19] without the batch dimension is no file of theirs
    cube, columns = columns is None, columns or N_COLUMNS
    if cube and not batched and a.ndim == 2 and a.shape[1] == DAIR_COLUMNS:
        return a
    if a.ndim != 2 or a.shape[1] != columns or (cube and not batched):
        want = (f"[1, T, {columns}] (or dair_pll's copy, [T, {DAIR_COLUMNS}])" if cube else f"[T, {columns}]")
        joints = a.shape[-1] - DAIR_COLUMNS
        hint = (f": a toss of an object with {joints // 2} joint(s) in dair_pll's [T, 13 + 2J] layout? pass its URDF "
                "(--urdf)" if cube and a.ndim == 2 and a.shape[1] != N_COLUMNS and joints > 0 and joints % 2 == 0
                else "")
        raise CaptureError(f"shape {list(t.shape)}, expected {want}{hint}", file=name, field="tensor")
    return a


def _read_member(path: Path) -> bytes | CaptureError:
    """The bytes of toss file ``path``, or the CaptureError that says why it cannot be read."""
    try:
        if path.is_dir():
            return CaptureError("is a folder, not a toss file", file=path, field="file")
        return path.read_bytes()
    except OSError as e:  # a dangling link, a symlink loop, no permission
        what = "a dangling or looping symlink" if path.is_symlink() else "unreadable"
        return CaptureError(f"{what} ({e.strerror or type(e).__name__})", file=path, field="file")


def _sources(src: str | Path):
    """Yield (name, bytes or CaptureError) for every toss file and an ExperimentFile if present.

    An archive that cannot be read to its end (truncated, corrupt) raises a CaptureError
    naming it: what it would have held is unknown, so nothing is imported from it."""
    src_s = str(src)
    if src_s.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(src_s, timeout=60) as r:
                data = r.read()
        except OSError as e:
            raise CaptureError(f"cannot download ({e}); download the archive elsewhere and pass its path", file=src_s) from None
        tmp_dir = Path(tempfile.mkdtemp(prefix="contactnets-download-"))
        tmp = tmp_dir / ("upstream.zip" if src_s.endswith(".zip") else "upstream.tar.gz")
        try:
            tmp.write_bytes(data)
            yield from _sources(tmp)
        finally:  # the downloaded archive is this import's own temporary file: never left behind
            shutil.rmtree(tmp_dir, ignore_errors=True)
        return
    src = Path(src)
    if src.is_dir():
        folder = src / "data" / "tosses_processed" if (src / "data" / "tosses_processed").is_dir() else src
        for p in sorted(folder.iterdir()):
            if TOSS_FILE.match(p.name):
                yield str(p), _read_member(p)
            elif p.suffix in TORCH_SUFFIXES and p.is_file():
                yield NotAToss(str(p), "not named N.pt (N, the toss number, is its episode id): not read")
        for p in sorted(q for q in folder.rglob("*") if q.parent != folder and q.suffix in TORCH_SUFFIXES):
            yield NotAToss(str(p), "in a subfolder: a toss folder is read flat (import the subfolder itself)")
        for cand in (folder / EXPERIMENT, src / "data" / "params_processed" / EXPERIMENT):
            if cand.is_file():
                try:
                    yield ExperimentFile(str(cand), cand.read_bytes())
                except OSError as e:
                    raise CaptureError(f"unreadable ({e.strerror or e})", file=cand) from None
                break
        return
    if not src.exists():
        raise CaptureError("no such file or folder", file=src)
    try:
        for kind, name, raw in archive_members(src):
            yield ExperimentFile(name, raw) if kind == "experiment" else (name, raw)
    except ARCHIVE_ERRORS as e:
        raise CaptureError(f"unreadable archive, truncated or corrupt ({type(e).__name__}: {str(e)[:120]}); "
                           "download it again", file=src, field="archive") from None


def source_fingerprint(src) -> str:
    """A hash of what ``import_contactnets`` reads at ``src``: the toss files' names and bytes and the experiment file
    (a URL: the URL itself, not downloaded twice). Two sources of the same folder name but other tosses differ."""
    h = hashlib.sha256()
    if str(src).startswith(("http://", "https://")):
        h.update(str(src).encode())
        return h.hexdigest()
    for item in _sources(src):
        if isinstance(item, NotAToss):  # not read, so not part of what was imported
            continue
        name, raw = (item.name, item.raw) if isinstance(item, ExperimentFile) else item
        h.update(Path(name).name.encode() + b"\0")
        h.update(raw if isinstance(raw, bytes) else repr(raw).encode())
    return h.hexdigest()


def _check_param(key: str, value, file: str):
    """``value`` as a float inside its range; CaptureError naming ``file`` and ``key`` otherwise."""
    (lo, hi), what = PARAM_RANGES[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise CaptureError(f"must be a finite number ({what}), got {value!r}", file=file, field=key)
    if not lo <= value <= hi:
        raise CaptureError(f"must be in [{lo:g}, {hi:g}] ({what}), got {value!r}", file=file, field=key)
    return float(value)


def _load_experiment(exp: ExperimentFile | None) -> dict:
    """The defaults updated with ``experiment.json``'s known keys, each checked (stops the import if bad)."""
    params = dict(DEFAULTS)
    if exp is None:
        return params
    try:
        data = json.loads(exp.raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CaptureError(f"corrupt JSON ({e})", file=exp.name) from None
    if not isinstance(data, dict):
        raise CaptureError(f"must hold a JSON object of parameters, got a {type(data).__name__}", file=exp.name)
    for key in DEFAULTS:
        if key in data and not (key == "inertia" and data[key] is None):
            params[key] = _check_param(key, data[key], exp.name)
    params["file"] = exp.name
    params["given"] = sorted(k for k in DEFAULTS if data.get(k) is not None)  # checked against the tosses
    return params


def cube_object(params: dict) -> ObjectSpec:
    """The tossed cube as a user would describe it (the authors' nominal values)."""
    m = float(params["mass"])
    i = float(params["inertia"])  # experiment.json's unit: kg * half-width^2
    if "inertia" not in params.get("given", ()):  # the authors' radius of gyration at the mass given
        i *= m / DEFAULTS["mass"]
    i *= HALF_WIDTH_M**2
    return ObjectSpec(
        name="contactnets_cube", mass=m, inertia=(np.eye(3) * i).tolist(), size=CUBE_WIDTH_M,
        geometry={"kind": "box", "half_extents": [HALF_WIDTH_M] * 3}, friction=float(params["mu"]),
    )


def toss_to_episode(a: np.ndarray, toss_id: str, params: dict, *, file: str, dair: bool = False) -> Episode:
    """Convert one toss [T, 19] (cube half-width units) to an SI Episode; ``dair``: the file was dair_pll's copy."""
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
            notes=(f"{DAIR_UPSTREAM}, {toss_id}.pt, a copy of a toss of {UPSTREAM} in dair_pll's layout" if dair
                   else f"{UPSTREAM} @ {UPSTREAM_COMMIT}, data/tosses_processed/{toss_id}.pt")
            + "; AprilTag tracking, 3-sample median filter; velocities are backward differences of tracked poses",
        ),
        task="toss",
    )


def _toss_id(name: str) -> str:
    """The upstream toss number of ``name`` (a path, or ``archive!member``), without leading zeros: ``01.pt`` and
    ``1.pt`` are one toss, and the second file of it is skipped."""
    return str(int(TOSS_FILE.match(Path(name.split("!")[-1]).name).group(1)))


def _read_tosses(tosses, report: ImportReport, *, progress: bool, columns: int | None = None) -> list:
    """[(name, toss id, [T, 19] array)] of the readable tosses (``columns``: a URDF object's width, None for the
    cube's files); the rest are skipped and reported, as is a second file of a toss id already seen (the first one is
    kept)."""
    seen, out = {}, []
    for name, raw in tqdm(tosses, desc="contactnets", unit="toss", disable=not progress):
        toss_id = _toss_id(name)
        try:
            if toss_id in seen:
                raise CaptureError(f"toss {toss_id} appears twice; kept {seen[toss_id]}", file=name, episode=toss_id, field="file")
            if isinstance(raw, CaptureError):
                raise raw
            a = _read_tensor(raw, name, columns)
        except CaptureError as e:
            report.skip(e, file=name, episode=toss_id)
            continue
        seen[toss_id] = name
        out.append((name, toss_id, a))
    return out


def import_contactnets(src, out, *, overwrite: bool = False, progress: bool = True, urdf=None,
                       rate_hz: float | None = None) -> ImportReport:
    """Convert ContactNets tosses at ``src`` into a capture dataset at ``out``.

    Upstream toss numbers are kept as episode ids; bad files are skipped and reported
    (and listed under ``skipped`` in meta/contact.json). Returns the ImportReport.
    ``urdf``: the tosses are of that URDF object in the DAIR Lab's dair_pll layout (``dair_urdf``), not the cube,
    recorded at ``rate_hz`` (None: the DAIR Lab's 148 Hz; the cube's rate is its experiment file's).
    """
    from .dair_cube import dair_cube_warnings, to_cube_layout  # (it imports this module's constants)

    if urdf is not None:
        from .dair_urdf import RATE_HZ, import_urdf_tosses

        return import_urdf_tosses(src, out, urdf, overwrite=overwrite, progress=progress,
                                  rate_hz=RATE_HZ if rate_hz is None else rate_hz)
    if rate_hz is not None:
        raise ConfigError("is for tosses of a URDF object (--urdf); the cube's rate is its experiment file's dt",
                          key="rate_hz")
    report = ImportReport(out=Path(out))
    report.check_output(overwrite=overwrite)
    tosses, experiment = split_sources(list(_sources(src)), report)
    params = _load_experiment(experiment)
    if not tosses:
        raise CaptureError("\n".join(["no toss files (N.pt) found"] + skipped_lines(report.skipped)), file=src)
    arrays, dair = to_cube_layout(_read_tosses(tosses, report, progress=progress), report)
    try:
        check_dt(params, [a for _, _, a in arrays])
    except CaptureError as e:
        if experiment is not None:
            raise
        # no experiment file: the authors' step is the default, and the way out is to give the tosses' own
        raise CaptureError(f"{e.reason}; there is no {EXPERIMENT} beside the tosses, so the authors' 1/148 s was "
                           f"assumed: put one there with the tosses' \"dt\" (s)", file=src, field="dt") from None
    if "g" in params.get("given", ()):
        check_gravity(params, [a for _, _, a in arrays], unit=("half-widths/s^2", HALF_WIDTH_M))
    episodes = []
    for name, toss_id, a in arrays:
        try:
            ep = toss_to_episode(a, toss_id, params, file=name, dair=toss_id in dair)
            validate_episode(ep, file=name)
            check_toss_dt(a, float(params["dt"]), file=name, episode=toss_id)
            check_toss_frames(a, float(params["dt"]), file=name, episode=toss_id, metres=HALF_WIDTH_M)
            check_toss_gravity(ep, file=name)
        except CaptureError as e:
            report.skip(e, file=name, episode=toss_id)
            continue
        episodes.append(ep)
    if dair:
        report.warnings += dair_cube_warnings(episodes, dair)
    meta = DatasetMeta(name="contactnets_cube", robot_type="none", angular_frame="body")
    return report.write(episodes, meta, overwrite=overwrite)
