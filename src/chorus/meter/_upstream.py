"""The meter's upstream client: HTTP/1.1 over asyncio, answers parsed by httptools
(C), connections kept alive per origin and reused.

Made for a pass-through proxy, lean on purpose (httpx cost the meter more CPU per
request than all the rest together): the request leaves in one write (its head and
body), the answer's head is kept as the upstream sent it, and its body is read as it
comes, each :meth:`Conn.read` returning all that arrived since the last one (never
waiting for more). No redirect is followed, nothing is retried, no timeout applies
once connected (a model may think for minutes; the CLI keeps its own), and no
proxy from the environment is used (as the meter's httpx client before it).

- :class:`Upstream`: the pool; :meth:`Upstream.send` sends one request and returns
  its :class:`Conn` (:meth:`Conn.head` waits for the answer's head),
  :meth:`Upstream.request` both.
- :class:`Conn`: the answer (``status``, ``headers``) and its body; :meth:`Conn.release`
  gives the connection back (kept when the answer ended cleanly), :meth:`Conn.abort`
  closes it (the client went away).
- :class:`UpstreamError`: could not connect, or the upstream broke off.
"""

from __future__ import annotations

import asyncio
import functools
import os
import select
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import httptools

#: A connection attempt (and a TLS handshake) gives up after this.
CONNECT_TIMEOUT_S = 30.0
#: Idle connections kept per origin.
MAX_IDLE = 32
#: Reading from the upstream pauses while this much is read but not yet taken.
_HIGH_WATER = 1 << 20
_NO_BODY_STATUS = (204, 304)


class UpstreamError(Exception):
    """The upstream could not be reached, or broke off its answer."""


@dataclass(frozen=True, slots=True)
class Origin:
    scheme: str
    host: str
    port: int
    #: The ``Host`` header (the port only when it is not the scheme's own).
    authority: bytes
    #: The base URL's path (``/v1``), which each request's path goes under.
    base: bytes


@functools.lru_cache(maxsize=256)
def origin_of(base_url: str) -> Origin:
    """Where ``base_url`` (``http(s)://host[:port][/path]``) points; ValueError when it
    is not such a URL."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {base_url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    authority = parts.netloc.rpartition("@")[2].encode("idna")
    base = parts.path.rstrip("/").encode("latin-1")
    return Origin(parts.scheme, parts.hostname, port, authority, base)


def request_head(
    method: bytes, origin: Origin, target: bytes, headers: Sequence[tuple[bytes, bytes]], size: int
) -> bytes:
    """A request's head: ``target`` (path and query, as the client encoded them) under
    the origin's base; the ``Host`` and length of this hop (``headers`` have neither)."""
    path = origin.base + target
    if not path.startswith(b"/"):
        path = b"/" + path
    lines = [b"%s %s HTTP/1.1\r\nhost: %s\r\n" % (method, path, origin.authority)]
    lines.extend(b"%s: %s\r\n" % (name, value) for name, value in headers)
    if size or method in (b"POST", b"PUT", b"PATCH"):
        lines.append(b"content-length: %d\r\n" % size)
    lines.append(b"\r\n")
    return b"".join(lines)


class Conn(asyncio.Protocol):
    """One connection to an origin, and the answer being read on it."""

    def __init__(self, pool: Upstream, origin: Origin) -> None:
        self.pool, self.origin = pool, origin
        self.transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._reset(head_only=False)

    def _reset(self, *, head_only: bool) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self._head_only = head_only
        self._chunks: list[bytes] = []
        self._size = 0
        self._head = False
        self._complete = False
        self._keep_alive = False
        self._error: UpstreamError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False

    # -- asyncio.Protocol ------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(f"a malformed answer: {exc}")
            self.close()
            return
        if self._chunks:  # once a read, however many chunks of the body it held
            self._size += len(data)
            if self._size > _HIGH_WATER and not self._paused and self.transport is not None:
                self._paused = True
                self.transport.pause_reading()
            self._wake()

    def eof_received(self) -> bool:
        return False  # close: HTTP/1.1 has no half-closed answers

    def connection_lost(self, exc: Exception | None) -> None:
        self.pool.forget(self)
        self.transport = None
        if self._complete or self._error is not None:
            return
        if self._head and self._until_close():
            self._complete = True  # an answer delimited by the connection's end
            self._wake()
        elif self._head:
            self._fail("the upstream broke off its answer")
        else:
            self._fail(f"the upstream closed the connection without answering{_why(exc)}")

    # -- httptools callbacks ---------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:
            self.headers = []  # an interim answer (100 Continue): the real one follows
            return
        self.status, self._head = status, True
        if self._head_only:  # a HEAD's answer states a length it does not send
            self._complete = True
        self._wake()

    def on_body(self, body: bytes) -> None:
        self._chunks.append(body)  # (the reader is woken once the read is parsed)

    def on_message_complete(self) -> None:
        if self._head:
            self._complete = True
            self._keep_alive = self.parser.should_keep_alive()  # reset once this returns
            self._wake()

    # -- the answer ------------------------------------------------------------------

    async def head(self) -> None:
        """Wait for the answer's head (UpstreamError: none came)."""
        while not self._head:
            if self._error is not None:
                raise self._error
            await self._wait()

    async def read(self) -> bytes:
        """The body's bytes that came since the last read (waiting for some), ``b""``
        at its end; UpstreamError when the upstream broke off."""
        while not self._chunks:
            if self._complete:
                return b""
            if self._error is not None:
                raise self._error
            await self._wait()
        chunks, self._chunks, self._size = self._chunks, [], 0
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    @property
    def ended(self) -> bool:
        """The answer came whole and all of it was read."""
        return self._complete and not self._chunks

    def header(self, name: bytes) -> str:
        """The first value of header ``name`` (lower case), ``""`` when absent."""
        for key, value in self.headers:
            if key.lower() == name:
                return value.decode("latin-1")
        return ""

    def release(self) -> None:
        """Done with the answer: the connection is kept for the next request when the
        answer ended cleanly and the upstream keeps it, else closed."""
        reusable = (
            self._complete
            and not self._head_only
            and self._error is None
            and not self._chunks
            and self.transport is not None
            and self._keep_alive
        )
        if reusable:
            self.pool.keep(self)
        else:
            self.close()

    def abort(self) -> None:
        """The client went away: close the connection (a read waiting ends)."""
        self._fail("the client went away")
        self.close()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    # -- inside ----------------------------------------------------------------------

    def _until_close(self) -> bool:
        """Whether the answer's body ends with the connection (no length, not chunked)."""
        if self.status in _NO_BODY_STATUS:
            return True
        names = {name.lower() for name, _ in self.headers}
        return b"content-length" not in names and b"transfer-encoding" not in names

    def _fail(self, why: str) -> None:
        if self._error is None and not self._complete:
            self._error = UpstreamError(why)
        self._wake()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _wait(self) -> None:
        self._waiter = self._loop.create_future()
        await self._waiter

    def _start(self, head_only: bool) -> None:
        self._reset(head_only=head_only)

    def _idle_and_open(self) -> bool:
        """Still usable: open, and nothing to read (a readable idle connection was
        closed by the upstream, or holds bytes nobody asked for)."""
        if self.transport is None or self.transport.is_closing():
            return False
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return False
        try:
            readable, _, _ = select.select([sock.fileno()], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable


def _why(exc: Exception | None) -> str:
    return f" ({exc})" if exc is not None and str(exc) else ""


class Upstream:
    """The pool of connections to the upstreams (one per origin per request in flight,
    up to :data:`MAX_IDLE` kept idle per origin)."""

    def __init__(self) -> None:
        self._idle: dict[Origin, list[Conn]] = {}
        self._ssl: ssl.SSLContext | None = None
        self._closed = False

    async def send(
        self,
        method: bytes,
        origin: Origin,
        target: bytes,
        headers: Sequence[tuple[bytes, bytes]],
        body: bytes,
    ) -> Conn:
        """Send one request (on a kept connection, else a new one): its connection,
        whose :meth:`Conn.head` comes next."""
        conn = self._take(origin) or await self._connect(origin)
        conn._start(head_only=method == b"HEAD")
        assert conn.transport is not None
        conn.transport.write(request_head(method, origin, target, headers, len(body)) + body)
        return conn

    async def request(
        self,
        method: bytes,
        origin: Origin,
        target: bytes,
        headers: Sequence[tuple[bytes, bytes]],
        body: bytes,
    ) -> Conn:
        """Send one request; its connection once the answer's head came."""
        conn = await self.send(method, origin, target, headers, body)
        try:
            await conn.head()
        except BaseException:
            conn.close()
            raise
        return conn

    def _take(self, origin: Origin) -> Conn | None:
        idle = self._idle.get(origin)
        while idle:
            conn = idle.pop()
            if conn._idle_and_open():
                return conn
            conn.close()
        return None

    async def _connect(self, origin: Origin) -> Conn:
        loop = asyncio.get_running_loop()
        context = self._context() if origin.scheme == "https" else None
        host = origin.host if context is not None else None
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                _, conn = await loop.create_connection(
                    lambda: Conn(self, origin),
                    origin.host,
                    origin.port,
                    ssl=context,
                    server_hostname=host,
                )
        except TimeoutError:
            raise UpstreamError(f"no connection within {CONNECT_TIMEOUT_S:g} s") from None
        except OSError as exc:
            raise UpstreamError(str(exc) or type(exc).__name__) from None
        return conn

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = tls_context()
        return self._ssl

    def keep(self, conn: Conn) -> None:
        idle = self._idle.setdefault(conn.origin, [])
        if self._closed or len(idle) >= MAX_IDLE:
            conn.close()
        else:
            idle.append(conn)

    def forget(self, conn: Conn) -> None:
        idle = self._idle.get(conn.origin)
        if idle and conn in idle:
            idle.remove(conn)

    async def close(self) -> None:
        self._closed = True
        for idle in list(self._idle.values()):
            for conn in list(idle):
                conn.close()
        self._idle.clear()
        await asyncio.sleep(0)  # the transports' closing callbacks run


def tls_context() -> ssl.SSLContext:
    """Certificates as httpx found them: ``SSL_CERT_FILE``, ``SSL_CERT_DIR``, else
    certifi's bundle, else the system's; HTTP/1.1 offered."""
    if os.environ.get("SSL_CERT_FILE"):
        context = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    elif os.environ.get("SSL_CERT_DIR"):
        context = ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
    else:
        context = _default_context()
    context.set_alpn_protocols(["http/1.1"])
    return context


def _default_context() -> ssl.SSLContext:
    try:
        import certifi
    except ImportError:
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=certifi.where())
