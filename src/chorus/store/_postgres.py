"""The PostgreSQL store: the same core as SQLite, shared by several daemons.

Everything but the connections is the shared core (:mod:`chorus.store._core`):
one writer thread per process (group commit; per-session seqs serialized by a row
lock on the session, see :mod:`chorus.store._ops`), reader threads on a
connection pool. Every process mirrors the events *it* committed to its own
``CHORUS_HOME``; events other processes commit reach this process's bus through
``LISTEN`` (:mod:`chorus.store._pg_listen`), so a subscriber on any daemon sees
every session's events. Timestamps are client seconds like SQLite's, except
leases, which use the database's clock so that hosts with skewed clocks agree.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from chorus._errors import ChorusError
from chorus.store._cluster import SharedHealth
from chorus.store._core import DEFAULT_MAX_EVENT_BYTES, SqlStore
from chorus.store._jobs import JOBS_CHANNEL
from chorus.store._ops import EVENTS_CHANNEL
from chorus.store._pg_db import PgDb, connect_pg
from chorus.store._pg_lead import Leadership
from chorus.store._pg_listen import Listener
from chorus.store._pg_names import CONNECT_TIMEOUT_S, StoreUnreachableError, redact_url
from chorus.store._query import rows, values
from chorus.store._records import StoreOutage
from chorus.store._redact import MIN_SECRET_CHARS, Redactor

_BAD_COUNTERS = (
    "SELECT s.id FROM sessions s WHERE s.last_seq <>"
    " (SELECT COALESCE(MAX(seq), 0) FROM events e WHERE e.session_id = s.id)"
    " OR s.last_seq <> (SELECT COUNT(*) FROM events e WHERE e.session_id = s.id)"
)


#: Longest a read waits for a connection to the database, seconds.
READ_WAIT_S = 5.0


class PostgresStore(SharedHealth, SqlStore):
    """The shared store on PostgreSQL at ``url`` (``postgresql://user@host/db``).

    ``pool_size`` bounds the readers' connections (the writer and the listener use
    one more each); the other options mean what they mean for :class:`SqliteStore`.
    """

    shared = True
    _driver_errors = PgDb.errors

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
        super().__init__(redactor, mirror_dir, (max_queue, max_batch, max_event_bytes), pool_size)
        self.url = url
        password = urlsplit(url).password
        if password and len(password) >= MIN_SECRET_CHARS:
            self.redactor.add_secret(password)
        self.writer_id = uuid.uuid4().hex[:12]
        self._pool_size = pool_size
        self._listen = listen
        self._pool: ConnectionPool[psycopg.Connection[tuple[object, ...]]] | None = None
        self._listener: Listener | None = None
        self._lead = Leadership(url, node=self.writer_id)

    @property
    def display_url(self) -> str:
        return redact_url(self.url)

    # -- connections -------------------------------------------------------------------

    def _connect_writer(self) -> PgDb:
        name = f"chorus-writer {self.writer_id}"
        return connect_pg(self.url, timeout_s=CONNECT_TIMEOUT_S, name=name)

    def _open_error(self, exc: Exception) -> ChorusError:
        if isinstance(exc, psycopg.Error | OSError):
            return self._unreachable(exc)
        return super()._open_error(exc)

    def _unreachable(self, exc: BaseException) -> StoreUnreachableError:
        reason = self.redactor.redact_text(str(exc).strip() or type(exc).__name__)
        return StoreUnreachableError(
            f"cannot use the PostgreSQL store at {self.display_url}: {reason}"
            " (check that the server runs and [store] url in config.toml)"
        )

    async def _open(self) -> None:
        await super()._open()  # the writer connected and migrated
        self._pool = ConnectionPool(
            self.url,
            min_size=1,
            max_size=self._pool_size,
            kwargs={"autocommit": True},
            open=False,
            name="chorus-store",
            check=ConnectionPool.check_connection,  # none left broken by an outage
            # A reader waits no longer than a connection takes to make (each reader
            # thread holds at most one, so the pool is never short of them): with the
            # database away, a read failed only after the pool's default 30 s, and
            # ``chorus status`` hung that long before the writer noticed the outage.
            timeout=READ_WAIT_S,
        )
        try:
            await asyncio.to_thread(self._pool.open, wait=True, timeout=CONNECT_TIMEOUT_S)
        except PoolTimeout as exc:
            raise self._unreachable(exc) from exc
        if self._listen:
            channels = {EVENTS_CHANNEL: self._on_events_note, JOBS_CHANNEL: self._on_jobs_note}
            self._listener = Listener(self.url, channels, on_reconnect=self._jobs_queued)
            await self._listener.start()

    @contextmanager
    def _reader(self) -> Iterator[PgDb]:
        assert self._pool is not None
        with self._pool.connection() as conn:
            yield PgDb(conn)

    def _close_readers(self) -> None:
        if self._pool is not None:
            self._pool.close()

    async def _closing(self) -> None:
        if self._listener is not None:
            await self._listener.stop()
        await self._lead.close()

    # -- other processes' writes ---------------------------------------------------------

    async def _on_events_note(self, payload: str) -> None:
        """A process committed seqs ``first..last`` of a session; when it was another
        one, offer them to this process's subscribers (who fill any hole from the log)."""
        writer, session_id, first, last = payload.split(" ")
        if writer != self.writer_id and self._state == "open":
            await self._remote_events(session_id, int(first), int(last))

    async def _remote_events(self, session_id: str, first: int, last: int) -> None:
        events = await self.read_events(session_id, from_seq=first, limit=last - first + 1)
        self._bus.publish(events)

    async def _on_jobs_note(self, payload: str) -> None:
        self._jobs_queued()

    # -- one of everything across the cluster ----------------------------------------------

    def outage(self) -> StoreOutage | None:
        down = self._writer.outage() if self._writer is not None else None
        return None if down is None else StoreOutage(*down)

    async def try_lead(self, role: str) -> bool:
        self._check_open()
        return await self._lead.hold(role)

    async def integrity_check(self) -> list[str]:
        bad = await self._read(lambda: values(rows(_BAD_COUNTERS)))
        return [f"session {sid}: seqs do not match last_seq" for sid in bad] or ["ok"]
