"""The meter: a streaming pass-through proxy for the model APIs, served by the meter's
own process (``_process``) under each session's token
(``/s/<token>/meter/<api>/<ref>/...``, see ``_point``).

Each request goes to the upstream its signed URL names with the body's own method,
path, query, headers (credentials included; hop-by-hop ones aside) and body; the
answer comes back as the provider gave it: status, headers, and every chunk as it
arrives. Nothing is retried or swallowed; an upstream that cannot be reached is a
502 in the API's own error shape. A client that goes away closes the upstream
request. On the way each answer's usage is read (``_usage``), priced
(``_prices``) and handed to the sink as a :class:`chorus.events.Metered` before the
client can see the answer's end (so a budget is current when the next request
comes, and a record is kept before its CLI can exit); its rate-limit headers go to
the :class:`QuotaBook`. Connections to the upstreams are kept alive (``_upstream``).
Before a POST is forwarded the sink may refuse it (a budget reached): the CLI then
gets a 400 in its API's error shape and ends its turn.

Secrets stay home (``_secrets``): the known values in a POST's body are replaced by
``[SECRET:<name>]`` before it goes (a body compressed in a way the meter cannot read
is refused while any secret is known), and the answer to a request that hid some
has their placeholders put back in its tool calls (asked uncompressed; its length
header dropped: the body changes).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
import zlib
from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote

from chorus.events import Metered, Usage
from chorus.meter._point import Target, resolve
from chorus.meter._prices import PriceTable, price_table
from chorus.meter._quota import QuotaBook, windows_from
from chorus.meter._replies import (
    Reply,
    api_error,
    budget_reply,
    too_large_reply,
    unreachable_reply,
)
from chorus.meter._secrets import Restorer, SecretBook
from chorus.meter._upstream import Conn, Upstream, UpstreamError, origin_of
from chorus.meter._usage import Api, UsageReader

log = logging.getLogger("chorus.meter")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

#: A request body larger than this is refused (413) rather than forwarded.
MAX_REQUEST_BYTES = 64 << 20
_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"trailers",
        b"transfer-encoding",
        b"upgrade",
    }
)
#: Set by the HTTP client from the URL and the body it sends.
_REQUEST_OWN = frozenset({b"host", b"content-length"})
_NOT_FORWARDED = _HOP_BY_HOP | _REQUEST_OWN


class MeterSink(Protocol):
    """Where the meter asks and tells (the daemon: its ledger, budgets and log)."""

    def admit(self, channel: str, api: str) -> str | Awaitable[str | None] | None:
        """Why a model request of ``channel`` may not go out now, or None (or an
        awaitable of it: the meter's own process asks the daemon)."""

    def record(self, channel: str, event: Metered) -> None:
        """One request's usage (called once per forwarded request; a sink with a
        ``record_fields(channel, fields)`` method is given the event's fields
        instead, a dict of JSON values)."""


class NullSink:
    """Admits everything, keeps nothing."""

    def admit(self, channel: str, api: str) -> str | None:
        return None

    def record(self, channel: str, event: Metered) -> None:
        return None


def new_client() -> Upstream:
    """The upstream client (``_upstream``): connections kept alive per origin, no
    timeout once connected (a model may think for minutes; the CLI keeps its own), no
    redirects followed, no headers of its own but the ``Host`` and length."""
    return Upstream()


@dataclass(eq=False)
class MeterApp:
    """Serves ``/s/<token>/meter/...``: called with the channel id the token names and
    the path after ``meter`` (by the meter's process, or any ASGI front that checks
    the token)."""

    key: bytes
    sink: MeterSink = field(default_factory=NullSink)
    prices: PriceTable = field(default_factory=price_table)
    quotas: QuotaBook = field(default_factory=QuotaBook)
    max_request_bytes: int = MAX_REQUEST_BYTES
    client: Upstream | None = None  # made on the first request

    def upstream(self) -> Upstream:
        if self.client is None:
            self.client = new_client()
        return self.client

    #: The secret values hidden from the providers (replaced as the daemon learns them).
    secrets: SecretBook = field(default_factory=SecretBook)

    async def __call__(
        self, channel: str, rest: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        target = resolve(self.key, channel, rest)
        if target is None:
            await _answer(send, Reply(404, b"not found"), b"text/plain")
            return
        body = await _read_body(receive, self.max_request_bytes)
        if body is None:
            await _answer(send, too_large_reply(target.api, self.max_request_bytes))
            return
        posted = scope.get("method") == "POST"
        if posted and (why := await self._admit(channel, target.api)):
            await _answer(send, budget_reply(target.api, why))
            return
        exchange = _Exchange(self, channel, target, scope, body=body)
        if posted and self.secrets and not exchange.hide(body):
            await _answer(send, _unreadable(target.api, exchange.encoding))
            return
        await exchange.run(exchange.body, receive, send)

    async def _admit(self, channel: str, api: str) -> str | None:
        why = self.sink.admit(channel, api)
        return why if why is None or isinstance(why, str) else await why

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()


@dataclass(eq=False)
class _Exchange:
    """One forwarded request and its answer."""

    meter: MeterApp
    channel: str
    target: Target
    scope: Scope
    started: float = field(default_factory=time.monotonic)
    recorded: bool = False
    cut: bool = False
    #: The secrets this request's body had, by name (their placeholders go back).
    hidden: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    restorer: Restorer | None = None

    @property
    def encoding(self) -> str:
        return _header(self.scope, b"content-encoding").strip().lower()

    def hide(self, body: bytes) -> bool:
        """Hide the known secrets in ``body`` (:attr:`body`: what to forward); False
        when it is compressed in a way that cannot be read."""
        plain = _decoded(body, self.encoding)
        if plain is None:
            return False
        out, self.hidden = self.meter.secrets.hide(plain)
        self.body = out if self.hidden else body
        return True

    def _headers(self) -> list[tuple[bytes, bytes]]:
        headers = _request_headers(self.scope)
        if not self.hidden:
            return headers
        drop = {b"content-encoding", b"accept-encoding"}
        return [*((k, v) for k, v in headers if k.lower() not in drop), _IDENTITY]

    async def run(self, body: bytes, receive: Receive, send: Send) -> None:
        try:
            origin = origin_of(self.target.upstream)
            conn = await self.meter.upstream().send(
                str(self.scope.get("method", "GET")).encode("latin-1"),
                origin,
                self._target(),
                self._headers(),
                body,
            )
        except (UpstreamError, ValueError) as exc:
            await self._unreachable(send, exc)
            return
        # From now on a client that goes away closes the upstream request, even
        # while the upstream has not answered yet (a model may think for minutes).
        watch = asyncio.create_task(self._watch(receive, conn))
        try:
            await self._answered(conn, send)
        finally:
            watch.cancel()
            conn.release()

    async def _answered(self, conn: Conn, send: Send) -> None:
        try:
            await conn.head()
        except UpstreamError as exc:
            if not self.cut:
                await self._unreachable(send, exc)
            return
        encoding = conn.header(b"content-encoding")
        reader = UsageReader(self.target.api, conn.header(b"content-type"), encoding)
        if self.hidden and encoding.strip().lower() in ("", "identity"):
            self.restorer = Restorer(self.target.api, self.hidden, reader.streaming)
        try:
            await self._relay(conn, reader, send)
        finally:
            self._record(conn, reader)

    async def _unreachable(self, send: Send, exc: Exception) -> None:
        why = str(exc) or type(exc).__name__
        await _answer(send, unreachable_reply(self.target.api, self.target.upstream, why))

    def _target(self) -> bytes:
        """The path below the upstream's base, and the query, as the client sent them."""
        query = self.scope.get("query_string") or b""
        path = _raw_tail(self.scope) or quote(self.target.path, safe=_PATH_SAFE).encode()
        return path + b"?" + query if query else path

    async def _relay(self, conn: Conn, reader: UsageReader, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": conn.status,
                "headers": _response_headers(conn.headers, self.restorer is not None),
            }
        )
        await self._pump(conn, reader, send)

    async def _watch(self, receive: Receive, conn: Conn) -> None:
        """The client went away: close the upstream request (the pump's read ends)."""
        while (await receive())["type"] != "http.disconnect":
            pass
        self.cut = True
        conn.abort()

    async def _pump(self, conn: Conn, reader: UsageReader, send: Send) -> None:
        """Every chunk to the client as it comes, the answer's end with the last one
        when it came with it (a JSON answer's last chunk is held to the end, where the
        restorer may change it); the answer left unended when the upstream broke off."""
        streamed = reader.streaming
        held = b""
        try:
            while chunk := await conn.read():
                if reader.feed(chunk):
                    self._record(conn, reader)
                out = self.restorer.feed(chunk) if self.restorer else chunk
                if not streamed:
                    out, held = held, out
                elif conn.ended and self.restorer is None:
                    held = out  # the last bytes: they go with the end, in one write
                    break
                if out:
                    await send({"type": "http.response.body", "body": out, "more_body": True})
        except UpstreamError as exc:
            if not self.cut:
                log.info("meter: %s broke off: %s", self.target.upstream, exc)
            self.cut = True
            return
        self._record(conn, reader)  # before the client can see the end
        held += self.restorer.close() if self.restorer else b""
        if not self.cut:
            await send({"type": "http.response.body", "body": held, "more_body": False})

    def _record(self, conn: Conn, reader: UsageReader) -> None:
        if self.recorded:
            return
        self.recorded = True
        tally = reader.close()
        now = time.time()
        api = self.target.api
        windows = windows_from(
            api, conn.status, _quota_view(api, conn.headers), reader.error_body(), now
        )
        self.meter.quotas.update(api, self.target.upstream, windows, now)
        if self.scope.get("method") != "POST":
            return
        model = tally.model or _model_hint(self.target.path)
        # a Metered event's fields, of the types it has (the daemon validates the
        # record it reads)
        fields = {
            "type": "metered",
            "ts": now,
            "api": api,
            "model": model,
            "usage": tally.usage_fields(),
            "cost_usd": self.meter.prices.cost(model, tally),
            "status": conn.status,
            "upstream": self.target.upstream,
            "path": self.target.path,
            "duration_ms": int((time.monotonic() - self.started) * 1000),
            "complete": tally.done and not self.cut,
            "request_id": next(_REQUEST_IDS),
        }
        try:
            self._sink(fields)
        except Exception:  # the answer must reach the CLI whatever the sink does
            log.exception("meter: recording a request failed")

    def _sink(self, fields: dict[str, Any]) -> None:
        """To the sink: as they are when it takes them so (``record_fields``: the
        meter's process writes them out), else as a :class:`Metered` event."""
        sink = self.meter.sink
        as_fields = getattr(sink, "record_fields", None)
        if as_fields is not None:
            as_fields(self.channel, fields)
            return
        usage = Usage.model_construct(**fields["usage"])
        sink.record(self.channel, Metered.model_construct(**(fields | {"usage": usage})))


def _model_hint(path: str) -> str | None:
    """Gemini names the model in the path (``/v1beta/models/<model>:<op>``)."""
    _, found, tail = path.partition("/models/")
    if not found:
        return None
    return tail.split(":", 1)[0] or None


def _raw_tail(scope: Scope) -> bytes:
    """The request's path below its ref, as the client encoded it."""
    raw = scope.get("raw_path")
    if not isinstance(raw, bytes):
        return b""
    parts = raw.split(b"?", 1)[0].split(b"/", 6)  # "", s, token, meter, api, ref, rest
    return b"/" + parts[6] if len(parts) > 6 else b""


_IDENTITY = (b"accept-encoding", b"identity")
#: Each request's id: unique (a random prefix a process) and cheap (no ``uuid4``,
#: a system call each).
_ID_PREFIX = os.urandom(8).hex()
_REQUEST_IDS = (f"{_ID_PREFIX}{n:016x}" for n in itertools.count(1))
#: What a path may hold unquoted (only when no raw path came with the request).
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"


def _header(scope: Scope, name: bytes) -> str:
    found = [v for k, v in scope.get("headers") or [] if k.lower() == name]
    return found[0].decode("latin-1") if found else ""


def _decoded(body: bytes, encoding: str) -> bytes | None:
    """``body`` undone from ``encoding`` (none, gzip, deflate); None: cannot be read."""
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "x-gzip", "deflate"):
        return None
    try:
        return zlib.decompress(body, 47)
    except zlib.error:
        return None


def _unreadable(api: Api, encoding: str) -> Reply:
    message = (
        f"Chorus meter: a request body compressed with {encoding!r} cannot be checked for "
        "secrets; it was not forwarded"
    )
    return api_error(api, 400, message, "unreadable_request")


def _request_headers(scope: Scope) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in scope.get("headers") or [] if k.lower() not in _NOT_FORWARDED]


def _response_headers(
    headers: list[tuple[bytes, bytes]], rewritten: bool
) -> list[tuple[bytes, bytes]]:
    """The upstream's headers for the client (no length where the body is rewritten)."""
    drop = _HOP_BY_HOP | {b"content-length"} if rewritten else _HOP_BY_HOP
    return [(k, v) for k, v in headers if k.lower() not in drop]


#: The headers each API states its quota in (by their start, lower case).
_QUOTA_HEADERS: dict[str, bytes] = {"anthropic": b"anthropic-ratelimit-", "openai": b"x-ratelimit-"}


def _quota_view(api: Api, headers: list[tuple[bytes, bytes]]) -> _HeaderView:
    """An answer's rate-limit headers (Gemini states none: its errors say)."""
    prefix = _QUOTA_HEADERS.get(api)
    if prefix is None:
        return _HeaderView([])
    return _HeaderView([(k, v) for k, v in headers if k.lower().startswith(prefix)])


class _HeaderView(Mapping[str, str]):
    """An answer's headers by lower-case name, for the quota (the first of each)."""

    def __init__(self, headers: list[tuple[bytes, bytes]]) -> None:
        self._headers: dict[str, str] = {}
        for name, value in headers:
            self._headers.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))

    def __getitem__(self, name: str) -> str:
        return self._headers[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._headers)

    def __len__(self) -> int:
        return len(self._headers)


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or None past ``limit`` bytes."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(parts)
        chunk = message.get("body") or b""
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
        if not message.get("more_body"):
            return b"".join(parts)


async def _answer(send: Send, reply: Reply, content_type: bytes = b"application/json") -> None:
    headers = [(b"content-type", content_type), *reply.headers[1:]]
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": reply.body})
