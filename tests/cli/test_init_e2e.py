"""``chorus init`` on a fresh home, then a real ``chorus ask`` through the daemon on
the body it set up (the real Claude Code CLI against the scripted model server),
and init again while the daemon runs: nothing changed, then a new login taken by
a reload and kept by the integrity guardian."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chorus.daemon import stop_daemon
from chorus.events import Routed, parse_event
from chorus.testing import ModelServer, claude_env, text
from tests.cli.test_init import LOGIN_VARS

pytestmark = pytest.mark.e2e


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelServer]:
    """A scripted model server; the only login a Claude key in the environment (HOME
    empty: no CLI's own login file); the daemon stopped at the end."""
    home = tmp_path / "empty-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in LOGIN_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy")
    with ModelServer() as server:
        yield server
        stop_daemon()
    assert server.errors == []


def chorus(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chorus", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=os.environ.copy(),
        cwd=cwd,
    )


def init_json(cwd: Path) -> dict[str, Any]:
    done = chorus(cwd, "init", "--json")
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_init_then_ask_runs_on_claude(
    server: ModelServer, chorus_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    first = init_json(work)
    assert first["router_bodies"] == ["claude"]
    assert first["daemon"]["daemon"] == "not running"
    config = chorus_home / "config.toml"
    # Init invents no base URL: the person (here the test) points Claude at the server.
    # The key stays the one in the environment.
    env = claude_env(tmp_path / "claude-home", server.url)
    del env["ANTHROPIC_API_KEY"]
    lines = ["[daemon]", "notifications = false", "[gateway]", "port = 0"]
    lines += ["[dashboard]", "port = 0", "[agents.claude.env]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in env.items()]
    config.write_text(config.read_text() + "\n".join(lines) + "\n")

    server.script([text("Renamed.")])
    done = chorus(work, "ask", "Rename foo to bar", "--json")  # no --body: the router picks
    assert done.returncode == 0, done.stderr
    events = [parse_event(line) for line in done.stdout.splitlines()]
    assert [e.to_body for e in events if isinstance(e, Routed)] == ["claude"]
    assert events[-1].state == "succeeded"
    (request,) = server.turn_requests()
    assert request.headers.get("x-api-key") == "dummy"  # the environment's key

    kept = config.read_bytes()
    again = chorus(work, "init")
    assert again.returncode == 0, again.stderr
    assert "unchanged" in again.stdout
    assert "daemon: reloaded" not in again.stdout
    assert config.read_bytes() == kept

    # A Gemini login appears: init adds gemini, the running daemon takes it.
    monkeypatch.setenv("GEMINI_API_KEY", "dummy")
    grown = init_json(work)
    assert grown["router_bodies"] == ["claude", "gemini"]
    assert grown["daemon"]["applied"] == ["router.bodies"]
    # The daemon was started without that key: init says so (restart it from here).
    assert list(grown["daemon_needs_login"]) == ["gemini"]
    assert config.read_bytes() == kept.replace(b'["claude"]', b'["claude", "gemini"]')
    beat = chorus(work, "heartbeat", "run")
    assert beat.returncode == 0, beat.stderr
    assert config.read_bytes() == kept.replace(b'["claude"]', b'["claude", "gemini"]')
