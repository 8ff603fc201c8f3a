"""The gateway mounted in the real daemon: UCP on its unix socket, the brain link and
the CLI commands (``chorus repl``, ``chorus connect``, ``chorus gateway``)."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.server import ServerConnection, serve

from chorus.client._paths import socket_path
from chorus.daemon import stop_daemon
from chorus.events import (
    ControlRequest,
    ControlResponse,
    RequestBody,
    TurnCompleted,
    parse_outbound,
)
from chorus.gateway import UcpClient, token_path
from chorus.testing import ModelServer, claude_env, text

pytestmark = pytest.mark.e2e


@pytest.fixture
def daemon_home(
    chorus_home: Path, tmp_path: Path, model_server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """A CHORUS_HOME whose Claude talks to the fake server; the daemon stops afterwards."""
    monkeypatch.setenv("CHORUS_ALLOW_INSECURE_BRAIN", "1")  # inherited by the daemon
    env = claude_env(tmp_path / "claude-home", model_server.url)
    lines = ["[daemon]", "notifications = false", "[agents.claude.env]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in env.items()]
    chorus_home.mkdir(parents=True, exist_ok=True)
    (chorus_home / "config.toml").write_text("\n".join(lines) + "\n")
    work = tmp_path / "work"
    work.mkdir()
    try:
        yield work
    finally:
        stop_daemon()


async def _chorus(*args: str, stdin: bytes | None = None, timeout: float = 90) -> tuple[int, str]:  # noqa: ASYNC109
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "chorus",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=os.environ.copy(),
    )
    out, _ = await asyncio.wait_for(proc.communicate(stdin), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_ucp_on_the_daemon_socket(daemon_home: Path, model_server: ModelServer) -> None:
    model_server.script([text("hello from the daemon")])
    code, out = await _chorus("start")  # in a child, so no Popen of ours outlives the test
    assert code == 0, out
    async with UcpClient.connect(unix_socket=socket_path()) as brain:
        before = await brain.request("status")
        assert before["ucp_version"] == 1
        assert before["tcp"] or before["tcp_error"]  # TCP is on by default (port 7719)
        await brain.request("initialize", body="claude", cwd=str(daemon_home), timeout=90)
        await brain.send_user("hello")
        events = await brain.until(lambda e: isinstance(e, TurnCompleted), timeout=90)
    done = events[-1]
    assert isinstance(done, TurnCompleted)
    assert done.result == "hello from the daemon"
    transport = httpx.AsyncHTTPTransport(uds=str(socket_path()))
    async with httpx.AsyncClient(transport=transport, base_url="http://chorus") as http:
        metrics = (await http.get("/metrics")).text
        status = (await http.get("/gateway/status")).json()
        assert len(status["sessions"]) == 1
        record = (await http.get(f"/sessions/{status['sessions'][0]}")).json()
    assert 'chorus_gateway_requests_total{body="none",subtype="initialize"} 1.0' in metrics
    pid = record["transport"]["pgid"]
    await asyncio.to_thread(stop_daemon)
    with pytest.raises(ProcessLookupError):  # stopping the daemon closed the body
        os.kill(pid, 0)


async def test_repl_command(daemon_home: Path, model_server: ModelServer) -> None:
    model_server.script([text("repl reply")])
    script = b":status\n:brain status\n:mode plan\n:quit\n"
    code, out = await _chorus("repl", "--body", "claude", "--cwd", str(daemon_home), stdin=script)
    assert code == 0, out
    assert "session " in out
    assert '"state": "idle"' in out
    assert '"state": "none"' in out  # no brain link
    assert '"mode": "plan"' in out


async def test_connect_command_makes_the_daemon_dial_a_brain(daemon_home: Path) -> None:
    asked: asyncio.Queue[ControlResponse] = asyncio.Queue(1)

    async def brain(ws: ServerConnection) -> None:
        frame = ControlRequest(request_id="hello", request=RequestBody(subtype="status"))
        await ws.send(frame.model_dump_json())
        while True:
            reply = parse_outbound(await ws.recv())
            if isinstance(reply, ControlResponse):
                asked.put_nowait(reply)
                await ws.wait_closed()
                return

    async with serve(brain, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        url = f"ws://127.0.0.1:{port}/brain"
        code, out = await _chorus("connect", "--brain-url", url)
        assert code == 0, out
        assert json.loads(out)["state"] == "connected"
        reply = await asyncio.wait_for(asked.get(), 15)
        assert reply.response.subtype == "success"
        assert reply.response.response["ucp_version"] == 1  # type: ignore[union-attr]
        code, out = await _chorus("connect", "--disconnect")
        assert code == 0, out
        assert json.loads(out)["state"] == "stopped"


async def test_connect_refuses_a_url_that_is_not_a_websocket(daemon_home: Path) -> None:
    code, out = await _chorus("connect", "--brain-url", "http://not-a-websocket/")
    assert code == 2, out
    assert "wss://" in out


async def test_gateway_token_command(daemon_home: Path) -> None:
    code, out = await _chorus("gateway", "token")
    assert code == 0, out
    assert out.strip() == token_path().read_text().strip()
    assert stat.S_IMODE(token_path().stat().st_mode) == 0o600
