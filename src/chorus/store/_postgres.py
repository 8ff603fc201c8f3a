"""The PostgreSQL store: the same contract as SQLite, shared by several daemons.

psycopg 3 (async) with a connection pool. Writes go through one writer task per
process (:mod:`chorus.store._pg_writer`: FIFO, group commit, per-session seqs
serialized by a row lock on the session, see there why); reads use the pool.
Every process mirrors the events *it* committed to its own ``CHORUS_HOME``;
events other processes commit reach this process's bus through ``LISTEN``
(:mod:`chorus.store._pg_listen`), so a subscriber on any daemon sees every
session's events. Timestamps are client seconds like SQLite's, except leases,
which use the database's clock so that hosts with skewed clocks agree.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from chorus._errors import UserError
from chorus.config import sessions_dir
from chorus.events import Event, parse_event
from chorus.store import _pg_mailbox as pg_mailbox
from chorus.store._bus import DEFAULT_SUBSCRIBER_QUEUE, EventBus, Subscription
from chorus.store._errors import (
    ControlAnsweredError,
    DuplicateRecordError,
    JobStateError,
    SessionExistsError,
    StoreClosedError,
    StoreError,
    UnknownControlRequestError,
    UnknownJobError,
    UnknownSessionError,
)
from chorus.store._fields import clean_message, clean_names, clean_opt
from chorus.store._flags import PostgresFlags
from chorus.store._interface import (
    JOB_TERMINAL,
    ORIGIN_CHORUS,
    ORIGIN_CODEC,
    ControlRecord,
    ControlStatus,
    JobRecord,
    JobState,
    JsonDict,
    NodeRecord,
    RawLine,
    RawStream,
    SessionRecord,
    Store,
    StoreOutage,
    check_id,
    check_job_end,
    check_job_transition,
    lease_expired_error,
    new_id,
)
from chorus.store._mailbox import NO_LIMIT, MessageRecord, NewMessage, check_kind
from chorus.store._mirror import JsonlMirror
from chorus.store._pg_lead import Leadership
from chorus.store._pg_listen import Listener
from chorus.store._pg_migrations import migrate
from chorus.store._pg_routines import PgRoutines
from chorus.store._pg_writer import (
    EVENTS_CHANNEL,
    AppendOp,
    CallOp,
    Conn,
    EndOp,
    Op,
    PgWriter,
    RawOp,
)
from chorus.store._redact import MIN_SECRET_CHARS, Redactor
from chorus.store._sqlite import (
    _JOB_COLUMNS,
    DEFAULT_MAX_EVENT_BYTES,
    _control,
    _job,
    _node,
    _session,
)

T = TypeVar("T")

#: Seconds to wait for the first connection before giving up at start.
CONNECT_TIMEOUT_S = 5.0


class StoreUnreachableError(StoreError, UserError):
    """The configured database cannot be reached or refused us (exit code 2)."""


def redact_url(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


class PostgresStore(PostgresFlags, PgRoutines, Store):
    """The shared store on PostgreSQL at ``url`` (``postgresql://user@host/db``).

    ``pool_size`` bounds connections (the writer and the listener use one each);
    the other options mean what they mean for :class:`SqliteStore`.
    """

    shared = True

    def __init__(
        self,
        url: str,
        *,
        redactor: Redactor | None = None,
        mirror_dir: Path | None = None,
        max_queue: int = 10_000,
        max_batch: int = 1000,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        pool_size: int = 8,
        listen: bool = True,
    ) -> None:
        self.url = url
        self.redactor = redactor or Redactor.from_config()
        password = urlsplit(url).password
        if password and len(password) >= MIN_SECRET_CHARS:
            self.redactor.add_secret(password)
        self.writer_id = uuid.uuid4().hex[:12]
        self.max_event_bytes = max_event_bytes
        self.mirror: JsonlMirror | None = None
        self._mirror_dir = mirror_dir
        self._writer_options = {
            "max_queue": max_queue,
            "max_batch": max_batch,
            "max_event_bytes": max_event_bytes,
        }
        self._pool_size = pool_size
        self._listen = listen
        self._bus = EventBus()
        self._pool: AsyncConnectionPool[Conn] | None = None
        self._writer: PgWriter | None = None
        self._listener: Listener | None = None
        self._state: Literal["new", "open", "closed"] = "new"
        self._queued_hooks: list[Callable[[], None]] = []
        self._lead = Leadership(url, node=self.writer_id)

    @property
    def display_url(self) -> str:
        return redact_url(self.url)

    # -- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        if self._state != "new":
            raise StoreClosedError("a store can be started once")
        self._state = "open"
        try:
            await self._start()
        except BaseException:
            await self.close()
            raise

    async def _start(self) -> None:
        conn = await self._first_connection()
        async with conn:
            await migrate(conn)
        self.mirror = JsonlMirror(self._mirror_dir or sessions_dir())
        self._pool = AsyncConnectionPool(
            self.url,
            min_size=1,
            max_size=self._pool_size,
            kwargs={"autocommit": True},
            open=False,
            name="chorus-store",
        )
        try:
            await self._pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except PoolTimeout as exc:
            raise self._unreachable(exc) from exc
        self._writer = PgWriter(
            self._pool,
            writer_id=self.writer_id,
            redactor=self.redactor,
            mirror=self.mirror,
            bus=self._bus,
            **self._writer_options,
        )
        self._writer.start()
        if self._listen:
            channels = {EVENTS_CHANNEL: self._on_events_note, JOBS_CHANNEL: self._on_jobs_note}
            self._listener = Listener(self.url, channels, on_reconnect=self._jobs_queued)
            await self._listener.start()

    async def _first_connection(self) -> Conn:
        try:
            return await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT_S)
            )
        except psycopg.Error as exc:
            raise self._unreachable(exc) from exc

    def _unreachable(self, exc: BaseException) -> StoreUnreachableError:
        reason = self.redactor.redact_text(str(exc).strip() or type(exc).__name__)
        return StoreUnreachableError(
            f"cannot use the PostgreSQL store at {self.display_url}: {reason}"
            " (check that the server runs and [store] url in config.toml)"
        )

    async def close(self) -> None:
        if self._state == "closed":
            return
        self._state = "closed"
        if self._writer is not None:
            await self._writer.stop()
        if self._listener is not None:
            await self._listener.stop()
        await self._lead.close()
        self._bus.close()
        if self._pool is not None:
            await self._pool.close()

    # -- plumbing ------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._state != "open" or self._writer is None:
            raise StoreClosedError(f"the store is {self._state}")

    async def _write(self, op: Op) -> Any:
        self._check_open()
        assert self._writer is not None
        self._writer.submit(op)
        assert op.future is not None
        return await op.future

    async def _call(self, fn: Callable[[Conn], Awaitable[T]]) -> T:
        result: T = await self._write(CallOp(asyncio.get_running_loop(), fn))
        return result

    async def _read(self, fn: Callable[[Conn], Awaitable[T]]) -> T:
        self._check_open()
        assert self._pool is not None
        try:
            async with self._pool.connection() as conn:
                return await fn(conn)
        except psycopg.Error as exc:
            reason = self.redactor.redact_text(str(exc))
            raise StoreError(f"read failed: {reason}") from exc

    async def _on_events_note(self, payload: str) -> None:
        """A process committed seqs ``first..last`` of a session; when it was another
        one, offer them to this process's subscribers (who fill any hole from the log)."""
        writer, session_id, first, last = payload.split(" ")
        if writer != self.writer_id and self._state == "open":
            await self._remote_events(session_id, int(first), int(last))

    async def _remote_events(self, session_id: str, first: int, last: int) -> None:
        events = await self.read_events(session_id, from_seq=first, limit=last - first + 1)
        self._bus.publish(events)

    def _json(self, value: JsonDict) -> str:
        return json.dumps(self.redactor.redact_json(value), ensure_ascii=False)

    def _clean(self, value: str | None) -> str | None:
        """A stored text field (a session's model, folder ...) with secrets redacted."""
        return clean_opt(self.redactor, value)

    # -- sessions --------------------------------------------------------------------

    async def create_session(
        self,
        body: str,
        *,
        session_id: str | None = None,
        model: str | None = None,
        cwd: str | None = None,
        native_session_id: str | None = None,
        transport: JsonDict | None = None,
        state: str = "created",
    ) -> SessionRecord:
        sid = check_id(session_id or new_id(), "session id")
        now = time.time()
        row = (
            sid,
            body,
            self._clean(model),
            self._clean(cwd),
            self._clean(native_session_id),
            self._json(transport or {}),
            state,
            now,
        )

        async def insert(conn: Conn) -> SessionRecord:
            cur = await conn.execute(
                "INSERT INTO sessions (id, body, model, cwd, native_session_id, transport,"
                " state, created_at, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (id) DO NOTHING",
                (*row, now),
            )
            if cur.rowcount == 0:
                raise SessionExistsError(f"session {sid!r} already exists")
            return await _get_session(conn, sid)

        return await self._call(insert)

    async def get_session(self, session_id: str) -> SessionRecord:
        return await self._read(lambda conn: _get_session(conn, session_id))

    async def list_sessions(
        self, *, state: str | None = None, body: str | None = None, limit: int = 100
    ) -> list[SessionRecord]:
        params = {"state": state, "body": body, "limit": limit}

        async def select(conn: Conn) -> list[SessionRecord]:
            cur = await conn.execute(
                _SESSION_SELECT + " WHERE (%(state)s::text IS NULL OR state = %(state)s)"
                " AND (%(body)s::text IS NULL OR body = %(body)s)"
                " ORDER BY created_at DESC, ord DESC LIMIT %(limit)s",
                params,
            )
            return [_session(row) for row in await cur.fetchall()]

        return await self._read(select)

    async def update_session(
        self,
        session_id: str,
        *,
        state: str | None = None,
        model: str | None = None,
        native_session_id: str | None = None,
        transport: JsonDict | None = None,
    ) -> SessionRecord:
        changes: dict[str, Any] = {
            "state": state,
            "model": self._clean(model),
            "native_session_id": self._clean(native_session_id),
            "transport": None if transport is None else self._json(transport),
        }
        changes = {key: value for key, value in changes.items() if value is not None}
        changes["updated_at"] = time.time()

        async def update(conn: Conn) -> SessionRecord:
            cur = await conn.execute(
                _update_sql("sessions", changes), {**changes, "id": session_id}
            )
            if cur.rowcount == 0:
                raise UnknownSessionError(session_id)
            return await _get_session(conn, session_id)

        return await self._call(update)

    # -- events -----------------------------------------------------------------------

    async def append(self, session_id: str, event: Event, *, origin: str = ORIGIN_CODEC) -> Event:
        return await self.append_nowait(session_id, event, origin=origin)

    def append_nowait(
        self, session_id: str, event: Event, *, origin: str = ORIGIN_CODEC
    ) -> asyncio.Future[Event]:
        self._check_open()
        assert self._writer is not None
        op = AppendOp(asyncio.get_running_loop(), session_id, (event,), origin, single=True)
        self._writer.submit(op)
        assert op.future is not None
        return op.future

    async def append_many(
        self, session_id: str, events: Sequence[Event], *, origin: str = ORIGIN_CODEC
    ) -> list[Event]:
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
        params = {"id": session_id, "from": from_seq, "origin": origin, "limit": limit}

        async def select(conn: Conn) -> list[str]:
            cur = await conn.execute(
                "SELECT payload FROM events WHERE session_id = %(id)s AND seq >= %(from)s"
                " AND (%(origin)s::text IS NULL OR origin = %(origin)s)"
                " ORDER BY seq LIMIT %(limit)s::bigint",
                params,
            )
            return [row[0] for row in await cur.fetchall()]

        payloads = await self._read(select)
        return [parse_event(p, max_bytes=self.max_event_bytes) for p in payloads]

    async def last_seq(self, session_id: str) -> int:
        async def select(conn: Conn) -> int:
            cur = await conn.execute("SELECT last_seq FROM sessions WHERE id = %s", (session_id,))
            row = await cur.fetchone()
            return 0 if row is None else int(row[0])

        return await self._read(select)

    async def subscribe(
        self,
        session_id: str | None,
        *,
        from_seq: int | None = None,
        max_queue: int = DEFAULT_SUBSCRIBER_QUEUE,
    ) -> Subscription:
        self._check_open()
        if session_id is None:
            if from_seq is not None:
                raise ValueError("a subscription to all sessions is live only: no from_seq")
            return Subscription(self._bus, None, next_seq=1, fetch=None, max_queue=max_queue)
        sub = Subscription(
            self._bus, session_id, next_seq=from_seq or 1, fetch=self._fetch, max_queue=max_queue
        )
        if from_seq is None:
            sub._start_at(await self.last_seq(session_id) + 1)
        return sub

    async def _fetch(self, session_id: str, from_seq: int, limit: int) -> list[Event]:
        return await self.read_events(session_id, from_seq=from_seq, limit=limit)

    # -- raw lines ---------------------------------------------------------------------

    def record_raw(self, session_id: str, stream: RawStream, line: str) -> None:
        self._check_open()
        assert self._writer is not None
        self._writer.submit(RawOp(None, session_id, stream, line))

    async def append_raw(self, session_id: str, stream: RawStream, line: str) -> int:
        n: int = await self._write(RawOp(asyncio.get_running_loop(), session_id, stream, line))
        return n

    async def read_raw(
        self,
        session_id: str,
        *,
        streams: Sequence[RawStream] | None = None,
        from_n: int = 1,
        limit: int | None = None,
    ) -> list[RawLine]:
        wanted = list(streams) if streams is not None else None
        params = {"id": session_id, "from": from_n, "streams": wanted, "limit": limit}

        async def select(conn: Conn) -> list[RawLine]:
            cur = await conn.execute(
                "SELECT session_id, n, stream, line, ts FROM raw_lines"
                " WHERE session_id = %(id)s AND n >= %(from)s AND (%(streams)s::text[] IS NULL"
                " OR stream = ANY(%(streams)s::text[])) ORDER BY n LIMIT %(limit)s::bigint",
                params,
            )
            return [RawLine(*row) for row in await cur.fetchall()]

        return await self._read(select)

    # -- control requests ----------------------------------------------------------------

    async def record_control_request(
        self, session_id: str, request_id: str, subtype: str, payload: JsonDict | None = None
    ) -> ControlRecord:
        text = self.redactor.redact_text(subtype)
        row = (session_id, request_id, text, self._json(payload or {}), time.time())

        async def insert(conn: Conn) -> ControlRecord:
            await _require_session(conn, session_id)
            cur = await conn.execute(
                "INSERT INTO control_requests (session_id, request_id, subtype, payload,"
                " status, requested_at) VALUES (%s, %s, %s, %s, 'pending', %s)"
                " ON CONFLICT DO NOTHING",
                row,
            )
            if cur.rowcount == 0:
                raise DuplicateRecordError(
                    f"session {session_id!r} already has control request {request_id!r}"
                )
            return await _get_control(conn, session_id, request_id)

        return await self._call(insert)

    async def record_control_response(
        self,
        session_id: str,
        request_id: str,
        *,
        status: ControlStatus,
        response: JsonDict | None = None,
    ) -> ControlRecord:
        if status is ControlStatus.PENDING:
            raise StoreError("a control response cannot have status 'pending'")
        values = (status.value, self._json(response or {}), time.time(), session_id, request_id)

        async def update(conn: Conn) -> ControlRecord:
            cur = await conn.execute(
                "UPDATE control_requests SET status = %s, response = %s, responded_at = %s"
                " WHERE session_id = %s AND request_id = %s AND status = 'pending'",
                values,
            )
            if cur.rowcount == 0:
                current = await _get_control(conn, session_id, request_id)
                raise ControlAnsweredError(
                    f"control request {request_id!r} already answered ({current.status.value})"
                )
            return await _get_control(conn, session_id, request_id)

        return await self._call(update)

    async def get_control_request(self, session_id: str, request_id: str) -> ControlRecord:
        return await self._read(lambda conn: _get_control(conn, session_id, request_id))

    async def list_control_requests(
        self, session_id: str, *, status: ControlStatus | None = None
    ) -> list[ControlRecord]:
        params = {"id": session_id, "status": status.value if status else None}

        async def select(conn: Conn) -> list[ControlRecord]:
            cur = await conn.execute(
                _CONTROL_SELECT + " WHERE session_id = %(id)s AND (%(status)s::text IS NULL"
                " OR status = %(status)s) ORDER BY requested_at, ord",
                params,
            )
            return [_control(row) for row in await cur.fetchall()]

        return await self._read(select)

    # -- jobs -----------------------------------------------------------------------------

    async def create_job(
        self,
        prompt: str,
        *,
        body: str | None = None,
        session_id: str | None = None,
        options: JsonDict | None = None,
        job_id: str | None = None,
        affinity: str | None = None,
    ) -> JobRecord:
        jid = check_id(job_id or new_id(), "job id")
        clean_prompt = self.redactor.redact_text(prompt)
        now = time.time()
        text = self._clean(body)
        row = (jid, session_id, text, clean_prompt, self._json(options or {}), now, now, affinity)

        async def insert(conn: Conn) -> JobRecord:
            if session_id is not None:
                await _require_session(conn, session_id)
            cur = await conn.execute(
                "INSERT INTO jobs (id, session_id, body, prompt, state, options, created_at,"
                " updated_at, affinity) VALUES (%s, %s, %s, %s, 'queued', %s, %s, %s, %s)"
                " ON CONFLICT (id) DO NOTHING",
                row,
            )
            if cur.rowcount == 0:
                raise DuplicateRecordError(f"job {jid!r} already exists")
            await _notify_jobs(conn)
            return await _get_job(conn, jid)

        job = await self._call(insert)
        self._jobs_queued()  # this process's claimers at once; others by NOTIFY
        return job

    async def get_job(self, job_id: str) -> JobRecord:
        return await self._read(lambda conn: _get_job(conn, job_id))

    async def list_jobs(
        self,
        *,
        state: JobState | None = None,
        session_id: str | None = None,
        limit: int | None = None,
    ) -> list[JobRecord]:
        params = {"state": state.value if state else None, "sid": session_id, "limit": limit}

        async def select(conn: Conn) -> list[JobRecord]:
            cur = await conn.execute(
                _JOB_SELECT + " WHERE (%(state)s::text IS NULL OR state = %(state)s)"
                " AND (%(sid)s::text IS NULL OR session_id = %(sid)s)"
                " ORDER BY created_at, ord LIMIT %(limit)s::bigint",
                params,
            )
            return [_job(row) for row in await cur.fetchall()]

        return await self._read(select)

    async def claim_next_job(self) -> JobRecord | None:
        async def claim(conn: Conn) -> JobRecord | None:
            cur = await conn.execute(
                "SELECT id FROM jobs WHERE state = 'queued' ORDER BY created_at, ord"
                " LIMIT 1 FOR UPDATE SKIP LOCKED"
            )
            row = await cur.fetchone()
            if row is None:
                return None
            return await _set_job_state(conn, await _get_job(conn, row[0]), JobState.RUNNING)

        return await self._call(claim)

    async def update_job(
        self,
        job_id: str,
        *,
        state: JobState | None = None,
        result: JsonDict | None = None,
        error: JsonDict | None = None,
        session_id: str | None = None,
        body: str | None = None,
        prompt: str | None = None,
    ) -> JobRecord:
        fields: dict[str, Any] = {
            "result": None if result is None else self._json(result),
            "error": None if error is None else self._json(error),
            "session_id": session_id,
            "body": self._clean(body),
            "prompt": self._clean(prompt),
        }
        fields = {key: value for key, value in fields.items() if value is not None}

        async def update(conn: Conn) -> JobRecord:
            job = await _get_job(conn, job_id, lock=True)
            if state is not None:
                job = await _set_job_state(conn, job, state)
            if session_id is not None:
                await _require_session(conn, session_id)
            if fields:
                await _update_job_row(conn, job_id, fields)
            if state is JobState.QUEUED:
                await _notify_jobs(conn)
            return await _get_job(conn, job_id)

        job = await self._call(update)
        if state is JobState.QUEUED:
            self._jobs_queued()
        return job

    async def end_job(
        self,
        job_id: str,
        state: JobState,
        ended: Event,
        *,
        result: JsonDict | None = None,
        error: JsonDict | None = None,
        origin: str = ORIGIN_CHORUS,
    ) -> tuple[JobRecord, Event]:
        check_job_end(job_id, state)
        fields: dict[str, Any] = {
            "result": None if result is None else self._json(result),
            "error": None if error is None else self._json(error),
        }
        fields = {key: value for key, value in fields.items() if value is not None}

        async def end(conn: Conn) -> tuple[str, JobRecord]:
            job = await _set_job_state(conn, await _get_job(conn, job_id, lock=True), state)
            if fields:
                await _update_job_row(conn, job_id, fields)
            if job.session_id is None:
                raise JobStateError(job_id, job.state.value, "ended without a session")
            return job.session_id, await _get_job(conn, job_id)

        tagged = ended.model_copy(update={"job_id": job_id})
        op = EndOp(asyncio.get_running_loop(), end, tagged, origin)
        job, stamped = await self._write(op)
        return job, stamped

    async def jobs_missing_end(self) -> list[JobRecord]:
        async def select(conn: Conn) -> list[JobRecord]:
            cur = await conn.execute(
                _JOB_SELECT + " WHERE state IN ('succeeded', 'failed', 'cancelled')"
                " AND session_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM events e"
                " WHERE e.session_id = jobs.session_id AND e.type = 'job_ended'"
                " AND (e.payload::jsonb ->> 'job_id') = jobs.id) ORDER BY created_at, ord"
            )
            return [_job(row) for row in await cur.fetchall()]

        return await self._read(select)

    async def requeue_running_jobs(self, *, node: str | None = None) -> list[JobRecord]:
        async def requeue(conn: Conn) -> list[JobRecord]:
            cur = await conn.execute(
                _JOB_SELECT + " WHERE state = 'running' AND (%(node)s::text IS NULL"
                " OR node = %(node)s) ORDER BY created_at, ord FOR UPDATE",
                {"node": node},
            )
            jobs = [_job(row) for row in await cur.fetchall()]
            if jobs:
                await _notify_jobs(conn)
            return [await _set_job_state(conn, job, JobState.QUEUED) for job in jobs]

        jobs = await self._call(requeue)
        if jobs:
            self._jobs_queued()
        return jobs

    # -- worker nodes and leases (the database's clock) --------------------------------------

    async def register_node(self, node_id: str, *, host: str, bodies: Sequence[str]) -> NodeRecord:
        row = {"id": node_id, "host": host, "bodies": json.dumps(list(bodies))}

        async def upsert(conn: Conn) -> NodeRecord:
            await conn.execute(
                "INSERT INTO nodes (id, host, bodies, started_at, last_seen)"
                f" VALUES (%(id)s, %(host)s, %(bodies)s, {_DB_NOW}, {_DB_NOW})"
                " ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host,"
                " bodies = EXCLUDED.bodies, last_seen = EXCLUDED.last_seen",
                row,
            )
            return next(n for n in await _list_nodes(conn) if n.id == node_id)

        return await self._call(upsert)

    async def list_nodes(self) -> list[NodeRecord]:
        return await self._read(_list_nodes)

    async def claim_job(
        self,
        node_id: str,
        *,
        lease_s: float,
        host: str | None = None,
        exclude_sessions: Sequence[str] = (),
        system_only: bool = False,
    ) -> JobRecord | None:
        params = {
            "node": node_id,
            "host": host,
            "exclude": list(exclude_sessions),
            "system_only": system_only,
            "lease": lease_s,
            "now": time.time(),
        }

        async def claim(conn: Conn) -> JobRecord | None:
            cur = await conn.execute(_CLAIM_UPDATE, params)
            row = await cur.fetchone()
            return None if row is None else _job(row)

        return await self._call(claim)

    async def extend_leases(
        self, node_id: str, job_ids: Sequence[str], *, lease_s: float
    ) -> list[str]:
        params = {"node": node_id, "ids": list(job_ids), "lease": lease_s}

        async def extend(conn: Conn) -> list[str]:
            await conn.execute(
                f"UPDATE nodes SET last_seen = {_DB_NOW} WHERE id = %(node)s", params
            )
            cur = await conn.execute(
                f"UPDATE jobs SET lease_expires_at = {_DB_NOW} + %(lease)s WHERE node = %(node)s"
                " AND state = 'running' AND id = ANY(%(ids)s::text[]) RETURNING id",
                params,
            )
            return sorted(row[0] for row in await cur.fetchall())

        return await self._call(extend)

    async def requeue_expired_jobs(self, *, max_attempts: int | None = None) -> list[JobRecord]:
        async def requeue(conn: Conn) -> list[JobRecord]:
            cur = await conn.execute(
                _JOB_SELECT + f" WHERE state = 'running' AND lease_expires_at < {_DB_NOW}"
                " ORDER BY created_at, ord FOR UPDATE SKIP LOCKED"
            )
            jobs = [await _expire(conn, _job(row), max_attempts) for row in await cur.fetchall()]
            if any(job.state is JobState.QUEUED for job in jobs):
                await _notify_jobs(conn)
            return jobs

        jobs = await self._call(requeue)
        if any(job.state is JobState.QUEUED for job in jobs):
            self._jobs_queued()
        return jobs

    def on_jobs_queued(self, callback: Callable[[], None]) -> None:
        self._queued_hooks.append(callback)

    async def _on_jobs_note(self, payload: str) -> None:
        self._jobs_queued()

    def _jobs_queued(self) -> None:
        for hook in list(self._queued_hooks):
            hook()

    # -- one of everything across the cluster ----------------------------------------------

    def outage(self) -> StoreOutage | None:
        down = self._writer.outage() if self._writer is not None else None
        return None if down is None else StoreOutage(*down)

    async def try_lead(self, role: str) -> bool:
        self._check_open()
        return await self._lead.hold(role)

    async def list_provider_health(self) -> list[JsonDict]:
        async def select(conn: Conn) -> list[str]:
            cur = await conn.execute("SELECT data FROM provider_health ORDER BY key")
            return [row[0] for row in await cur.fetchall()]

        return [json.loads(data) for data in await self._read(select)]

    async def put_provider_health(self, key: str, data: JsonDict, *, node: str) -> None:
        row = {"key": key, "data": self._json(data), "node": node, "now": time.time()}

        async def upsert(conn: Conn) -> None:
            await conn.execute(
                "INSERT INTO provider_health (key, data, node, updated_at)"
                " VALUES (%(key)s, %(data)s, %(node)s, %(now)s) ON CONFLICT (key) DO UPDATE"
                " SET data = EXCLUDED.data, node = EXCLUDED.node, updated_at = EXCLUDED.updated_at",
                row,
            )

        await self._call(upsert)

    # -- maintenance ----------------------------------------------------------------------

    # -- team mailboxes ------------------------------------------------------------

    async def set_team_members(self, team: str, members: Sequence[str]) -> None:
        redact = self.redactor.redact_text
        team, members = redact(team), [redact(m) for m in members]
        now = time.time()
        await self._call(lambda conn: pg_mailbox.set_members(conn, team, members, now))

    async def team_members(self, team: str) -> list[str]:
        team = self.redactor.redact_text(team)
        return await self._read(lambda conn: pg_mailbox.members(conn, team))

    async def post_message(self, message: NewMessage) -> MessageRecord:
        check_kind(message.kind)
        body = self._json(message.body)
        message = clean_message(self.redactor, message)
        return await self._call(lambda conn: pg_mailbox.post(conn, message, body))

    async def take_messages(
        self,
        team: str,
        recipient: str,
        *,
        job_id: str | None = None,
        kind: str | None = None,
        limit: int = 100,
    ) -> list[MessageRecord]:
        names = clean_names(self.redactor, {"team": team, "recipient": recipient})
        params: dict[str, Any] = {**names, "job": job_id}
        params.update(kind=kind, limit=limit, now=time.time())
        return await self._call(lambda conn: pg_mailbox.take(conn, params))

    async def ack_messages(self, ids: Sequence[str]) -> list[str]:
        return await self._call(lambda conn: pg_mailbox.ack(conn, list(ids)))

    async def release_messages(self, *, job_id: str | None = None, team: str | None = None) -> int:
        params = {"job": job_id, "team": self._clean(team)}
        return await self._call(lambda conn: pg_mailbox.release(conn, params))

    async def list_messages(
        self,
        team: str,
        *,
        recipient: str | None = None,
        unacked: bool = False,
        limit: int | None = None,
    ) -> list[MessageRecord]:
        names = clean_names(self.redactor, {"team": team, "recipient": recipient})
        params: dict[str, Any] = {**names, "unacked": int(unacked)}
        params["limit"] = NO_LIMIT if limit is None else limit
        return await self._read(lambda conn: pg_mailbox.listing(conn, params))

    # -- maintenance ---------------------------------------------------------------------

    async def integrity_check(self) -> list[str]:
        async def check(conn: Conn) -> list[str]:
            cur = await conn.execute(
                "SELECT s.id FROM sessions s WHERE s.last_seq <>"
                " (SELECT COALESCE(MAX(seq), 0) FROM events e WHERE e.session_id = s.id)"
                " OR s.last_seq <> (SELECT COUNT(*) FROM events e WHERE e.session_id = s.id)"
            )
            bad = [row[0] for row in await cur.fetchall()]
            return [f"session {sid}: seqs do not match last_seq" for sid in bad] or ["ok"]

        return await self._read(check)

    async def rebuild_mirror(self, session_id: str) -> None:
        await self.get_session(session_id)

        async def payloads(conn: Conn) -> list[str]:
            cur = await conn.execute(
                "SELECT payload FROM events WHERE session_id = %s ORDER BY seq", (session_id,)
            )
            return [row[0] for row in await cur.fetchall()]

        lines = await self._read(payloads)
        assert self.mirror is not None
        await asyncio.to_thread(self.mirror.rebuild, session_id, lines)


# -- row access (inside a writer transaction or on a pooled connection) -----------------------

_SESSION_SELECT = (
    "SELECT id, body, state, created_at, updated_at, model, cwd, native_session_id,"
    " transport, last_seq FROM sessions"
)
_CONTROL_SELECT = (
    "SELECT session_id, request_id, subtype, payload, status, requested_at, response,"
    " responded_at FROM control_requests"
)
_JOB_SELECT = f"SELECT {', '.join(_JOB_COLUMNS)} FROM jobs"
#: Seconds since the epoch on the database server: one clock for every node's leases.
_DB_NOW = "EXTRACT(EPOCH FROM clock_timestamp())::double precision"
#: NOTIFY channel: a job may have become claimable (payload unused).
JOBS_CHANNEL = "chorus_jobs"
#: Take the oldest queued job a node may run (see :meth:`Store.claim_job`). SKIP
#: LOCKED: concurrent claimers pass over the rows others are taking.
_CLAIM_UPDATE = (
    "UPDATE jobs SET state = 'running', attempts = attempts + 1, started_at = %(now)s,"
    f" ended_at = NULL, updated_at = %(now)s, node = %(node)s,"
    f" lease_expires_at = {_DB_NOW} + %(lease)s"
    " WHERE state = 'queued' AND id = (SELECT id FROM jobs j WHERE state = 'queued'"
    " AND (affinity IS NULL OR affinity = %(node)s OR affinity = %(host)s::text)"
    " AND NOT (COALESCE(session_id, '') = ANY(%(exclude)s::text[]))"
    """ AND (NOT %(system_only)s OR options::jsonb @> '{"system": true}')"""
    " AND (session_id IS NULL OR NOT EXISTS (SELECT 1 FROM jobs r"
    " WHERE r.session_id = j.session_id AND r.state = 'running'))"
    " ORDER BY created_at, ord LIMIT 1 FOR UPDATE SKIP LOCKED)"
    f" RETURNING {', '.join(_JOB_COLUMNS)}"
)
_NODE_SELECT = (
    "SELECT n.id, n.host, n.bodies, n.started_at, n.last_seen,"
    " (SELECT COUNT(*) FROM jobs j WHERE j.node = n.id AND j.state = 'running') FROM nodes n"
    " ORDER BY n.last_seen DESC, n.id"
)


async def _notify_jobs(conn: Conn) -> None:
    await conn.execute("SELECT pg_notify(%s, '')", (JOBS_CHANNEL,))


async def _list_nodes(conn: Conn) -> list[NodeRecord]:
    cur = await conn.execute(_NODE_SELECT)
    return [_node(row) for row in await cur.fetchall()]


async def _expire(conn: Conn, job: JobRecord, max_attempts: int | None) -> JobRecord:
    """A running job whose node stopped renewing its lease: queue it again, or
    fail it once it has been claimed ``max_attempts`` times."""
    if max_attempts is not None and job.attempts >= max_attempts:
        await _set_job_state(conn, job, JobState.FAILED)
        await _update_job_row(conn, job.id, {"error": json.dumps(lease_expired_error(job))})
        return await _get_job(conn, job.id)
    return await _set_job_state(conn, job, JobState.QUEUED)


def _update_sql(table: str, values: dict[str, Any]) -> sql.Composed:
    """``UPDATE table SET k = %(k)s, ... WHERE id = %(id)s``; keys are this module's
    fixed column names, never caller input."""
    assignments = sql.SQL(", ").join(
        sql.SQL("{} = {}").format(sql.Identifier(key), sql.Placeholder(key)) for key in values
    )
    return sql.SQL("UPDATE {} SET {} WHERE id = %(id)s").format(sql.Identifier(table), assignments)


async def _get_session(conn: Conn, session_id: str) -> SessionRecord:
    cur = await conn.execute(_SESSION_SELECT + " WHERE id = %s", (session_id,))
    row = await cur.fetchone()
    if row is None:
        raise UnknownSessionError(session_id)
    return _session(row)


async def _require_session(conn: Conn, session_id: str) -> None:
    cur = await conn.execute("SELECT 1 FROM sessions WHERE id = %s", (session_id,))
    if await cur.fetchone() is None:
        raise UnknownSessionError(session_id)


async def _get_control(conn: Conn, session_id: str, request_id: str) -> ControlRecord:
    cur = await conn.execute(
        _CONTROL_SELECT + " WHERE session_id = %s AND request_id = %s", (session_id, request_id)
    )
    row = await cur.fetchone()
    if row is None:
        raise UnknownControlRequestError(session_id, request_id)
    return _control(row)


async def _get_job(conn: Conn, job_id: str, *, lock: bool = False) -> JobRecord:
    query = _JOB_SELECT + " WHERE id = %s" + (" FOR UPDATE" if lock else "")
    cur = await conn.execute(query.encode(), (job_id,))
    row = await cur.fetchone()
    if row is None:
        raise UnknownJobError(job_id)
    return _job(row)


async def _set_job_state(conn: Conn, job: JobRecord, state: JobState) -> JobRecord:
    """Apply one checked transition and its timestamp rules; return the new row."""
    check_job_transition(job.id, job.state, state)
    now = time.time()
    fields: dict[str, Any] = {"state": state.value}
    if state is JobState.RUNNING:
        fields.update(attempts=job.attempts + 1, started_at=now, ended_at=None)
    elif state is JobState.QUEUED:
        fields.update(result=None, error=None, ended_at=None, node=None, lease_expires_at=None)
    elif state in JOB_TERMINAL:
        fields.update(ended_at=now, lease_expires_at=None)
    await _update_job_row(conn, job.id, fields, now=now)
    return await _get_job(conn, job.id)


async def _update_job_row(
    conn: Conn, job_id: str, fields: dict[str, Any], *, now: float | None = None
) -> None:
    assert set(fields) <= set(_JOB_COLUMNS)
    values = {**fields, "updated_at": now or time.time()}
    await conn.execute(_update_sql("jobs", values), {**values, "id": job_id})
