"""One bayespass process at a time per run directory or samples file.

Two processes writing one run directory ran every program twice, and two generating into one samples file could
lose samples: one rewrites the file (a task cut short is dropped) while the other appends to the old one. The
second process is now refused at once, with the first one's pid. The lock is ``flock`` on a small file (``.lock``
in a run directory, ``.NAME.lock`` beside a samples file), so it ends with its process however that ends (Ctrl-C,
``kill -9``, a crash): no stale lock is ever left to remove by hand. Within one process it is re-entrant
(``run`` holds its directory and its execute stage takes it again).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["BusyError", "exclusive"]

_HELD: dict[str, int] = {}
_GUARD = threading.Lock()


class BusyError(ValueError):
    """Another process writes the run directory or samples file given."""


def check_target(path: Path, *, directory: bool, name: str, make: bool = True) -> None:
    """Raise a ValueError naming ``name`` where ``path`` (a run directory, else a file) cannot be written.

    A run directory that is a file, a file that is a directory, a directory that cannot be made, one in
    which no file can be made (read-only, no permission).  The directory is made if missing; with
    ``make=False`` nothing is made, and the nearest directory that exists is checked instead.
    """
    from .validate import check_writable_dir

    if directory and path.exists() and not path.is_dir():
        raise ValueError(f"{name}={str(path)!r} is a file; pass a run directory (it is created if missing)")
    if not directory and path.is_dir():
        raise ValueError(f"{name}={str(path)!r} is a directory; pass a file path (it is created if missing)")
    where = path if directory else path.parent
    if not make:
        while not where.exists() and where != where.parent:
            where = where.parent
    try:
        if make:
            where.mkdir(parents=True, exist_ok=True)
        if not where.is_dir():
            raise NotADirectoryError(20, "Not a directory")
    except OSError as err:
        raise ValueError(f"{name}={str(path)!r}: the directory {str(path if directory else path.parent)!r} "
                         f"cannot be made ({err.strerror})") from None
    check_writable_dir(where, name=name, value=path)


def _lock_file(path: Path, *, directory: bool, name: str) -> Path:
    check_target(path, directory=directory, name=name)
    return path / ".lock" if directory else path.parent / f".{path.name}.lock"


@contextlib.contextmanager
def exclusive(path: str | os.PathLike, *, name: str = "out", directory: bool = True) -> Iterator[None]:
    """Hold ``path`` (a run directory; with ``directory=False`` a file) for this process, else raise :class:`BusyError`.

    A run directory that is a file is a ValueError naming ``name``. Where the file system cannot lock (some
    network file systems) the work goes on unlocked.
    """
    path = Path(path)
    lock = _lock_file(path, directory=directory, name=name)
    key = os.path.realpath(lock)
    with _GUARD:
        if key in _HELD:
            _HELD[key] += 1
            reentered = True
        else:
            reentered = False
    if reentered:
        try:
            yield
        finally:
            with _GUARD:
                _HELD[key] -= 1
        return
    fd = _acquire(lock, path, name, "directory" if directory else "file")
    with _GUARD:
        _HELD[key] = 1
    try:
        yield
    finally:
        with _GUARD:
            del _HELD[key]
        if fd is not None:
            os.close(fd)  # releases the flock


def _acquire(lock: Path, path: Path, name: str, kind: str) -> int | None:
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:  # a directory this process may not write: what writes there says so
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 200).decode(errors="replace").strip() or "pid unknown"
        os.close(fd)
        raise BusyError(f"{name}={str(path)!r} is in use by another bayespass process ({holder}): two processes "
                        f"writing it would do the same work twice and race on its files; wait for that one to "
                        f"end (a run resumes from what it wrote), or give another {kind}") from None
    except OSError:  # no flock here (some network file systems): go on without it
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}".encode(), 0)
    return fd
