"""The audit anchor: where an audit log stood, kept in the store, outside the log's own
two files (``audit.jsonl`` and ``head.json``).

One row per log (``log``: host and path): how many entries it held, the last one's
hash, the byte offset just after that entry, and a signature the audit log makes
(the store only keeps it). :meth:`AnchorCell.advance` is a compare-and-set on the
entry count, so two processes appending to one log cannot move it backwards.

The cells are synchronous on purpose: the audit log is used from the daemon and
from short CLI commands alike, with or without a running daemon. Each call
opens its own short connection: to ``chorus.db`` (the schema migrated as
:class:`SqliteStore` would), or to ``[store] url`` (whose schema the daemon
migrates when it starts). Appends reach them from a background thread, never the
event loop that appended.
"""

from __future__ import annotations

import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from chorus.config import ChorusConfig, load_config
from chorus.store._db import Db, SqliteDb
from chorus.store._errors import StoreError
from chorus.store._migrations import migrate
from chorus.store._pg_names import CONNECT_TIMEOUT_S, redact_url
from chorus.store._query import QueryFn, count, one, run

T = TypeVar("T")

_COLUMNS = "log, entries, head_hash, end_offset, mac, updated_at"


@dataclass(frozen=True, slots=True)
class AuditAnchor:
    """Where the log ``log`` stood: ``entries`` entries, the last one hashing to
    ``head_hash`` and ending at byte ``end_offset``; ``mac`` signs the rest."""

    log: str
    entries: int
    head_hash: str
    end_offset: int
    mac: str
    updated_at: float

    def row(self) -> tuple[Any, ...]:
        return (self.log, self.entries, self.head_hash, self.end_offset, self.mac, self.updated_at)


class AnchorCell(ABC):
    """The anchor rows of one store. Safe to use from several threads."""

    def load(self, log: str) -> AuditAnchor | None:
        """The anchor of ``log``, None when there is none. Raises :class:`StoreError`."""
        row = self._run(lambda: one(_SELECT, (log,)))
        return None if row is None else AuditAnchor(*row)

    def advance(self, anchor: AuditAnchor, expected: int | None) -> bool:
        """Store ``anchor`` if the stored one holds ``expected`` entries (None: if there
        is none yet); False when it did not (another writer moved it first)."""
        if expected is None:
            sql, args = _INSERT, anchor.row()
        else:
            sql, args = _UPDATE, (*anchor.row()[1:], anchor.log, expected)
        return self._run(lambda: count(sql, args)) == 1

    @abstractmethod
    def _run(self, fn: QueryFn[T]) -> T:
        """Run the query ``fn()`` on a connection of its own."""


_SELECT = f"SELECT {_COLUMNS} FROM audit_anchor WHERE log = ?"
_INSERT = (
    f"INSERT INTO audit_anchor ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (log) DO NOTHING"
)
_UPDATE = (
    "UPDATE audit_anchor SET entries = ?, head_hash = ?, end_offset = ?, mac = ?,"
    " updated_at = ? WHERE log = ? AND entries = ?"
)


class SqliteAnchorCell(AnchorCell):
    """The anchor in the SQLite store (``CHORUS_HOME/chorus.db`` unless ``path``).
    Each call opens and closes its own connection (the schema is migrated once)."""

    def __init__(self, path: Path | None = None) -> None:
        from chorus.store._sqlite import default_db_path

        self.path = path or default_db_path()
        self._lock = threading.Lock()
        self._migrated = False

    def load(self, log: str) -> AuditAnchor | None:
        if not self._migrated and not self.path.exists():
            return None  # no store yet: nothing anchored, and reading makes none
        return super().load(log)

    def _run(self, fn: QueryFn[T]) -> T:
        with self._lock:
            try:
                return _once(self._connect, fn)
            except sqlite3.Error as exc:
                raise StoreError(f"{self.path}: the audit anchor: {exc}") from exc

    def _connect(self) -> SqliteDb:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        db = SqliteDb(sqlite3.connect(self.path, isolation_level=None, timeout=30.0))
        if not self._migrated:
            try:
                migrate(db)
            except BaseException:
                db.close()
                raise
            self._migrated = True
        return db


class PgAnchorCell(AnchorCell):
    """The anchor in the PostgreSQL store at ``url`` (its schema migrated by the
    daemon). Each call opens and closes its own connection."""

    def __init__(self, url: str) -> None:
        self.url = url

    def _run(self, fn: QueryFn[T]) -> T:
        import psycopg  # here, not at the top: only a PostgreSQL store needs the driver

        from chorus.store._pg_db import connect_pg

        try:
            return _once(lambda: connect_pg(self.url, timeout_s=CONNECT_TIMEOUT_S), fn)
        except psycopg.Error as exc:
            raise StoreError(f"{redact_url(self.url)}: the audit anchor: {exc}") from exc


def _once(connect: Callable[[], Db], fn: QueryFn[T]) -> T:
    """Run the query ``fn()`` on a connection of its own, closed after."""
    db = connect()
    try:
        return run(db, fn())
    finally:
        db.close()


def audit_anchor_cell(config: ChorusConfig | None = None) -> AnchorCell:
    """The anchor cell of the configured store (``[store] url``, else SQLite)."""
    url = (config or load_config()).store.url
    return SqliteAnchorCell() if url is None else PgAnchorCell(url)
