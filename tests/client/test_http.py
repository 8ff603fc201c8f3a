"""The client's own HTTP reader: bodies by length, by chunks and to the end of the
connection, and a clear error for an answer that is not HTTP."""

from __future__ import annotations

import contextlib
import io
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chorus.client import DaemonClient, DaemonError
from chorus.client._http import Connection, ProtocolError, Response


def response(raw: bytes) -> Response:
    return Response(io.BufferedReader(io.BytesIO(raw)))


def test_a_body_by_length() -> None:
    resp = response(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nX-A: b\r\n\r\nhello, and more")
    assert resp.status == 200
    assert resp.headers["x-a"] == "b"
    assert resp.read() == b"hello"


def test_a_chunked_body_read_by_lines() -> None:
    raw = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"7\r\ndata: {\r\n4;ext=1\r\n}\n\n:\r\n6\r\n ping\n\r\n0\r\n\r\n"
    )
    resp = response(raw)
    assert [resp.readline() for _ in range(5)] == [b"data: {}\n", b"\n", b": ping\n", b"", b""]


def test_a_body_to_the_end_of_the_connection() -> None:
    resp = response(b"HTTP/1.0 404 Not Found\r\n\r\nno such\nthing")
    assert resp.status == 404
    assert resp.readline() == b"no such\n"
    assert resp.read() == b"thing"


@pytest.mark.parametrize(
    "raw",
    [
        b"SSH-2.0-OpenSSH_9.6\r\n",
        b"HTTP/1.1 abc OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: -3\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nshort",
        b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 200 + b"\r\n",
        b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70000 + b"\r\n\r\n",
    ],
)
def test_what_is_not_http_is_a_protocol_error(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        response(raw).read()


def test_no_answer_at_all_says_so() -> None:
    with pytest.raises(ProtocolError, match="closed the connection without an answer"):
        response(b"")


def _daemon_socket(chorus_home: Path) -> socket.socket:
    """A listener of our own where the daemon's socket would be."""
    (chorus_home / "run").mkdir(parents=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(chorus_home / "run" / "chorus.sock"))
    listener.listen(1)
    return listener


def test_a_socket_that_answers_garbage_is_a_clear_daemon_error(chorus_home: Path) -> None:
    """Something else listening on the daemon's socket: a message, not a traceback."""
    listener = _daemon_socket(chorus_home)

    def answer() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"220 smtp.example ready\r\n")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        with pytest.raises(DaemonError, match="daemon request failed: bad status line"):
            DaemonClient(autostart=False, timeout=30).jobs()
    finally:
        thread.join(timeout=30)
        listener.close()


ResponseOf = Callable[[list[bytes]], Response]


@pytest.fixture
def socket_response() -> Iterator[ResponseOf]:
    """A response read off a real socket, its bytes arriving in pieces."""
    conns: list[Connection] = []

    def make(pieces: list[bytes]) -> Response:
        ours, theirs = socket.socketpair()
        conns.append(Connection("unused", 5))
        conns[-1].sock = ours
        ours.settimeout(5)
        threading.Thread(target=_send, args=(theirs, pieces), daemon=True).start()
        return conns[-1].getresponse()

    yield make
    for conn in conns:
        conn.close()


def _send(sock: socket.socket, pieces: list[bytes]) -> None:
    with sock, contextlib.suppress(OSError):  # the reader may stop early
        for piece in pieces:
            sock.sendall(piece)
            time.sleep(0.005)


def test_a_response_off_a_socket_in_small_pieces_reads_whole(socket_response: ResponseOf) -> None:
    raw = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"7\r\ndata: {\r\n4;ext=1\r\n}\n\n:\r\n6\r\n ping\n\r\n0\r\n\r\n"
    )
    resp = socket_response([raw[i : i + 3] for i in range(0, len(raw), 3)])
    assert resp.status == 200
    assert [resp.readline() for _ in range(4)] == [b"data: {}\n", b"\n", b": ping\n", b""]


def test_a_body_off_a_socket_by_length_leaves_what_follows(socket_response: ResponseOf) -> None:
    resp = socket_response([b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhel", b"lo, more"])
    assert resp.read() == b"hello"


def test_a_line_off_a_socket_too_long_is_a_protocol_error(socket_response: ResponseOf) -> None:
    with pytest.raises(ProtocolError, match="header line too long"):
        socket_response([b"HTTP/1.1 200 OK\r\nX: ", b"y" * 70000, b"\r\n\r\n"])


def test_a_silent_socket_times_out() -> None:
    ours, theirs = socket.socketpair()
    conn = Connection("unused", 0.05)
    conn.sock = ours
    ours.settimeout(0.05)
    with theirs:
        with pytest.raises(TimeoutError):
            conn.getresponse()
        conn.close()


def test_a_daemon_that_drops_the_request_unread_says_what_to_do(chorus_home: Path) -> None:
    """A daemon dying as the request comes (``kill -9`` a moment before) takes the
    connection and closes it unread: the client is reset, and says so plainly."""
    listener = _daemon_socket(chorus_home)

    def drop() -> None:
        conn, _ = listener.accept()
        time.sleep(0.2)  # the request is in, unread
        conn.close()

    thread = threading.Thread(target=drop, daemon=True)
    thread.start()
    try:
        with pytest.raises(DaemonError, match="dropped it unanswered") as caught:
            DaemonClient(autostart=False, timeout=30).jobs()
        assert "chorus jobs" in str(caught.value)
    finally:
        thread.join(timeout=30)
        listener.close()
