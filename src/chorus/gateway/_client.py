"""A brain-side UCP v1 client: one WebSocket, requests matched to answers by id.

Use it as an async context manager::

    async with UcpClient.connect("ws://127.0.0.1:7719/ucp", token=token) as brain:
        info = await brain.request("initialize", body="claude", cwd="/work")
        await brain.send_user("make out.txt")
        async for event in brain.events():
            ...

Queues and their policies: events wait in a queue of ``max_events``; when it
is full the reader waits (back-pressure reaches the gateway, which then feeds
this client from its log), so answers queued behind events wait too. Error
answers whose ``request_id`` matches no request of ours (rejected user
messages, unparseable frames) go to :meth:`rejection`, a queue of
``max_rejections`` that drops its oldest entry when full.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Self

from websockets.asyncio.client import ClientConnection, connect, unix_connect
from websockets.exceptions import ConnectionClosed

from chorus._errors import EventError
from chorus.events import (
    CanUseToolRequest,
    ControlRequest,
    ControlResponse,
    ErrorBody,
    Event,
    EventFrame,
    JsonDict,
    RequestBody,
    UserContent,
    UserMessage,
    error,
    parse_outbound,
    success,
)
from chorus.gateway._errors import GatewayError, ResponseError

log = logging.getLogger("chorus.gateway.client")

#: A brain's answer to a permission ask: ``{"behavior": "allow"|"deny", "message": ...}``.
CanUseTool = Callable[[CanUseToolRequest], Awaitable[JsonDict]]

#: Largest frame the client accepts (events can carry big tool outputs).
MAX_INBOUND_BYTES = 64 << 20


class UcpClient:
    """Speak UCP v1 to a gateway. Create with :meth:`connect`."""

    def __init__(
        self,
        connection: ClientConnection,
        *,
        max_events: int,
        max_rejections: int,
        on_can_use_tool: CanUseTool | None = None,
    ) -> None:
        self.connection = connection
        self._on_can_use_tool = on_can_use_tool
        self._handlers: set[asyncio.Task[None]] = set()
        self._waiters: dict[str, asyncio.Future[ControlResponse]] = {}
        self._events: asyncio.Queue[Event] = asyncio.Queue(max_events)
        self._rejections: asyncio.Queue[ErrorBody] = asyncio.Queue(max_rejections)
        self._ids = itertools.count(1)
        self._salt = secrets.token_hex(4)
        self.last_seq = 0
        self.keep_alives = 0

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(
        cls,
        url: str = "ws://localhost/ucp",
        *,
        token: str | None = None,
        unix_socket: Path | None = None,
        origin: str | None = None,
        keepalive_s: float | None = 15.0,
        max_events: int = 10_000,
        max_rejections: int = 1000,
        open_timeout: float = 10.0,
        on_can_use_tool: CanUseTool | None = None,
    ) -> AsyncIterator[Self]:
        """Connect (TCP ``url``, or the daemon's ``unix_socket``) and run the reader and
        the keep-alive sender until the block exits; then close.

        With ``on_can_use_tool``, ``initialize`` tells the gateway this brain takes
        permission asks, and each ask is answered with what the callback returns
        (``{"behavior": "allow" | "deny", "message": ...}``)."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        options: dict[str, Any] = {
            "additional_headers": headers,
            "open_timeout": open_timeout,
            "max_size": MAX_INBOUND_BYTES,
            "proxy": None,
        }
        if origin is not None:
            options["origin"] = origin
        if unix_socket is not None:
            opener = unix_connect(str(unix_socket), url, **options)
        else:
            opener = connect(url, **options)
        connection = await opener
        client = cls(
            connection,
            max_events=max_events,
            max_rejections=max_rejections,
            on_can_use_tool=on_can_use_tool,
        )
        async with asyncio.TaskGroup() as tg:
            tg.create_task(client._read_loop(), name="ucp-client-reader")
            beat = tg.create_task(client._keepalive(keepalive_s), name="ucp-client-keepalive")
            try:
                yield client
            finally:
                beat.cancel()
                await connection.close()

    # -- sending --------------------------------------------------------------------------

    def new_request_id(self) -> str:
        return f"req_{next(self._ids)}_{self._salt}"

    async def request(
        self,
        subtype: str,
        *,
        request_id: str | None = None,
        timeout: float = 60.0,  # noqa: ASYNC109 - a per-request deadline, like the gateway's
        **fields: Any,
    ) -> JsonDict:
        """Send a control request; return the success payload or raise
        :class:`ResponseError` (with the stable ``code``)."""
        reply = await self.call(subtype, request_id=request_id, timeout=timeout, **fields)
        body = reply.response
        if body.subtype == "error":
            raise ResponseError(body.request_id, body.error_code, body.error)
        return body.response

    async def call(
        self,
        subtype: str,
        *,
        request_id: str | None = None,
        timeout: float = 60.0,  # noqa: ASYNC109 - a per-request deadline
        **fields: Any,
    ) -> ControlResponse:
        """Like :meth:`request`, but return the raw response (success or error)."""
        rid = request_id or self.new_request_id()
        if subtype == "initialize" and self._on_can_use_tool is not None:
            fields.setdefault("can_use_tool", True)
        frame = ControlRequest(request_id=rid, request=RequestBody(subtype=subtype, **fields))
        return await self.call_raw(rid, frame.model_dump_json(), timeout=timeout)

    async def call_raw(
        self,
        request_id: str,
        data: str | bytes,
        *,
        timeout: float = 60.0,  # noqa: ASYNC109 - a per-request deadline
    ) -> ControlResponse:
        """Send ``data`` as is and wait for the response carrying ``request_id``."""
        future: asyncio.Future[ControlResponse] = asyncio.get_running_loop().create_future()
        self._waiters[request_id] = future
        try:
            await self.send_raw(data)
            return await asyncio.wait_for(future, timeout)
        finally:
            self._waiters.pop(request_id, None)

    async def send_user(self, text: str) -> None:
        """Queue a user message (refusals arrive through :meth:`rejection`)."""
        message = UserMessage(message=UserContent(content=text))
        await self.send_raw(message.model_dump_json())

    async def send_raw(self, data: str | bytes) -> None:
        try:
            await self.connection.send(data)
        except ConnectionClosed as exc:
            raise GatewayError(f"the gateway connection is closed: {exc}") from exc

    # -- receiving --------------------------------------------------------------------------

    async def next_event(self, timeout: float = 60.0) -> Event:  # noqa: ASYNC109
        """The next event frame's event; :class:`TimeoutError` after ``timeout``."""
        return await asyncio.wait_for(self._events.get(), timeout)

    async def events(self) -> AsyncIterator[Event]:
        """Events as they arrive (no end of its own)."""
        while True:
            yield await self._events.get()

    async def until(
        self,
        done: Callable[[Event], bool],
        timeout: float = 60.0,  # noqa: ASYNC109
    ) -> list[Event]:
        """Collect events up to and including the first for which ``done`` is true."""
        collected: list[Event] = []
        async with asyncio.timeout(timeout):
            while True:
                event = await self._events.get()
                collected.append(event)
                if done(event):
                    return collected

    def drain(self) -> list[Event]:
        """Events already received and not yet taken."""
        taken: list[Event] = []
        while not self._events.empty():
            taken.append(self._events.get_nowait())
        return taken

    async def rejection(self, timeout: float = 10.0) -> ErrorBody:  # noqa: ASYNC109
        """The next error answer that matches no pending request of ours."""
        return await asyncio.wait_for(self._rejections.get(), timeout)

    async def _read_loop(self) -> None:
        try:
            async for data in self.connection:
                await self._dispatch(data)
        except ConnectionClosed:
            pass
        finally:
            closed = GatewayError("the gateway connection closed")
            for future in self._waiters.values():
                if not future.done():
                    future.set_exception(closed)

    async def _dispatch(self, data: str | bytes) -> None:
        try:
            frame = parse_outbound(data, max_bytes=MAX_INBOUND_BYTES)
        except EventError as exc:
            log.warning("ignoring a frame the gateway sent: %s", exc)
            return
        if isinstance(frame, EventFrame):
            self.last_seq = max(self.last_seq, frame.seq)
            await self._events.put(frame.event)
        elif isinstance(frame, ControlResponse):
            self._answer(frame)
        elif isinstance(frame, ControlRequest):
            task = asyncio.create_task(self._serve_request(frame))
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)
        else:
            self.keep_alives += 1

    async def _serve_request(self, frame: ControlRequest) -> None:
        """Answer a request from the gateway (today: ``can_use_tool`` asks)."""
        rid = frame.request_id
        if frame.request.subtype != "can_use_tool" or self._on_can_use_tool is None:
            reply = error(
                rid, f"this brain does not answer {frame.request.subtype!r}", "unsupported"
            )
        else:
            try:
                ask = CanUseToolRequest.model_validate(frame.request.model_dump())
                reply = success(rid, await self._on_can_use_tool(ask))
            except Exception as exc:  # the gateway must get its one answer
                reply = error(rid, f"the brain's callback failed: {exc}", "internal")
        with contextlib.suppress(ConnectionClosed):
            await self.connection.send(reply.model_dump_json())

    def _answer(self, frame: ControlResponse) -> None:
        future = self._waiters.get(frame.response.request_id)
        if future is not None and not future.done():
            future.set_result(frame)
            return
        if isinstance(frame.response, ErrorBody):
            if self._rejections.full():
                self._rejections.get_nowait()  # the stated policy: drop the oldest
            self._rejections.put_nowait(frame.response)

    async def _keepalive(self, every: float | None) -> None:
        if every is None:
            return
        while True:
            await asyncio.sleep(every)
            with contextlib.suppress(ConnectionClosed):
                await self.connection.send('{"type":"keep_alive"}')
