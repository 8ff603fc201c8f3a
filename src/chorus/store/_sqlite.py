"""The SQLite store: WAL mode, one writer thread, reader threads, JSONL mirror.

Everything but the connections is the shared core (:mod:`chorus.store._core`):
writes go to the writer thread, reads to a small pool of reader threads that each
own a connection. WAL lets readers run while the writer commits.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from chorus.config import chorus_home
from chorus.store._core import DEFAULT_MAX_EVENT_BYTES, SqlStore
from chorus.store._db import SqliteDb, open_sqlite
from chorus.store._query import rows, values
from chorus.store._redact import Redactor

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "SqliteStore", "default_db_path"]

SqlTrace = Callable[[str], None]


def default_db_path() -> Path:
    """``CHORUS_HOME/chorus.db``."""
    return chorus_home() / "chorus.db"


class SqliteStore(SqlStore):
    """The embedded store. All defaults come from ``CHORUS_HOME`` and its config.

    ``max_queue`` bounds pending writes (beyond it writes raise
    :class:`StoreQueueFullError`); ``max_batch`` bounds operations per
    transaction; ``synchronous="FULL"`` makes each commit survive power loss
    (``"NORMAL"`` survives process crashes only, and is faster); ``sql_trace`` is
    called with every SQL statement, on the thread that runs it (for debugging
    and for tests that check which thread touches SQLite).
    """

    _driver_errors = SqliteDb.errors

    def __init__(
        self,
        path: Path | None = None,
        *,
        redactor: Redactor | None = None,
        mirror_dir: Path | None = None,
        max_queue: int = 10_000,
        max_batch: int = 1000,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        readers: int = 4,
        sql_trace: SqlTrace | None = None,
    ) -> None:
        super().__init__(redactor, mirror_dir, (max_queue, max_batch, max_event_bytes), readers)
        self.path = path or default_db_path()
        self._synchronous = synchronous
        self._sql_trace = sql_trace
        self._local = threading.local()
        self._reader_dbs: list[SqliteDb] = []
        self._dbs_lock = threading.Lock()

    async def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        await super()._open()

    def _connect(self, *, writer: bool) -> SqliteDb:
        sync = self._synchronous
        return open_sqlite(self.path, writer=writer, synchronous=sync, trace=self._sql_trace)

    def _connect_writer(self) -> SqliteDb:
        return self._connect(writer=True)

    @contextmanager
    def _reader(self) -> Iterator[SqliteDb]:
        db: SqliteDb | None = getattr(self._local, "db", None)
        if db is None:
            db = self._connect(writer=False)
            self._local.db = db
            with self._dbs_lock:
                self._reader_dbs.append(db)
        yield db

    def _close_readers(self) -> None:
        with self._dbs_lock:
            dbs, self._reader_dbs = self._reader_dbs, []
        for db in dbs:
            db.close()

    async def integrity_check(self) -> list[str]:
        found = await self._read(lambda: values(rows("PRAGMA integrity_check")))
        return [str(line) for line in found]

    async def stale_mirrors(self) -> list[str]:
        last = await self._read(lambda: rows(_LAST_SEQS))
        assert self.mirror is not None
        mirror = self.mirror
        return await asyncio.to_thread(
            lambda: [str(sid) for sid, seq in last if mirror.last_seq(str(sid)) != int(seq)]
        )


_LAST_SEQS = "SELECT session_id, MAX(seq) FROM events GROUP BY session_id"
