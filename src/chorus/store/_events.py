"""The event log and raw lines: appends go through the writer (stamped there), reads
through the readers; subscribers follow a session from the log, then live."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from chorus.events import Event, parse_event
from chorus.store._bus import DEFAULT_SUBSCRIBER_QUEUE, EventBus, Subscription
from chorus.store._ops import AppendOp, RawOp
from chorus.store._query import NO_LIMIT, Query, one, rows, values
from chorus.store._records import ORIGIN_CODEC, RAW_STREAMS, RawLine, RawStream, RawTap
from chorus.store._repo import Repo
from chorus.store._sessions import require_session

if TYPE_CHECKING:
    from chorus.store._mirror import JsonlMirror

_EVENTS = (
    "SELECT payload FROM events WHERE session_id = :id AND seq >= :from"
    " AND (CAST(:origin AS TEXT) IS NULL OR origin = :origin) ORDER BY seq LIMIT :limit"
)
_RAW = (
    "SELECT session_id, n, stream, line, ts FROM raw_lines WHERE session_id = :id"
    " AND n >= :from AND (CAST(:streams AS TEXT) IS NULL"
    " OR stream IN (JSON_ITEMS(:streams))) ORDER BY n LIMIT :limit"
)
_LAST_SEQ = "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?"
_ALL_PAYLOADS = "SELECT payload FROM events WHERE session_id = ? ORDER BY seq"


class Events(Repo):
    """The events and raw-lines part of :class:`~chorus.store.Store`."""

    max_event_bytes: int
    mirror: JsonlMirror | None
    _bus: EventBus

    async def append(self, session_id: str, event: Event, *, origin: str = ORIGIN_CODEC) -> Event:
        """Redact, stamp (``session_id``, next gap-free ``seq``, ``body`` if empty)
        and commit one event; return the stamped, redacted event as stored.

        Resolves after the commit; the event is then in the mirror and offered to
        the bus. Raises :class:`UnknownSessionError`, :class:`StoreQueueFullError`
        (the writer is ``max_queue`` operations behind; nothing was written), or
        :class:`EventTooLargeError`. Cancelling the await does not withdraw the write.
        """
        return await self.append_nowait(session_id, event, origin=origin)

    def append_nowait(
        self, session_id: str, event: Event, *, origin: str = ORIGIN_CODEC
    ) -> asyncio.Future[Event]:
        """Queue one append now and return a future of the stamped event.

        Call on the event loop's thread. Appends are stamped in call order, so a
        session can queue events as they arrive without waiting for each commit
        (their futures resolve after it, like :meth:`append`). Raises
        :class:`StoreQueueFullError` or :class:`StoreClosedError` at once; other
        errors arrive through the future.
        """
        op = AppendOp(asyncio.get_running_loop(), session_id, (event,), origin, single=True)
        self._submit(op)
        assert op.future is not None
        return op.future

    async def append_many(
        self, session_id: str, events: Sequence[Event], *, origin: str = ORIGIN_CODEC
    ) -> list[Event]:
        """Like :meth:`append` for several events in one transaction, with
        consecutive seqs; all or none are written."""
        if not events:
            return []
        op = AppendOp(asyncio.get_running_loop(), session_id, tuple(events), origin)
        result: list[Event] = await self._write(op)
        return result

    async def read_events(
        self,
        session_id: str,
        *,
        from_seq: int = 1,
        limit: int | None = None,
        origin: str | None = None,
    ) -> list[Event]:
        """Committed events with ``seq >= from_seq`` in seq order (optionally only
        one origin). Unknown sessions read as empty."""
        params = {"id": session_id, "from": from_seq, "origin": origin, "limit": limit or NO_LIMIT}
        payloads = await self._read(lambda: values(rows(_EVENTS, params)))
        return [parse_event(p, max_bytes=self.max_event_bytes) for p in payloads]

    async def last_seq(self, session_id: str) -> int:
        """The highest committed seq of the session (0 when it has none)."""
        return await self._read(lambda: _last_seq(session_id))

    async def subscribe(
        self,
        session_id: str | None,
        *,
        from_seq: int | None = None,
        max_queue: int = DEFAULT_SUBSCRIBER_QUEUE,
    ) -> Subscription:
        """Follow a session's events: from ``from_seq`` (log first, then live, no gap,
        no duplicate) or, with ``from_seq=None``, those committed from now on.
        ``session_id=None`` follows every session, live only. See
        :mod:`chorus.store._bus` for the slow-subscriber policy."""
        self._check_open()
        if session_id is None:
            if from_seq is not None:
                raise ValueError("a subscription to all sessions is live only: no from_seq")
            return Subscription(self._bus, None, next_seq=1, fetch=None, max_queue=max_queue)
        # Attach before reading where "now" is, so nothing committed in between is missed.
        sub = Subscription(
            self._bus, session_id, next_seq=from_seq or 1, fetch=self._fetch, max_queue=max_queue
        )
        if from_seq is None:
            sub._start_at(await self.last_seq(session_id) + 1)
        return sub

    async def _fetch(self, session_id: str, from_seq: int, limit: int) -> list[Event]:
        return await self.read_events(session_id, from_seq=from_seq, limit=limit)

    def record_raw(self, session_id: str, stream: RawStream, line: str) -> None:
        """Queue one raw line without waiting (callable from sync code, e.g. a
        transport's tap). Failures after queuing are logged, not raised. Raises
        :class:`StoreQueueFullError` or :class:`StoreClosedError` at once."""
        self._submit(RawOp(None, session_id, stream, line))

    async def append_raw(self, session_id: str, stream: RawStream, line: str) -> int:
        """Redact and commit one raw line; return its ``n``."""
        n: int = await self._write(RawOp(asyncio.get_running_loop(), session_id, stream, line))
        return n

    def raw_tap(self, session_id: str) -> RawTap:
        """A :data:`chorus.bodies.RawTap` that records every line the transport moves."""

        def tap(stream: str, line: str) -> None:
            if stream in RAW_STREAMS:
                self.record_raw(session_id, stream, line)

        return tap

    async def read_raw(
        self,
        session_id: str,
        *,
        streams: Sequence[RawStream] | None = None,
        from_n: int = 1,
        limit: int | None = None,
    ) -> list[RawLine]:
        """Raw lines in ``n`` order, optionally only some streams."""
        wanted = json.dumps(list(streams)) if streams is not None else None
        params = {"id": session_id, "from": from_n, "streams": wanted, "limit": limit or NO_LIMIT}
        return await self._read(lambda: _raw(params))

    async def rebuild_mirror(self, session_id: str) -> None:
        """Rewrite the session's JSONL mirror from the log (after a crash may have
        left it short). Raises :class:`UnknownSessionError`."""
        await self._read(lambda: require_session(session_id))
        lines = await self._read(lambda: values(rows(_ALL_PAYLOADS, (session_id,))))
        assert self.mirror is not None
        await asyncio.to_thread(self.mirror.rebuild, session_id, lines)


def _last_seq(session_id: str) -> Query[int]:
    row = yield from one(_LAST_SEQ, (session_id,))
    return int(row[0])


def _raw(params: dict[str, Any]) -> Query[list[RawLine]]:
    return [RawLine(*row) for row in (yield from rows(_RAW, params))]
