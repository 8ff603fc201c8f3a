"""Team mailboxes in the store: who belongs to a team, and the messages
between its members, delivered at least once with an explicit ack.

A message is *pending* until it is taken (``delivered_at`` set, ``attempts``
bumped, ``delivered_to`` names the job whose turn carries it), then *acked* once
that turn has done its work. A taken message that was never acked (its turn
failed, or the daemon died) is released and taken again: nothing is lost, and
an acked message is never taken again. Recipients are checked against the
team's members in the same transaction as the insert: an unknown name is an
error (:class:`UnknownMemberError`), never a new inbox.

The SQL is written once with ``:name`` parameters (SQLite's style); the
PostgreSQL store turns them into ``%(name)s`` with :func:`pg`.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chorus._errors import UserError
from chorus.store._errors import UnknownRecordError

#: A LIMIT both SQLite and PostgreSQL read as "all".
NO_LIMIT = 1 << 62

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


def pg(query: str) -> str:
    """The query with PostgreSQL's parameter style."""
    return re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", query)


def ack_query(count: int) -> str:
    """Ack the given ids (``:id0`` ...) that are not acked yet; returns the ids acked."""
    marks = ", ".join(f":id{n}" for n in range(count))
    return (
        "UPDATE mailbox SET acked_at = :now WHERE acked_at IS NULL"
        f" AND id IN ({marks}) RETURNING id"
    )


def ack_params(ids: Sequence[str]) -> dict[str, Any]:
    return {"now": time.time(), **{f"id{n}": value for n, value in enumerate(ids)}}


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


# -- SQLite (run on the store's writer or reader threads) -----------------------------------


def sqlite_set_members(conn: sqlite3.Connection, team: str, members: Sequence[str]) -> None:
    conn.execute(MEMBERS_DELETE, {"team": team})
    now = time.time()
    for member in members:
        conn.execute(MEMBER_INSERT, {"team": team, "member": member, "now": now})


def sqlite_members(conn: sqlite3.Connection, team: str) -> list[str]:
    return [row[0] for row in conn.execute(MEMBERS_SELECT, {"team": team}).fetchall()]


def sqlite_post(conn: sqlite3.Connection, msg: NewMessage, body: str) -> MessageRecord:
    members = sqlite_members(conn, msg.team)
    if msg.recipient not in members:
        raise UnknownMemberError(msg.team, msg.recipient, members)
    conn.execute(MESSAGE_INSERT, insert_params(msg, body))
    return record(conn.execute(MESSAGE_BY_ID, {"id": msg.id}).fetchone())


def sqlite_take(conn: sqlite3.Connection, params: dict[str, Any]) -> list[MessageRecord]:
    rows = conn.execute(TAKE, params).fetchall()
    return sorted((record(row) for row in rows), key=lambda m: m.seq)


def sqlite_ack(conn: sqlite3.Connection, ids: Sequence[str]) -> list[str]:
    if not ids:
        return []
    return [row[0] for row in conn.execute(ack_query(len(ids)), ack_params(ids)).fetchall()]


def sqlite_release(conn: sqlite3.Connection, params: dict[str, Any]) -> int:
    return conn.execute(RELEASE, params).rowcount


def sqlite_list(conn: sqlite3.Connection, params: dict[str, Any]) -> list[MessageRecord]:
    return [record(row) for row in conn.execute(LIST, params).fetchall()]
