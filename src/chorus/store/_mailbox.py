"""Team mailboxes in the store: who belongs to a team, and the messages
between its members, delivered at least once with an explicit ack.

A message is *pending* until it is taken (``delivered_at`` set, ``attempts``
bumped, ``delivered_to`` names the job whose turn carries it), then *acked* once
that turn has done its work. A taken message that was never acked (its turn
failed, or the daemon died) is released and taken again: nothing is lost, and
an acked message is never taken again. Recipients are checked against the
team's members in the same transaction as the insert: an unknown name is an
error (:class:`UnknownMemberError`), never a new inbox.

The SQL is written once for both backends (:mod:`chorus.store._query`).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chorus._errors import UserError
from chorus.store._errors import UnknownRecordError
from chorus.store._query import NO_LIMIT, Query, count, many, one, rows, values
from chorus.store._redact import Redactor
from chorus.store._repo import Repo

#: The kinds a message may have (the seed's list).
MESSAGE_KINDS = ("task", "result", "status", "steer", "handoff", "shutdown", "idle")


class UnknownMemberError(UnknownRecordError):
    """A message named a recipient that is not a member of the team."""

    def __init__(self, team: str, member: str, members: Sequence[str]) -> None:
        known = ", ".join(members) or "none: the team does not exist or was torn down"
        super().__init__(f"team {team!r} has no member {member!r} (members: {known})")
        self.team = team
        self.member = member


@dataclass(frozen=True, slots=True)
class MessageRecord:
    seq: int
    id: str
    team: str
    sender: str
    recipient: str
    kind: str
    body: dict[str, Any]
    correlation_id: str | None
    created_at: float
    delivered_at: float | None = None
    delivered_to: str | None = None
    acked_at: float | None = None
    attempts: int = 0

    @property
    def state(self) -> str:
        if self.acked_at is not None:
            return "acked"
        return "pending" if self.delivered_at is None else "delivered"


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message to post; ``id`` makes a post idempotent (a second post is a no-op)."""

    id: str
    team: str
    sender: str
    recipient: str
    kind: str
    body: dict[str, Any]
    correlation_id: str | None = None


COLUMNS = (
    "seq, id, team, sender, recipient, kind, body, correlation_id, created_at,"
    " delivered_at, delivered_to, acked_at, attempts"
)

MEMBERS_SELECT = "SELECT member FROM team_members WHERE team = :team ORDER BY member"
MEMBERS_DELETE = "DELETE FROM team_members WHERE team = :team"
MEMBER_INSERT = "INSERT INTO team_members (team, member, created_at) VALUES (:team, :member, :now)"
MESSAGE_INSERT = (
    "INSERT INTO mailbox (id, team, sender, recipient, kind, body, correlation_id,"
    " created_at, attempts) VALUES (:id, :team, :sender, :recipient, :kind, :body,"
    " :correlation_id, :now, 0) ON CONFLICT (id) DO NOTHING"
)
MESSAGE_BY_ID = f"SELECT {COLUMNS} FROM mailbox WHERE id = :id"
TAKE = (
    "UPDATE mailbox SET delivered_at = :now, delivered_to = :job, attempts = attempts + 1"
    " WHERE seq IN (SELECT seq FROM mailbox WHERE team = :team AND recipient = :recipient"
    " AND delivered_at IS NULL AND acked_at IS NULL"
    " AND (CAST(:kind AS TEXT) IS NULL OR kind = :kind)"
    " ORDER BY seq LIMIT :limit) AND delivered_at IS NULL"
    f" RETURNING {COLUMNS}"
)
RELEASE = (
    "UPDATE mailbox SET delivered_at = NULL, delivered_to = NULL"
    " WHERE acked_at IS NULL AND delivered_at IS NOT NULL"
    " AND (CAST(:job AS TEXT) IS NULL OR delivered_to = :job)"
    " AND (CAST(:team AS TEXT) IS NULL OR team = :team)"
)
LIST = (
    f"SELECT {COLUMNS} FROM mailbox WHERE team = :team"
    " AND (CAST(:recipient AS TEXT) IS NULL OR recipient = :recipient)"
    " AND (:unacked = 0 OR acked_at IS NULL) ORDER BY seq LIMIT :limit"
)


ACK = (
    "UPDATE mailbox SET acked_at = :now WHERE acked_at IS NULL"
    " AND id IN (JSON_ITEMS(:ids)) RETURNING id"
)


def record(row: Sequence[Any]) -> MessageRecord:
    body = json.loads(row[6]) if isinstance(row[6], str) else {}
    return MessageRecord(
        seq=int(row[0]),
        id=row[1],
        team=row[2],
        sender=row[3],
        recipient=row[4],
        kind=row[5],
        body=body if isinstance(body, dict) else {"value": body},
        correlation_id=row[7],
        created_at=float(row[8]),
        delivered_at=None if row[9] is None else float(row[9]),
        delivered_to=row[10],
        acked_at=None if row[11] is None else float(row[11]),
        attempts=int(row[12]),
    )


def insert_params(msg: NewMessage, body: str) -> dict[str, Any]:
    return {
        "id": msg.id,
        "team": msg.team,
        "sender": msg.sender,
        "recipient": msg.recipient,
        "kind": msg.kind,
        "body": body,
        "correlation_id": msg.correlation_id,
        "now": time.time(),
    }


def check_kind(kind: str) -> None:
    if kind not in MESSAGE_KINDS:
        raise UserError(f"unknown message kind {kind!r}; use one of {', '.join(MESSAGE_KINDS)}")


def clean_message(redactor: Redactor, message: NewMessage) -> NewMessage:
    """The message with its team, sender, recipient and correlation id redacted (its
    body is JSON, redacted apart)."""
    cid = message.correlation_id
    return dataclasses.replace(
        message,
        team=redactor.redact_text(message.team),
        sender=redactor.redact_text(message.sender),
        recipient=redactor.redact_text(message.recipient),
        correlation_id=None if cid is None else redactor.redact_text(cid),
    )


# -- the repository ----------------------------------------------------------------------------


class Mailboxes(Repo):
    """The team-mailbox part of :class:`~chorus.store.Store`."""

    async def set_team_members(self, team: str, members: Sequence[str]) -> None:
        """Make ``members`` the team's whole membership (empty: the team is gone)."""
        redact = self.redactor.redact_text
        team, members = redact(team), [redact(m) for m in members]
        await self._call(lambda: _set_members(team, members, time.time()))

    async def team_members(self, team: str) -> list[str]:
        """The team's members by name (empty for an unknown team)."""
        team = self.redactor.redact_text(team)
        return await self._read(lambda: values(rows(MEMBERS_SELECT, {"team": team})))

    async def post_message(self, message: NewMessage) -> MessageRecord:
        """Store ``message`` (pending); a second post of its id returns the first.
        Raises :class:`UnknownMemberError` (nothing written) for a recipient that is
        not a member."""
        check_kind(message.kind)
        body = self._json(message.body)
        message = clean_message(self.redactor, message)
        return await self._call(lambda: _post(message, body))

    async def take_messages(
        self,
        team: str,
        recipient: str,
        *,
        job_id: str | None = None,
        kind: str | None = None,
        limit: int = 100,
    ) -> list[MessageRecord]:
        """Deliver the recipient's oldest pending messages (to ``job_id``'s turn):
        each is marked delivered and not taken again until released."""
        params: dict[str, Any] = {**self._names(team=team, recipient=recipient), "job": job_id}
        params.update(kind=kind, limit=limit, now=time.time())
        return await self._call(lambda: _take(params))

    async def ack_messages(self, ids: Sequence[str]) -> list[str]:
        """Ack delivered messages; returns the ids acked now (not acked before)."""
        params = {"ids": json.dumps(list(ids)), "now": time.time()}
        return await self._call(lambda: values(rows(ACK, params)))

    async def release_messages(self, *, job_id: str | None = None, team: str | None = None) -> int:
        """Make delivered, unacked messages pending again (of one turn, one team, or
        all: after a crash); returns how many."""
        params = {"job": job_id, "team": self._clean(team)}
        return await self._call(lambda: count(RELEASE, params))

    async def list_messages(
        self,
        team: str,
        *,
        recipient: str | None = None,
        unacked: bool = False,
        limit: int | None = None,
    ) -> list[MessageRecord]:
        """The team's messages oldest first (one recipient's; only unacked ones)."""
        names = self._names(team=team, recipient=recipient)
        params: dict[str, Any] = {**names, "unacked": int(unacked), "limit": limit or NO_LIMIT}
        return await self._read(lambda: _records(LIST, params))


def _set_members(team: str, members: Sequence[str], now: float) -> Query[None]:
    yield from count(MEMBERS_DELETE, {"team": team})
    rows_ = [{"team": team, "member": member, "now": now} for member in members]
    yield from many(MEMBER_INSERT, rows_)


def _post(msg: NewMessage, body: str) -> Query[MessageRecord]:
    members = yield from values(rows(MEMBERS_SELECT, {"team": msg.team}))
    if msg.recipient not in members:
        raise UnknownMemberError(msg.team, msg.recipient, members)
    yield from count(MESSAGE_INSERT, insert_params(msg, body))
    return record((yield from one(MESSAGE_BY_ID, {"id": msg.id})))


def _records(sql: str, params: dict[str, Any]) -> Query[list[MessageRecord]]:
    return [record(row) for row in (yield from rows(sql, params))]


def _take(params: dict[str, Any]) -> Query[list[MessageRecord]]:
    return sorted((yield from _records(TAKE, params)), key=lambda m: m.seq)
