"""The toss files in a zip or tar archive: the upstream repository's, or any archive of one folder of ``N.pt``.

ContactNets' repository archive holds its tosses in ``data/tosses_processed`` and its parameters in
``data/params_processed/experiment.json``; dair_pll's holds each object's in ``assets/<object>``; a user's archive of
a toss folder holds them at its top or in one folder. So the tosses are the ``N.pt`` files of the archive's
``tosses_processed`` folders where it has any, else of the one folder that holds any; an archive with them in several
folders (dair_pll's: the cube's and the elbow's) is refused, naming them, since which object is meant is unknown.
The experiment file is the one beside the tosses, else the upstream ``params_processed`` one.
"""

from __future__ import annotations

import posixpath
import re
import tarfile
import zipfile
from pathlib import Path

from ..errors import CaptureError
from .toss_checks import EXPERIMENT

TOSS_FILE = re.compile(r"^(\d+)\.pt$")  # N.pt: N, the toss number, is its episode id
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
MAX_FOLDERS_NAMED = 6


def _toss_folders(names: list, src: Path) -> set:
    """The archive folders whose ``N.pt`` files are the tosses (``names``: every member's): every upstream
    ``tosses_processed`` (a toss in two of them is skipped as a toss seen twice), else the one folder holding any."""
    folders = sorted({posixpath.dirname(n) for n in names if TOSS_FILE.match(posixpath.basename(n))})
    upstream = {f for f in folders if posixpath.basename(f) == "tosses_processed"}
    if upstream or len(folders) <= 1:
        return upstream or set(folders)
    listed = ", ".join(repr(f or ".") for f in folders[:MAX_FOLDERS_NAMED])
    more = f" and {len(folders) - MAX_FOLDERS_NAMED} more" if len(folders) > MAX_FOLDERS_NAMED else ""
    raise CaptureError(f"holds N.pt toss files in {len(folders)} folders ({listed}{more}): which object's tosses "
                       "are meant is unknown; extract one folder and import it", file=src, field="archive")


def archive_members(src: Path):
    """Yield ("toss", name, bytes or CaptureError) for each toss file and ("experiment", name, bytes) for the
    experiment file of archive ``src`` (names as ``archive!member``), the archive read to its end first (a truncated
    one fails before any toss is used)."""
    if zipfile.is_zipfile(src):
        with zipfile.ZipFile(src) as z:
            yield from _picked(src, [(i.filename, lambda i=i: z.read(i), True) for i in z.infolist() if not i.is_dir()])
    elif tarfile.is_tarfile(src):
        with tarfile.open(src) as t:
            yield from _picked(src, [(m.name, lambda m=m: t.extractfile(m).read(), m.isfile())
                                     for m in t.getmembers() if not m.isdir()])
    elif src.name.lower().endswith(ARCHIVE_SUFFIXES):  # zipfile and tarfile say only "no": a truncated download
        raise CaptureError("unreadable archive, truncated or corrupt (not a readable zip or tar file); download it "
                           "again", file=src, field="archive")
    else:
        raise CaptureError("expected a folder of N.pt files, a .zip or .tar.gz archive of one (or of the upstream "
                           "repository), or a URL", file=src, field="src")


def _picked(src: Path, members: list):
    """``archive_members``' items of ``members`` [(name, read() -> bytes, a regular file)]."""
    folders = _toss_folders([n for n, _, _ in members], src)
    beside = {posixpath.join(f, EXPERIMENT) for f in folders}
    experiment = None
    for name, read, regular in members:
        base, where = posixpath.basename(name), f"{src}!{name}"
        if TOSS_FILE.match(base) and posixpath.dirname(name) in folders:
            yield "toss", where, (read() if regular else
                                  CaptureError("is not a regular file in the archive (a folder or a link)",
                                               file=where, field="file"))
        elif base == EXPERIMENT and regular and (name in beside or "params_processed" in name.split("/")):
            if experiment is None or name in beside:
                experiment = (where, read)
    if experiment is not None:
        yield "experiment", experiment[0], experiment[1]()
