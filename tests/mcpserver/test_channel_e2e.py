"""A session's channel outlives its daemon. A warm body (detached, in its sandbox)
left running when the daemon is killed keeps Chorus's tools: Claude carries the MCP
server on its own stdio (no URL, no token in its command line) and the next daemon,
re-attached, answers it; Codex keeps the URL it was started with, and the next
daemon (same key, same port) serves it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chorus.bodies import process_start_time
from chorus.client._lifecycle import read_pid
from chorus.daemon import DaemonClient, stop_daemon
from chorus.events import parse_event
from chorus.policy import AuditLog
from chorus.testing import ModelServer, offline_env, text, tool_call

pytestmark = pytest.mark.e2e


@pytest.fixture(params=["claude", "codex"])
def body(
    request: pytest.FixtureRequest, chorus_home: Path, tmp_path: Path
) -> Iterator[tuple[str, ModelServer, Path]]:
    name = str(request.param)
    work = tmp_path / "work"
    work.mkdir()
    with ModelServer() as server:
        env = offline_env(name, tmp_path / f"{name}-home", server.url)  # type: ignore[arg-type]
        lines = ["[daemon]", "notifications = false", "[gateway]", "port = 0"]
        lines += ["[dashboard]", "port = 0", f"[agents.{name}.env]"]
        lines += [f"{k} = {json.dumps(v)}" for k, v in env.items()]
        chorus_home.mkdir(parents=True, exist_ok=True)
        (chorus_home / "config.toml").write_text("\n".join(lines) + "\n")
        yield name, server, work
        stop_daemon()
    assert server.errors == []


def _ask(work: Path, body: str, *args: str) -> list[object]:
    done = subprocess.run(
        [sys.executable, "-m", "chorus", "ask", *args, "--body", body, "--json"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=work,
        env=os.environ.copy(),
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return [parse_event(line) for line in done.stdout.splitlines()]


def _kill_daemon() -> None:
    pid = read_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    # Until it is gone: a killed daemon whose main thread is already a zombie may still
    # hold its socket while its other threads end, and a client connecting then is reset.
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists():
        assert time.monotonic() < deadline
        time.sleep(0.1)


def _mcp_config(group: int) -> object:
    """The ``--mcp-config`` servers of the Claude CLI in process group ``group``."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            argv = (stat.parent / "cmdline").read_bytes().decode().split("\0")
        except OSError:
            continue
        if int(fields[2]) == group and "--mcp-config" in argv:
            return json.loads(argv[argv.index("--mcp-config") + 1])["mcpServers"]
    raise AssertionError(f"no CLI with --mcp-config in process group {group}")


def _wrote(server: ModelServer, index: int) -> bool:
    result = server.turn_requests()[index].last_tool_result()
    assert result is not None
    return '"op": "add"' in result.content


def _write(text: str, body: str) -> object:
    """The model's call of Chorus's ``memory_write`` as ``body``'s CLI names it (Codex
    finds deferred MCP tools by namespace)."""
    if body == "codex":
        return tool_call("memory_write", {"text": text}, namespace="mcp__chorus")
    return tool_call("mcp__chorus__memory_write", {"text": text})


def test_a_body_left_running_reaches_the_next_daemons_channel(
    body: tuple[str, ModelServer, Path], chorus_home: Path
) -> None:
    name, server, work = body
    server.script(
        [
            _write("The staging host is db-staging-7", name),
            text("saved"),
            _write("The release is on Tuesday", name),
            text("saved again"),
        ]  # type: ignore[list-item]
    )
    first = _ask(work, name, "remember the host")
    assert _wrote(server, 1)
    session_id = first[-1].session_id  # type: ignore[attr-defined]
    handle = DaemonClient().session(session_id)["transport"]["body_handle"]
    if name == "claude":  # in-band: no URL to keep
        assert _mcp_config(int(handle["pid"])) == {"chorus": {"type": "sdk", "name": "chorus"}}
    port = (chorus_home / "run" / "channel.port").read_text()
    _kill_daemon()
    assert process_start_time(int(handle["pid"])) == handle["started"]  # it outlived
    _ask(work, name, "remember the day", "--session", session_id)  # a new daemon starts
    assert (chorus_home / "run" / "channel.port").read_text() == port
    now = DaemonClient().session(session_id)["transport"]["body_handle"]
    assert (now["pid"], now["started"]) == (handle["pid"], handle["started"])  # same CLI
    assert _wrote(server, 3)  # answered by the new daemon: on the same stdio or URL
    audited = [e for e in AuditLog().entries() if e.kind == "mcp_tool_call"]
    assert [(e.data["tool"], e.session_id) for e in audited] == [("memory_write", session_id)] * 2
