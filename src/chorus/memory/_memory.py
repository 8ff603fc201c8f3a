"""The memory: files as the truth, the index for search, one event per write.

Writes (:meth:`Memory.add`, :meth:`~Memory.edit`, :meth:`~Memory.forget`) change
the item's file first (atomically), then the index, and return the
:class:`MemoryChanged` events the caller appends to the log
(:func:`chorus.memory.record_changes`). Nothing is ever deleted silently: a
contradiction supersedes the old item, ``forget`` marks it forgotten, and both
stay on disk.

Dedup on add: the same normalized text (content hash) or, for the same kind, a
word-set overlap of at least ``dedup_similarity`` reinforces the existing item
(count + 1, ``last_seen`` now) instead of adding a second one.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

from chorus.config import MemorySettings, memory_settings
from chorus.events import MemoryChanged
from chorus.memory import _rank
from chorus.memory._embed import Embedder, dot, from_blob, make_embedder, to_blob
from chorus.memory._files import (
    Layout,
    append_daily,
    chunk_note,
    daily_files,
    is_item_id,
    parse_item,
    read_lines,
    render_item,
    write_atomic,
)
from chorus.memory._index import MemoryIndex
from chorus.memory._model import (
    Hit,
    MemoryInputError,
    MemoryItem,
    check_kind,
    check_text,
    content_hash,
)

log = logging.getLogger("chorus.memory")
#: Longest time between two checks of every note file by one open :class:`Memory`.
SWEEP_EVERY_S = 5.0
Op = Literal["add", "reinforce", "edit", "supersede", "forget"]
_CANDIDATES = 50


@dataclass(slots=True)
class WriteResult:
    """What a write did: the item as it now is, and the events to log."""

    item: MemoryItem
    op: Op
    events: list[MemoryChanged] = field(default_factory=list)


class Memory:
    """Open with :meth:`open` (or the constructor), use, then :meth:`close` (or
    ``with``). Not shared between threads; several processes may each open one."""

    def __init__(
        self,
        layout: Layout | None = None,
        settings: MemorySettings | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.layout = layout or Layout.default()
        self.settings = settings or MemorySettings()
        self.clock = clock
        self.layout.ensure()
        self.index = MemoryIndex(self.layout.index)
        self.embedder: Embedder | None = make_embedder(self.settings.embedder)
        self.warnings: list[str] = []
        self._stamps: dict[str, tuple[int, int]] | None = None
        self._daily_mtime = 0
        self._sweep_due = 0.0
        self._rows: int | None = None
        self._check_embedder()

    @classmethod
    def open(cls, table: dict[str, Any] | None = None) -> Memory:
        """The memory under CHORUS_HOME with the ``[memory]`` settings given."""
        return cls(settings=memory_settings(table))

    def close(self) -> None:
        self.index.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _check_embedder(self) -> None:
        """A changed embedder makes stored vectors meaningless: rebuild them."""
        name = self.embedder.name if self.embedder else "none"
        stored = self.index.meta("embedder")
        if stored not in (None, name):
            self.reindex()
        if stored != name:  # no write when it is the same (a reader's open stays a read)
            self.index.set_meta("embedder", name)

    def _vec(self, text: str) -> bytes | None:
        return to_blob(self.embedder.embed(text)) if self.embedder else None

    # -- writing items -------------------------------------------------------------------

    def add(
        self,
        text: str,
        kind: str = "fact",
        *,
        source_kind: str = "user",
        source_event: str | None = None,
        session_id: str | None = None,
        job_id: str | None = None,
        body: str | None = None,
        importance: float = 0.5,
        supersedes: str | None = None,
    ) -> WriteResult:
        """Add an item, or reinforce its duplicate. ``supersedes`` names an item this
        one replaces (it is marked superseded, not deleted). ``session_id``,
        ``job_id`` and ``body`` say who wrote it. Bad input raises
        :class:`MemoryInputError` and writes nothing."""
        text, kind = check_text(text), check_kind(kind)
        old = self.get(supersedes) if supersedes else None
        if not 0.0 <= importance <= 1.0:
            raise MemoryInputError(f"importance {importance} is outside 0..1")
        writer: dict[str, Any] = {
            "source_kind": source_kind,
            "session_id": session_id,
            "job_id": job_id,
            "body": body,
        }
        twin = self.duplicate_of(text, kind)
        if twin is not None and twin.id != supersedes:
            return self._reinforce(twin, importance, writer)
        now = self.clock()
        item = MemoryItem(
            id=f"m{uuid.uuid4().hex[:12]}",
            kind=kind,
            text=text,
            importance=importance,
            source_event=source_event,
            created=now,
            last_seen=now,
            supersedes=supersedes,
            **writer,
        )
        events = [self._save(item, "add")]
        if old is not None:
            events.append(
                self._save(old.but(status="superseded", superseded_by=item.id), "supersede")
            )
        return WriteResult(item, "add", events)

    def duplicate_of(self, text: str, kind: str) -> MemoryItem | None:
        """An active item with the same content hash, or of the same kind and similar
        enough words (``dedup_similarity``)."""
        same = self.index.active_by_hash(content_hash(text))
        if same is not None:
            return same
        query = _rank.fts_query(text)
        if query is None:
            return None
        rows = self.index.rows_for(self.index.lexical(query, 10))
        for what, value in rows.values():
            if what != "item" or value.kind != kind:
                continue
            if _rank.jaccard(text, value.text) >= self.settings.dedup_similarity:
                return value  # type: ignore[no-any-return]
        return None

    def _reinforce(
        self, item: MemoryItem, importance: float, writer: dict[str, Any]
    ) -> WriteResult:
        """Count the twin once more; the item takes the more trusted source, and with
        it that source's writer (the person who confirms an agent's item owns it)."""
        fresh = item.but(
            reinforcement=item.reinforcement + 1,
            last_seen=self.clock(),
            importance=max(item.importance, importance),
        )
        if _rank.trust(writer["source_kind"]) > _rank.trust(item.source_kind):
            fresh = fresh.but(**writer)
        return WriteResult(fresh, "reinforce", [self._save(fresh, "reinforce")])

    def edit(
        self,
        item_id: str,
        *,
        text: str | None = None,
        kind: str | None = None,
        importance: float | None = None,
    ) -> WriteResult:
        """Change an item's text, kind or importance (what is given)."""
        item = self.get(item_id)
        changes: dict[str, Any] = {"last_seen": self.clock()}
        if text is not None:
            changes["text"] = check_text(text)
        if kind is not None:
            changes["kind"] = check_kind(kind)
        if importance is not None:
            if not 0.0 <= importance <= 1.0:
                raise MemoryInputError(f"importance {importance} is outside 0..1")
            changes["importance"] = importance
        fresh = item.but(**changes)
        return WriteResult(fresh, "edit", [self._save(fresh, "edit")])

    def forget(self, item_id: str) -> WriteResult:
        """Mark an item forgotten: out of search and context, its file kept."""
        item = self.get(item_id)
        fresh = item.but(status="forgotten", last_seen=self.clock())
        return WriteResult(fresh, "forget", [self._save(fresh, "forget")])

    def reload_item(self, item_id: str) -> WriteResult:
        """Re-read an item file edited by hand (``chorus memory edit`` with $EDITOR)."""
        self.get(item_id)
        item, warnings = parse_item(self.layout.item_path(item_id))
        self.warnings += warnings
        if item is None:
            raise MemoryInputError(
                f"{item_id}: the edited file cannot be read: {'; '.join(warnings)}"
            )
        item = item.but(id=item_id)
        with self.index.transaction():
            self.index.put_item(item, self._vec(item.text))
        return WriteResult(item, "edit", [_event("edit", item)])

    def _save(self, item: MemoryItem, op: Op) -> MemoryChanged:
        write_atomic(self.layout.item_path(item.id), render_item(item))
        with self.index.transaction():
            self.index.put_item(item, self._vec(item.text))
            self._note_items_dir()
        return _event(op, item)

    def _note_items_dir(self) -> None:
        self.index.set_meta("items_mtime", str(self.layout.items.stat().st_mtime_ns))

    # -- reading items --------------------------------------------------------------------

    def get(self, item_id: str) -> MemoryItem:
        """The item (any status), or :class:`MemoryInputError` for an unknown id."""
        item = self.index.get_item(item_id) if is_item_id(item_id) else None
        if item is None:
            raise MemoryInputError(
                f"no memory item {item_id!r} (see `chorus memory list --all` for the ids)"
            )
        return item

    def items(
        self, *, status: str | None = "active", kind: str | None = None, limit: int = 100
    ) -> list[MemoryItem]:
        if kind is not None:
            check_kind(kind)
        return self.index.list_items(status=status, kind=kind, limit=limit)

    # -- notes ------------------------------------------------------------------------------

    def note(self, text: str, when: dt.datetime | None = None) -> Path:
        """Append a line to today's daily note (and index it)."""
        path = append_daily(self.layout, check_text(text), when or dt.datetime.now())
        self.sync()
        return path

    def memory_md(self) -> tuple[str, list[str]]:
        """MEMORY.md's text (unreadable lines dropped) and the warnings."""
        if not os.path.lexists(self.layout.memory_md):
            return "", []
        lines, warnings = read_lines(self.layout.memory_md)
        return "\n".join(lines).strip(), warnings

    def recent_notes(self, days: int, today: dt.date | None = None) -> list[tuple[dt.date, str]]:
        """The daily notes of the last ``days`` days (today included), oldest first."""
        today = today or dt.date.today()
        out = []
        for back in range(max(0, days) - 1, -1, -1):
            day = today - dt.timedelta(days=back)
            path = self.layout.day_path(day)
            if os.path.lexists(path):
                lines, warnings = read_lines(path)
                self.warnings += warnings
                out.append((day, "\n".join(lines).strip()))
        return out

    # -- sync and reindex ---------------------------------------------------------------------

    def sync(self) -> None:
        """Bring the index up to date with the files: changed notes are re-chunked,
        item files added or removed by hand are picked up (an item edited in place by
        hand needs ``reindex`` or ``chorus memory edit``).

        Every note is checked on the first call, when a folder changed (a note added,
        removed or replaced) and every :data:`SWEEP_EVERY_S` seconds; in between
        only MEMORY.md and the notes of today and yesterday, the files written in
        place, are (so a search stays cheap with a year of notes)."""
        daily_mtime = self.layout.daily.stat().st_mtime_ns
        now = time.monotonic()
        if self._stamps is None or daily_mtime != self._daily_mtime or now > self._sweep_due:
            self._sweep()
            self._daily_mtime, self._sweep_due = daily_mtime, now + SWEEP_EVERY_S
        else:
            self._check(self._hot_notes())
        self._sync_items()

    def _sweep(self) -> None:
        self._stamps = self.index.file_stamps()
        notes = self._note_files()
        self._check(notes)
        seen = {str(path) for path, _, _ in notes}
        gone = [p for p in self._stamps if p not in seen]
        if gone:
            with self.index.transaction():
                for path_str in gone:
                    self.index.drop_note(path_str)
                    self._stamps.pop(path_str, None)

    def _check(self, notes: list[tuple[Path, str, float | None]]) -> None:
        assert self._stamps is not None
        for path, source, day in notes:
            try:
                stat = os.stat(path)
            except FileNotFoundError:
                continue  # gone: the next sweep drops it
            stamp = (stat.st_mtime_ns, stat.st_size)
            if self._stamps.get(str(path)) != stamp:
                self._index_note(path, source, day, stamp)
                self._stamps[str(path)] = stamp

    def _hot_notes(self) -> list[tuple[Path, str, float | None]]:
        today = dt.date.today()
        out: list[tuple[Path, str, float | None]] = [(self.layout.memory_md, "memory_md", None)]
        for day in (today - dt.timedelta(days=1), today):
            noon = dt.datetime.combine(day, dt.time(12)).timestamp()
            out.append((self.layout.day_path(day), "daily", noon))
        return out

    def _note_files(self) -> list[tuple[Path, str, float | None]]:
        out: list[tuple[Path, str, float | None]] = []
        if self.layout.memory_md.exists():
            out.append((self.layout.memory_md, "memory_md", None))
        for day, path in daily_files(self.layout):
            noon = dt.datetime.combine(day, dt.time(12)).timestamp()
            out.append((path, "daily", noon))
        return out

    def _index_note(
        self, path: Path, source: str, day: float | None, stamp: tuple[int, int]
    ) -> None:
        lines, warnings = read_lines(path)
        self.warnings += warnings
        chunks = [(c.line, c.text, self._vec(c.text)) for c in chunk_note(path, lines)]
        with self.index.transaction():
            self.index.put_note(str(path), stamp, source, day, chunks)

    def _sync_items(self) -> None:
        mtime = str(self.layout.items.stat().st_mtime_ns)
        if self.index.meta("items_mtime") == mtime:
            return
        on_disk = {p.stem for p in self.layout.items.glob("m*.md")}
        known = self.index.item_ids()
        self._load_items(on_disk - known)
        with self.index.transaction():
            for item_id in known - on_disk:
                self.index.delete_item(item_id)
            self.index.set_meta("items_mtime", mtime)

    def _load_items(self, ids: Iterable[str]) -> int:
        loaded = 0
        with self.index.transaction():
            for item_id in ids:
                item, warnings = parse_item(self.layout.item_path(item_id))
                self.warnings += warnings
                if item is not None:
                    self.index.put_item(item.but(id=item_id), self._vec(item.text))
                    loaded += 1
        return loaded

    def reindex(self) -> dict[str, int]:
        """Rebuild the whole index from the files; returns the counts."""
        self.warnings.clear()
        self._stamps, self._rows = None, None
        with self.index.transaction():
            self.index.clear()
            self.index.set_meta("items_mtime", "")
        self._load_items(p.stem for p in self.layout.items.glob("m*.md"))
        self.sync()
        return self.index.counts()

    # -- search ----------------------------------------------------------------------------------

    def search(self, query: str, limit: int = 10) -> list[Hit]:
        """Items and note chunks for ``query``: BM25 (and vectors when configured)
        fused by RRF, then weighted by salience (see :mod:`chorus.memory._rank`)."""
        self.sync()
        rankings = [self._lexical(query)]
        if self.embedder is not None:
            rankings.append(self._vector(query))
        fused = _rank.rrf([[str(r) for r in ranking] for ranking in rankings])
        rows = self.index.rows_for(int(r) for r in fused)
        now = self.clock()
        hits = [
            self._hit(rows[int(ref)], score, now)
            for ref, score in fused.items()
            if int(ref) in rows
        ]
        hits.sort(key=lambda h: h.score, reverse=True)
        return hits[:limit]

    def _lexical(self, query: str) -> list[int]:
        words = _rank.words_of(query)
        if not words:
            return []
        counts = self.index.doc_counts(words)
        if self._rows is None:
            # Cached: only the stop-word share depends on it, and writes move it little.
            self._rows = self.index.searchable_rows()
        fts = _rank.or_query(_rank.informative(words, counts, self._rows))
        return self.index.lexical(fts, _CANDIDATES) if fts else []

    def _vector(self, query: str) -> list[int]:
        assert self.embedder is not None
        qv = self.embedder.embed(query)
        scored = [(dot(qv, from_blob(blob)), rowid) for rowid, blob in self.index.vectors()]
        scored = [s for s in scored if s[0] > 0.05]
        scored.sort(reverse=True)
        return [rowid for _, rowid in scored[:_CANDIDATES]]

    def _hit(self, row: tuple[str, Any], rrf: float, now: float) -> Hit:
        half = self.settings.half_life_days
        if row[0] == "item":
            item: MemoryItem = row[1]
            why = {
                "rrf": rrf,
                "recency": _rank.recency(now - item.last_seen, half),
                "reinforcement": _rank.reinforcement(item.reinforcement),
                "trust": _rank.trust(item.source_kind),
                "importance": _rank.importance(item.importance),
            }
            return Hit(f"item:{item.id}", "item", item.text, _product(why), item=item, why=why)
        path, source, line, day, text = row[1]
        decay = 1.0 if day is None else _rank.recency(now - day, half)
        why = {"rrf": rrf, "recency": decay}
        return Hit(
            f"{Path(path).name}#L{line}", source, text, _product(why), path=path, line=line, why=why
        )


def _product(parts: dict[str, float]) -> float:
    out = 1.0
    for value in parts.values():
        out *= value
    return out


def _event(op: Op, item: MemoryItem) -> MemoryChanged:
    return MemoryChanged(
        op=op,
        item_id=item.id,
        kind=item.kind,
        text=item.text[:500],
        source_kind=item.source_kind,
    )
