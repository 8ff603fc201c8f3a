"""ClaudeBody against a small fake CLI script: garbage, hangs, crashes, odd requests."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from chorus import BodyCrashedError, BodyTimeoutError
from chorus.bodies import (
    MAX_LINE_BYTES,
    BodyOptions,
    BodyState,
    IllegalBodyTransitionError,
    McpServer,
    PermissionAnswer,
    PermissionAsk,
)
from chorus.bodies.claude import ClaudeBody
from chorus.events import (
    ControlRequestEvent,
    ErrorCode,
    Event,
    PermissionDecision,
    PermissionRequest,
    SessionEnded,
    TextDelta,
    TurnCompleted,
    TurnFailed,
    Unknown,
)

FAKE = Path(__file__).parent / "fake_agents" / "fake_claude.py"


def _fake_cli(tmp_path: Path) -> Path:
    """A one-line launcher, since the body runs ``<executable> <flags>``."""
    launcher = tmp_path / "claude"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    launcher.chmod(0o755)
    return launcher


def _options(
    tmp_path: Path, mode: str, env: dict[str, str] | None = None, **kw: Any
) -> BodyOptions:
    child_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "FAKE_CLAUDE_MODE": mode,
        "FAKE_CLAUDE_LOG": str(tmp_path / "stdin.log"),
        **(env or {}),
    }
    return BodyOptions(cwd=tmp_path, env=child_env, executable=_fake_cli(tmp_path), **kw)


def _stdin_log(tmp_path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (tmp_path / "stdin.log").read_text().splitlines()]


async def _collect(
    events: AsyncIterator[Event], until: Callable[[Event], bool] | None = None
) -> list[Event]:
    seen = []
    async for event in events:
        seen.append(event)
        if until is not None and until(event):
            break
    return seen


async def test_garbage_lines_become_unknown_and_the_turn_completes(tmp_path: Path) -> None:
    async with ClaudeBody(_options(tmp_path, "garbage")) as body:
        events = await _collect(body.turn("hi"))
    unknown = [e for e in events if isinstance(e, Unknown)]
    assert [u.raw for u in unknown[:2]] == ["this is not json", "[1, 2, 3]"]
    assert {u.native_type for u in unknown} >= {
        "brand_new_type",
        "assistant",
        "system/future_thing",
    }
    done = events[-1]
    assert isinstance(done, TurnCompleted)
    assert done.result == "echo: hi"
    assert body.native_session_id == "fa4e0000-0000-4000-8000-000000000001"


async def test_stdin_gets_only_codec_json_lines(tmp_path: Path) -> None:
    async with ClaudeBody(_options(tmp_path, "echo")) as body:
        await _collect(body.turn("line one\nline two"))
    sent = _stdin_log(tmp_path)
    assert [m["type"] for m in sent] == ["control_request", "user"]
    assert sent[1]["message"] == {"role": "user", "content": "line one\nline two"}


async def test_interrupt_of_a_hung_cli_escalates_within_bounds(tmp_path: Path) -> None:
    options = _options(
        tmp_path, "hang", interrupt_timeout=0.5, env={"FAKE_CLAUDE_IGNORE_TERM": "1"}
    )
    body = ClaudeBody(options)
    await body.start()
    turn = body.turn("hang please")
    await _collect(turn, until=lambda e: isinstance(e, TextDelta))
    started = time.monotonic()
    await asyncio.gather(body.interrupt(), body.interrupt())  # idempotent, concurrent
    assert time.monotonic() - started < 8.0
    rest = await _collect(turn)
    failed = next(e for e in rest if isinstance(e, TurnFailed))
    assert failed.error.code is ErrorCode.INTERRUPTED
    ended = await anext(body.stream())
    assert isinstance(ended, SessionEnded)
    assert ended.reason == "killed"
    await body.interrupt()  # after the end: a no-op
    await body.close()


async def test_turn_timeout_interrupts_and_fails_with_timeout(tmp_path: Path) -> None:
    options = _options(tmp_path, "hang", turn_timeout=0.3, interrupt_timeout=0.3)
    async with ClaudeBody(options) as body:
        started = time.monotonic()
        events = await _collect(body.turn("hang please"))
    assert time.monotonic() - started < 6.0
    failed = events[-1]
    assert isinstance(failed, TurnFailed)
    assert failed.error.code is ErrorCode.TIMEOUT


async def test_close_of_a_hung_cli_returns_within_bounds(tmp_path: Path) -> None:
    body = ClaudeBody(_options(tmp_path, "hang", env={"FAKE_CLAUDE_IGNORE_TERM": "1"}))
    await body.start()
    await _collect(body.turn("hang please"), until=lambda e: isinstance(e, TextDelta))
    started = time.monotonic()
    await body.close()
    await body.close()
    assert time.monotonic() - started < 12.0
    tail = await _collect(body.stream(), until=lambda e: isinstance(e, SessionEnded))
    assert isinstance(tail[-2], TurnFailed)
    assert tail[-2].error.code is ErrorCode.INTERRUPTED
    assert isinstance(tail[-1], SessionEnded)
    assert tail[-1].reason == "closed"


async def test_crash_mid_turn_is_body_crashed_with_stderr(tmp_path: Path) -> None:
    async with ClaudeBody(_options(tmp_path, "crash")) as body:
        events = await _collect(body.turn("crash please"))
        failed = events[-1]
        assert isinstance(failed, TurnFailed)
        assert failed.error.code is ErrorCode.BODY_CRASHED
        assert failed.error.native is not None
        assert failed.error.native["exit_code"] == 3
        assert "boom: fake crash" in failed.error.native["stderr_tail"]
        ended = await anext(body.stream())
        assert isinstance(ended, SessionEnded)
        assert ended.reason == "crashed"
        with pytest.raises(BodyCrashedError):
            await _collect(body.turn("again"))


async def test_withdrawn_permission_request_is_not_answered(tmp_path: Path) -> None:
    release = asyncio.Event()

    async def slow_policy(ask: PermissionAsk) -> PermissionAnswer:
        await release.wait()
        return PermissionAnswer.allow()

    async with ClaudeBody(_options(tmp_path, "cancel", permission_callback=slow_policy)) as body:
        events = await _collect(body.turn("cancel please"))
    request = next(e for e in events if isinstance(e, PermissionRequest))
    decision = next(e for e in events if isinstance(e, PermissionDecision))
    assert (request.request_id, request.tool) == ("perm-1", "shell")
    assert (decision.request_id, decision.decision, decision.source) == ("perm-1", "deny", "agent")
    assert isinstance(events[-1], TurnCompleted)
    assert [m["type"] for m in _stdin_log(tmp_path)] == ["control_request", "user"]


async def test_unhandled_cli_request_gets_an_error_answer(tmp_path: Path) -> None:
    async with ClaudeBody(_options(tmp_path, "hook")) as body:
        events = await _collect(body.turn("hook please"))
    asked = next(
        e for e in events if isinstance(e, ControlRequestEvent) and e.request_id == "hook-1"
    )
    assert asked.subtype == "hook_callback"
    done = events[-1]
    assert isinstance(done, TurnCompleted)
    assert done.result == "error"
    reply = _stdin_log(tmp_path)[-1]
    assert reply["type"] == "control_response"


async def test_unanswered_initialize_times_out_and_cleans_up(tmp_path: Path) -> None:
    options = _options(
        tmp_path, "echo", env={"FAKE_CLAUDE_NO_INIT": "1"}, extra={"initialize_timeout": 0.5}
    )
    body = ClaudeBody(options)
    with pytest.raises(BodyTimeoutError, match="initialize"):
        await body.start()
    assert body.pid is not None
    assert not Path(f"/proc/{body.pid}").exists()  # killed and reaped by start()


def _state(body: ClaudeBody) -> BodyState:
    """The body's state, read afresh (not narrowed by the asserts before)."""
    return body.state


async def test_the_body_state_follows_the_lifecycle_table(tmp_path: Path) -> None:
    body = ClaudeBody(_options(tmp_path, "echo"))
    assert _state(body) is BodyState.NEW
    await body.start()
    assert _state(body) is BodyState.READY
    with pytest.raises(IllegalBodyTransitionError, match="ready -> starting"):
        await body.start()  # once only; the running CLI is left alone
    assert body.alive
    turn = body.turn("hello")
    first = await anext(turn)
    assert _state(body) is BodyState.BUSY, first
    rest = await _collect(turn)
    assert isinstance(rest[-1], TurnCompleted)
    assert _state(body) is BodyState.READY
    await body.close()
    assert _state(body) is BodyState.CLOSED
    assert not body.alive
    with pytest.raises(BodyCrashedError, match="claude body is closed"):
        await anext(body.turn("after the close"))


async def test_an_ignored_interrupt_escalates_and_the_process_end_is_final(
    tmp_path: Path,
) -> None:
    options = _options(
        tmp_path, "hang", interrupt_timeout=0.5, env={"FAKE_CLAUDE_IGNORE_TERM": "1"}
    )
    async with ClaudeBody(options) as body:
        turn = body.turn("hang please")
        await _collect(turn, until=lambda e: isinstance(e, TextDelta))
        interrupting = asyncio.create_task(body.interrupt())
        await asyncio.sleep(0.1)
        assert _state(body) is BodyState.INTERRUPTING
        await interrupting
        assert _state(body) is BodyState.EXITED  # escalated, then the group was killed
        assert not body.alive
    assert _state(body) is BodyState.CLOSED


async def _answer(message: dict[str, Any]) -> dict[str, Any] | None:
    """An in-band server: ``boom`` fails, ``huge`` answers past the line cap."""
    if "id" not in message:
        return None  # a notification
    if message["method"] == "boom":
        raise RuntimeError("boom")
    size = (MAX_LINE_BYTES + 1) if message["method"] == "huge" else 1
    return {"jsonrpc": "2.0", "id": message["id"], "result": {"echo": "x" * size}}


async def test_in_band_mcp_messages_get_an_answer_each_and_the_body_goes_on(
    tmp_path: Path,
) -> None:
    server = McpServer(url="http://127.0.0.1:9/unused", inband=_answer)
    options = _options(tmp_path, "mcp", mcp_servers={"chorus": server})
    async with ClaudeBody(options) as body:
        events = await _collect(body.turn("mcp please"))
    done = events[-1]
    assert isinstance(done, TurnCompleted)
    noted, not_json, elsewhere, failed, too_long, listed = json.loads(done.result or "")
    assert noted["response"] == {"mcp_response": {"jsonrpc": "2.0", "result": {}, "id": 0}}
    assert not_json["subtype"] == "error"
    assert "no JSON-RPC object" in not_json["error"]
    assert elsewhere["subtype"] == "error"  # a server Chorus did not give the CLI
    assert failed["subtype"] == "error"
    assert "boom" in failed["error"]
    error = too_long["response"]["mcp_response"]
    assert (error["id"], error["error"]["code"]) == (3, -32603)
    assert listed["response"]["mcp_response"] == {
        "jsonrpc": "2.0",
        "id": 4,
        "result": {"echo": "x"},
    }
    asked = [e.request_id for e in events if isinstance(e, ControlRequestEvent)]
    assert [a for a in asked if a.startswith("mcp-")] == [f"mcp-{n}" for n in range(6)]
