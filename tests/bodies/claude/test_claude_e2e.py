"""The real ``claude`` CLI (pinned 2.1.330) driven by the bodies, against the fake model server."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any, TypeVar

import pytest

from chorus.bodies import BodyOptions, rule_callback
from chorus.bodies.claude import ClaudeBody, ClaudePrintBody
from chorus.events import (
    ErrorCode,
    Event,
    Notice,
    PermissionDecision,
    PermissionRequest,
    RetryNotice,
    SessionEnded,
    SessionStarted,
    StatusChanged,
    TextDelta,
    ToolCall,
    ToolResult,
    TurnCompleted,
    TurnFailed,
    Unknown,
)
from chorus.testing import (
    ModelServer,
    Scenario,
    error,
    offline_env,
    slow_text,
    text,
    thinking,
    write_file,
)

pytestmark = pytest.mark.e2e
T = TypeVar("T")
SONNET = "claude-sonnet-4-5"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def _options(
    tmp_path: Path, work: Path, claude: Path, url: str, *, max_retries: int = 0, **kw: Any
) -> BodyOptions:
    env = offline_env("claude", tmp_path / "home", url, max_retries=max_retries)
    return BodyOptions(cwd=work, env=env, executable=claude, **kw)


async def _turn(body: ClaudeBody | ClaudePrintBody, prompt: str) -> list[Event]:
    return [event async for event in body.turn(prompt)]


def _all(events: list[Event], kind: type[T]) -> list[T]:
    return [e for e in events if isinstance(e, kind)]


def _one(events: list[Event], kind: type[T]) -> T:
    found = _all(events, kind)
    assert len(found) == 1, f"expected one {kind.__name__}: {found}"
    return found[0]


def _history_texts(body: Any) -> list[str]:
    """Every text block of every message in a recorded request body."""
    texts = []
    for message in body["messages"]:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        texts += [b.get("text", "") for b in blocks if b.get("type") == "text"]
    return texts


async def test_tool_run_writes_the_file(tmp_path: Path, work: Path, claude: Path) -> None:
    scenario = Scenario.of(
        write_file("out.txt", "hello from chorus\n", say="Writing."), text("done")
    )
    with ModelServer(scenario) as server:
        async with ClaudeBody(_options(tmp_path, work, claude, server.url)) as body:
            events = await _turn(body, "make out.txt")
    assert (work / "out.txt").read_text() == "hello from chorus\n"
    started = _one(events, SessionStarted)
    assert (started.body_version, started.cwd) == ("2.1.330", str(work))
    call = _one(events, ToolCall)
    assert (call.tool, call.native_tool) == ("write", "Write")
    ask = _one(events, PermissionRequest)
    assert (ask.call_id, ask.tool) == (call.call_id, "write")
    assert _one(events, PermissionDecision).decision == "allow"
    assert _one(events, ToolResult).status == "completed"
    done = events[-1]
    assert isinstance(done, TurnCompleted)
    assert done.result == "done"
    assert done.usage is not None
    assert done.usage.input_tokens > 0
    assert done.cost_usd is not None
    assert done.cost_usd > 0
    assert body.native_session_id == started.native_session_id


async def test_denied_tool_is_not_run_and_the_model_sees_why(
    tmp_path: Path, work: Path, claude: Path
) -> None:
    policy = rule_callback(deny=["write"], reason="no writes in this test")
    scenario = Scenario.of(write_file("out.txt", "nope\n"), text("understood"))
    with ModelServer(scenario) as server:
        options = _options(tmp_path, work, claude, server.url, permission_callback=policy)
        async with ClaudeBody(options) as body:
            events = await _turn(body, "make out.txt")
        seen = server.turn_requests()[1].last_tool_result()
    assert not (work / "out.txt").exists()
    assert seen is not None
    assert seen.is_error
    assert "no writes in this test" in seen.content
    decision = _one(events, PermissionDecision)
    assert (decision.decision, decision.reason) == ("deny", "no writes in this test: write")
    assert _one(events, ToolResult).status == "denied"
    done = events[-1]
    assert isinstance(done, TurnCompleted)
    assert [d["tool_name"] for d in done.permission_denials] == ["Write"]


async def test_interrupt_mid_stream_then_the_next_turn_works(
    tmp_path: Path, work: Path, claude: Path
) -> None:
    scenario = Scenario.of(
        slow_text("one two three four five six", chunks=30, delay=0.2), text("again")
    )
    with ModelServer(scenario) as server:
        async with ClaudeBody(_options(tmp_path, work, claude, server.url)) as body:
            events: list[Event] = []
            async for event in body.turn("talk slowly"):
                events.append(event)
                if isinstance(event, TextDelta) and len(_all(events, TextDelta)) == 2:
                    await asyncio.wait_for(asyncio.gather(body.interrupt(), body.interrupt()), 10)
            after = await _turn(body, "hello again")
    failed = events[-1]
    assert isinstance(failed, TurnFailed)
    assert failed.error.code is ErrorCode.INTERRUPTED
    assert failed.terminal_reason == "aborted_streaming"
    assert isinstance(after[-1], TurnCompleted)
    assert after[-1].result == "again"


async def test_controls_reach_the_next_request(tmp_path: Path, work: Path, claude: Path) -> None:
    with ModelServer(Scenario.of(text("first"), text("second"))) as server:
        async with ClaudeBody(_options(tmp_path, work, claude, server.url)) as body:
            await _turn(body, "one")
            await body.set_model(SONNET)
            await body.set_max_thinking_tokens(4096)
            await body.set_permission_mode("acceptEdits")
            assert await body.mcp_status() == {"mcpServers": []}
            events = await _turn(body, "two")
        first, second = (r.body for r in server.turn_requests())
    assert first["model"] != SONNET
    assert second["model"] == SONNET
    assert second["thinking"]["budget_tokens"] == 4096
    assert (body.model, body.permission_mode) == (SONNET, "acceptEdits")
    assert isinstance(events[-1], TurnCompleted)


async def test_resume_continues_the_session_in_a_new_process(
    tmp_path: Path, work: Path, claude: Path
) -> None:
    with ModelServer(Scenario.of(text("noted"), text("it was blue"))) as server:
        async with ClaudeBody(_options(tmp_path, work, claude, server.url)) as first:
            await _turn(first, "remember the colour blue")
        session = first.native_session_id
        assert session is not None
        options = _options(tmp_path, work, claude, server.url, resume=session)
        async with ClaudeBody(options) as second:
            assert second.native_session_id is None  # not confirmed before the first turn
            events = await _turn(second, "which colour?")
        history = _history_texts(server.turn_requests()[-1].body)
    assert _one(events, SessionStarted).native_session_id == session
    assert second.native_session_id == session
    assert "remember the colour blue" in history
    assert "noted" in history


@pytest.mark.parametrize("missing", ["11111111-2222-4333-8444-555555555555", "not-a-session"])
async def test_unknown_resume_id_falls_back_to_a_fresh_session(
    tmp_path: Path, work: Path, claude: Path, missing: str
) -> None:
    with ModelServer(Scenario.of(text("fresh start"))) as server:
        options = _options(tmp_path, work, claude, server.url, resume=missing)
        async with ClaudeBody(options) as body:
            events = await _turn(body, "hello")
    notice = _one(events, Notice)
    assert notice.kind == "resume_fallback"
    assert missing in notice.message
    assert isinstance(events[-1], TurnCompleted)
    assert body.native_session_id not in (None, missing)


@pytest.mark.parametrize(
    ("kind", "retries", "code", "retryable"),
    [
        ("quota", 0, ErrorCode.QUOTA_EXHAUSTED, False),
        ("rate_limit", 0, ErrorCode.RATE_LIMITED, True),
        ("context_overflow", 0, ErrorCode.CONTEXT_OVERFLOW, False),
        ("auth", 0, ErrorCode.AUTH, False),
    ],
)
async def test_api_errors_fail_the_turn_with_stable_codes(
    tmp_path: Path,
    work: Path,
    claude: Path,
    kind: Any,
    retries: int,
    code: ErrorCode,
    retryable: bool,
) -> None:
    with ModelServer(Scenario.of(error(kind, times=None))) as server:
        options = _options(tmp_path, work, claude, server.url, max_retries=retries)
        async with ClaudeBody(options) as body:
            events = await _turn(body, "hello")
    failed = events[-1]
    assert isinstance(failed, TurnFailed)
    assert (failed.error.code, failed.error.retryable) == (code, retryable)


async def test_rate_limit_retries_show_as_retry_notices(
    tmp_path: Path, work: Path, claude: Path
) -> None:
    with ModelServer(Scenario.of(error("rate_limit", times=None))) as server:
        options = _options(tmp_path, work, claude, server.url, max_retries=1)
        async with ClaudeBody(options) as body:
            events = await _turn(body, "hello")
        assert len(server.turn_requests()) == 2
    retry = _one(events, RetryNotice)
    assert (retry.attempt, retry.max_retries, retry.error.code) == (1, 1, ErrorCode.RATE_LIMITED)
    failed = events[-1]
    assert isinstance(failed, TurnFailed)
    assert failed.error.code is ErrorCode.RATE_LIMITED


async def test_quota_is_not_retried_by_the_cli(tmp_path: Path, work: Path, claude: Path) -> None:
    with ModelServer(Scenario.of(error("quota", times=None))) as server:
        options = _options(tmp_path, work, claude, server.url, max_retries=2)
        async with ClaudeBody(options) as body:
            events = await _turn(body, "hello")
        assert len(server.turn_requests()) == 1
    assert not _all(events, RetryNotice)
    failed = events[-1]
    assert isinstance(failed, TurnFailed)
    assert failed.error.code is ErrorCode.QUOTA_EXHAUSTED


async def test_kill_9_is_body_crashed(tmp_path: Path, work: Path, claude: Path) -> None:
    with ModelServer(Scenario.of(slow_text("a b c d e f g h", chunks=20, delay=0.3))) as server:
        async with ClaudeBody(_options(tmp_path, work, claude, server.url)) as body:
            events: list[Event] = []
            async for event in body.turn("talk slowly"):
                events.append(event)
                if isinstance(event, TextDelta) and body.pid is not None:
                    os.kill(body.pid, signal.SIGKILL)
            ended = await anext(body.stream())
    failed = events[-1]
    assert isinstance(failed, TurnFailed)
    assert failed.error.code is ErrorCode.BODY_CRASHED
    assert failed.error.native is not None
    assert failed.error.native["exit_code"] == -signal.SIGKILL
    assert isinstance(ended, SessionEnded)
    assert ended.reason == "crashed"


async def test_print_body_runs_tools_and_resumes(tmp_path: Path, work: Path, claude: Path) -> None:
    scenario = Scenario.of(write_file("p.txt", "print mode\n"), text("written"), text("still here"))
    with ModelServer(scenario) as server:
        options = _options(tmp_path, work, claude, server.url, permission_mode="bypassPermissions")
        async with ClaudePrintBody(options) as body:
            first = await _turn(body, "make p.txt")
            second = await _turn(body, "-are you there?")
        history = _history_texts(server.turn_requests()[-1].body)
    assert (work / "p.txt").read_text() == "print mode\n"
    assert _one(first, ToolCall).native_tool == "Write"
    assert isinstance(second[-1], TurnCompleted)
    assert second[-1].result == "still here"
    session = _one(first, SessionStarted).native_session_id
    assert session == body.native_session_id
    assert not _all(second, SessionStarted)  # one SessionStarted per native session
    assert {e.native_session_id for e in second} == {session}
    assert {"make p.txt", "-are you there?"} <= set(history)


async def test_print_body_names_a_new_sessions_id_before_the_cli_says_it(
    tmp_path: Path, work: Path, claude: Path
) -> None:
    """A new session's id is Chorus's (``--session-id``): known as soon as the process
    starts, so a turn killed before the CLI's first line can still be resumed."""
    with ModelServer(Scenario.of(text("named"))) as server:
        async with ClaudePrintBody(_options(tmp_path, work, claude, server.url)) as body:
            events = await _turn(body, "hello")
            argv = list(body._transport.spec.argv) if body._transport else []
    chosen = argv[argv.index("--session-id") + 1]
    assert "--resume" not in argv
    assert _one(events, SessionStarted).native_session_id == chosen == body.native_session_id


async def test_print_body_interrupt(tmp_path: Path, work: Path, claude: Path) -> None:
    with ModelServer(Scenario.of(slow_text("x y z w v u", chunks=20, delay=0.3))) as server:
        async with ClaudePrintBody(_options(tmp_path, work, claude, server.url)) as body:
            events: list[Event] = []
            async for event in body.turn("talk slowly"):
                events.append(event)
                if isinstance(event, TextDelta):
                    await asyncio.wait_for(body.interrupt(), 15)
    failed = events[-1]
    assert isinstance(failed, TurnFailed)
    assert failed.error.code is ErrorCode.INTERRUPTED


async def test_print_body_falls_back_from_an_unknown_session(
    tmp_path: Path, work: Path, claude: Path
) -> None:
    missing = "11111111-2222-4333-8444-555555555555"
    with ModelServer(Scenario.of(text("fresh"))) as server:
        options = _options(tmp_path, work, claude, server.url, resume=missing)
        async with ClaudePrintBody(options) as body:
            events = await _turn(body, "hello")
    assert _one(events, Notice).kind == "resume_fallback"
    assert isinstance(events[-1], TurnCompleted)
    assert body.native_session_id not in (None, missing)


#: 300 KiB: more than the kernel takes in one argv string (128 KiB).
BIG_PROMPT = "BIG-START " + " ".join(f"w{i}" for i in range(60_000))[: 300 << 10] + " BIG-END"


async def test_print_body_takes_a_300_kib_prompt_on_stdin(
    tmp_path: Path, work: Path, claude: Path
) -> None:
    with ModelServer(Scenario.of(text("read it all"))) as server:
        async with ClaudePrintBody(_options(tmp_path, work, claude, server.url)) as body:
            events = await _turn(body, BIG_PROMPT)
        sent = json.dumps(server.turn_requests()[-1].body)
    assert isinstance(events[-1], TurnCompleted)
    assert events[-1].result == "read it all"
    assert "BIG-START" in sent
    assert "BIG-END" in sent


async def test_thinking_turn_maps_every_line(tmp_path: Path, work: Path, claude: Path) -> None:
    with ModelServer(Scenario.of(thinking("pondering deeply", "answer"))) as server:
        async with ClaudeBody(_options(tmp_path, work, claude, server.url)) as body:
            events = await _turn(body, "think")
    assert not [e for e in events if isinstance(e, Unknown)]
    assert any(isinstance(e, StatusChanged) and e.state == "thinking" for e in events)
    assert _one(events, TurnCompleted).result == "answer"
