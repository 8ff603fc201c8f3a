"""The one way a front reaches Chorus: UCP v1 over the daemon's unix socket.

A :class:`Link` is one UCP connection bound to one Chorus session. It starts the
daemon when none answers (as the ``chorus`` CLI does), opens or re-opens the
session with ``initialize``, sends user messages and controls, and hands the
session's canonical events to the front, skipping the ones a re-opened session
had logged before (a front shows only what happens while it is attached).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from chorus._errors import ChorusError
from chorus.events import CanUseToolRequest, Event, JsonDict, TurnCompleted, TurnFailed
from chorus.gateway import UcpClient

#: A front's answer to a permission ask: ``{"behavior": "allow" | "deny", "message"?}``.
CanUseTool = Callable[[CanUseToolRequest], Awaitable[JsonDict]]

#: How long ``initialize`` may take (a cold body start, a resumed native session).
INITIALIZE_TIMEOUT_S = 120.0


class LinkError(ChorusError):
    """The daemon could not be started or reached."""


#: The ``terminal_reason`` the session gives a body's end that its turn goes on after
#: (a denial's or a steer's follow-up prompt): not the turn's end.
CONTINUES = "continues"


def is_turn_end(event: Event) -> bool:
    """``event`` ends the turn (a body's inner end, marked ``continues``, does not)."""
    ends = isinstance(event, TurnCompleted | TurnFailed)
    return ends and getattr(event, "terminal_reason", None) != CONTINUES


async def ensure_daemon() -> None:
    """Start the daemon of this ``CHORUS_HOME`` unless one answers already."""
    from chorus._errors import ChorusError
    from chorus.client import DaemonError, spawn_daemon

    try:
        await asyncio.to_thread(spawn_daemon)
    except (DaemonError, ChorusError) as exc:  # a bad config is said by the daemon itself
        raise LinkError(f"the Chorus daemon could not start: {exc}") from exc


class Link:
    """One UCP connection to the daemon, attached to one Chorus session."""

    def __init__(self, client: UcpClient) -> None:
        self.client = client
        self.info: JsonDict = {}
        self._skip_through = 0

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, on_can_use_tool: CanUseTool | None = None) -> AsyncIterator[Link]:
        """Start the daemon if needed and connect to its socket. With
        ``on_can_use_tool``, the policy's asks about this session's tool calls come
        to the front (which puts them to its client)."""
        from chorus.client import socket_path

        await ensure_daemon()
        async with contextlib.AsyncExitStack() as stack:
            try:
                opener = UcpClient.connect(
                    unix_socket=socket_path(), on_can_use_tool=on_can_use_tool
                )
                client = await stack.enter_async_context(opener)
            except OSError as exc:
                message = f"cannot reach the Chorus daemon at {socket_path()}: {exc}"
                raise LinkError(message) from exc
            yield cls(client)

    @property
    def session_id(self) -> str:
        return str(self.info.get("session_id", ""))

    async def open(self, **fields: Any) -> JsonDict:
        """``initialize`` (``resume=`` re-opens a Chorus session); returns its status."""
        given = {key: value for key, value in fields.items() if value is not None}
        self.info = await self.client.request("initialize", timeout=INITIALIZE_TIMEOUT_S, **given)
        if self.info.get("resumed"):
            self._skip_through = int(self.info.get("last_seq", 0))
        return self.info

    async def history(self) -> AsyncIterator[Event]:
        """A re-opened session's logged events (those :meth:`events` skips), in order."""
        if self._skip_through == 0:
            return
        async for event in self.client.events():
            yield event
            if event.seq >= self._skip_through:
                return

    async def user(self, text: str) -> None:
        await self.client.send_user(text)

    async def control(self, subtype: str, **fields: Any) -> JsonDict:
        """A UCP control; raises :class:`chorus.gateway.ResponseError` on refusal."""
        return await self.client.request(subtype, **fields)

    async def events(self) -> AsyncIterator[Event]:
        """The session's new events, as they arrive (no end of its own)."""
        async for event in self.client.events():
            if event.seq > self._skip_through:
                yield event

    async def turn(self) -> AsyncIterator[Event]:
        """The events of the next turn, up to and including its end."""
        async for event in self.events():
            yield event
            if is_turn_end(event):
                return


def seconds_left(ask: CanUseToolRequest) -> float:
    """How long the front may wait for its client's answer to ``ask``."""
    return max(0.0, ask.expires - time.time())


def verdict(allow: bool, message: str | None = None) -> JsonDict:
    """A ``can_use_tool`` answer for Chorus."""
    answer: JsonDict = {"behavior": "allow" if allow else "deny"}
    if message:
        answer["message"] = message
    return answer
