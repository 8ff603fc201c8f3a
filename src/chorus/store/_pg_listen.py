"""One dedicated ``LISTEN`` connection per store, re-opened when it is lost.

``NOTIFY`` is a wake-up hint, never the transport: whatever a notification
announces is read from the tables, and everyone who waits on one also polls.
The connection is not pooled (``LISTEN`` belongs to a session). A silent
network failure is caught by probing the connection (``SELECT 1``) whenever no
notification arrived for ``probe_s``; a failed probe or read reconnects with
exponential backoff, and ``on_reconnect`` runs so that waiters re-read state
they might have missed while deaf.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping

import psycopg
from psycopg import sql

log = logging.getLogger("chorus.store")

Handler = Callable[[str], Awaitable[None]]


class Listener:
    """Dispatches notifications of ``channels`` (name -> handler of the payload),
    one at a time, in the order the server sends them (commit order)."""

    def __init__(
        self,
        url: str,
        channels: Mapping[str, Handler],
        *,
        probe_s: float = 5.0,
        max_backoff_s: float = 5.0,
        on_reconnect: Callable[[], None] | None = None,
    ) -> None:
        self._url = url
        self._channels = dict(channels)
        self._probe_s = probe_s
        self._max_backoff_s = max_backoff_s
        self._on_reconnect = on_reconnect
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.listening = asyncio.Event()
        #: Connections opened so far (1 after a clean start; more after losses).
        self.connections = 0
        #: The server pid of the current connection (tests terminate it).
        self.backend_pid: int | None = None

    async def start(self) -> None:
        """Start listening; returns once the first ``LISTEN`` is in place."""
        self._task = asyncio.create_task(self._run(), name="chorus-pg-listener")
        waiter = asyncio.create_task(self.listening.wait())
        done, _ = await asyncio.wait({waiter, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if waiter not in done:
            waiter.cancel()

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        backoff = 0.1
        while not self._stopping:
            opened = self.connections
            try:
                await self._session()
            except (psycopg.Error, OSError) as exc:
                if self.listening.is_set():  # once per loss, not once per failed retry
                    log.warning("store: LISTEN connection lost (%s); reconnecting", exc)
                self.listening.clear()
            backoff = 0.1 if self.connections > opened else min(backoff * 2, self._max_backoff_s)
            await asyncio.sleep(backoff)

    async def _session(self) -> None:
        async with await psycopg.AsyncConnection.connect(self._url, autocommit=True) as conn:
            for channel in self._channels:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            self.connections += 1
            self.backend_pid = conn.info.backend_pid
            if self.connections > 1 and self._on_reconnect is not None:
                self._on_reconnect()
            self.listening.set()
            while True:
                async for note in conn.notifies(timeout=self._probe_s):
                    await self._dispatch(note.channel, note.payload)
                await conn.execute("SELECT 1")  # quiet for probe_s: is it still alive?

    async def _dispatch(self, channel: str, payload: str) -> None:
        handler = self._channels.get(channel)
        if handler is None:
            return
        try:
            await handler(payload)
        except Exception:  # one bad notification must not deafen the listener
            log.exception("store: handling a %s notification failed", channel)
