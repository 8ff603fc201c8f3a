"""Durable flags: a decision a body took with a default, for a person to overrule.

One row per flag in the ``flags`` table (both backends). The lifecycle is a small
transition table: ``pending`` goes once to ``approved``, ``rejected`` or
``timed_out`` (the deadline passed, the default is final), never back. The
update that decides is conditional on ``status = 'pending'``, so a person and
the deadline can never both win. A decision that differs from the default is
reaches the job (a steer, or a follow-up when it ended); every decision is
*due* until :meth:`FlagStore.mark_flag_delivered` records how it was told.

The SQL is written once with ``:name`` parameters (SQLite's style) and turned
into ``%(name)s`` for psycopg.
"""

from __future__ import annotations

import json
import re
import secrets
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from chorus._errors import UserError
from chorus.store._errors import AmbiguousIdError, StoreError, UnknownRecordError

if TYPE_CHECKING:
    import psycopg

    from chorus.store._redact import Redactor

    PgConn = psycopg.AsyncConnection[tuple[Any, ...]]

T = TypeVar("T")

FLAG_PENDING = "pending"
FLAG_APPROVED = "approved"
FLAG_REJECTED = "rejected"
FLAG_TIMED_OUT = "timed_out"
#: The only transitions: out of ``pending``, once.
FLAG_TRANSITIONS: dict[str, frozenset[str]] = {
    FLAG_PENDING: frozenset({FLAG_APPROVED, FLAG_REJECTED, FLAG_TIMED_OUT}),
    FLAG_APPROVED: frozenset(),
    FLAG_REJECTED: frozenset(),
    FLAG_TIMED_OUT: frozenset(),
}


class UnknownFlagError(UnknownRecordError):
    """No flag has this id (or prefix)."""

    def __init__(self, flag_id: str) -> None:
        super().__init__(f"no flag {flag_id!r}; `chorus flags` lists them")
        self.flag_id = flag_id


class FlagDecidedError(StoreError, UserError):
    """The flag was decided already (by a person or its deadline): nothing changed."""


@dataclass(frozen=True, slots=True)
class FlagRecord:
    """One flag. ``choice`` is the option that stands once decided (the default when
    approved or timed out); ``reason`` is the person's words with a rejection."""

    id: str
    job_id: str | None
    session_id: str | None
    question: str
    options: list[str]
    default: str
    status: str
    choice: str | None
    reason: str | None
    decided_by: str | None
    created_at: float
    deadline_at: float
    decided_at: float | None
    delivered_at: float | None
    delivery: str | None

    @property
    def overrules(self) -> bool:
        """The decision differs from the default the job went on with."""
        if self.status == FLAG_REJECTED:
            return True
        return self.status == FLAG_APPROVED and self.choice != self.default

    @property
    def due(self) -> bool:
        """Decided, and the job not yet told (or, when it kept the default, the
        decision not yet announced in its log)."""
        return self.status != FLAG_PENDING and self.delivered_at is None


_COLUMNS = (
    "id",
    "job_id",
    "session_id",
    "question",
    "options",
    "default_option",
    "status",
    "choice",
    "reason",
    "decided_by",
    "created_at",
    "deadline_at",
    "decided_at",
    "delivered_at",
    "delivery",
)
_SQL = ", ".join(_COLUMNS)

_INSERT = (
    f"INSERT INTO flags ({_SQL}) VALUES (:id, :job_id, :session_id, :question, :options,"
    " :default_option, 'pending', NULL, NULL, NULL, :created_at, :deadline_at, NULL, NULL, NULL)"
)
_GET = f"SELECT {_SQL} FROM flags WHERE id = :id"
_LIST = (
    f"SELECT {_SQL} FROM flags WHERE (CAST(:status AS TEXT) IS NULL OR status = :status)"
    " AND (CAST(:job_id AS TEXT) IS NULL OR job_id = :job_id) ORDER BY created_at, id"
)
_PREFIX = f"SELECT {_SQL} FROM flags WHERE id LIKE :pattern ORDER BY created_at LIMIT 6"
_DECIDE = (
    "UPDATE flags SET status = :status, choice = :choice, reason = :reason,"
    " decided_by = :decided_by, decided_at = :now WHERE id = :id AND status = 'pending'"
)
_EXPIRE_IDS = (
    "SELECT id FROM flags WHERE status = 'pending' AND deadline_at <= :now ORDER BY deadline_at"
)
_EXPIRE = (
    "UPDATE flags SET status = 'timed_out', choice = default_option, decided_by = 'timeout',"
    " decided_at = :now WHERE id = :id AND status = 'pending'"
)
_DUE = (
    f"SELECT {_SQL} FROM flags WHERE delivered_at IS NULL AND status <> 'pending'"
    " ORDER BY decided_at, id"
)
_DELIVERED = "UPDATE flags SET delivered_at = :now, delivery = :delivery WHERE id = :id"


def _pg(sql: str) -> str:
    """``:name`` parameters as psycopg's ``%(name)s``."""
    return re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", sql.replace("%", "%%"))


def _record(row: Sequence[Any]) -> FlagRecord:
    data = dict(zip(_COLUMNS, row, strict=True))
    data["default"] = data.pop("default_option")
    data["options"] = json.loads(data["options"])
    return FlagRecord(**data)


def new_flag_id() -> str:
    """``fl-`` and 12 hex characters: short enough to type, long enough to be unique."""
    return f"fl-{secrets.token_hex(6)}"


def check_decision(flag: FlagRecord, status: str, choice: str | None) -> None:
    """Refuse a decision the flag's lifecycle or options do not allow."""
    if status not in FLAG_TRANSITIONS[FLAG_PENDING]:
        raise UserError(f"{status!r} is not a decision")
    if flag.status != FLAG_PENDING:
        by = f" by {flag.decided_by}" if flag.decided_by else ""
        raise FlagDecidedError(
            f"flag {flag.id} was already decided ({flag.status}{by}, {flag.choice}); "
            "nothing changed"
        )
    if choice is not None and flag.options and choice not in flag.options:
        raise UserError(f"{choice!r} is not an option of flag {flag.id}: {flag.options}")


class FlagStore:
    """The flags part of the store contract; each backend mixes in its own."""

    async def create_flag(
        self,
        question: str,
        *,
        default: str,
        options: Sequence[str] = (),
        deadline_at: float,
        job_id: str | None = None,
        session_id: str | None = None,
        flag_id: str | None = None,
    ) -> FlagRecord:
        """Store a new pending flag (question redacted) and return it."""
        raise StoreError(f"flags are not available on {type(self).__name__}")

    async def get_flag(self, flag_id: str) -> FlagRecord:
        """The flag, by id or unique prefix; :class:`UnknownFlagError` if none."""
        raise UnknownFlagError(flag_id)

    async def list_flags(
        self, *, status: str | None = None, job_id: str | None = None
    ) -> list[FlagRecord]:
        """Flags oldest first, optionally of one status or job."""
        return []

    async def decide_flag(
        self,
        flag_id: str,
        status: str,
        *,
        choice: str | None = None,
        reason: str | None = None,
        decided_by: str = "person",
    ) -> FlagRecord:
        """Decide a pending flag (``approved`` keeps ``choice``, default the default;
        ``rejected`` with a ``reason``). :class:`FlagDecidedError` when it is no longer
        pending: nothing changed."""
        raise UnknownFlagError(flag_id)

    async def expire_flags(self, now: float | None = None) -> list[FlagRecord]:
        """Settle every pending flag whose deadline passed with its default."""
        return []

    async def due_flags(self) -> list[FlagRecord]:
        """Decided flags whose job was not told yet, oldest decision first."""
        return []

    async def mark_flag_delivered(self, flag_id: str, delivery: str) -> FlagRecord:
        """Record how a decision reached its job (``steered``, ``queued_followup`` ...)."""
        raise UnknownFlagError(flag_id)


def _insert_params(redactor: Redactor, question: str, **fields: Any) -> dict[str, Any]:
    options = [redactor.redact_text(str(o)) for o in fields.pop("options")]
    return {
        **fields,
        "id": fields.get("id") or new_flag_id(),
        "question": redactor.redact_text(question),
        "options": json.dumps(options, ensure_ascii=False),
        "default_option": redactor.redact_text(fields.pop("default")),
        "created_at": time.time(),
    }


def _decision(flag: FlagRecord, status: str, choice: str | None, **rest: Any) -> dict[str, Any]:
    check_decision(flag, status, choice)
    chosen: str | None = choice if status == FLAG_APPROVED and choice else flag.default
    if status == FLAG_REJECTED:
        chosen = choice  # an alternative the person names, or none
    return {"id": flag.id, "status": status, "choice": chosen, "now": time.time(), **rest}


def _match(rows: list[Sequence[Any]], raw: str) -> FlagRecord:
    if len(rows) == 1:
        return _record(rows[0])
    if not rows:
        raise UnknownFlagError(raw)
    shown = ", ".join(str(r[0]) for r in rows[:5])
    raise AmbiguousIdError(f"flag prefix {raw!r} matches several flags ({shown})")


def _pattern(raw: str) -> str:
    """``raw%`` for a LIKE; only ids' own characters (no wildcard) may prefix."""
    if not re.fullmatch(r"[A-Za-z0-9-]+", raw):
        raise UnknownFlagError(raw)
    return raw + "%"


class SqliteFlags(FlagStore):
    """Flags on the SQLite store (``_call`` runs on the writer, ``_read`` on a reader)."""

    if TYPE_CHECKING:
        redactor: Redactor

        async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...
        async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T: ...

    async def create_flag(
        self,
        question: str,
        *,
        default: str,
        options: Sequence[str] = (),
        deadline_at: float,
        job_id: str | None = None,
        session_id: str | None = None,
        flag_id: str | None = None,
    ) -> FlagRecord:
        params = _insert_params(
            self.redactor, question, default=default, options=list(options), id=flag_id
        )
        params.update(deadline_at=deadline_at, job_id=job_id, session_id=session_id)

        def insert(conn: sqlite3.Connection) -> FlagRecord:
            conn.execute(_INSERT, params)
            return _sqlite_get(conn, params["id"])

        return await self._call(insert)

    async def get_flag(self, flag_id: str) -> FlagRecord:
        return await self._read(lambda conn: _sqlite_get(conn, flag_id))

    async def list_flags(
        self, *, status: str | None = None, job_id: str | None = None
    ) -> list[FlagRecord]:
        def select(conn: sqlite3.Connection) -> list[FlagRecord]:
            rows = conn.execute(_LIST, {"status": status, "job_id": job_id}).fetchall()
            return [_record(r) for r in rows]

        return await self._read(select)

    async def decide_flag(
        self,
        flag_id: str,
        status: str,
        *,
        choice: str | None = None,
        reason: str | None = None,
        decided_by: str = "person",
    ) -> FlagRecord:
        said = None if reason is None else self.redactor.redact_text(reason)
        choice = None if choice is None else self.redactor.redact_text(choice)
        decided_by = self.redactor.redact_text(decided_by)

        def decide(conn: sqlite3.Connection) -> FlagRecord:
            flag = _sqlite_get(conn, flag_id)
            params = _decision(flag, status, choice, reason=said, decided_by=decided_by)
            conn.execute(_DECIDE, params)
            return _sqlite_get(conn, flag.id)

        return await self._call(decide)

    async def expire_flags(self, now: float | None = None) -> list[FlagRecord]:
        at = time.time() if now is None else now

        def expire(conn: sqlite3.Connection) -> list[FlagRecord]:
            ids = [r[0] for r in conn.execute(_EXPIRE_IDS, {"now": at}).fetchall()]
            for flag_id in ids:
                conn.execute(_EXPIRE, {"id": flag_id, "now": at})
            return [_sqlite_get(conn, flag_id) for flag_id in ids]

        return await self._call(expire)

    async def due_flags(self) -> list[FlagRecord]:
        return await self._read(lambda conn: [_record(r) for r in conn.execute(_DUE).fetchall()])

    async def mark_flag_delivered(self, flag_id: str, delivery: str) -> FlagRecord:
        said = self.redactor.redact_text(delivery)

        def mark(conn: sqlite3.Connection) -> FlagRecord:
            conn.execute(_DELIVERED, {"id": flag_id, "delivery": said, "now": time.time()})
            return _sqlite_get(conn, flag_id)

        return await self._call(mark)


def _sqlite_get(conn: sqlite3.Connection, raw: str) -> FlagRecord:
    row = conn.execute(_GET, {"id": raw}).fetchone()
    if row is not None:
        return _record(row)
    return _match(conn.execute(_PREFIX, {"pattern": _pattern(raw)}).fetchall(), raw)


class PostgresFlags(FlagStore):
    """Flags on the PostgreSQL store."""

    if TYPE_CHECKING:
        redactor: Redactor

        async def _call(self, fn: Callable[[PgConn], Awaitable[T]]) -> T: ...
        async def _read(self, fn: Callable[[PgConn], Awaitable[T]]) -> T: ...

    async def create_flag(
        self,
        question: str,
        *,
        default: str,
        options: Sequence[str] = (),
        deadline_at: float,
        job_id: str | None = None,
        session_id: str | None = None,
        flag_id: str | None = None,
    ) -> FlagRecord:
        params = _insert_params(
            self.redactor, question, default=default, options=list(options), id=flag_id
        )
        params.update(deadline_at=deadline_at, job_id=job_id, session_id=session_id)

        async def insert(conn: PgConn) -> FlagRecord:
            await conn.execute(_pg(_INSERT), params)
            return await _pg_get(conn, params["id"])

        return await self._call(insert)

    async def get_flag(self, flag_id: str) -> FlagRecord:
        return await self._read(lambda conn: _pg_get(conn, flag_id))

    async def list_flags(
        self, *, status: str | None = None, job_id: str | None = None
    ) -> list[FlagRecord]:
        async def select(conn: PgConn) -> list[FlagRecord]:
            cur = await conn.execute(_pg(_LIST), {"status": status, "job_id": job_id})
            return [_record(r) for r in await cur.fetchall()]

        return await self._read(select)

    async def decide_flag(
        self,
        flag_id: str,
        status: str,
        *,
        choice: str | None = None,
        reason: str | None = None,
        decided_by: str = "person",
    ) -> FlagRecord:
        said = None if reason is None else self.redactor.redact_text(reason)
        choice = None if choice is None else self.redactor.redact_text(choice)
        decided_by = self.redactor.redact_text(decided_by)

        async def decide(conn: PgConn) -> FlagRecord:
            flag = await _pg_get(conn, flag_id, lock=True)
            params = _decision(flag, status, choice, reason=said, decided_by=decided_by)
            await conn.execute(_pg(_DECIDE), params)
            return await _pg_get(conn, flag.id)

        return await self._call(decide)

    async def expire_flags(self, now: float | None = None) -> list[FlagRecord]:
        at = time.time() if now is None else now

        async def expire(conn: PgConn) -> list[FlagRecord]:
            cur = await conn.execute(_pg(_EXPIRE_IDS + " FOR UPDATE"), {"now": at})
            ids = [str(r[0]) for r in await cur.fetchall()]
            for flag_id in ids:
                await conn.execute(_pg(_EXPIRE), {"id": flag_id, "now": at})
            return [await _pg_get(conn, flag_id) for flag_id in ids]

        return await self._call(expire)

    async def due_flags(self) -> list[FlagRecord]:
        async def select(conn: PgConn) -> list[FlagRecord]:
            return [_record(r) for r in await (await conn.execute(_pg(_DUE))).fetchall()]

        return await self._read(select)

    async def mark_flag_delivered(self, flag_id: str, delivery: str) -> FlagRecord:
        said = self.redactor.redact_text(delivery)

        async def mark(conn: PgConn) -> FlagRecord:
            params = {"id": flag_id, "delivery": said, "now": time.time()}
            await conn.execute(_pg(_DELIVERED), params)
            return await _pg_get(conn, flag_id)

        return await self._call(mark)


async def _pg_get(conn: PgConn, raw: str, *, lock: bool = False) -> FlagRecord:
    cur = await conn.execute(_pg(_GET + (" FOR UPDATE" if lock else "")), {"id": raw})
    row = await cur.fetchone()
    if row is not None:
        return _record(row)
    cur = await conn.execute(_pg(_PREFIX), {"pattern": _pattern(raw)})
    return _match(list(await cur.fetchall()), raw)
