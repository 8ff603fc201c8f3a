"""The daemon's stand-in for client tests: what it sends, the real client reads."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from chorus.client import DaemonClient, socket_path
from chorus.testing import SocketStub, send_created, send_event, send_stream_head


class Stub(SocketStub):
    def __init__(self, path: Path) -> None:
        self.seen: list[bytes] = []
        super().__init__(path)

    def answer(self, conn: socket.socket) -> None:
        head = conn.recv(65536)
        self.seen.append(head.split(b" ", 2)[1])
        if head.startswith(b"POST /jobs "):
            send_created(conn, {"id": "j1", "state": "queued"})
            return
        send_stream_head(conn)
        send_event(conn, {"seq": 1, "type": "text", "text": "h\u00e9 \n"})
        send_event(conn, {"seq": 2, "type": "job_ended", "state": "succeeded"})
        conn.sendall(b"0\r\n\r\n")


def test_the_real_client_reads_what_the_stub_sends(chorus_home: Path) -> None:
    stub = Stub(socket_path())
    try:
        client = DaemonClient(autostart=False)
        assert client.submit(prompt="hi", body="claude", cwd=str(chorus_home))["id"] == "j1"
        lines = [json.loads(line) for line in client.event_lines("j1")]
    finally:
        stub.close()
    assert [e["type"] for e in lines] == ["text", "job_ended"]
    assert lines[0]["text"] == "h\u00e9 \n"
    assert stub.seen[0] == b"/jobs"
