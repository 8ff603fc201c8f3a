"""The PostgreSQL side of the team mailboxes (:mod:`chorus.store._mailbox`): the
same SQL, run on the store's async connections."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chorus.store._mailbox import (
    LIST,
    MEMBER_INSERT,
    MEMBERS_DELETE,
    MEMBERS_SELECT,
    MESSAGE_BY_ID,
    MESSAGE_INSERT,
    RELEASE,
    TAKE,
    MessageRecord,
    NewMessage,
    UnknownMemberError,
    ack_params,
    ack_query,
    insert_params,
    pg,
    record,
)
from chorus.store._pg_writer import Conn


async def set_members(conn: Conn, team: str, members: Sequence[str], now: float) -> None:
    await conn.execute(pg(MEMBERS_DELETE).encode(), {"team": team})
    for member in members:
        await conn.execute(pg(MEMBER_INSERT).encode(), {"team": team, "member": member, "now": now})


async def members(conn: Conn, team: str) -> list[str]:
    cur = await conn.execute(pg(MEMBERS_SELECT).encode(), {"team": team})
    return [str(row[0]) for row in await cur.fetchall()]


async def post(conn: Conn, msg: NewMessage, body: str) -> MessageRecord:
    known = await members(conn, msg.team)
    if msg.recipient not in known:
        raise UnknownMemberError(msg.team, msg.recipient, known)
    await conn.execute(pg(MESSAGE_INSERT).encode(), insert_params(msg, body))
    cur = await conn.execute(pg(MESSAGE_BY_ID).encode(), {"id": msg.id})
    row = await cur.fetchone()
    assert row is not None
    return record(row)


async def take(conn: Conn, params: dict[str, Any]) -> list[MessageRecord]:
    cur = await conn.execute(pg(TAKE).encode(), params)
    return sorted((record(row) for row in await cur.fetchall()), key=lambda m: m.seq)


async def ack(conn: Conn, ids: Sequence[str]) -> list[str]:
    if not ids:
        return []
    cur = await conn.execute(pg(ack_query(len(ids))).encode(), ack_params(ids))
    return [str(row[0]) for row in await cur.fetchall()]


async def release(conn: Conn, params: dict[str, Any]) -> int:
    cur = await conn.execute(pg(RELEASE).encode(), params)
    return cur.rowcount


async def listing(conn: Conn, params: dict[str, Any]) -> list[MessageRecord]:
    cur = await conn.execute(pg(LIST).encode(), params)
    return [record(row) for row in await cur.fetchall()]
