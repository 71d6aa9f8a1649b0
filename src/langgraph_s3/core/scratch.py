"""Where a whole-table flow keeps what it has read: a scratch SQLite file, not memory.

The collector (:mod:`langgraph_s3.core.collect`) needs every index item grouped by
thread (to decide retention and to find what each thread references) and then the
set of referenced object keys (to test each listed object against); the inventory
(:mod:`langgraph_s3.core.inventory`, behind ``langgraph-s3 threads``, ``stats`` and
``verify``) needs the items by thread and the object count and bytes of each thread's
folder. Held in Python, these grow with the table: about 10 KB per thread, so a
million threads would not fit a Lambda function. They go to a SQLite database in a
temporary directory instead (Lambda's ``/tmp`` or ``workdir``) and are read back in
order, so memory stays near SQLite's page cache and one page of results, whatever the
number of threads. The file is local disk, not AWS: flows use it directly.

SQLite's ``ORDER BY pk`` also gives each thread's items together however the table
scan returned them: nothing relies on the scan's order.
"""

from __future__ import annotations

import itertools
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import ormsgpack

from langgraph_s3.core import schema

#: SQLite's page cache, in KiB (a negative ``cache_size`` is KiB).
_CACHE_KIB = 16 * 1024
#: Keys looked up per query (SQLite's bound on parameters is 999 in old builds).
_LOOKUP_BATCH = 500
#: Rows fetched from SQLite per round while reading threads back.
_FETCH = 1000

_SCHEMA = f"""
PRAGMA journal_mode = OFF;
PRAGMA synchronous = OFF;
PRAGMA temp_store = FILE;
PRAGMA cache_size = -{_CACHE_KIB};
CREATE TABLE items (pk TEXT NOT NULL, sk TEXT NOT NULL, item BLOB NOT NULL,
                    PRIMARY KEY (pk, sk)) WITHOUT ROWID;
CREATE TABLE refs (key TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE gone (pk TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE folders (folder TEXT PRIMARY KEY, objects INTEGER NOT NULL,
                      bytes INTEGER NOT NULL) WITHOUT ROWID;
"""


class Scratch:
    """Index items, referenced keys and folder sizes of one run, on local disk.

    Use as a context manager: leaving it deletes the file.

    Args:
        workdir: directory for the scratch file (default: the system's temporary
            directory, ``/tmp`` in Lambda). It needs room for about the size of the
            index items under the prefix plus the referenced keys.
    """

    def __init__(self, workdir: str | Path | None = None) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="langgraph-s3-scratch-", dir=workdir)
        self.path = Path(self._dir.name) / "scratch.sqlite3"
        # isolation_level=None: the store opens its own transactions around batches.
        self._db = sqlite3.connect(self.path, isolation_level=None)
        self._db.executescript(_SCHEMA)

    def __enter__(self) -> Scratch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the database and delete its directory."""
        self._db.close()
        self._dir.cleanup()

    def size(self) -> int:
        """Bytes the scratch file takes on disk now."""
        return self.path.stat().st_size

    def add_items(self, items: Iterable[dict[str, Any]]) -> None:
        """Keep index items (a scan page), all or none; an item read twice is kept once."""
        rows = ((i[schema.PK]["S"], i[schema.SK]["S"], ormsgpack.packb(i)) for i in items)
        with self._transaction():
            self._db.executemany("INSERT OR REPLACE INTO items VALUES (?, ?, ?)", rows)

    def thread_count(self) -> int:
        """How many threads (partition keys) the kept items belong to."""
        return int(self._db.execute("SELECT COUNT(DISTINCT pk) FROM items").fetchone()[0])

    def threads(self) -> Iterator[list[dict[str, Any]]]:
        """Each thread's items, one thread at a time, threads in key order."""
        cursor = self._db.execute("SELECT pk, item FROM items ORDER BY pk, sk")
        rows = itertools.chain.from_iterable(iter(lambda: cursor.fetchmany(_FETCH), []))
        for _, group in itertools.groupby(rows, key=lambda row: row[0]):
            yield [ormsgpack.unpackb(item) for _, item in group]

    def forget(self, pk: str) -> None:
        """A thread whose items were deleted: :meth:`chunk_items` skips its items."""
        # A table of its own: deleting from ``items`` while ``threads`` reads it
        # would leave that read undefined.
        self._db.execute("INSERT OR IGNORE INTO gone VALUES (?)", (pk,))

    def chunk_items(self) -> Iterator[list[dict[str, Any]]]:
        """The chunk items kept (but those of forgotten threads), a page at a time, in
        key order."""
        # Every chunk item's sort key begins with CHUNK_SK_PREFIX, and "b$" is the
        # first string after all of them ("$" follows "#").
        low = schema.CHUNK_SK_PREFIX
        high = low[:-1] + chr(ord(low[-1]) + 1)
        cursor = self._db.execute(
            "SELECT item FROM items WHERE sk >= ? AND sk < ? "
            "AND pk NOT IN (SELECT pk FROM gone) ORDER BY pk, sk",
            (low, high),
        )
        for rows in iter(lambda: cursor.fetchmany(_FETCH), []):
            yield [ormsgpack.unpackb(item) for (item,) in rows]

    def reference(self, keys: Iterable[str]) -> None:
        """Record object keys as referenced."""
        with self._transaction():
            self._db.executemany("INSERT OR IGNORE INTO refs VALUES (?)", ((k,) for k in keys))

    def referenced(self, keys: Sequence[str]) -> set[str]:
        """Which of ``keys`` were recorded as referenced."""
        found: set[str] = set()
        for start in range(0, len(keys), _LOOKUP_BATCH):
            part = keys[start : start + _LOOKUP_BATCH]
            marks = ",".join("?" * len(part))
            query = f"SELECT key FROM refs WHERE key IN ({marks})"  # placeholders only
            found.update(row[0] for row in self._db.execute(query, part))
        return found

    def add_objects(self, sizes: Iterable[tuple[str, int]]) -> None:
        """Count objects (folder, size) into their folders' totals."""
        with self._transaction():
            self._db.executemany(
                "INSERT INTO folders VALUES (?, 1, ?) ON CONFLICT (folder) DO UPDATE SET "
                "objects = objects + 1, bytes = bytes + excluded.bytes",
                sizes,
            )

    def folder(self, folder: str) -> tuple[int, int]:
        """How many objects a folder holds, and their bytes."""
        row = self._db.execute(
            "SELECT objects, bytes FROM folders WHERE folder = ?", (folder,)
        ).fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        # In autocommit mode every row would be its own transaction; a batch is one.
        self._db.execute("BEGIN")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
