"""Atomic outputs: a crash never leaves a half-written file or dataset that looks complete.

Files are written to a temporary sibling and renamed into place (rename is atomic
on POSIX within one filesystem). Directories are built under a temporary sibling
and swapped in with renames, so readers see either the old tree or the new one.

Outputs get the user's umask (temporary files and folders are created 0600/0700 and
widened before they are published). A hidden ``.partial`` folder left by a crash holds
a marker file naming the process that made it; the next write of the same output
removes it once that process is gone (folders without the marker are not ours and are
left alone). ``pid_lock`` keeps a second concurrent writer away from an output.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import math
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from .errors import ConfigError, ForeignOutputError, LockedError

PARTIAL_MARKER = ".contact-surrogate-partial"  # inside our temporary trees: the PID that builds it


def current_umask() -> int:
    """The process's umask: from ``/proc/self/status`` where Linux reports it (no change to the
    process state, so safe with threads), else by setting and restoring it."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _widen(path: Path, *, directory: bool) -> None:
    """Give ``path`` the mode a plain ``open``/``mkdir`` would have (0666/0777 minus the umask)."""
    os.chmod(path, (0o777 if directory else 0o666) & ~current_umask())


def pid_alive(pid: int) -> bool:
    """Whether a process with this PID exists (zombies count as gone)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


@contextlib.contextmanager
def atomic_file(path: str | Path):
    """Yield a temporary path beside ``path`` (same suffix, so writers that go by the extension
    work) for a library to write; on success it is given the user's umask and renamed to ``path``,
    on an exception removed (``path`` untouched)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        _widen(Path(tmp), directory=False)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file + fsync + rename, with the user's umask)."""
    with atomic_file(path) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(path: str | Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def strict_json(obj):
    """``obj`` with every non-finite float (NaN, inf) replaced by ``None``: JSON has no NaN, and a file holding the
    bare ``NaN`` that Python's ``json`` writes by default is refused by strict parsers (JavaScript, jq, Rust)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: strict_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict_json(v) for v in obj]
    return obj


def write_json_atomic(path: str | Path, obj) -> None:
    """Write ``obj`` as strict JSON (non-finite numbers as ``null``: ``strict_json``), atomically."""
    write_text_atomic(path, json.dumps(strict_json(obj), indent=2, sort_keys=False, allow_nan=False) + "\n")


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def clean_stale_partials(path: str | Path) -> list:
    """Remove hidden ``.<name>.*.partial`` siblings of ``path`` that this project made
    (they hold ``PARTIAL_MARKER``) and whose builder process is gone. Returns the removed paths."""
    path = Path(path)
    removed = []
    if not path.parent.is_dir():
        return removed
    for cand in path.parent.glob(f".{path.name}.*.partial"):
        marker = cand / PARTIAL_MARKER
        if not cand.is_dir() or cand.is_symlink():
            continue
        # the builder's PID: in the marker, else in the name (a kill between the folder's creation and the marker's
        # write, or between the swap and the marker's rewrite, leaves only the name: ``.<name>.<pid>.<random>.partial``)
        pid = (_read_pid(marker) if marker.is_file() else None) or _pid_in_name(cand.name, path.name)  # or half-written
        if pid is None:
            continue  # not a folder this project made
        if pid is not None and pid != os.getpid() and pid_alive(pid):
            continue  # another process is building it right now
        shutil.rmtree(cand, ignore_errors=True)
        removed.append(cand)
    return removed



def _pid_in_name(folder: str, name: str) -> int | None:
    """The PID in a temporary folder name ``.<name>.<pid>.<random>.partial`` (``atomic_directory``), else None."""
    middle = folder[len(name) + 2 : -len(".partial")].split(".")
    return int(middle[0]) if len(middle) == 2 and middle[0].isdigit() else None


def _lock_pid(lock: Path) -> int | None:
    """The PID in ``lock`` if it is one of ours (a plain file whose whole text is a PID and a newline), else None. An
    empty file is read again for up to a second: a writer without hard links (``_create_lock``) writes its PID next."""
    text = ""
    for _ in range(20):
        if lock.is_symlink() or not lock.is_file():
            return None
        with contextlib.suppress(OSError, UnicodeDecodeError):
            text = lock.read_text()
        if text:
            break
        time.sleep(0.05)
    return int(text) if re.fullmatch(r"[0-9]+\n?", text) else None


def _create_lock(lock: Path) -> bool:
    """Create ``lock`` holding this PID; False where it exists. The PID is written to ``.<lock>.<pid>.tmp`` and
    hard-linked into place, so that a kill at any point leaves no empty lock (which ``pid_lock`` would refuse as no lock
    of ours); such temporary files of dead processes are removed. Where the file system has no hard links the lock is
    created, then written."""
    for old in lock.parent.glob(f".{lock.name}.*.tmp"):
        pid = old.name[len(lock.name) + 2 : -len(".tmp")]
        if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
            old.unlink(missing_ok=True)
    tmp = lock.parent / f".{lock.name}.{os.getpid()}.tmp"
    tmp.write_text(f"{os.getpid()}\n")
    try:
        os.link(tmp, lock)
        return True
    except FileExistsError:
        return False
    except OSError:  # no hard links here
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            f.write(f"{os.getpid()}\n")
        return True
    finally:
        tmp.unlink(missing_ok=True)


TAKEOVER_WAIT_S = 2.0  # a takeover holds the stale lock's flock for a stat, a read and a rename: milliseconds


def _take_over(lock: Path, stale: int, target) -> bool:
    """Replace ``lock``, left by the dead process ``stale``, with this process's lock (written whole beside it and
    renamed over it, so that the lock is never absent nor half written); False where it is no longer that stale lock
    (released, or taken over by another process first: the caller looks again).

    Removing a stale lock and creating one's own are two steps: two processes that both found it stale had both
    removed it (the second removing the first's new lock) and both written. Here a taker holds an flock on the stale
    file while it checks that the path still leads to that very file and replaces it; a second taker, let in after,
    finds the path leading elsewhere. The kernel drops an flock when its holder dies, so a taker killed while it
    holds one blocks no later taker (as a lock file of its own would, once stale).
    """
    fd = None
    for mode in (os.O_RDWR, os.O_RDONLY):  # O_RDWR first: NFS grants an exclusive flock only to a writer
        try:
            fd = os.open(lock, mode | os.O_NOFOLLOW)
            break
        except PermissionError:
            continue
        except OSError:  # gone, or no longer a plain file
            return False
    if fd is None:
        return False
    try:
        if not _flock(fd, lock, stale, target):
            return False
        held = os.fstat(fd)
        try:
            now = os.stat(lock, follow_symlinks=False)
        except FileNotFoundError:
            return False
        text = os.pread(fd, 64, 0)
        if (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino) or not re.fullmatch(rb"%d\n?" % stale, text):
            return False  # replaced (or rewritten) since it was found stale
        tmp = lock.parent / f".{lock.name}.{os.getpid()}.tmp"  # removed by _create_lock if this process dies here
        tmp.write_text(f"{os.getpid()}\n")
        os.replace(tmp, lock)
        return True
    finally:
        os.close(fd)  # drops the flock


def _flock(fd: int, lock: Path, stale: int, target) -> bool:
    """Take the flock of the stale ``lock`` (open as ``fd``) to replace it; False where another taker held it past
    TAKEOVER_WAIT_S. A file system without file locks is refused: the takeover could not be made safe there."""
    deadline = time.monotonic() + TAKEOVER_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        except OSError as e:
            raise LockedError(f"its process (PID {stale}) is gone, but this file system has no file locks "
                              f"({e.strerror}) to take it over safely; if no run is writing {target}, delete it",
                              file=lock) from None


@contextlib.contextmanager
def pid_lock(target: str | Path):
    """Hold ``<target>.lock`` (holding this PID) while writing ``target``.

    A lock whose process still lives is refused with a LockedError naming that PID; one
    left by a dead process is taken over (``_take_over``: of several processes that find it stale at once, exactly one
    takes it, the others are refused naming that one's PID). A file of that name that is not such a lock (no PID in
    it: a user's file) is never touched: refused with a ForeignOutputError naming it.
    """
    lock = Path(f"{target}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(3):
        if _create_lock(lock):
            break
        pid = _lock_pid(lock)
        if pid is None and (lock.exists() or lock.is_symlink()):
            raise ForeignOutputError(f"is not a lock of contact-surrogate (it holds no PID) and is left alone; move "
                                     f"or delete it to write {target}", file=lock)
        if pid is not None and pid_alive(pid):
            raise LockedError(f"another run (PID {pid}) is writing {target}; wait for it to finish, "
                              f"or stop it (if that PID is not a surrogate run, delete {lock})", file=lock)
        if pid is not None and _take_over(lock, pid, target):  # stale: its process is gone
            break
        # else it was released, or another process took it over first: look again
    else:
        raise LockedError(f"cannot take the lock for {target}", file=lock)
    try:
        yield lock
    finally:
        if _read_pid(lock) == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()


def exchange(a: str | Path, b: str | Path) -> bool:
    """Swap the paths ``a`` and ``b`` in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``); False where the
    system or the filesystem cannot (the caller then renames twice), an OSError on any other failure."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(str(a)), at_fdcwd, os.fsencode(str(b)), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


@contextlib.contextmanager
def atomic_directory(path: str | Path, *, overwrite: bool = False, replaceable=None):
    """Build a directory under a temporary name; move it to ``path`` only on success.

    Yields the temporary directory to fill. On an exception the temporary tree is
    removed and ``path`` is untouched. With ``overwrite`` an existing ``path`` is
    replaced (old tree moved aside first, deleted after the new one is in place), if
    ``replaceable(path)`` (when given) allows it: it raises a SurrogateError naming why
    not. Stale temporary trees of earlier crashed writes of ``path`` are removed first.
    """
    path = Path(path)
    if path.exists() or path.is_symlink():
        if not overwrite:
            raise FileExistsError(f"{path}: already exists (pass overwrite=True / --overwrite to replace it)")
        if replaceable is not None:
            replaceable(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_partials(path)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".partial", dir=path.parent))
    marker = tmp / PARTIAL_MARKER
    try:
        marker.write_text(f"{os.getpid()}\n")
        yield tmp
        marker.unlink()
        _widen(tmp, directory=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if path.is_dir() and not path.is_symlink() and exchange(tmp, path):
        # one atomic step: readers (and a kill -9) see the old tree or the new one, never neither; the old
        # tree, now under the temporary name, gets the marker so that a crash before its removal is cleaned up
        with contextlib.suppress(OSError):
            (tmp / PARTIAL_MARKER).write_text(f"{os.getpid()}\n")
        shutil.rmtree(tmp, ignore_errors=True)
        return
    old = None
    if path.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
        os.rmdir(old)
        os.replace(path, old)
    os.replace(tmp, path)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def claim_output(out: str | Path, *, marker: str, command: str, earlier: tuple[str, ...] = ()) -> Path:
    """Make the folder ``out`` one of ``command``'s, which replaces its own files there: refused, before any work and
    with nothing touched, where it holds anything that no earlier run of the command wrote (no ``marker`` file and
    none of ``earlier``, what such a run wrote before markers existed). Returns ``out`` as a ``Path``."""
    out = Path(out)
    if out.is_dir() and any(out.iterdir()) and not any((out / n).exists() for n in (marker, *earlier)):
        raise ConfigError(f"is not empty and no earlier `{command}` wrote it (no {marker}): its outputs would replace "
                          "files there; give --out a new or empty folder, or one of its own", file=out, key="--out")
    if out.exists() and not out.is_dir():
        raise ConfigError("is a file, not a folder: give --out a folder", file=out, key="--out")
    out.mkdir(parents=True, exist_ok=True)
    (out / marker).write_text(f"written by `{command}`: a later run replaces its outputs here\n")
    return out
