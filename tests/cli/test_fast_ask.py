"""``chorus ask`` on the fast path, against a fake daemon on the real socket path: the
request goes out before anything heavy (``json`` and ``re`` among it) is loaded, the
command ends at the job's last event even when the daemon keeps the stream open, and
the process's quick exit loses nothing of its output, however large, through a pipe.
A closed stdout ends it with 141, a shell tool's code, not as a lost daemon."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from chorus.client import socket_path
from chorus.testing import SocketStub, send_created, send_event, send_stream_head

#: Runs the CLI on argv[2:]; the names of the modules loaded when its first request
#: went out are written to argv[1] (plain text: ``json`` is not to be loaded for it).
WRAPPER = """
import sys
out, sys.argv = sys.argv[1], ["chorus", *sys.argv[2:]]
from chorus.client import _http
send = _http.Connection.request

def noted(self, *args):
    if not _http.__dict__.get("noted"):
        _http.noted = True
        with open(out, "w") as f:
            f.write("\\n".join(sorted(sys.modules)))
    return send(self, *args)

_http.Connection.request = noted
from chorus.cli import main
main()
"""

#: Not loaded before the job's request is on the socket.
NOT_BEFORE_SEND = (
    *("json", "re", "enum", "pathlib", "urllib", "socket", "selectors", "typing"),
    *("typer", "rich", "pydantic", "asyncio", "http", "email", "ssl", "chorus.events"),
    *("chorus.config", "chorus.store", "chorus.bodies", "chorus.cli._render"),
)
#: Never loaded by ``ask --json`` against a running daemon.
NEVER = ("typer", "rich", "pydantic", "asyncio", "chorus.events", "chorus.config", "socket")


class FakeDaemon(SocketStub):
    """Answers ``POST /jobs`` with job ``j1`` and its event stream with ``events``,
    then keeps that stream open (no end chunk) until :meth:`close`."""

    def __init__(self, path: Path, events: list[dict[str, object]]) -> None:
        self.events = events
        self.requests: list[bytes] = []
        self.held: list[socket.socket] = []
        super().__init__(path, backlog=8)

    def take(self, conn: socket.socket) -> None:
        try:
            self.answer(conn)
        except OSError:  # the client went away (as it does at the job's end)
            conn.close()

    def answer(self, conn: socket.socket) -> None:
        head = conn.recv(65536)
        self.requests.append(head.split(b"\r\n", 1)[0])
        if head.startswith(b"POST /jobs "):
            send_created(conn, {"id": "j1", "state": "queued"})
            conn.close()
            return
        send_stream_head(conn)
        for event in self.events:
            send_event(conn, event)
        self.held.append(conn)  # never ended: the client must stop at job_ended

    def close(self) -> None:
        super().close()
        for conn in self.held:
            conn.close()


def events(texts: int = 2, size: int = 10) -> list[dict[str, object]]:
    """``texts`` text events of ``size`` characters each, then the job's end."""
    out: list[dict[str, object]] = [{"seq": 1, "job_id": "j1", "type": "job_started"}]
    for i in range(texts):
        text = f"{i:06d}" + "x" * max(0, size - 6)
        out.append({"seq": 2 + i, "job_id": "j1", "type": "text", "text": text})
    result = "\n".join(str(e["text"]) for e in out if e["type"] == "text")
    end = {"type": "job_ended", "state": "succeeded", "result": result}
    out.append({"seq": 2 + texts, "job_id": "j1", **end})
    return out


@pytest.fixture
def fake(chorus_home: Path) -> Iterator[list[FakeDaemon]]:
    made: list[FakeDaemon] = []
    yield made
    for daemon in made:
        daemon.close()


def serve(made: list[FakeDaemon], evts: list[dict[str, object]]) -> FakeDaemon:
    made.append(FakeDaemon(socket_path(), evts))
    return made[-1]


def ask(
    tmp_path: Path, *args: str, stdout: int | None = subprocess.PIPE, prefix: str = ""
) -> tuple[int, str, str]:
    """``chorus ask ARGS`` through the wrapper (after the code ``prefix``): (exit code,
    stdout, stderr); it must end well within the timeout, though the fake daemon never
    ends its stream."""
    done = subprocess.run(
        [sys.executable, "-c", prefix + WRAPPER, str(tmp_path / "modules.txt"), "ask", *args],
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=30,
        cwd=tmp_path,
        env={**os.environ, "CHORUS_STREAM_IDLE_S": "120"},
    )
    return done.returncode, done.stdout or "", done.stderr


def loaded(tmp_path: Path, names: tuple[str, ...]) -> list[str]:
    modules = (tmp_path / "modules.txt").read_text().split("\n")
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in names)]


def test_ask_json_sends_before_loading_anything_heavy_and_ends_at_the_job_end(
    fake: list[FakeDaemon], tmp_path: Path
) -> None:
    daemon = serve(fake, events())
    code, out, err = ask(tmp_path, "hi", "--json")
    assert code == 0, err
    assert [json.loads(line) for line in out.splitlines()] == daemon.events
    assert daemon.requests == [
        b"POST /jobs HTTP/1.1",
        b"GET /jobs/j1/events?from_seq=1&follow=1 HTTP/1.1",
    ]
    assert loaded(tmp_path, NOT_BEFORE_SEND) == []


@pytest.mark.parametrize("fmt", ["text", "events"])
def test_the_other_formats_send_before_loading_their_renderer(
    fake: list[FakeDaemon], tmp_path: Path, fmt: str
) -> None:
    serve(fake, events())
    code, out, err = ask(tmp_path, "hi", "--format", fmt)
    assert code == 0, err
    assert "000001" in out
    assert loaded(tmp_path, NOT_BEFORE_SEND) == []


def test_the_listing_sees_a_module_loaded_before_the_send(
    fake: list[FakeDaemon], tmp_path: Path
) -> None:
    """The check above can fail: a wrapper that loads ``json`` first is caught."""
    serve(fake, events())
    code, _, err = ask(tmp_path, "hi", "--json", prefix="import json\n")
    assert code == 0, err
    assert {"json", "re"} <= set(loaded(tmp_path, NOT_BEFORE_SEND))


@pytest.mark.parametrize("fmt", ["json", "text", "events"])
def test_a_large_output_through_a_pipe_is_whole(
    fake: list[FakeDaemon], tmp_path: Path, fmt: str
) -> None:
    """Far more than a pipe holds (64 KiB), and the process quits at once after it."""
    daemon = serve(fake, events(texts=300, size=3000))
    code, out, err = ask(tmp_path, "hi", "--format", fmt)
    assert code == 0, err
    if fmt == "json":
        assert [json.loads(line) for line in out.splitlines()] == daemon.events
    elif fmt == "text":  # the answer: the job's result, printed after its end
        assert out == str(daemon.events[-1]["result"]) + "\n"
    else:
        assert [out.count(f"{i:06d}") for i in range(300)] == [1] * 300
        assert "job_ended" in out.splitlines()[-1] or "succeeded" in out.splitlines()[-1]
    assert len(out) > 300 * 3000


def test_a_closed_stdout_ends_quietly_with_141(fake: list[FakeDaemon], tmp_path: Path) -> None:
    serve(fake, events(texts=50, size=3000))
    read, write = os.pipe()
    os.close(read)  # nobody reads what ask prints
    try:
        code, _, err = ask(tmp_path, "hi", "--json", stdout=write)
    finally:
        os.close(write)
    assert code == 141, err
    assert err == ""


def test_a_failed_job_exits_1_at_its_end(fake: list[FakeDaemon], tmp_path: Path) -> None:
    evts = events(texts=1)
    evts[-1] = {**evts[-1], "state": "failed", "error": "boom"}
    serve(fake, evts)
    code, out, err = ask(tmp_path, "hi", "--json")
    assert code == 1, err
    assert json.loads(out.splitlines()[-1])["state"] == "failed"


def test_ask_json_never_loads_the_heavy_modules(fake: list[FakeDaemon], tmp_path: Path) -> None:
    """After the send too: the events pass through; only the job's end is parsed."""
    serve(fake, events())
    out = tmp_path / "after.txt"
    listing = (
        "import os, sys\nend = os._exit\n"
        f"os._exit = lambda code: (open({str(out)!r}, 'w').write('\\n'.join(sys.modules)),"
        " end(code))\n"
    )
    code, _, err = ask(tmp_path, "hi", "--json", prefix=listing)
    assert code == 0, err
    modules = out.read_text().split("\n")
    assert "json" in modules  # loaded after the send, to read the answer
    assert [m for m in modules if any(m == n or m.startswith(n + ".") for n in NEVER)] == []
