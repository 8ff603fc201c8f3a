"""Following a job's stream: a stream the daemon cuts by going away is taken up again.

The daemon here is a socket server on the real path: the first connection is dropped
with the request unread (the reset a client sees when a daemon dies or restarts
under it), the next one serves the rest of the stream."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chorus.cli import _jobs
from chorus.cli._jobs import Printer, follow
from chorus.client import DaemonClient, DaemonLostError, socket_path
from chorus.testing import SocketStub


def _event(seq: int, kind: str, **data: object) -> bytes:
    return f"data: {json.dumps({'seq': seq, 'type': kind, **data})}\n\n".encode()


class CuttingDaemon(SocketStub):
    """Cuts the first ``cuts`` streams with a reset; then serves seq 2 and the end."""

    def __init__(self, path: Path, cuts: int) -> None:
        self.cuts = cuts
        self.requests: list[str] = []
        super().__init__(path, backlog=8)

    def take(self, conn: socket.socket) -> None:
        with conn:
            self.answer(conn)

    def answer(self, conn: socket.socket) -> None:
        head = conn.recv(65536, socket.MSG_PEEK)  # the request is there, unread
        self.requests.append(head.split(b"\r\n", 1)[0].decode())
        if len(self.requests) <= self.cuts:
            return  # closed with the request unread: the client gets ECONNRESET
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        conn.sendall(_event(2, "text_delta", text="after"))
        conn.sendall(_event(3, "job_ended", state="succeeded", result="after"))


@pytest.fixture
def cutting(
    chorus_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[int], CuttingDaemon]]:
    monkeypatch.setattr(_jobs, "RECONNECT_PAUSE_S", 0.01)
    made: list[CuttingDaemon] = []

    def make(cuts: int) -> CuttingDaemon:
        made.append(CuttingDaemon(socket_path(), cuts))
        return made[-1]

    yield make
    for daemon in made:
        daemon.close()


def test_a_stream_reset_by_the_daemon_is_taken_up_from_the_last_seq(
    cutting: Callable[[int], CuttingDaemon],
) -> None:
    daemon = cutting(2)
    printer = Printer("json")
    printer.last_seq = 1  # seq 1 was printed before the daemon went away
    follow(DaemonClient(autostart=False), "j1", printer)
    assert printer.ended is not None
    assert printer.ended["state"] == "succeeded"
    assert len(daemon.requests) == 3
    assert all("from_seq=2" in line for line in daemon.requests)


def test_a_daemon_that_keeps_cutting_the_stream_is_a_clear_error(
    cutting: Callable[[int], CuttingDaemon],
) -> None:
    daemon = cutting(99)
    with pytest.raises(DaemonLostError, match="lost the daemon"):
        follow(DaemonClient(autostart=False), "j1", Printer("json"))
    assert len(daemon.requests) == 1 + _jobs.RECONNECTS
