"""Crash-safe verdict store (SQLite in WAL mode), one row per executed program.

Rows are keyed by (task, code hash, test-set hash, harness version) and
committed the moment a program's tests are judged; the samples table maps
(config, task, sample) to code hashes.  Re-running skips stored programs, so
SIGINT or ``kill -9`` of the supervisor loses only what was in flight.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import warnings
from pathlib import Path

import numpy as np

__all__ = ["VerdictStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    task TEXT, code_hash TEXT, testset TEXT, harness TEXT,
    verdicts BLOB, digests BLOB, durations BLOB, flags BLOB,
    PRIMARY KEY (task, code_hash, testset, harness));
CREATE TABLE IF NOT EXISTS samples (
    config TEXT, task TEXT, sample INTEGER, code_hash TEXT, extra TEXT,
    PRIMARY KEY (config, task, sample));
CREATE TABLE IF NOT EXISTS twins (
    task TEXT, testset TEXT, harness TEXT, bkey TEXT, code_hash TEXT,
    PRIMARY KEY (task, testset, harness, bkey));
"""


class VerdictStore:
    """Append-only store of per-program verdicts in ``RUNDIR/verdicts.sqlite``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._open()
        except sqlite3.DatabaseError as err:
            if isinstance(err, sqlite3.OperationalError):  # locked, a full disk: the machine's state, not the file's
                raise
            self._set_aside(err)
            self._open()
        cols = {row[1] for row in self._db.execute("PRAGMA table_info(results)")}
        if "flags" not in cols:  # a store written before harness 7
            self._db.execute("ALTER TABLE results ADD COLUMN flags BLOB")

    def _open(self) -> None:
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        except BaseException:
            self._db.close()
            raise

    def _set_aside(self, err: Exception) -> None:
        """Move a store SQLite cannot read (a truncated copy, a damaged disk) to ``NAME.damaged``, and say so.

        Its programs are run again; the file is kept, not deleted, for whoever wants to look into it.
        """
        aside = self.path.with_name(self.path.name + ".damaged")
        os.replace(self.path, aside)
        for suffix in ("-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        warnings.warn(f"the verdict store {str(self.path)!r} is damaged ({err}); moved to {aside.name}, its programs "
                      "are run again", UserWarning, stacklevel=3)

    @contextlib.contextmanager
    def _transaction(self):
        self._db.execute("BEGIN")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def add_samples(self, rows) -> None:
        """Record (config, task, sample, code_hash, extra-json) rows (idempotent)."""
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO samples VALUES (?, ?, ?, ?, ?)", rows)
            self._db.execute("COMMIT")

    def done(self, testsets: dict[str, str], harness: str) -> set[tuple[str, str]]:
        """(task, code_hash) pairs already judged under the current test sets and harness."""
        with self._lock:
            cur = self._db.execute("SELECT task, code_hash, testset FROM results WHERE harness = ?", (harness,))
            return {(t, h) for t, h, ts in cur if testsets.get(t) == ts}

    def other_harnesses(self, harness: str) -> dict[str, int]:
        """Return {harness: programs} judged under harness strings other than ``harness``.

        Those results (of an older bayespass, or of other timeout settings) are not used under ``harness``.
        """
        with self._lock:
            cur = self._db.execute("SELECT harness, COUNT(*) FROM results WHERE harness != ? GROUP BY harness",
                                   (harness,))
            return dict(cur.fetchall())

    def put(self, task, code_hash, testset, harness, verdicts, digests, durations, flags=None, *,
            twins=(), bkey=None) -> None:
        """Commit one program's results (``flags``: 1 = re-run after a timeout, 2 = presumed timeout).

        ``twins``: code hashes of programs with the same behaviour key ``bkey`` (see
        :mod:`bayespass.execution.twins`), given the same results in the same transaction.
        """
        flags = np.zeros(len(verdicts), np.int8) if flags is None else flags
        blobs = (np.asarray(verdicts, np.int8).tobytes(), np.asarray(digests, np.int64).tobytes(),
                 np.asarray(durations, np.float32).tobytes(), np.asarray(flags, np.int8).tobytes())
        rows = [(task, h, testset, harness, *blobs) for h in (code_hash, *twins)]
        with self._lock, self._transaction():
            self._db.executemany("INSERT OR REPLACE INTO results (task, code_hash, testset, harness, verdicts, "
                                 "digests, durations, flags) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            if bkey is not None:
                self._db.execute("INSERT OR IGNORE INTO twins VALUES (?, ?, ?, ?, ?)",
                                 (task, testset, harness, bkey, code_hash))

    def twins_done(self, testsets: dict[str, str], harness: str) -> dict[tuple[str, str], str]:
        """{(task, behaviour key): code hash} of judged programs under the current test sets and harness."""
        with self._lock:
            cur = self._db.execute("SELECT t.task, t.testset, t.bkey, t.code_hash FROM twins t JOIN results r ON "
                                   "r.task = t.task AND r.code_hash = t.code_hash AND r.testset = t.testset AND "
                                   "r.harness = t.harness WHERE t.harness = ?", (harness,))
            return {(t, k): h for t, ts, k, h in cur if testsets.get(t) == ts}

    def copy(self, task, source: str, targets, testset, harness) -> None:
        """Give the programs ``targets`` the stored results of the program ``source`` (behavioural twins)."""
        with self._lock, self._transaction():
            self._db.executemany(
                "INSERT OR REPLACE INTO results (task, code_hash, testset, harness, verdicts, digests, durations, "
                "flags) SELECT task, ?, testset, harness, verdicts, digests, durations, flags FROM results "
                "WHERE task = ? AND code_hash = ? AND testset = ? AND harness = ?",
                [(h, task, source, testset, harness) for h in targets])

    def get(self, harness: str, testsets: dict[str, str] | None = None, programs=None) -> dict:
        """Results under ``harness`` (and test sets): {(task, code_hash): (verdicts, digests, durations, flags)}.

        ``programs``: only these (task, code_hash) pairs (a run directory shared by many calls holds far more).
        """
        with self._lock:
            if programs is None:
                cur = self._db.execute("SELECT task, code_hash, testset, verdicts, digests, durations, flags "
                                       "FROM results WHERE harness = ?", (harness,))
            else:
                self._db.execute("CREATE TEMP TABLE IF NOT EXISTS wanted_programs (task TEXT, code_hash TEXT)")
                self._db.execute("DELETE FROM wanted_programs")
                self._db.executemany("INSERT INTO wanted_programs VALUES (?, ?)", list(programs))
                cur = self._db.execute("SELECT r.task, r.code_hash, r.testset, r.verdicts, r.digests, r.durations, "
                                       "r.flags FROM wanted_programs w JOIN results r ON r.task = w.task AND "
                                       "r.code_hash = w.code_hash WHERE r.harness = ?", (harness,))
            out = {}
            for t, h, ts, v, d, u, f in cur:
                if testsets is None or testsets.get(t) == ts:
                    v = np.frombuffer(v, np.int8)
                    out[t, h] = (v, np.frombuffer(d, np.int64), np.frombuffer(u, np.float32),
                                 np.frombuffer(f, np.int8) if f is not None else np.zeros(len(v), np.int8))
            return out

    def import_results(self, other: str | Path, harness: str, testsets: dict[str, str]) -> int:
        """Copy another store's results for these task test sets under ``harness``; return the count."""
        other = Path(other)
        if not other.exists():
            return 0
        with self._lock:
            self._db.execute("ATTACH DATABASE ? AS other", (str(other),))
            try:
                self._db.execute("BEGIN")
                self._db.execute("CREATE TEMP TABLE IF NOT EXISTS wanted (task TEXT, testset TEXT)")
                self._db.execute("DELETE FROM wanted")
                self._db.executemany("INSERT INTO wanted VALUES (?, ?)", list(testsets.items()))
                cols = {row[1] for row in self._db.execute("PRAGMA other.table_info(results)")}
                flags = "r.flags" if "flags" in cols else "NULL"
                cur = self._db.execute(
                    "INSERT OR IGNORE INTO results (task, code_hash, testset, harness, verdicts, digests, "
                    f"durations, flags) SELECT r.task, r.code_hash, r.testset, r.harness, r.verdicts, "
                    f"r.digests, r.durations, {flags} FROM other.results r JOIN wanted w "
                    "ON r.task = w.task AND r.testset = w.testset WHERE r.harness = ?", (harness,))
                imported = max(cur.rowcount, 0)  # the results copied, not the helper table's rows
                self._db.execute("COMMIT")
            finally:
                self._db.execute("DETACH DATABASE other")
            return imported

    def samples(self) -> list[tuple]:
        """All sample rows."""
        with self._lock:
            return list(self._db.execute("SELECT config, task, sample, code_hash, extra FROM samples"))
