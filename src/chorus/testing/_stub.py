"""A stand-in for the daemon's socket, for the client's tests and benches: a unix
socket served by a thread, each connection answered by :meth:`SocketStub.answer`
(a subclass's), plus the pieces of HTTP the daemon's answers are made of.

Set a subclass's own attributes before calling ``super().__init__``: the thread
accepts connections from then on.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from pathlib import Path


class SocketStub:
    """Listens on ``path``; answers each connection in one thread, in order."""

    def __init__(self, path: Path, backlog: int = 16) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(backlog)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def answer(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def take(self, conn: socket.socket) -> None:
        """Answer ``conn`` and close it (a client gone meanwhile is no error)."""
        with conn, contextlib.suppress(OSError):
            self.answer(conn)

    def close(self) -> None:
        self.listener.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.take(conn)


def send_created(conn: socket.socket, job: dict[str, object]) -> None:
    """``201 Created`` with ``job`` as its JSON body (``POST /jobs``'s answer)."""
    body = json.dumps(job).encode()
    conn.sendall(
        b"HTTP/1.1 201 Created\r\ncontent-type: application/json\r\n"
        + f"content-length: {len(body)}\r\n\r\n".encode()
        + body
    )


def send_stream_head(conn: socket.socket) -> None:
    """The head of a chunked event stream (``GET /jobs/ID/events``)."""
    conn.sendall(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )


def send_event(conn: socket.socket, event: dict[str, object]) -> None:
    """One event of a chunked stream, as a ``data:`` line in a chunk of its own."""
    line = f"data: {json.dumps(event)}\n\n".encode()
    conn.sendall(f"{len(line):x}\r\n".encode() + line + b"\r\n")
