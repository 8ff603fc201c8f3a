"""Approvals that reach the brain: when the policy *asks* about a tool call, a UCP
brain attached to the session (that said it takes asks) gets a ``can_use_tool``
request, and ``[brain] authority`` says what its answer may do. End to end on
the real Claude CLI through the daemon."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chorus.client._paths import socket_path
from chorus.daemon import stop_daemon
from chorus.events import CanUseToolRequest, Event, JsonDict, Notice, TurnCompleted, TurnFailed
from chorus.gateway import UcpClient
from chorus.policy import AuditLog
from chorus.testing import ModelServer, claude_env, shell, text

pytestmark = pytest.mark.e2e


@pytest.fixture
def home(chorus_home: Path, tmp_path: Path, model_server: ModelServer) -> Iterator[Path]:
    """Claude against the scripted server; asks time out after 4 s (default deny)."""
    env = claude_env(tmp_path / "claude-home", model_server.url)
    lines = ["[daemon]", "notifications = false", "[gateway]", "port = 0"]
    lines += ["[agents.claude.env]", *(f"{k} = {json.dumps(v)}" for k, v in env.items())]
    chorus_home.mkdir(parents=True, exist_ok=True)
    (chorus_home / "config.toml").write_text("\n".join(lines) + "\n")
    (chorus_home / "policy.toml").write_text("version = 1\n[ask]\ntimeout_s = 4\n")
    work = tmp_path / "work"
    (work / "build").mkdir(parents=True)
    try:
        yield work
    finally:
        stop_daemon()


def _with_authority(chorus_home: Path, authority: str) -> None:
    config = chorus_home / "config.toml"
    config.write_text(config.read_text() + f'[brain]\nauthority = "{authority}"\n')


def _turn_end(event: Event) -> bool:
    return isinstance(event, TurnCompleted | TurnFailed)


async def _run(work: Path, answer: str, *, opt_in: bool = True) -> tuple[list[Any], list[Event]]:
    """A brain asks for ``rm -rf build`` (an *ask* under the default policy) and answers
    every permission ask with ``answer``; returns the asks it got and the turn's events."""
    asked: list[CanUseToolRequest] = []

    async def decide(ask: CanUseToolRequest) -> JsonDict:
        asked.append(ask)
        return {"behavior": answer, "message": f"the brain says {answer}"}

    callback = decide if opt_in else None
    started = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "chorus", "start"], capture_output=True, text=True
    )
    assert started.returncode == 0, started.stderr
    async with UcpClient.connect(unix_socket=socket_path(), on_can_use_tool=callback) as brain:
        await brain.request("initialize", body="claude", cwd=str(work), timeout=90)
        await brain.send_user("clean the build folder")
        events = await brain.until(_turn_end, timeout=90)
        events += await asyncio.wait_for(_drain_notices(brain), 5)
    return asked, events


async def _drain_notices(brain: UcpClient) -> list[Event]:
    await asyncio.sleep(0.5)  # a brain note may be logged just after the turn
    return brain.drain()


def _brain_audit() -> list[dict[str, Any]]:
    entries = AuditLog().entries()
    return [
        e.data for e in entries if e.kind == "permission_decision" and e.data["source"] == "brain"
    ]


async def test_an_escalate_only_brain_denies_an_ask(
    home: Path, model_server: ModelServer, chorus_home: Path
) -> None:
    model_server.script([shell("rm -rf build"), text("left it alone")])
    asked, events = await _run(home, "deny")
    assert [a.tool_name for a in asked] == ["shell"]
    assert asked[0].input["command"] == "rm -rf build"
    assert asked[0].default == "deny"
    assert (home / "build").is_dir()  # the brain's deny held
    notes = [e.message for e in events if isinstance(e, Notice) and e.kind == "brain"]
    assert any("deny" in n and "applied" in n for n in notes)
    audit = _brain_audit()
    assert [a["decision"] for a in audit] == ["deny"]


async def test_an_escalate_only_brain_cannot_allow(
    home: Path, model_server: ModelServer, chorus_home: Path
) -> None:
    model_server.script([shell("rm -rf build"), text("could not")])
    asked, events = await _run(home, "allow")
    assert len(asked) == 1
    assert (home / "build").is_dir()  # logged only; the ask timed out to its default (deny)
    notes = [e.message for e in events if isinstance(e, Notice) and e.kind == "brain"]
    assert any("logged only (escalate-only)" in n for n in notes)
    assert _brain_audit() == []


async def test_a_governing_brain_allows_an_ask(
    home: Path, model_server: ModelServer, chorus_home: Path
) -> None:
    _with_authority(chorus_home, "governing")
    model_server.script([shell("rm -rf build"), text("cleaned")])
    asked, _ = await _run(home, "allow")
    assert len(asked) == 1
    assert not (home / "build").exists()  # the brain's allow decided
    assert [a["decision"] for a in _brain_audit()] == ["allow"]


async def test_a_brain_that_did_not_opt_in_is_never_asked(
    home: Path, model_server: ModelServer, chorus_home: Path
) -> None:
    _with_authority(chorus_home, "governing")
    model_server.script([shell("rm -rf build"), text("waited")])
    asked, _ = await _run(home, "allow", opt_in=False)
    assert asked == []
    assert (home / "build").is_dir()  # nobody allowed it: the default (deny) held
