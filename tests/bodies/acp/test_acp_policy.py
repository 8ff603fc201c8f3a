"""The policy over ACP where the protocol leaves gaps, on the fake agent:
an agent whose only reject aborts the turn, and the ``fs/*`` requests Chorus serves
from outside the body's sandbox."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from chorus.bodies import BodyOptions, PermissionAnswer, PermissionAsk
from chorus.bodies.acp import CLAUDE_CODE_ACP_QUIRKS, AcpCodec, AcpRpcError, open_acp_body
from chorus.events import Event, Notice, TextDelta, ToolCall, TurnCompleted, TurnFailed

REASON = "Chorus policy denied this: no secrets"


def _options(folder: Path, **kw: Any) -> BodyOptions:
    return BodyOptions(cwd=folder, env={"PATH": "/usr/bin:/bin"}, **kw)


def _said(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


class Recorder:
    """A permission callback that denies what ``deny`` matches and records every ask."""

    def __init__(self, deny: str = "") -> None:
        self.deny = deny
        self.asks: list[PermissionAsk] = []

    async def __call__(self, ask: PermissionAsk) -> PermissionAnswer:
        self.asks.append(ask)
        said = json.dumps(ask.input)
        if self.deny and self.deny in said:
            return PermissionAnswer.deny(REASON)
        return PermissionAnswer.allow()


async def test_a_reject_that_aborts_the_turn_is_told_and_the_turn_goes_on(
    fake_config: Path,
    work: Path,
) -> None:
    """codex-acp's only reject option ends the prompt ``cancelled``: that is the
    denial, not an interrupt; the model is prompted with the reason, same turn."""
    sent: list[str] = []

    def tap(stream: str, line: str) -> None:
        if stream == "stdin" and "session/prompt" in line:
            sent.append(json.loads(line)["params"]["prompt"][0]["text"])

    options = _options(work, permission_callback=Recorder(deny="rm -rf"), raw_tap=tap)
    async with open_acp_body("fake", options) as body:
        events = [event async for event in body.turn("abort")]
    ends = [e for e in events if isinstance(e, TurnCompleted | TurnFailed)]
    assert [type(e) for e in ends] == [TurnCompleted, TurnCompleted]
    assert isinstance(ends[0], TurnCompleted)
    assert ends[0].stop_reason == "denied"
    assert sent[0] == "abort"
    assert sent[1].startswith("[Chorus policy]")
    assert REASON in sent[1]


async def test_an_interrupt_without_a_denial_still_fails_the_turn(
    fake_config: Path,
    work: Path,
) -> None:
    async with open_acp_body("fake", _options(work)) as body:
        events: list[Event] = []
        async for event in body.turn("slow"):
            events.append(event)
            if isinstance(event, TextDelta) and len(events) == 2:
                await body.interrupt()
    assert isinstance(events[-1], TurnFailed)


async def test_file_requests_are_asked_of_the_policy(
    fake_config: Path,
    work: Path,
) -> None:
    """Chorus reads and writes for the agent outside its sandbox: the policy decides
    (a denied ``.env``, a write in plan mode) and the agent gets the reason."""
    (work / ".env").write_text("TOKEN=hush-7Qx\n")
    (work / "ok.txt").write_text("fine\n")
    policy = Recorder(deny=".env")
    async with open_acp_body("fake", _options(work, permission_callback=policy)) as body:
        secret = [e async for e in body.turn(f"read {work / '.env'}")]
        fine = [e async for e in body.turn(f"read {work / 'ok.txt'}")]
        written = [e async for e in body.turn(f"write {work / 'new.env'}")]
    error = json.loads(_said(secret))["error"]
    assert REASON in error["message"]
    assert "hush-7Qx" not in _said(secret)
    assert any(isinstance(e, Notice) and REASON in e.message for e in secret)
    assert json.loads(_said(fine))["result"] == {"content": "fine\n"}
    assert REASON in json.loads(_said(written))["error"]["message"]
    assert not (work / "new.env").exists()
    asked = [(a.tool, a.input["file_path"]) for a in policy.asks]
    assert asked == [
        ("read", str(work / ".env")),
        ("read", str(work / "ok.txt")),
        ("write", str(work / "new.env")),
    ]


async def test_a_write_allowed_as_a_tool_call_is_not_asked_twice(
    fake_config: Path,
    work: Path,
) -> None:
    policy = Recorder()
    async with open_acp_body("fake", _options(work, permission_callback=policy)) as body:
        first = [e async for e in body.turn(f"edit {work / 'a.txt'}")]
        # A write of the same path later, not as part of an allowed call, is asked.
        again = [e async for e in body.turn(f"write {work / 'a.txt'}")]
    assert json.loads(_said(first))["result"] is None
    assert json.loads(_said(again))["result"] is None
    assert [a.tool for a in policy.asks] == ["edit", "write"]
    assert (work / "a.txt").read_text() == "written by fake\n"


async def test_claude_code_acp_holds_plan_mode_in_its_default_mode_and_says_so(
    chorus_home: Path, work: Path
) -> None:
    """Its own plan mode runs shell commands unasked: Chorus's plan is its default
    mode (every shell command and write asked of the policy), with a policy notice."""
    chorus_home.mkdir(parents=True, exist_ok=True)
    (chorus_home / "config.toml").write_text(
        "[agents.claude-code-acp]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(Path(__file__).with_name('fake_acp_agent.py')))}]\n"
        'env = { FAKE_MODES = "default,acceptEdits,plan,bypassPermissions" }\n'
    )
    sent: list[str] = []

    def tap(stream: str, line: str) -> None:
        if stream == "stdin" and "session/set_mode" in line:
            sent.append(json.loads(line)["params"]["modeId"])

    options = _options(work, permission_mode="plan", raw_tap=tap)
    async with open_acp_body("claude-code-acp", options) as body:
        events = [e async for e in body.turn("hello")]
        await body.set_permission_mode("acceptEdits")
        await body.set_permission_mode("plan")
        assert body.permission_mode == "plan"
    assert sent == ["default", "acceptEdits", "default"]
    notices = [e for e in events if isinstance(e, Notice) and e.kind == "policy"]
    assert len(notices) == 1
    assert "plan mode is held by the Chorus policy" in notices[0].message


async def test_a_failed_start_says_what_the_agent_said(fake_config: Path, work: Path) -> None:
    """claude-code-acp's session/new error is only "Query closed before response
    received"; why (e.g. its CLI refusing to run as root) is on its stderr."""
    options = BodyOptions(cwd=work, env={"PATH": "/usr/bin:/bin", "FAKE_NEW_FAILS": "no key here"})
    body = open_acp_body("fake", options)
    with pytest.raises(AcpRpcError, match="fake said on stderr: no key here"):
        await body.start()


def test_claude_code_acp_own_file_tools_are_reads_and_writes() -> None:
    """``mcp__acp__Read`` is claude-code-acp's Read, not a call to an MCP server."""
    codec = AcpCodec(body="claude-code-acp", quirks=CLAUDE_CODE_ACP_QUIRKS)
    request_id, _ = codec.new_session("/work")
    codec.feed(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"sessionId": "s"}}))
    calls = []
    for call_id, name in (("t1", "mcp__acp__Read"), ("t2", "mcp__acp__Write"), ("t3", "Bash")):
        update = {
            "sessionUpdate": "tool_call",
            "toolCallId": call_id,
            "title": name,
            "kind": "other",
            "rawInput": {"file_path": "/work/x"},
            "_meta": {"claudeCode": {"toolName": name}},
        }
        line = {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": "s", "update": update},
        }
        calls += [e for e in codec.feed(json.dumps(line)) if isinstance(e, ToolCall)]
    assert [(c.tool, c.native_tool) for c in calls] == [
        ("read", "mcp__acp__Read"),
        ("write", "mcp__acp__Write"),
        ("shell", "Bash"),
    ]
