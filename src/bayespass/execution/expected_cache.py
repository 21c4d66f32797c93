"""The on-disk cache of a suite's ground truth, read lazily: a small index and a file of values.

A suite's expected values can be far larger than its inputs: two HumanEval+ tasks (130 and 15) return
values whose tagged JSON is 360 MB of the 390 MB of the whole suite.  Parsing them all on every
``load_suite`` took 10-20 s and held 2.4 GB in the evaluator, for any run, also one of five tasks.

The cache is therefore two files in :func:`~bayespass.data.suites.cache_dir` (mode 0600):

* ``<stem>.json``, the index: per task its inputs, times, ``n_base``, dropped tests, the number of
  values and where its values lie in the values file; and the values file's name;
* ``<stem>.<token>.values``, each task's list of tagged values as one JSON block, back to back.

A task's values are read and parsed on first use (:class:`LazyValues`); ``len()`` costs nothing.  Each
writer gives its values file a new name, so a reader that has opened the values file named by its index
reads what that index describes even while another process rewrites the cache; stale values files are
removed by the writer (an open file stays readable after it is unlinked).
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = ["LazyValues", "read_cache", "write_cache"]


class _ValuesFile:
    """An open values file, read by offset (``os.pread``: no shared file position between threads)."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        self.size = os.fstat(self.fd).st_size

    def read(self, offset: int, size: int) -> bytes:
        """Return ``size`` bytes at ``offset`` (the whole block or an error)."""
        chunks, got = [], 0
        while got < size:
            chunk = os.pread(self.fd, size - got, offset + got)
            if not chunk:
                raise OSError(f"expected-value cache truncated: {size} bytes at {offset} asked, {got} read")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def __del__(self) -> None:
        try:
            os.close(self.fd)
        except (OSError, AttributeError):
            pass


class LazyValues(Sequence):
    """A task's expected tagged values, read from the cache's values file on first use.

    ``len()`` needs no read; indexing or iterating parses the task's block once (thread-safe).
    Pickled (a Dask batch's task data) as the plain list.
    """

    def __init__(self, store: _ValuesFile, offset: int, size: int, n: int) -> None:
        self._store, self._offset, self._size, self._n = store, offset, size, n
        self._values: list | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether the values have been read."""
        return self._values is not None

    def _load(self) -> list:
        if self._values is None:
            with self._lock:
                if self._values is None:
                    values = json.loads(self._store.read(self._offset, self._size))
                    if not isinstance(values, list) or len(values) != self._n:
                        raise OSError(f"expected-value cache damaged: {self._n} values expected at {self._offset}")
                    self._values = values
        return self._values

    def raw(self) -> bytes:
        """Return the task's block of the values file as it is (JSON text), without parsing it."""
        return self._store.read(self._offset, self._size)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):  # noqa: ANN001, ANN204 - the list's own signature
        return self._load()[i]

    def __iter__(self) -> Iterator:
        return iter(self._load())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyValues | list):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # mutable, like the list it stands for

    def __reduce__(self) -> tuple:
        return (list, (self._load(),))

    def __repr__(self) -> str:
        return f"LazyValues({self._n} values, {'read' if self.loaded else 'not read yet'})"


def write_cache(path: Path, expected: dict, speed_ref: float) -> None:
    """Write ``expected`` (task -> dict with ``values``) and ``speed_ref`` as an index and a values file."""
    token = uuid.uuid4().hex[:12]
    values_path = path.with_name(f"{path.stem}.{token}.values")
    tmp, itmp = values_path.with_name(values_path.name + ".tmp"), path.with_name(f"{path.name}.{token}.tmp")
    try:
        _write(path, expected, speed_ref, values_path, tmp, itmp)
    except BaseException:  # a full disk, Ctrl-C: none of this writer's files is left (the previous cache stays)
        for f in (tmp, itmp, values_path):
            f.unlink(missing_ok=True)
        raise
    for stale in path.parent.glob(f"{path.stem}.*.values"):
        if stale != values_path:
            stale.unlink(missing_ok=True)


def _write(path: Path, expected: dict, speed_ref: float, values_path: Path, tmp: Path, itmp: Path) -> None:
    index, offset = {}, 0
    with open(tmp, "wb") as fh:
        os.chmod(tmp, 0o600)
        for tid, entry in expected.items():
            values = entry["values"]  # a task read from an earlier cache is copied, not parsed again
            blob = values.raw() if isinstance(values, LazyValues) else json.dumps(list(values)).encode()
            fh.write(blob)
            index[tid] = {k: v for k, v in entry.items() if k != "values"} | {
                "values_at": [offset, len(blob)], "n_values": len(entry["values"])}
            offset += len(blob)
    tmp.replace(values_path)
    itmp.write_text(json.dumps({"tasks": index, "speed_ref": speed_ref, "values_file": values_path.name,
                                "values_bytes": offset}))
    os.chmod(itmp, 0o600)
    itmp.replace(path)


def read_cache(path: Path) -> tuple[dict, float] | None:
    """Return ``(expected, speed_ref)`` from the cache at ``path`` (values not read yet), or None if absent.

    A damaged index (an interrupted copy, another version) counts as absent: the caller computes again.
    """
    for _ in range(3):  # a writer may replace the index and remove its values file between our two opens
        try:
            index = json.loads(path.read_text())
            values_name = index["values_file"]
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            return None
        try:
            store = _ValuesFile(path.with_name(values_name))
        except FileNotFoundError:
            continue  # read the index that replaced this one
        if store.size != index["values_bytes"]:
            return None
        expected = {}
        for tid, entry in index["tasks"].items():
            (offset, size), n = entry.pop("values_at"), entry.pop("n_values")
            expected[tid] = entry | {"values": LazyValues(store, offset, size, n)}
        return expected, index["speed_ref"]
    return None
