"""The SQLite store: WAL mode, one writer thread, reader threads, JSONL mirror.

No SQLite call runs on the event loop's thread: writes go to the writer thread
(:mod:`chorus.store._writer`), reads to a small pool of reader threads that
each own a connection. WAL lets readers run while the writer commits.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, TypeVar

from chorus.config import chorus_home, sessions_dir
from chorus.events import Event, parse_event
from chorus.store import _mailbox as mailbox
from chorus.store._bus import DEFAULT_SUBSCRIBER_QUEUE, EventBus, Subscription
from chorus.store._errors import (
    ControlAnsweredError,
    DuplicateRecordError,
    FiringExistsError,
    JobStateError,
    SessionExistsError,
    StoreClosedError,
    StoreError,
    UnknownControlRequestError,
    UnknownJobError,
    UnknownSessionError,
    UnknownWorktreeError,
)
from chorus.store._fields import (
    clean_firing,
    clean_message,
    clean_names,
    clean_opt,
    clean_worktree,
)
from chorus.store._flags import SqliteFlags
from chorus.store._interface import (
    JOB_TERMINAL,
    ORIGIN_CHORUS,
    ORIGIN_CODEC,
    ControlRecord,
    ControlStatus,
    Firing,
    FiringRecord,
    JobRecord,
    JobState,
    JsonDict,
    NodeRecord,
    RawLine,
    RawStream,
    RoutineRecord,
    SessionRecord,
    Store,
    WorktreeRecord,
    check_id,
    check_job_end,
    check_job_transition,
    lease_expired_error,
    new_id,
)
from chorus.store._mailbox import MessageRecord, NewMessage
from chorus.store._mirror import JsonlMirror
from chorus.store._redact import Redactor
from chorus.store._writer import AppendOp, CallOp, EndOp, Op, RawOp, Writer

T = TypeVar("T")

#: Cap on one stored event (a body line may be 8 MiB; its Unknown event is larger).
DEFAULT_MAX_EVENT_BYTES = 32 << 20
READER_THREAD_PREFIX = "chorus-store-reader"

SqlTrace = Callable[[str], None]


def default_db_path() -> Path:
    """``CHORUS_HOME/chorus.db``."""
    return chorus_home() / "chorus.db"


class SqliteStore(SqliteFlags, Store):
    """The embedded store. All defaults come from ``CHORUS_HOME`` and its config.

    ``max_queue`` bounds pending writes (beyond it writes raise
    :class:`StoreQueueFullError`); ``max_batch`` bounds operations per
    transaction; ``synchronous="FULL"`` makes each commit survive power loss
    (``"NORMAL"`` survives process crashes only, and is faster); ``sql_trace`` is
    called with every SQL statement, on the thread that runs it (for debugging
    and for tests that check which thread touches SQLite).
    """

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
        self.path = path or default_db_path()
        self.redactor = redactor or Redactor.from_config()
        self._mirror_dir = mirror_dir
        self._synchronous = synchronous
        self._sql_trace = sql_trace
        self._bus = EventBus()
        self._writer_options = {
            "max_queue": max_queue,
            "max_batch": max_batch,
            "max_event_bytes": max_event_bytes,
        }
        self._reader_count = readers
        self._writer: Writer | None = None
        self._readers: ThreadPoolExecutor | None = None
        self._local = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._state: Literal["new", "open", "closed"] = "new"
        self.max_event_bytes = max_event_bytes
        self.mirror: JsonlMirror | None = None
        self._queued_hooks: list[Callable[[], None]] = []

    # -- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        if self._state != "new":
            raise StoreClosedError("a store can be started once")
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.mirror = JsonlMirror(self._mirror_dir or sessions_dir())
        self._writer = Writer(
            self._connect_writer,
            redactor=self.redactor,
            mirror=self.mirror,
            bus=self._bus,
            **self._writer_options,
        )
        self._readers = ThreadPoolExecutor(self._reader_count, READER_THREAD_PREFIX)
        self._state = "open"
        try:
            await asyncio.wrap_future(self._writer.start())
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        if self._state == "closed":
            return
        self._state = "closed"
        # Writes first (they publish), then the bus, then the readers.
        if self._writer is not None:
            await asyncio.to_thread(self._writer.stop)
        self._bus.close()
        if self._readers is not None:
            await asyncio.to_thread(self._shutdown_readers, self._readers)

    def _shutdown_readers(self, pool: ThreadPoolExecutor) -> None:
        pool.shutdown(wait=True)
        with self._conns_lock:
            conns, self._reader_conns = self._reader_conns, []
        for conn in conns:
            conn.close()

    # -- connections ----------------------------------------------------------------

    def _open(self, *, writer: bool) -> sqlite3.Connection:
        # Reader connections are closed by close() from another thread, after
        # their pool has stopped, hence check_same_thread=False for them only.
        conn = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=writer, timeout=30.0
        )
        try:
            if self._sql_trace is not None:
                conn.set_trace_callback(self._sql_trace)
            if writer:
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            conn.execute("PRAGMA foreign_keys=ON")
            if not writer:
                conn.execute("PRAGMA query_only=ON")
        except BaseException:
            conn.close()
            raise
        return conn

    def _connect_writer(self) -> sqlite3.Connection:
        return self._open(writer=True)

    def _reader_conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open(writer=False)
            self._local.conn = conn
            with self._conns_lock:
                self._reader_conns.append(conn)
        return conn

    # -- plumbing ------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._state != "open":
            raise StoreClosedError(f"the store is {self._state}")

    async def _write(self, op: Op) -> Any:
        self._check_open()
        assert self._writer is not None
        assert op.future is not None
        self._writer.submit(op)
        return await op.future

    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        result: T = await self._write(CallOp(asyncio.get_running_loop(), fn))
        return result

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        self._check_open()
        assert self._readers is not None
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, self._run_read, fn)

    def _run_read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return fn(self._reader_conn())
        except sqlite3.Error as exc:
            raise StoreError(f"read failed: {exc}") from exc

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
            now,
        )

        def insert(conn: sqlite3.Connection) -> SessionRecord:
            try:
                conn.execute(
                    "INSERT INTO sessions (id, body, model, cwd, native_session_id, transport,"
                    " state, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    row,
                )
            except sqlite3.IntegrityError as exc:
                raise SessionExistsError(f"session {sid!r} already exists") from exc
            return _get_session(conn, sid)

        return await self._call(insert)

    async def get_session(self, session_id: str) -> SessionRecord:
        return await self._read(lambda conn: _get_session(conn, session_id))

    async def list_sessions(
        self, *, state: str | None = None, body: str | None = None, limit: int = 100
    ) -> list[SessionRecord]:
        def select(conn: sqlite3.Connection) -> list[SessionRecord]:
            rows = conn.execute(
                _SESSION_SELECT + " WHERE (:state IS NULL OR s.state = :state)"
                " AND (:body IS NULL OR s.body = :body)"
                " ORDER BY s.created_at DESC, s.rowid DESC LIMIT :limit",
                {"state": state, "body": body, "limit": limit},
            ).fetchall()
            return [_session(row) for row in rows]

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

        def update(conn: sqlite3.Connection) -> SessionRecord:
            # Column names come from the fixed dict above, never from the caller.
            assignments = ", ".join(f"{key} = :{key}" for key in changes)
            cursor = conn.execute(
                f"UPDATE sessions SET {assignments} WHERE id = :id", {**changes, "id": session_id}
            )
            if cursor.rowcount == 0:
                raise UnknownSessionError(session_id)
            return _get_session(conn, session_id)

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
        params = {"id": session_id, "from": from_seq, "origin": origin, "limit": limit or -1}

        def select(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute(
                "SELECT payload FROM events WHERE session_id = :id AND seq >= :from"
                " AND (:origin IS NULL OR origin = :origin) ORDER BY seq LIMIT :limit",
                params,
            ).fetchall()
            return [row[0] for row in rows]

        payloads = await self._read(select)
        return [parse_event(p, max_bytes=self.max_event_bytes) for p in payloads]

    async def last_seq(self, session_id: str) -> int:
        def select(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?", (session_id,)
            ).fetchone()
            return int(row[0])

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
        # Attach before reading where "now" is, so nothing committed in between is missed.
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
        wanted = json.dumps(list(streams)) if streams is not None else None
        params = {"id": session_id, "from": from_n, "streams": wanted, "limit": limit or -1}

        def select(conn: sqlite3.Connection) -> list[RawLine]:
            rows = conn.execute(
                "SELECT session_id, n, stream, line, ts FROM raw_lines"
                " WHERE session_id = :id AND n >= :from AND (:streams IS NULL"
                " OR stream IN (SELECT value FROM json_each(:streams))) ORDER BY n LIMIT :limit",
                params,
            ).fetchall()
            return [RawLine(*row) for row in rows]

        return await self._read(select)

    # -- control requests ----------------------------------------------------------------

    async def record_control_request(
        self, session_id: str, request_id: str, subtype: str, payload: JsonDict | None = None
    ) -> ControlRecord:
        text = self.redactor.redact_text(subtype)
        row = (session_id, request_id, text, self._json(payload or {}), time.time())

        def insert(conn: sqlite3.Connection) -> ControlRecord:
            _require_session(conn, session_id)
            try:
                conn.execute(
                    "INSERT INTO control_requests (session_id, request_id, subtype, payload,"
                    " status, requested_at) VALUES (?, ?, ?, ?, 'pending', ?)",
                    row,
                )
            except sqlite3.IntegrityError as exc:
                raise DuplicateRecordError(
                    f"session {session_id!r} already has control request {request_id!r}"
                ) from exc
            return _get_control(conn, session_id, request_id)

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

        def update(conn: sqlite3.Connection) -> ControlRecord:
            current = _get_control(conn, session_id, request_id)
            if current.status is not ControlStatus.PENDING:
                raise ControlAnsweredError(
                    f"control request {request_id!r} already answered ({current.status.value})"
                )
            conn.execute(
                "UPDATE control_requests SET status = ?, response = ?, responded_at = ?"
                " WHERE session_id = ? AND request_id = ?",
                values,
            )
            return _get_control(conn, session_id, request_id)

        return await self._call(update)

    async def get_control_request(self, session_id: str, request_id: str) -> ControlRecord:
        return await self._read(lambda conn: _get_control(conn, session_id, request_id))

    async def list_control_requests(
        self, session_id: str, *, status: ControlStatus | None = None
    ) -> list[ControlRecord]:
        params = {"id": session_id, "status": status.value if status else None}

        def select(conn: sqlite3.Connection) -> list[ControlRecord]:
            rows = conn.execute(
                _CONTROL_SELECT + " WHERE session_id = :id AND (:status IS NULL"
                " OR status = :status) ORDER BY requested_at, rowid",
                params,
            ).fetchall()
            return [_control(row) for row in rows]

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

        def insert(conn: sqlite3.Connection) -> JobRecord:
            if session_id is not None:
                _require_session(conn, session_id)
            try:
                conn.execute(
                    "INSERT INTO jobs (id, session_id, body, prompt, state, options,"
                    " created_at, updated_at, affinity) VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?)",
                    row,
                )
            except sqlite3.IntegrityError as exc:
                raise DuplicateRecordError(f"job {jid!r} already exists") from exc
            return _get_job(conn, jid)

        job = await self._call(insert)
        self._jobs_queued()
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
        params = {
            "state": state.value if state else None,
            "sid": session_id,
            "limit": limit or -1,
        }

        def select(conn: sqlite3.Connection) -> list[JobRecord]:
            rows = conn.execute(
                "SELECT * FROM jobs WHERE (:state IS NULL OR state = :state)"
                " AND (:sid IS NULL OR session_id = :sid)"
                " ORDER BY created_at, rowid LIMIT :limit",
                params,
            ).fetchall()
            return [_job(row) for row in rows]

        return await self._read(select)

    async def claim_next_job(self) -> JobRecord | None:
        def claim(conn: sqlite3.Connection) -> JobRecord | None:
            row = conn.execute(
                "SELECT id FROM jobs WHERE state = 'queued' ORDER BY created_at, rowid LIMIT 1"
            ).fetchone()
            if row is None:
                return None
            return _set_job_state(conn, _get_job(conn, row[0]), JobState.RUNNING)

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

        def update(conn: sqlite3.Connection) -> JobRecord:
            job = _get_job(conn, job_id)
            if state is not None:
                job = _set_job_state(conn, job, state)
            # A failure from here on is undone with the state change (SAVEPOINT).
            if session_id is not None:
                _require_session(conn, session_id)
            if fields:
                _update_job_row(conn, job_id, fields)
            return _get_job(conn, job_id)

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

        def end(conn: sqlite3.Connection) -> tuple[str, JobRecord]:
            job = _set_job_state(conn, _get_job(conn, job_id), state)
            if fields:
                _update_job_row(conn, job_id, fields)
            if job.session_id is None:
                raise JobStateError(job_id, job.state.value, "ended without a session")
            return job.session_id, _get_job(conn, job_id)

        tagged = ended.model_copy(update={"job_id": job_id})
        op = EndOp(asyncio.get_running_loop(), end, (tagged,), origin)
        job, stamped = await self._write(op)
        return job, stamped[0]

    async def jobs_missing_end(self) -> list[JobRecord]:
        def select(conn: sqlite3.Connection) -> list[JobRecord]:
            rows = conn.execute(
                "SELECT * FROM jobs j WHERE j.state IN ('succeeded', 'failed', 'cancelled')"
                " AND j.session_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM events e"
                " WHERE e.session_id = j.session_id AND e.type = 'job_ended'"
                " AND json_extract(e.payload, '$.job_id') = j.id)"
                " ORDER BY j.created_at, j.rowid"
            ).fetchall()
            return [_job(row) for row in rows]

        return await self._read(select)

    async def stale_mirrors(self) -> list[str]:
        def counts(conn: sqlite3.Connection) -> list[tuple[str, int]]:
            rows = conn.execute(
                "SELECT session_id, MAX(seq) FROM events GROUP BY session_id"
            ).fetchall()
            return [(str(row[0]), int(row[1])) for row in rows]

        assert self.mirror is not None
        mirror = self.mirror
        last = await self._read(counts)
        return await asyncio.to_thread(
            lambda: [sid for sid, seq in last if mirror.last_seq(sid) != seq]
        )

    async def requeue_running_jobs(self, *, node: str | None = None) -> list[JobRecord]:
        def requeue(conn: sqlite3.Connection) -> list[JobRecord]:
            rows = conn.execute(
                "SELECT * FROM jobs WHERE state = 'running' AND (:node IS NULL OR node = :node)"
                " ORDER BY created_at, rowid",
                {"node": node},
            ).fetchall()
            return [_set_job_state(conn, _job(row), JobState.QUEUED) for row in rows]

        jobs = await self._call(requeue)
        if jobs:
            self._jobs_queued()
        return jobs

    # -- worker nodes and leases (one host: the clock is time.time()) ----------------------

    async def register_node(self, node_id: str, *, host: str, bodies: Sequence[str]) -> NodeRecord:
        now = time.time()
        row = {"id": node_id, "host": host, "bodies": json.dumps(list(bodies)), "now": now}

        def upsert(conn: sqlite3.Connection) -> NodeRecord:
            conn.execute(
                "INSERT INTO nodes (id, host, bodies, started_at, last_seen)"
                " VALUES (:id, :host, :bodies, :now, :now) ON CONFLICT (id) DO UPDATE SET"
                " host = :host, bodies = :bodies, last_seen = :now",
                row,
            )
            return next(n for n in _list_nodes(conn) if n.id == node_id)

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
            "exclude": json.dumps(list(exclude_sessions)),
            "system_only": system_only,
        }

        def claim(conn: sqlite3.Connection) -> JobRecord | None:
            row = conn.execute(_CLAIM_SELECT, params).fetchone()
            if row is None:
                return None
            job = _set_job_state(conn, _get_job(conn, row[0]), JobState.RUNNING)
            lease = {"node": node_id, "lease_expires_at": (job.started_at or 0.0) + lease_s}
            _update_job_row(conn, job.id, lease)
            return _get_job(conn, job.id)

        return await self._call(claim)

    async def extend_leases(
        self, node_id: str, job_ids: Sequence[str], *, lease_s: float
    ) -> list[str]:
        now = time.time()
        params = {"node": node_id, "ids": json.dumps(list(job_ids)), "now": now}
        params["until"] = now + lease_s

        def extend(conn: sqlite3.Connection) -> list[str]:
            conn.execute("UPDATE nodes SET last_seen = :now WHERE id = :node", params)
            rows = conn.execute(
                "UPDATE jobs SET lease_expires_at = :until WHERE node = :node"
                " AND state = 'running' AND id IN (SELECT value FROM json_each(:ids)) RETURNING id",
                params,
            ).fetchall()
            return sorted(row[0] for row in rows)

        return await self._call(extend)

    async def requeue_expired_jobs(self, *, max_attempts: int | None = None) -> list[JobRecord]:
        now = time.time()

        def requeue(conn: sqlite3.Connection) -> list[JobRecord]:
            rows = conn.execute(
                "SELECT * FROM jobs WHERE state = 'running' AND lease_expires_at < ?"
                " ORDER BY created_at, rowid",
                (now,),
            ).fetchall()
            return [_expire(conn, _job(row), max_attempts) for row in rows]

        jobs = await self._call(requeue)
        if any(job.state is JobState.QUEUED for job in jobs):
            self._jobs_queued()
        return jobs

    def on_jobs_queued(self, callback: Callable[[], None]) -> None:
        self._queued_hooks.append(callback)

    def _jobs_queued(self) -> None:
        for hook in list(self._queued_hooks):
            hook()

    # -- routines ---------------------------------------------------------------------------

    async def register_routine(self, name: str, *, now: float | None = None) -> RoutineRecord:
        at = time.time() if now is None else now
        name = self.redactor.redact_text(name)
        return await self._call(lambda conn: _register_routine(conn, name, at))

    async def list_routine_records(self) -> list[RoutineRecord]:
        def select(conn: sqlite3.Connection) -> list[RoutineRecord]:
            rows = conn.execute(_ROUTINE_SELECT + " ORDER BY name").fetchall()
            return [_routine(row) for row in rows]

        return await self._read(select)

    async def set_routine_enabled(self, name: str, enabled: bool) -> RoutineRecord:
        name = self.redactor.redact_text(name)

        def update(conn: sqlite3.Connection) -> RoutineRecord:
            _register_routine(conn, name, time.time())
            conn.execute(
                "UPDATE routines SET enabled = ?, updated_at = ? WHERE name = ?",
                (int(enabled), time.time(), name),
            )
            return _get_routine(conn, name)

        return await self._call(update)

    async def delete_routine(self, name: str) -> None:
        name = self.redactor.redact_text(name)

        def delete(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM routine_firings WHERE routine = ?", (name,))
            conn.execute("DELETE FROM routines WHERE name = ?", (name,))

        await self._call(delete)

    async def create_fired_job(
        self,
        firing: Firing,
        prompt: str,
        *,
        body: str | None = None,
        session_id: str | None = None,
        options: JsonDict | None = None,
        affinity: str | None = None,
    ) -> JobRecord:
        firing = clean_firing(self.redactor, firing)
        at = _firing_key(firing)
        jid = new_id()
        merged = {**(options or {}), "routine": firing.routine, "scheduled_for": at}
        text = self._clean(body)
        row = (jid, session_id, text, self.redactor.redact_text(prompt), self._json(merged))
        detail = self._json(firing.detail)

        def insert(conn: sqlite3.Connection) -> JobRecord:
            if session_id is not None:
                _require_session(conn, session_id)
            now = time.time()
            conn.execute(
                "INSERT INTO jobs (id, session_id, body, prompt, state, options,"
                " created_at, updated_at, affinity) VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?)",
                (*row, now, now, affinity),
            )
            _insert_firing(conn, firing, at, "queued", jid, detail)
            return _get_job(conn, jid)

        return await self._call(insert)

    async def record_firing(self, firing: Firing, outcome: str) -> FiringRecord:
        firing = clean_firing(self.redactor, firing)
        at = _firing_key(firing)
        detail = self._json(firing.detail)

        def insert(conn: sqlite3.Connection) -> FiringRecord:
            _insert_firing(conn, firing, at, outcome, None, detail)
            return _firings(conn, firing.routine, "AND f.scheduled_for = ?", (at, 1))[0]

        return await self._call(insert)

    async def list_firings(
        self, routine: str, *, kind: str | None = None, limit: int | None = None
    ) -> list[FiringRecord]:
        params = (kind, kind, -1 if limit is None else limit)
        routine = self.redactor.redact_text(routine)
        return await self._read(
            lambda conn: _firings(conn, routine, "AND (? IS NULL OR f.kind = ?)", params)
        )

    # -- worktrees ------------------------------------------------------------------------

    async def create_worktree(self, record: WorktreeRecord) -> WorktreeRecord:
        check_id(record.job_id, "job id")
        record = clean_worktree(self.redactor, record)
        now = time.time()
        row = (*_worktree_row(record), self._json(record.info), now, now)

        def insert(conn: sqlite3.Connection) -> WorktreeRecord:
            try:
                conn.execute(f"INSERT INTO worktrees ({_WT_SQL}) VALUES ({_WT_MARKS})", row)
            except sqlite3.IntegrityError as exc:
                msg = f"a worktree for job {record.job_id!r} or at {record.path} exists"
                raise DuplicateRecordError(msg) from exc
            return _get_worktree(conn, record.job_id)

        return await self._call(insert)

    async def get_worktree(self, job_id: str) -> WorktreeRecord:
        return await self._read(lambda conn: _get_worktree(conn, job_id))

    async def list_worktrees(self, *, repo: str | None = None) -> list[WorktreeRecord]:
        repo = self._clean(repo)

        def select(conn: sqlite3.Connection) -> list[WorktreeRecord]:
            rows = conn.execute(
                f"SELECT {_WT_SQL} FROM worktrees WHERE (:repo IS NULL OR repo = :repo)"
                " ORDER BY created_at, rowid",
                {"repo": repo},
            ).fetchall()
            return [_worktree(row) for row in rows]

        return await self._read(select)

    async def update_worktree(
        self, job_id: str, *, state: str | None = None, info: JsonDict | None = None
    ) -> WorktreeRecord:
        values = {"state": state, "info": None if info is None else self._json(info)}

        def update(conn: sqlite3.Connection) -> WorktreeRecord:
            _get_worktree(conn, job_id)
            conn.execute(
                "UPDATE worktrees SET state = COALESCE(:state, state),"
                " info = COALESCE(:info, info), updated_at = :now WHERE job_id = :job_id",
                {**values, "now": time.time(), "job_id": job_id},
            )
            return _get_worktree(conn, job_id)

        return await self._call(update)

    # -- team mailboxes ------------------------------------------------------------

    async def set_team_members(self, team: str, members: Sequence[str]) -> None:
        redact = self.redactor.redact_text
        team, members = redact(team), [redact(m) for m in members]
        await self._call(lambda conn: mailbox.sqlite_set_members(conn, team, members))

    async def team_members(self, team: str) -> list[str]:
        team = self.redactor.redact_text(team)
        return await self._read(lambda conn: mailbox.sqlite_members(conn, team))

    async def post_message(self, message: NewMessage) -> MessageRecord:
        mailbox.check_kind(message.kind)
        body = self._json(message.body)
        message = clean_message(self.redactor, message)
        return await self._call(lambda conn: mailbox.sqlite_post(conn, message, body))

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
        return await self._call(lambda conn: mailbox.sqlite_take(conn, params))

    async def ack_messages(self, ids: Sequence[str]) -> list[str]:
        return await self._call(lambda conn: mailbox.sqlite_ack(conn, list(ids)))

    async def release_messages(self, *, job_id: str | None = None, team: str | None = None) -> int:
        params = {"job": job_id, "team": self._clean(team)}
        return await self._call(lambda conn: mailbox.sqlite_release(conn, params))

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
        params["limit"] = mailbox.NO_LIMIT if limit is None else limit
        return await self._read(lambda conn: mailbox.sqlite_list(conn, params))

    # -- maintenance ----------------------------------------------------------------------

    async def integrity_check(self) -> list[str]:
        def check(conn: sqlite3.Connection) -> list[str]:
            return [str(row[0]) for row in conn.execute("PRAGMA integrity_check").fetchall()]

        return await self._read(check)

    async def rebuild_mirror(self, session_id: str) -> None:
        await self.get_session(session_id)

        def payloads(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute(
                "SELECT payload FROM events WHERE session_id = ? ORDER BY seq", (session_id,)
            ).fetchall()
            return [row[0] for row in rows]

        lines = await self._read(payloads)
        assert self.mirror is not None
        await asyncio.to_thread(self.mirror.rebuild, session_id, lines)

    # -- helpers ---------------------------------------------------------------------------

    def _json(self, value: JsonDict) -> str:
        """Redacted JSON text of a record field."""
        return json.dumps(self.redactor.redact_json(value), ensure_ascii=False)

    def _clean(self, value: str | None) -> str | None:
        """A stored text field (a session's model, folder ...) with secrets redacted."""
        return clean_opt(self.redactor, value)


# -- row mapping (run on reader or writer threads) ----------------------------------------------

#: The oldest queued job a node may run (see :meth:`Store.claim_job`).
_CLAIM_SELECT = (
    "SELECT id FROM jobs j WHERE state = 'queued'"
    " AND (affinity IS NULL OR affinity = :node OR affinity = :host)"
    " AND COALESCE(session_id, '') NOT IN (SELECT value FROM json_each(:exclude))"
    " AND (NOT :system_only OR json_extract(options, '$.system') = 1)"
    " AND (session_id IS NULL OR NOT EXISTS (SELECT 1 FROM jobs r"
    " WHERE r.session_id = j.session_id AND r.state = 'running'))"
    " ORDER BY created_at, rowid LIMIT 1"
)
_NODE_SELECT = (
    "SELECT n.id, n.host, n.bodies, n.started_at, n.last_seen,"
    " (SELECT COUNT(*) FROM jobs j WHERE j.node = n.id AND j.state = 'running') FROM nodes n"
    " ORDER BY n.last_seen DESC, n.id"
)


def _node(row: Sequence[Any]) -> NodeRecord:
    return NodeRecord(
        id=row[0],
        host=row[1],
        bodies=json.loads(row[2]),
        started_at=row[3],
        last_seen=row[4],
        running=row[5],
    )


def _list_nodes(conn: sqlite3.Connection) -> list[NodeRecord]:
    return [_node(row) for row in conn.execute(_NODE_SELECT).fetchall()]


def _expire(conn: sqlite3.Connection, job: JobRecord, max_attempts: int | None) -> JobRecord:
    """A running job whose node stopped renewing its lease: queue it again, or
    fail it once it has been claimed ``max_attempts`` times."""
    if max_attempts is not None and job.attempts >= max_attempts:
        failed = _set_job_state(conn, job, JobState.FAILED)
        _update_job_row(conn, job.id, {"error": json.dumps(lease_expired_error(job))})
        return _get_job(conn, failed.id)
    return _set_job_state(conn, job, JobState.QUEUED)


_SESSION_SELECT = (
    "SELECT s.id, s.body, s.state, s.created_at, s.updated_at, s.model, s.cwd,"
    " s.native_session_id, s.transport,"
    " (SELECT COALESCE(MAX(seq), 0) FROM events e WHERE e.session_id = s.id) FROM sessions s"
)
_CONTROL_SELECT = (
    "SELECT session_id, request_id, subtype, payload, status, requested_at, response,"
    " responded_at FROM control_requests"
)


def _session(row: Sequence[Any]) -> SessionRecord:
    return SessionRecord(
        id=row[0],
        body=row[1],
        state=row[2],
        created_at=row[3],
        updated_at=row[4],
        model=row[5],
        cwd=row[6],
        native_session_id=row[7],
        transport=json.loads(row[8]),
        last_seq=row[9],
    )


def _get_session(conn: sqlite3.Connection, session_id: str) -> SessionRecord:
    row = conn.execute(_SESSION_SELECT + " WHERE s.id = ?", (session_id,)).fetchone()
    if row is None:
        raise UnknownSessionError(session_id)
    return _session(row)


def _require_session(conn: sqlite3.Connection, session_id: str) -> None:
    if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
        raise UnknownSessionError(session_id)


def _control(row: Sequence[Any]) -> ControlRecord:
    return ControlRecord(
        session_id=row[0],
        request_id=row[1],
        subtype=row[2],
        payload=json.loads(row[3]),
        status=ControlStatus(row[4]),
        requested_at=row[5],
        response=None if row[6] is None else json.loads(row[6]),
        responded_at=row[7],
    )


def _get_control(conn: sqlite3.Connection, session_id: str, request_id: str) -> ControlRecord:
    row = conn.execute(
        _CONTROL_SELECT + " WHERE session_id = ? AND request_id = ?", (session_id, request_id)
    ).fetchone()
    if row is None:
        raise UnknownControlRequestError(session_id, request_id)
    return _control(row)


_JOB_COLUMNS = (
    "id",
    "session_id",
    "body",
    "prompt",
    "state",
    "options",
    "result",
    "error",
    "attempts",
    "created_at",
    "updated_at",
    "started_at",
    "ended_at",
    "node",
    "lease_expires_at",
    "affinity",
)


def _job(row: Sequence[Any]) -> JobRecord:
    data = dict(zip(_JOB_COLUMNS, row, strict=True))
    return JobRecord(
        id=data["id"],
        prompt=data["prompt"],
        state=JobState(data["state"]),
        created_at=data["created_at"],
        updated_at=data["updated_at"],
        body=data["body"],
        session_id=data["session_id"],
        options=json.loads(data["options"]),
        result=None if data["result"] is None else json.loads(data["result"]),
        error=None if data["error"] is None else json.loads(data["error"]),
        attempts=data["attempts"],
        started_at=data["started_at"],
        ended_at=data["ended_at"],
        node=data["node"],
        lease_expires_at=data["lease_expires_at"],
        affinity=data["affinity"],
    )


def _get_job(conn: sqlite3.Connection, job_id: str) -> JobRecord:
    row = conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
    if row is None:
        raise UnknownJobError(job_id)
    return _job(row)


def _set_job_state(conn: sqlite3.Connection, job: JobRecord, state: JobState) -> JobRecord:
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
    _update_job_row(conn, job.id, fields, now=now)
    return _get_job(conn, job.id)


_ROUTINE_SELECT = "SELECT name, enabled, anchor_at, updated_at FROM routines"


def _routine(row: Sequence[Any]) -> RoutineRecord:
    return RoutineRecord(name=row[0], enabled=bool(row[1]), anchor_at=row[2], updated_at=row[3])


def _get_routine(conn: sqlite3.Connection, name: str) -> RoutineRecord:
    return _routine(conn.execute(_ROUTINE_SELECT + " WHERE name = ?", (name,)).fetchone())


def _register_routine(conn: sqlite3.Connection, name: str, now: float) -> RoutineRecord:
    conn.execute(
        "INSERT OR IGNORE INTO routines (name, enabled, anchor_at, updated_at) VALUES (?, 1, ?, ?)",
        (name, now, now),
    )
    return _get_routine(conn, name)


def _firing_key(firing: Firing) -> float:
    """Firings are keyed to the millisecond, so float noise never makes two keys."""
    return round(firing.scheduled_for, 3)


def _insert_firing(
    conn: sqlite3.Connection,
    firing: Firing,
    at: float,
    outcome: str,
    job_id: str | None,
    detail: str,
) -> None:
    try:
        conn.execute(
            "INSERT INTO routine_firings (routine, scheduled_for, kind, outcome, job_id,"
            " detail, fired_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (firing.routine, at, firing.kind, outcome, job_id, detail, time.time()),
        )
    except sqlite3.IntegrityError as exc:
        raise FiringExistsError(firing.routine, at) from exc


def _firings(
    conn: sqlite3.Connection, routine: str, where: str, params: tuple[Any, ...]
) -> list[FiringRecord]:
    # ``where`` is one of two fixed clauses chosen by this module, never caller input;
    # the last parameter is the limit.
    rows = conn.execute(
        "SELECT f.routine, f.scheduled_for, f.kind, f.outcome, f.fired_at, f.job_id,"
        " j.state, f.detail FROM routine_firings f LEFT JOIN jobs j ON j.id = f.job_id "
        f"WHERE f.routine = ? {where} ORDER BY f.scheduled_for DESC LIMIT ?",
        (routine, *params),
    ).fetchall()
    return [
        FiringRecord(
            routine=r[0],
            scheduled_for=r[1],
            kind=r[2],
            outcome=r[3],
            fired_at=r[4],
            job_id=r[5],
            job_state=None if r[6] is None else JobState(r[6]),
            detail=json.loads(r[7]),
        )
        for r in rows
    ]


def _update_job_row(
    conn: sqlite3.Connection, job_id: str, fields: dict[str, Any], *, now: float | None = None
) -> None:
    # Keys are fixed column names chosen by this module, never caller input.
    assert set(fields) <= set(_JOB_COLUMNS)
    values = {**fields, "updated_at": now or time.time()}
    assignments = ", ".join(f"{key} = :{key}" for key in values)
    conn.execute(f"UPDATE jobs SET {assignments} WHERE id = :job_id", {**values, "job_id": job_id})


_WT_COLUMNS = (
    "job_id",
    "repo",
    "path",
    "branch",
    "base",
    "base_commit",
    "into_branch",
    "state",
    "info",
    "created_at",
    "updated_at",
)
_WT_SQL = ", ".join(_WT_COLUMNS)
_WT_MARKS = ", ".join("?" for _ in _WT_COLUMNS)


def _worktree_row(record: WorktreeRecord) -> tuple[str, ...]:
    """The record's text columns, in :data:`_WT_COLUMNS` order up to ``state``."""
    r = record
    return (r.job_id, r.repo, r.path, r.branch, r.base, r.base_commit, r.into, r.state)


def _worktree(row: Sequence[Any]) -> WorktreeRecord:
    data = dict(zip(_WT_COLUMNS, row, strict=True))
    data["into"] = data.pop("into_branch")
    data["info"] = json.loads(data["info"])
    return WorktreeRecord(**data)


def _get_worktree(conn: sqlite3.Connection, job_id: str) -> WorktreeRecord:
    row = conn.execute(f"SELECT {_WT_SQL} FROM worktrees WHERE job_id = ?", (job_id,)).fetchone()
    if row is None:
        raise UnknownWorktreeError(job_id)
    return _worktree(row)
