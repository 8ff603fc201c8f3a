"""The search index: ``memory/index.db``, a SQLite file this package owns.

It is a cache of the files and can be rebuilt from them at any time
(``chorus memory reindex``). It lives apart from the event store so that the
store's numbered migrations, and the PostgreSQL backend, never depend on it.

Tables: ``items`` (every item, any status), ``chunks`` (paragraphs of MEMORY.md
and daily notes), ``files`` (the mtime and size each note had when indexed),
and the FTS5 table ``fts`` holding the *searchable* text: active items under
their row number, note chunks under the negated chunk number.

Schema 2 adds who wrote an agent's item (``job_id``, ``body``; ``session_id`` was
there): an index of schema 1 gets the columns when it is opened, empty until
``reindex`` reads them from the item files.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from chorus.memory._model import MemoryItem

SCHEMA_VERSION = 2
#: Columns added after schema 1, by the version that added them.
_ADDED_COLUMNS = {"job_id": "TEXT", "body": "TEXT"}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS items (
    n INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    status TEXT NOT NULL,
    importance REAL NOT NULL,
    reinforcement INTEGER NOT NULL,
    source_kind TEXT NOT NULL,
    source_event TEXT,
    session_id TEXT,
    created REAL NOT NULL,
    last_seen REAL NOT NULL,
    supersedes TEXT,
    superseded_by TEXT,
    hash TEXT NOT NULL,
    vec BLOB,
    job_id TEXT,
    body TEXT
);
CREATE INDEX IF NOT EXISTS items_hash ON items (hash);
CREATE INDEX IF NOT EXISTS items_seen ON items (status, last_seen);
CREATE TABLE IF NOT EXISTS chunks (
    c INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    source TEXT NOT NULL,
    line INTEGER NOT NULL,
    day REAL,
    text TEXT NOT NULL,
    vec BLOB
);
CREATE INDEX IF NOT EXISTS chunks_path ON chunks (path);
CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, mtime_ns INTEGER, size INTEGER);
CREATE VIRTUAL TABLE IF NOT EXISTS fts
    USING fts5 (text, tokenize = 'unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE IF NOT EXISTS fts_terms USING fts5vocab (fts, 'row');
"""

_ITEM_COLS = (
    "id, kind, text, status, importance, reinforcement, source_kind, source_event,"
    " session_id, created, last_seen, supersedes, superseded_by, job_id, body"
)


class MemoryIndex:
    """One connection to ``index.db``. Writers in several processes are serialized
    by SQLite (WAL, busy timeout); every public write is one transaction."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = sqlite3.connect(path, timeout=10.0, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.executescript(_SCHEMA)
        self._migrate()

    def _migrate(self) -> None:
        """Bring an older index up to :data:`SCHEMA_VERSION` (one transaction, so two
        processes opening it at once do not both add a column)."""
        if self.meta("schema") == str(SCHEMA_VERSION):
            return
        with self.transaction():
            have = {row[1] for row in self.conn.execute("PRAGMA table_info(items)")}
            for name, kind in _ADDED_COLUMNS.items():
                if name not in have:
                    self.conn.execute(f"ALTER TABLE items ADD COLUMN {name} {kind}")
            self.set_meta("schema", str(SCHEMA_VERSION))

    def close(self) -> None:
        self.conn.close()

    def transaction(self) -> _Txn:
        return _Txn(self.conn)

    # -- meta ----------------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # -- items ----------------------------------------------------------------------

    def put_item(self, item: MemoryItem, vec: bytes | None) -> None:
        """Insert or replace an item; only an active item is searchable."""
        row = self.conn.execute("SELECT n FROM items WHERE id = ?", (item.id,)).fetchone()
        values = (*_item_values(item), item.hash, vec)
        if row is None:
            cur = self.conn.execute(
                f"INSERT INTO items ({_ITEM_COLS}, hash, vec)"
                f" VALUES ({', '.join('?' * len(values))})",
                values,
            )
            n = int(cur.lastrowid or 0)
        else:
            n = int(row[0])
            sets = ", ".join(f"{c.strip()} = ?" for c in f"{_ITEM_COLS}, hash, vec".split(","))
            self.conn.execute(f"UPDATE items SET {sets} WHERE n = ?", (*values, n))
            self.conn.execute("DELETE FROM fts WHERE rowid = ?", (n,))
        if item.status == "active":
            self.conn.execute("INSERT INTO fts (rowid, text) VALUES (?, ?)", (n, item.text))

    def delete_item(self, item_id: str) -> None:
        row = self.conn.execute("SELECT n FROM items WHERE id = ?", (item_id,)).fetchone()
        if row is not None:
            self.conn.execute("DELETE FROM fts WHERE rowid = ?", (row[0],))
            self.conn.execute("DELETE FROM items WHERE n = ?", (row[0],))

    def get_item(self, item_id: str) -> MemoryItem | None:
        row = self.conn.execute(
            f"SELECT {_ITEM_COLS} FROM items WHERE id = ?", (item_id,)
        ).fetchone()
        return _item(row) if row else None

    def item_ids(self) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT id FROM items")}

    def list_items(
        self, *, status: str | None = "active", kind: str | None = None, limit: int = 100
    ) -> list[MemoryItem]:
        where, args = _filters(status=status, kind=kind)
        rows = self.conn.execute(
            f"SELECT {_ITEM_COLS} FROM items {where} ORDER BY last_seen DESC, n DESC LIMIT ?",
            (*args, limit),
        )
        return [_item(r) for r in rows]

    def active_by_hash(self, digest: str) -> MemoryItem | None:
        row = self.conn.execute(
            f"SELECT {_ITEM_COLS} FROM items WHERE hash = ? AND status = 'active' LIMIT 1",
            (digest,),
        ).fetchone()
        return _item(row) if row else None

    # -- notes ------------------------------------------------------------------------

    def file_stamps(self) -> dict[str, tuple[int, int]]:
        rows = self.conn.execute("SELECT path, mtime_ns, size FROM files")
        return {r[0]: (r[1], r[2]) for r in rows}

    def put_note(
        self,
        path: str,
        stamp: tuple[int, int],
        source: str,
        day: float | None,
        chunks: Iterable[tuple[int, str, bytes | None]],
    ) -> None:
        """Replace every chunk of one note file."""
        self.drop_note(path)
        for line, text, vec in chunks:
            cur = self.conn.execute(
                "INSERT INTO chunks (path, source, line, day, text, vec) VALUES (?, ?, ?, ?, ?, ?)",
                (path, source, line, day, text, vec),
            )
            self.conn.execute(
                "INSERT INTO fts (rowid, text) VALUES (?, ?)", (-int(cur.lastrowid or 0), text)
            )
        self.conn.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?)", (path, *stamp))

    def drop_note(self, path: str) -> None:
        for (c,) in self.conn.execute("SELECT c FROM chunks WHERE path = ?", (path,)).fetchall():
            self.conn.execute("DELETE FROM fts WHERE rowid = ?", (-c,))
        self.conn.execute("DELETE FROM chunks WHERE path = ?", (path,))
        self.conn.execute("DELETE FROM files WHERE path = ?", (path,))

    # -- search --------------------------------------------------------------------------

    def doc_counts(self, terms: list[str]) -> dict[str, int]:
        """How many searchable rows hold each term (FTS5's own vocabulary)."""
        marks = ",".join("?" * len(terms))
        rows = self.conn.execute(f"SELECT term, doc FROM fts_terms WHERE term IN ({marks})", terms)
        return {r[0]: r[1] for r in rows}

    def searchable_rows(self) -> int:
        """Active items plus note chunks (what ``fts`` holds; counting ``fts`` itself
        reads every row)."""
        row = self.conn.execute(
            "SELECT (SELECT COUNT(*) FROM items WHERE status = 'active')"
            " + (SELECT COUNT(*) FROM chunks)"
        ).fetchone()
        return int(row[0])

    def lexical(self, query: str, limit: int) -> list[int]:
        """FTS rowids by BM25, best first."""
        rows = self.conn.execute(
            "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY rank LIMIT ?", (query, limit)
        )
        return [r[0] for r in rows]

    def vectors(self) -> Iterator[tuple[int, bytes]]:
        """Every searchable vector as (fts rowid, blob)."""
        yield from self.conn.execute(
            "SELECT n, vec FROM items WHERE status = 'active' AND vec IS NOT NULL"
        )
        for c, vec in self.conn.execute("SELECT c, vec FROM chunks WHERE vec IS NOT NULL"):
            yield -c, vec

    def rows_for(self, rowids: Iterable[int]) -> dict[int, tuple[str, Any]]:
        """fts rowid → ("item", MemoryItem) or ("chunk", (path, source, line, day, text))."""
        ids = list(rowids)
        out: dict[int, tuple[str, Any]] = {}
        items = [r for r in ids if r > 0]
        chunks = [-r for r in ids if r < 0]
        if items:
            marks = ",".join("?" * len(items))
            sql = f"SELECT n, {_ITEM_COLS} FROM items WHERE n IN ({marks})"
            for row in self.conn.execute(sql, items):
                out[row[0]] = ("item", _item(row[1:]))
        if chunks:
            marks = ",".join("?" * len(chunks))
            sql = f"SELECT c, path, source, line, day, text FROM chunks WHERE c IN ({marks})"
            for row in self.conn.execute(sql, chunks):
                out[-row[0]] = ("chunk", row[1:])
        return out

    def clear(self) -> None:
        for table in ("items", "chunks", "files", "fts"):
            self.conn.execute(f"DELETE FROM {table}")

    def counts(self) -> dict[str, int]:
        one = self.conn.execute
        return {
            "items": one("SELECT COUNT(*) FROM items WHERE status = 'active'").fetchone()[0],
            "all_items": one("SELECT COUNT(*) FROM items").fetchone()[0],
            "chunks": one("SELECT COUNT(*) FROM chunks").fetchone()[0],
            "files": one("SELECT COUNT(*) FROM files").fetchone()[0],
        }


class _Txn:
    """``with index.transaction():`` — BEGIN IMMEDIATE … COMMIT (ROLLBACK on error)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.conn.execute("COMMIT" if exc_type is None else "ROLLBACK")


def _filters(*, status: str | None, kind: str | None) -> tuple[str, tuple[str, ...]]:
    parts, args = [], []
    if status is not None:
        parts.append("status = ?")
        args.append(status)
    if kind is not None:
        parts.append("kind = ?")
        args.append(kind)
    return ("WHERE " + " AND ".join(parts) if parts else ""), tuple(args)


def _item_values(item: MemoryItem) -> tuple[Any, ...]:
    return tuple(getattr(item, c.strip()) for c in _ITEM_COLS.split(","))


def _item(row: Any) -> MemoryItem:
    names = [c.strip() for c in _ITEM_COLS.split(",")]
    return MemoryItem(**dict(zip(names, row, strict=True)))
