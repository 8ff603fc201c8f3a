"""The little HTTP/1.1 the client speaks to the daemon over its unix socket.

``http.client`` would load the ``email`` package, ``ssl`` and ``datetime`` (tens of
milliseconds on every ``chorus status``); the daemon's answers need much less: a
status line, headers, and a body sized by ``Content-Length``, sent in chunks, or
ended by the closed connection (every request says ``Connection: close``).

It speaks through ``_socket`` itself and reads through its own small buffer:
``socket`` would load ``enum`` and ``selectors`` before the request is sent.
"""

from __future__ import annotations

import _socket

#: ``typing`` is not imported at run time: it costs the fast path milliseconds.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Protocol

    class BinaryIO(Protocol):
        """What is read of the connection (an ``io.BufferedReader`` does too)."""

        def readline(self, limit: int = -1, /) -> bytes: ...
        def read(self, size: int = -1, /) -> bytes: ...
        def read1(self, size: int = -1, /) -> bytes: ...


#: The longest status or header line accepted, and the most header lines.
MAX_LINE = 65536
MAX_HEADERS = 100


class ProtocolError(Exception):
    """The daemon's answer is not HTTP as this client reads it."""


class Connection:
    """One request and its response on a connected unix socket (``Connection: close``)."""

    def __init__(self, path: str, timeout: float | None) -> None:
        self.path = path
        self.timeout = timeout
        self.sock: _socket.socket | None = None

    def connect(self) -> None:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.path)
        except OSError:
            sock.close()
            raise
        self.sock = sock

    def request(self, method: str, path: str, body: bytes | None = None) -> None:
        head = [f"{method} {path} HTTP/1.1", "Host: chorus", "Connection: close"]
        if body is not None:
            head += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
        self._socket().sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (body or b""))

    def settimeout(self, timeout: float | None) -> None:
        """The longest wait for each read from now on (``None``: no limit)."""
        self._socket().settimeout(timeout)

    def getresponse(self) -> Response:
        return Response(SocketReader(self._socket()))

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _socket(self) -> _socket.socket:
        if self.sock is None:
            raise ProtocolError("not connected")
        return self.sock


class SocketReader:
    """What :class:`Response` reads of a connected socket: lines, and a length or
    whatever has arrived, through one buffer (the read timeout is the socket's)."""

    def __init__(self, sock: _socket.socket) -> None:
        self._sock = sock
        self._buffer = b""

    def readline(self, limit: int = -1, /) -> bytes:
        """Up to and with the next ``\\n`` (at most ``limit`` bytes; less at the end)."""
        start = 0
        while (end := self._buffer.find(b"\n", start)) < 0:
            start = len(self._buffer)
            if 0 <= limit <= start or not self._fill():
                return self._take(limit if limit >= 0 else start)
        return self._take(end + 1 if limit < 0 else min(end + 1, limit))

    def read(self, size: int = -1, /) -> bytes:
        """``size`` bytes (fewer only at the end); all until the end when negative."""
        while (size < 0 or len(self._buffer) < size) and self._fill():
            pass
        return self._take(len(self._buffer) if size < 0 else size)

    def read1(self, size: int = 65536, /) -> bytes:
        """What is buffered or arrives in one receive, at most ``size`` bytes."""
        if not self._buffer:
            self._fill()
        return self._take(size)

    def _fill(self) -> bool:
        data = self._sock.recv(65536)
        self._buffer += data
        return bool(data)

    def _take(self, size: int) -> bytes:
        out, self._buffer = self._buffer[:size], self._buffer[size:]
        return out


class Response:
    """A response's status and headers, read at once; its body read on demand."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self.status = _status(_line(stream))
        self.headers = _headers(stream)
        self._body = _Body(stream, self.headers)

    def read(self) -> bytes:
        """The whole body."""
        return self._body.read()

    def readline(self) -> bytes:
        """The body's next line (with its ``\\n``); ``b""`` at its end."""
        return self._body.readline()


def _line(stream: BinaryIO) -> bytes:
    line = stream.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise ProtocolError("header line too long")
    return line


def _status(line: bytes) -> int:
    if not line:
        raise ProtocolError("the daemon closed the connection without an answer")
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        raise ProtocolError(f"bad status line {line[:100]!r}")
    return int(parts[1])


def _headers(stream: BinaryIO) -> dict[str, str]:
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADERS):
        line = _line(stream)
        if line in (b"\r\n", b"\n", b""):
            return headers
        name, sep, value = line.decode("latin-1").partition(":")
        if not sep:
            raise ProtocolError(f"bad header line {line[:100]!r}")
        headers[name.strip().lower()] = value.strip()
    raise ProtocolError("too many headers")


class _Body:
    """The body, decoded: by length, by chunks or until the connection closes."""

    def __init__(self, stream: BinaryIO, headers: dict[str, str]) -> None:
        self._stream = stream
        self._chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        self._left = _length(headers) if not self._chunked else None
        self._buffer = b""
        self._done = False

    def read(self) -> bytes:
        out = [self._buffer]
        self._buffer = b""
        while chunk := self._next():
            out.append(chunk)
        return b"".join(out)

    def readline(self) -> bytes:
        while b"\n" not in self._buffer:
            chunk = self._next()
            if not chunk:
                line, self._buffer = self._buffer, b""
                return line
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line + b"\n"

    def _next(self) -> bytes:
        """The next piece of the body; ``b""`` at its end."""
        if self._done:
            return b""
        if self._chunked:
            return self._chunk()
        if self._left is None:
            return self._piece(self._stream.read1(65536))
        data = self._stream.read1(min(65536, self._left)) if self._left else b""
        self._left -= len(data)
        if self._left and not data:
            raise ProtocolError("the connection closed mid-body")
        return self._piece(data)

    def _piece(self, data: bytes) -> bytes:
        self._done = not data
        return data

    def _chunk(self) -> bytes:
        size_line = _line(self._stream).split(b";", 1)[0].strip()
        try:
            size = int(size_line, 16)
        except ValueError:
            raise ProtocolError(f"bad chunk size {size_line[:20]!r}") from None
        if size == 0:
            self._done = True
            return b""
        data = self._stream.read(size)
        if len(data) < size or self._stream.readline(3) not in (b"\r\n", b"\n"):
            raise ProtocolError("the connection closed mid-chunk")
        return data


def _length(headers: dict[str, str]) -> int | None:
    raw = headers.get("content-length")
    if raw is None:
        return None
    if not raw.isdigit():
        raise ProtocolError(f"bad Content-Length {raw[:20]!r}")
    return int(raw)
