"""Each session's channel: Chorus's MCP server over streamable HTTP, one per session.

``/s/<token>/mcp`` is the MCP endpoint of the session the token was made for
(``chorus.bodies.token_channel``): the session comes from the token, never from the
request, and the only thing served is that session's tools (audited as
``mcp_tool_call``). ``/s/<token>/<name>/...`` goes to the route the daemon gave under
``name`` (the model-API meter: ``chorus.meter``), with the token's session. Any other
path, and a token not made with the daemon's key, is a bare 404; a GET (a stream of
the server's own messages) is a 405: the channel has none to send. One SDK server
(stateless, JSON answers: nothing a restart loses) serves every session: each request
runs with its token's session in a context variable, which the tools read at each
call (the SDK's tasks for a request are made inside it, so they inherit it). It is
built on the first call, or by :meth:`ChannelApp.warm` once the daemon is up, in a
thread: the SDK takes a second to import, and building the tools' schemas tens of
milliseconds, which a session's start would otherwise wait for.

A CLI that carries MCP on its own stdio (a live Claude: ``mcp_message`` control
requests) is answered by :meth:`ChannelApp.answer`, bound to its session when the
body is started: the same server, fed each message as an in-process POST. The
answers to the handshake's requests (``initialize``, ``tools/list``...), the same
for every session, are kept once the SDK gave them: a session's start waits for
them, three round trips in a row.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chorus.bodies import NO_SESSION, token_channel
from chorus.mcpserver._registry import ToolContext
from chorus.mcpserver._server import build_server
from chorus.policy import AuditLog

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Handler = Callable[[Scope, Receive, Send], Awaitable[None]]
JsonDict = dict[str, Any]
#: A route beside the MCP endpoint: called with the token's channel id and the path
#: after ``/s/<token>/<name>``.
SessionRoute = Callable[[str, str, Scope, Receive, Send], Awaitable[None]]

_PATH = re.compile(r"/s/([^/]+)/mcp/?")
#: Requests the one stateless server answers the same for every session, its tools
#: being fixed once it is built: a session's start asks them again and again, and
#: the SDK takes milliseconds to answer each one while the CLI waits.
_FIXED = frozenset({"initialize", "tools/list", "prompts/list", "resources/list"})
_KNOWN_MAX = 64  # distinct such requests kept (a CLI names its own in `initialize`)
_KEY_MAX = 4096  # characters of a kept request (Claude's `initialize` has about 200)
_ROUTE = re.compile(r"/s/([^/]+)/([a-z]+)(/.*)?", re.DOTALL)
#: The context of the request being served: its token's session.
_CALLER: contextvars.ContextVar[ToolContext] = contextvars.ContextVar("chorus_mcp_caller")


@dataclass(eq=False)
class _Served:
    """The SDK server, its HTTP session manager running in ``task``."""

    handle: Handler
    stop: asyncio.Event
    task: asyncio.Task[None]

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
    routes: dict[str, SessionRoute] = field(default_factory=dict)
    _served: _Served | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: The SDK's answers to requests whose answer is the request's alone (see
    #: :data:`_FIXED`), kept while the server they came from serves.
    _known: dict[str, JsonDict] = field(default_factory=dict)

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
        await self._handle(channel, scope, receive, send)

    async def answer(self, channel: str, message: JsonDict) -> JsonDict | None:
        """One JSON-RPC message of ``channel``'s session, from a body that carries MCP
        on its own stdio (Claude's ``mcp_message``), answered by the same SDK server as
        an HTTP request: the reply, or None for a notification."""
        if "id" not in message:
            return None  # a notification: the stateless server keeps nothing of it
        key = _fixed_key(message)
        if key is not None and (known := self._known.get(key)) is not None:
            return {**known, "id": message["id"]}
        served = await self._serve()
        body = json.dumps(message).encode()
        exchange = _Exchange(body)
        await self._handle(channel, _post_scope(len(body)), exchange.receive, exchange.send)
        reply = exchange.reply()
        if reply is not None and reply.get("id") is None:
            reply = {**reply, "id": message["id"]}  # the SDK's own errors carry none
        if key is not None and reply is not None and served is self._served:
            self._keep(key, reply)
        return reply

    def _keep(self, key: str, reply: JsonDict) -> None:
        if "result" in reply and len(self._known) < _KNOWN_MAX:
            self._known[key] = reply

    async def _handle(self, channel: str, scope: Scope, receive: Receive, send: Send) -> None:
        served = await self._serve()
        session = None if channel == NO_SESSION else channel
        reset = _CALLER.set(ToolContext(session, None, self.memory_table))
        try:
            await served.handle(scope, receive, send)
        finally:
            _CALLER.reset(reset)

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

    async def warm(self) -> None:
        """Import the MCP SDK and build the server's tools in a thread (the first
        channel then need not wait for them)."""
        async with self._lock:
            if self._served is None:
                server = await asyncio.to_thread(build_server, _CALLER.get, self.audit)
                self._served = await _run(server)

    async def close(self) -> None:
        async with self._lock:
            served, self._served = self._served, None
            self._known.clear()
        if served is not None:
            await served.close()

    async def _serve(self) -> _Served:
        if self._served is None:
            await self.warm()
        assert self._served is not None
        return self._served


async def _run(server: MCPServer) -> _Served:
    """``server``'s stateless HTTP session manager, running in a task of its own."""
    server.streamable_http_app(stateless_http=True, json_response=True)
    manager = server.session_manager
    started, stop = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(_hold(manager.run(), started, stop), name="mcp-channel")
    await _started(started, task)
    return _Served(manager.handle_request, stop, task)


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


def _fixed_key(message: JsonDict) -> str | None:
    """What an answer to ``message`` is kept under, if it is one of :data:`_FIXED` and
    small (a CLI's handshake is; one a body made huge is answered, not kept)."""
    if message.get("method") not in _FIXED:
        return None
    key = json.dumps([message["method"], message.get("params")], sort_keys=True)
    return key if len(key) <= _KEY_MAX else None


def _post_scope(length: int) -> Scope:
    """The ASGI scope of a JSON POST to the endpoint, as a CLI's own HTTP one has it."""
    headers = [
        (b"host", b"127.0.0.1:0"),  # the SDK allows loopback hosts only
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"content-length", str(length).encode()),
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 0),
        "server": ("127.0.0.1", 0),
    }


@dataclass(eq=False)
class _Exchange:
    """One in-process request to the SDK's handler: its body in, its answer out."""

    body: bytes
    status: int = 0
    chunks: list[bytes] = field(default_factory=list)
    _asked: bool = False
    _done: asyncio.Event = field(default_factory=asyncio.Event)

    async def receive(self) -> MutableMapping[str, Any]:
        if not self._asked:
            self._asked = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self._done.wait()  # asked again: the client leaves once answered
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
        elif message["type"] == "http.response.body":
            self.chunks.append(bytes(message.get("body", b"")))
            if not message.get("more_body"):
                self._done.set()

    def reply(self) -> JsonDict | None:
        text = b"".join(self.chunks)
        if self.status == 202 or (self.status < 300 and not text):
            return None  # a notification, accepted
        try:
            reply = json.loads(text)
        except ValueError:
            reply = None
        if isinstance(reply, dict):
            return reply
        detail = text.decode(errors="replace")[:200]
        return {"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": detail}}
