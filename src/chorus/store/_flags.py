"""Durable flags: a decision a body took with a default, for a person to overrule.

One row per flag in the ``flags`` table (both backends: :class:`Flags`). The lifecycle is a small
transition table: ``pending`` goes once to ``approved``, ``rejected`` or
``timed_out`` (the deadline passed, the default is final), never back. The
update that decides is conditional on ``status = 'pending'``, so a person and
the deadline can never both win. A decision that differs from the default is
reaches the job (a steer, or a follow-up when it ended); every decision is
*due* until :meth:`FlagStore.mark_flag_delivered` records how it was told.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chorus._errors import UserError
from chorus.store._errors import AmbiguousIdError, StoreError, UnknownRecordError
from chorus.store._query import Query, count, one, rows, values
from chorus.store._redact import Redactor
from chorus.store._repo import Repo

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


def _match(found: list[Sequence[Any]], raw: str) -> FlagRecord:
    if len(found) == 1:
        return _record(found[0])
    if not found:
        raise UnknownFlagError(raw)
    shown = ", ".join(str(r[0]) for r in found[:5])
    raise AmbiguousIdError(f"flag prefix {raw!r} matches several flags ({shown})")


def _pattern(raw: str) -> str:
    """``raw%`` for a LIKE; only ids' own characters (no wildcard) may prefix."""
    if not re.fullmatch(r"[A-Za-z0-9-]+", raw):
        raise UnknownFlagError(raw)
    return raw + "%"


class Flags(Repo):
    """The flags part of :class:`~chorus.store.Store` (both backends)."""

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
        params = _insert_params(
            self.redactor, question, default=default, options=list(options), id=flag_id
        )
        params.update(deadline_at=deadline_at, job_id=job_id, session_id=session_id)
        return await self._call(lambda: _insert(params))

    async def get_flag(self, flag_id: str) -> FlagRecord:
        """The flag, by id or unique prefix; :class:`UnknownFlagError` if none."""
        return await self._read(lambda: _get(flag_id))

    async def list_flags(
        self, *, status: str | None = None, job_id: str | None = None
    ) -> list[FlagRecord]:
        """Flags oldest first, optionally of one status or job."""
        return await self._read(lambda: _records(_LIST, {"status": status, "job_id": job_id}))

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
        said = {"reason": self._clean(reason), "decided_by": self.redactor.redact_text(decided_by)}
        chosen = self._clean(choice)
        return await self._call(lambda: _decide(flag_id, status, chosen, said))

    async def expire_flags(self, now: float | None = None) -> list[FlagRecord]:
        """Settle every pending flag whose deadline passed with its default."""
        at = time.time() if now is None else now
        return await self._call(lambda: _expire(at))

    async def due_flags(self) -> list[FlagRecord]:
        """Decided flags whose job was not told yet, oldest decision first."""
        return await self._read(lambda: _records(_DUE, ()))

    async def mark_flag_delivered(self, flag_id: str, delivery: str) -> FlagRecord:
        """Record how a decision reached its job (``steered``, ``queued_followup`` ...)."""
        params = {"id": flag_id, "delivery": self.redactor.redact_text(delivery)}
        return await self._call(lambda: _delivered(params))


def _get(raw: str, *, lock: bool = False) -> Query[FlagRecord]:
    row = yield from one(_GET + ("{lock}" if lock else ""), {"id": raw})
    if row is not None:
        return _record(row)
    return _match((yield from rows(_PREFIX, {"pattern": _pattern(raw)})), raw)


def _records(sql: str, params: Any) -> Query[list[FlagRecord]]:
    return [_record(r) for r in (yield from rows(sql, params))]


def _insert(params: dict[str, Any]) -> Query[FlagRecord]:
    yield from count(_INSERT, params)
    return (yield from _get(params["id"]))


def _decide(
    flag_id: str, status: str, choice: str | None, said: dict[str, Any]
) -> Query[FlagRecord]:
    flag = yield from _get(flag_id, lock=True)
    yield from count(_DECIDE, _decision(flag, status, choice, **said))
    return (yield from _get(flag.id))


def _expire(at: float) -> Query[list[FlagRecord]]:
    ids = yield from values(rows(_EXPIRE_IDS + "{lock}", {"now": at}))
    flags = []
    for flag_id in ids:
        yield from count(_EXPIRE, {"id": flag_id, "now": at})
        flags.append((yield from _get(flag_id)))
    return flags


def _delivered(params: dict[str, Any]) -> Query[FlagRecord]:
    yield from count(_DELIVERED, {**params, "now": time.time()})
    return (yield from _get(params["id"]))
