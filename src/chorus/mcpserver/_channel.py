"""Each session's channel: Chorus's MCP server over streamable HTTP, one per session.

``/s/<token>/mcp`` is the MCP endpoint of the session the token was made for
(``chorus.bodies.token_channel``): the session comes from the token, never from the
request, and the only thing served is that session's tools (audited as
``mcp_tool_call``). ``/s/<token>/<name>/...`` goes to the route the daemon gave under
``name`` (the model-API meter: ``chorus.meter``), with the token's session. Any other
path, and a token not made with the daemon's key, is a bare 404; a GET (a stream of
the server's own messages) is a 405: the channel has none to send. The SDK's server
(stateless, JSON answers: nothing a restart loses) is built per session on its first
call and kept for the most recent sessions; the SDK itself is imported then, or by
:meth:`ChannelApp.warm` once the daemon is up.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from chorus.bodies import NO_SESSION, token_channel
from chorus.mcpserver._registry import ToolContext
from chorus.mcpserver._server import build_server
from chorus.mcpserver._tools import registered_tools
from chorus.policy import AuditLog

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Handler = Callable[[Scope, Receive, Send], Awaitable[None]]
#: A route beside the MCP endpoint: called with the token's channel id and the path
#: after ``/s/<token>/<name>``.
SessionRoute = Callable[[str, str, Scope, Receive, Send], Awaitable[None]]

_PATH = re.compile(r"/s/([^/]+)/mcp/?")
_ROUTE = re.compile(r"/s/([^/]+)/([a-z]+)(/.*)?", re.DOTALL)
#: Sessions whose server is kept built (an idle one beyond is dropped, rebuilt on use).
MAX_SERVED = 64


@dataclass(eq=False)
class _Served:
    """One session's SDK server, its HTTP session manager running in ``task``."""

    handle: Handler
    stop: asyncio.Event
    task: asyncio.Task[None]
    busy: int = 0

    @contextlib.asynccontextmanager
    async def using(self) -> AsyncIterator[None]:
        self.busy += 1
        try:
            yield
        finally:
            self.busy -= 1

    async def close(self) -> None:
        self.stop.set()
        with contextlib.suppress(Exception):
            await self.task


@dataclass(eq=False)
class ChannelApp:
    """The channel's ASGI app (give it to an HTTP server on loopback)."""

    key: bytes
    audit: AuditLog | None = None
    memory_table: dict[str, Any] | None = None
    max_served: int = MAX_SERVED
    routes: dict[str, SessionRoute] = field(default_factory=dict)
    _served: OrderedDict[str, _Served] = field(default_factory=OrderedDict)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if await self._routed(scope, receive, send):
            return
        channel = self.channel_of(str(scope.get("path", "")))
        if channel is None:
            await _answer(send, 404, b"not found")
            return
        if scope.get("method") == "GET":  # no stream of the server's own messages
            await _answer(send, 405, b"method not allowed", [(b"allow", b"POST")])
            return
        served = await self._serve(channel)
        async with served.using():
            await served.handle(scope, receive, send)

    async def _routed(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Serve a request for one of :attr:`routes` (True), if it is one."""
        match = _ROUTE.fullmatch(str(scope.get("path", "")))
        route = self.routes.get(match.group(2)) if match else None
        if match is None or route is None:
            return False
        channel = token_channel(self.key, match.group(1))
        if channel is None:
            await _answer(send, 404, b"not found")
        else:
            await route(channel, match.group(3) or "", scope, receive, send)
        return True

    def channel_of(self, path: str) -> str | None:
        """The channel id a request's path names with a good token, else None."""
        match = _PATH.fullmatch(path)
        return token_channel(self.key, match.group(1)) if match else None

    @property
    def sessions(self) -> list[str]:
        """The channels whose server is built now, least recently used first."""
        return list(self._served)

    async def warm(self) -> None:
        """Import the MCP SDK and the tools in a thread (the first channel then need
        not wait for them)."""
        await asyncio.to_thread(_warm)

    async def close(self) -> None:
        async with self._lock:
            served = list(self._served.values())
            self._served.clear()
        for one in served:
            await one.close()

    async def _serve(self, channel: str) -> _Served:
        async with self._lock:
            served = self._served.get(channel)
            if served is None:
                served = await self._start(channel)
                self._served[channel] = served
                await self._trim()
            self._served.move_to_end(channel)
            return served

    async def _start(self, channel: str) -> _Served:
        await self.warm()
        session = None if channel == NO_SESSION else channel
        server = build_server(ToolContext(session, None, self.memory_table), self.audit)
        server.streamable_http_app(stateless_http=True, json_response=True)
        manager = server.session_manager
        started, stop = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(_hold(manager.run(), started, stop), name=f"mcp-{channel}")
        await _started(started, task)
        return _Served(manager.handle_request, stop, task)

    async def _trim(self) -> None:
        idle = [c for c, s in self._served.items() if s.busy == 0]
        for channel in idle[: max(0, len(self._served) - self.max_served)]:
            await self._served.pop(channel).close()


def _warm() -> None:
    import mcp.server.mcpserver  # noqa: F401  the SDK takes a second to import

    registered_tools()


async def _hold(
    running: contextlib.AbstractAsyncContextManager[None],
    started: asyncio.Event,
    stop: asyncio.Event,
) -> None:
    """Keep a session manager running (its task group lives in this task) until ``stop``."""
    async with running:
        started.set()
        await stop.wait()


async def _started(started: asyncio.Event, task: asyncio.Task[None]) -> None:
    waiter = asyncio.ensure_future(started.wait())
    await asyncio.wait([waiter, task], return_when=asyncio.FIRST_COMPLETED)
    if not started.is_set():
        waiter.cancel()
        task.result()  # raises what stopped it
        raise RuntimeError("the MCP session manager stopped before it started")


async def _answer(
    send: Send, status: int, text: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """A bare answer (the same for a wrong path and a wrong token)."""
    head = [(b"content-type", b"text/plain"), (b"content-length", str(len(text)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": head + (headers or [])})
    await send({"type": "http.response.body", "body": text})
