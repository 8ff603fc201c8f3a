"""A session's channel outlives its daemon: a warm Claude body (detached, in its
sandbox) carries Chorus's MCP server on its own stdio (no URL, no token in its
command line); left running when the daemon is killed, its tool calls are answered
by the next daemon, which re-attaches to it."""

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


@pytest.fixture
def claude(chorus_home: Path, tmp_path: Path) -> Iterator[tuple[ModelServer, Path]]:
    work = tmp_path / "work"
    work.mkdir()
    with ModelServer() as server:
        env = offline_env("claude", tmp_path / "claude-home", server.url)
        lines = ["[daemon]", "notifications = false", "[gateway]", "port = 0"]
        lines += ["[dashboard]", "port = 0", "[agents.claude.env]"]
        lines += [f"{k} = {json.dumps(v)}" for k, v in env.items()]
        chorus_home.mkdir(parents=True, exist_ok=True)
        (chorus_home / "config.toml").write_text("\n".join(lines) + "\n")
        yield server, work
        stop_daemon()
    assert server.errors == []


def _ask(work: Path, *args: str) -> list[object]:
    done = subprocess.run(
        [sys.executable, "-m", "chorus", "ask", *args, "--body", "claude", "--json"],
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
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid):
        assert time.monotonic() < deadline
        time.sleep(0.1)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return "zombie"


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


def test_a_body_left_running_reaches_the_next_daemons_channel(
    claude: tuple[ModelServer, Path], chorus_home: Path
) -> None:
    server, work = claude
    write = "mcp__chorus__memory_write"
    server.script(
        [
            tool_call(write, {"text": "The staging host is db-staging-7"}),
            text("saved"),
            tool_call(write, {"text": "The release is on Tuesday"}),
            text("saved again"),
        ]
    )
    first = _ask(work, "remember the host")
    assert _wrote(server, 1)
    session_id = first[-1].session_id  # type: ignore[attr-defined]
    handle = DaemonClient().session(session_id)["transport"]["body_handle"]
    assert _mcp_config(int(handle["pid"])) == {"chorus": {"type": "sdk", "name": "chorus"}}
    _kill_daemon()
    assert process_start_time(int(handle["pid"])) == handle["started"]  # it outlived
    _ask(work, "remember the day", "--session", session_id)  # a new daemon starts
    now = DaemonClient().session(session_id)["transport"]["body_handle"]
    assert (now["pid"], now["started"]) == (handle["pid"], handle["started"])  # same CLI
    assert _wrote(server, 3)  # answered by the new daemon, on the same stdio
    audited = [e for e in AuditLog().entries() if e.kind == "mcp_tool_call"]
    assert [(e.data["tool"], e.session_id) for e in audited] == [("memory_write", session_id)] * 2
