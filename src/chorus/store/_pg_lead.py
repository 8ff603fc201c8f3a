"""One leader per role across the cluster, by a PostgreSQL advisory lock.

A session-level advisory lock lives exactly as long as the connection that took
it: when the leader's process dies (even by ``kill -9``) or its connection is cut,
the server releases the lock and the next node that asks takes it. The lock is
held on a connection of its own (not the pool's: a pooled connection would carry
the lock back into the pool). The holder checks that connection on every call;
once it fails, the holder says it no longer leads and reconnects to ask again.

Between the server releasing the lock and the old holder noticing (one check
interval), two nodes may both believe they lead; whatever they do must therefore
also be safe twice. Routine firings are: a firing's row is keyed by (routine,
scheduled time) and written with its job, so the second try is refused.
"""

from __future__ import annotations

import contextlib
import logging
import zlib
from typing import Any

import psycopg

Conn = psycopg.AsyncConnection[tuple[Any, ...]]

log = logging.getLogger("chorus.store")

#: The advisory lock's first key: "chor"; the second is a CRC of the role.
LEAD_LOCK_CLASS = 0x63686F72
CONNECT_TIMEOUT_S = 5


def lock_keys(role: str) -> tuple[int, int]:
    """The two 32-bit keys of the role's advisory lock."""
    return LEAD_LOCK_CLASS, zlib.crc32(role.encode()) & 0x7FFFFFFF


class Leadership:
    """Holds (or tries to hold) the advisory locks of some roles for this process."""

    def __init__(self, url: str, *, node: str = "") -> None:
        self.url = url
        self.node = node
        self._conn: Conn | None = None
        self._held: set[str] = set()

    async def hold(self, role: str) -> bool:
        """Take or keep ``role``; False when another process holds it or the database
        cannot be reached (then nothing is held, and the next call reconnects)."""
        try:
            conn = await self._connection()
            if role in self._held:
                await conn.execute("SELECT 1")
                return True
            cur = await conn.execute("SELECT pg_try_advisory_lock(%s, %s)", lock_keys(role))
            row = await cur.fetchone()
        except (psycopg.Error, OSError) as exc:
            await self._drop(f"{type(exc).__name__}: {exc}".strip())
            return False
        if row is not None and row[0]:
            self._held.add(role)
            log.info("this process now leads %r", role)
            return True
        return False

    async def _connection(self) -> Conn:
        if self._conn is None or self._conn.closed:
            self._held.clear()
            self._conn = await psycopg.AsyncConnection.connect(
                self.url,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT_S,
                application_name=f"chorus-lead {self.node}"[:63],
            )
        return self._conn

    async def _drop(self, reason: str) -> None:
        if self._held:
            log.warning("lost the lead of %s: %s", ", ".join(sorted(self._held)), reason)
        self._held.clear()
        await self.close()

    async def close(self) -> None:
        """Give up every role (closing the connection releases the locks)."""
        conn, self._conn = self._conn, None
        self._held.clear()
        if conn is not None:
            with contextlib.suppress(psycopg.Error, OSError):
                await conn.close()
