"""AcpBody against a scripted fake ACP agent (fault cases), configured by config.toml alone."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pytest

from chorus import BodyCrashedError, BodyTimeoutError, UnsupportedControlError
from chorus.bodies import BodyOptions, PermissionAnswer, PermissionAsk, rule_callback
from chorus.bodies.acp import AcpBody, AcpStateError, acp_agent, open_acp_body
from chorus.bodies.acp._quirks import CODEX_ACP_QUIRKS
from chorus.events import (
    ErrorCode,
    Event,
    Notice,
    PermissionDecision,
    PermissionRequest,
    SessionEnded,
    SessionStarted,
    TextDelta,
    ToolCall,
    ToolResult,
    TurnCompleted,
    TurnFailed,
)
from tests._wait import until_async

T = TypeVar("T")


def _options(work: Path, **kw: Any) -> BodyOptions:
    return BodyOptions(cwd=work, env={"PATH": "/usr/bin:/bin"}, **kw)


async def _turn(body: AcpBody, prompt: str) -> list[Event]:
    return [event async for event in body.turn(prompt)]


def _one(events: list[Event], kind: type[T]) -> T:
    found = [e for e in events if isinstance(e, kind)]
    assert len(found) == 1, f"expected one {kind.__name__} in {events}"
    return found[0]


def _said(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def test_config_agent_runs_a_turn(fake_config: Path, work: Path) -> None:
    body = open_acp_body("fake", _options(work))
    assert type(body).name == "fake"
    async with body:
        events = await _turn(body, "hello")
    started = _one(events, SessionStarted)
    assert (started.body, started.body_version, started.native_session_id) == (
        "fake",
        "9.9",
        "fake-session",
    )
    assert _said(events) == "hi"
    done = _one(events, TurnCompleted)
    assert done.usage is not None
    assert (done.usage.input_tokens, done.usage.output_tokens) == (5, 2)
    assert done.result == "hi"
    assert all(e.body == "fake" for e in events)


async def test_file_system_is_served_only_inside_the_roots(
    fake_config: Path, work: Path, tmp_path: Path
) -> None:
    (work / "inside.txt").write_text("inside\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("secret\n")
    (work / "link.txt").symlink_to(secret)
    extra = tmp_path / "extra"
    extra.mkdir()
    options = _options(work, extra={"allowed_roots": [str(extra)]})
    async with open_acp_body("fake", options) as body:
        inside = await _turn(body, f"read {work / 'inside.txt'}")
        dotdot = await _turn(body, f"read {work}/../secret.txt")
        via_link = await _turn(body, f"read {work / 'link.txt'}")
        missing = await _turn(body, f"read {work / 'nope.txt'}")
        wrote = await _turn(body, f"write {extra / 'sub' / 'new.txt'}")
        escape = await _turn(body, f"write {tmp_path / 'evil.txt'}")
    assert json.loads(_said(inside)) == {
        "jsonrpc": "2.0",
        "id": 100,
        "result": {"content": "inside\n"},
    }
    for refused in (dotdot, via_link, escape):
        error = json.loads(_said(refused))["error"]
        assert error["code"] == -32602
        assert "outside the session's allowed roots" in error["message"]
        assert "refused" in _one(refused, Notice).message
    assert json.loads(_said(missing))["error"]["code"] == -32002
    assert not any(isinstance(e, Notice) for e in missing)
    assert (extra / "sub" / "new.txt").read_text() == "written by fake\n"
    assert json.loads(_said(wrote))["result"] is None
    assert not (tmp_path / "evil.txt").exists()


async def test_unadvertised_terminal_is_method_not_found(fake_config: Path, work: Path) -> None:
    async with open_acp_body("fake", _options(work)) as body:
        events = await _turn(body, "terminal")
    assert json.loads(_said(events))["error"]["code"] == -32601


@pytest.mark.parametrize(
    ("answer", "option", "decision"),
    [
        (PermissionAnswer("allow", scope="session"), "yes-always", "allow"),
        (PermissionAnswer.allow(), "yes", "allow"),
        (PermissionAnswer.deny("not today"), "no", "deny"),
    ],
)
async def test_permission_goes_through_the_callback(
    fake_config: Path, work: Path, answer: PermissionAnswer, option: str, decision: str
) -> None:
    asks: list[PermissionAsk] = []

    async def callback(ask: PermissionAsk) -> PermissionAnswer:
        asks.append(ask)
        return answer

    async with open_acp_body("fake", _options(work, permission_callback=callback)) as body:
        events = await _turn(body, "permission")
    assert asks[0].tool == "shell"
    assert asks[0].input == {"command": "rm -rf build"}
    assert asks[0].call_id == "call-1"
    request = _one(events, PermissionRequest)
    assert (request.tool, request.call_id) == ("shell", "call-1")
    assert _one(events, PermissionDecision).decision == decision
    reply = json.loads(_said(events))["result"]
    assert reply == {"outcome": {"outcome": "selected", "optionId": option}}
    kinds = [type(e) for e in events]
    assert kinds.index(ToolCall) < kinds.index(PermissionRequest) < kinds.index(PermissionDecision)
    if decision == "deny":
        result = _one(events, ToolResult)
        assert (result.status, result.is_error, result.output) == ("denied", True, "not today")


async def test_a_failing_callback_denies(fake_config: Path, work: Path) -> None:
    async def broken(ask: PermissionAsk) -> PermissionAnswer:
        raise RuntimeError("policy store unreachable")

    async with open_acp_body("fake", _options(work, permission_callback=broken)) as body:
        events = await _turn(body, "permission")
    decision = _one(events, PermissionDecision)
    assert decision.decision == "deny"
    assert "policy store unreachable" in (decision.reason or "")
    assert json.loads(_said(events))["result"]["outcome"]["optionId"] == "no"


async def test_rule_callback_denies_by_tool(fake_config: Path, work: Path) -> None:
    options = _options(work, permission_callback=rule_callback(deny={"shell"}))
    async with open_acp_body("fake", options) as body:
        events = await _turn(body, "permission")
    assert _one(events, PermissionDecision).decision == "deny"


async def test_interrupt_ends_the_turn_and_the_session_goes_on(
    fake_config: Path, work: Path
) -> None:
    async with open_acp_body("fake", _options(work)) as body:
        events: list[Event] = []
        async for event in body.turn("slow"):
            events.append(event)
            if isinstance(event, TextDelta) and len(events) == 3:
                await body.interrupt()
        await body.interrupt()  # idle: a no-op
        after = await _turn(body, "hello")
    failed = _one(events, TurnFailed)
    assert failed.error.code is ErrorCode.INTERRUPTED
    assert failed.terminal_reason == "cancelled"
    assert _said(after) == "hi"


async def test_turn_deadline_cancels_then_gives_up(fake_config: Path, work: Path) -> None:
    options = _options(work, turn_timeout=0.5, interrupt_timeout=0.3)
    async with open_acp_body("fake", options) as body:
        loop = asyncio.get_running_loop()
        began = loop.time()
        events = await _turn(body, "hang")
        elapsed = loop.time() - began
        after = await _turn(body, "hello")
    failed = _one(events, TurnFailed)
    assert failed.error.code is ErrorCode.TIMEOUT
    assert 0.5 <= elapsed < 3
    assert _said(after) == "hi"


async def test_agent_crash_mid_turn_is_body_crashed(fake_config: Path, work: Path) -> None:
    async with open_acp_body("fake", _options(work)) as body:
        events = [event async for event in body.turn("crash")]
        ended = await anext(body.stream())
    failed = _one(events, TurnFailed)
    assert failed.error.code is ErrorCode.BODY_CRASHED
    assert failed.error.native is not None
    assert failed.error.native["exit_code"] == 3
    assert isinstance(ended, SessionEnded)
    assert (ended.reason, ended.exit_code) == ("crashed", 3)


async def test_an_agent_gone_before_the_prompt_is_a_crash_not_a_refusal(
    fake_config: Path, work: Path
) -> None:
    """Killed between its session's start and the prompt: the turn raises a crash (a
    job resumes after one), not "not running" (a job fails on that)."""
    async with open_acp_body("fake", _options(work)) as body:
        pid = body.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        await until_async(lambda: body._tg is None, 30)  # its reader saw the end
        with pytest.raises(BodyCrashedError):
            await _turn(body, "hello")


async def test_quota_error_is_quota_exhausted(fake_config: Path, work: Path) -> None:
    async with open_acp_body("fake", _options(work)) as body:
        events = await _turn(body, "quota")
    error = _one(events, TurnFailed).error
    assert (error.code, error.http_status, error.retryable) == (
        ErrorCode.QUOTA_EXHAUSTED,
        429,
        False,
    )


async def test_controls_map_to_agent_methods(fake_config: Path, work: Path) -> None:
    async with open_acp_body("fake", _options(work, permission_mode="auto")) as body:
        assert body.permission_mode == "auto"
        assert body.codec.state.current_mode == "auto"
        with pytest.raises(UnsupportedControlError, match="is not one of"):
            await body.set_permission_mode("bypassPermissions")
        with pytest.raises(UnsupportedControlError, match="Method not found"):
            await body.set_model("some-model")
        with pytest.raises(UnsupportedControlError):
            await body.steer("faster")


async def test_one_turn_at_a_time(fake_config: Path, work: Path) -> None:
    async with open_acp_body("fake", _options(work)) as body:
        turn = body.turn("slow")
        await anext(turn)
        with pytest.raises(AcpStateError, match="already running"):
            await anext(body.turn("hello"))
        await body.interrupt()
        rest = [event async for event in turn]
    assert isinstance(rest[-1], TurnFailed)


async def test_close_is_idempotent_and_ends_the_session(fake_config: Path, work: Path) -> None:
    body = open_acp_body("fake", _options(work))
    await body.start()
    pid = body.pid
    await body.close()
    await body.close()
    events = [await anext(body.stream()) for _ in range(2)]
    assert isinstance(events[0], SessionStarted)
    assert isinstance(events[1], SessionEnded)
    assert events[1].reason == "closed"
    assert pid is not None


async def test_a_broken_handler_ends_the_session_instead_of_hanging(
    fake_config: Path, work: Path
) -> None:
    async def not_an_answer(ask: PermissionAsk) -> Any:
        return "yes please"  # not a PermissionAnswer: serving the request fails

    async with open_acp_body("fake", _options(work, permission_callback=not_an_answer)) as body:
        events = await _turn(body, "permission")
        ended = await anext(body.stream())
    failed = _one(events, TurnFailed)
    assert failed.error.code is ErrorCode.BODY_PROTOCOL
    assert "decision" in failed.error.message
    assert isinstance(ended, SessionEnded)
    assert ended.reason == "error"


def _codex_like(work: Path, mode: str, sent: list[str]) -> AcpBody:
    """The fake agent with codex-acp's quirks and modes; ``sent`` gets what we write."""
    agent = replace(acp_agent("fake"), quirks=CODEX_ACP_QUIRKS)
    env = {"PATH": "/usr/bin:/bin", "FAKE_MODES": "read-only,auto,full-access"}
    tap = functools.partial(_keep_stdin, sent)
    return AcpBody(BodyOptions(cwd=work, env=env, permission_mode=mode, raw_tap=tap), agent)


def _keep_stdin(sent: list[str], stream: str, line: str) -> None:
    if stream == "stdin":
        sent.append(json.loads(line).get("method") or "reply")


async def test_codex_acp_asks_by_its_start_arguments_in_chorus_asking_modes(
    fake_config: Path, work: Path
) -> None:
    sent: list[str] = []
    body = _codex_like(work, "default", sent)
    argv = list(body._spawn_spec().argv)
    assert argv[-4:] == [
        "-c",
        'approval_policy="untrusted"',
        "-c",
        'sandbox_mode="workspace-write"',
    ]
    async with body:
        assert "session/set_mode" not in sent  # its own modes never ask: none is set
        await body.set_permission_mode("plan")  # the policy tells asking modes apart
        await body.set_permission_mode("acceptEdits")
        assert "session/set_mode" not in sent
        await body.set_permission_mode("bypassPermissions")
        assert sent.count("session/set_mode") == 1
        assert body.codec.state.current_mode == "full-access"
        with pytest.raises(UnsupportedControlError, match="cannot return to 'default'"):
            await body.set_permission_mode("default")
        assert body.permission_mode == "bypassPermissions"


async def test_codex_acp_in_bypass_permissions_starts_in_full_access(
    fake_config: Path, work: Path
) -> None:
    sent: list[str] = []
    body = _codex_like(work, "bypassPermissions", sent)
    assert "approval_policy" not in " ".join(body._spawn_spec().argv)
    async with body:
        assert body.codec.state.current_mode == "full-access"
    assert sent.count("session/set_mode") == 1


def _starts(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


async def test_a_slow_session_new_is_waited_for_while_the_agent_runs(
    fake_config: Path, work: Path, tmp_path: Path
) -> None:
    # session/new once had the control deadline (15 s); under load claude-code-acp
    # took longer and the job failed. Here the control deadline is 1 s.
    starts = tmp_path / "starts"
    env = {"PATH": "/usr/bin:/bin", "FAKE_SLOW": "session/new:3", "FAKE_STARTS": str(starts)}
    options = BodyOptions(cwd=work, env=env, control_timeout=1.0, start_timeout=30.0)
    async with open_acp_body("fake", options) as body:
        events = await _turn(body, "hello")
    assert _said(events) == "hi"
    assert _starts(starts) == 1


async def test_a_start_stuck_past_its_deadline_is_tried_once_more_then_names_the_step(
    fake_config: Path, work: Path, tmp_path: Path
) -> None:
    starts = tmp_path / "starts"
    env = {"PATH": "/usr/bin:/bin", "FAKE_SLOW": "session/new:60", "FAKE_STARTS": str(starts)}
    body = open_acp_body("fake", BodyOptions(cwd=work, env=env, start_timeout=2.0))
    began = time.monotonic()
    with pytest.raises(BodyTimeoutError) as info:
        await body.start()
    assert "start step session/new got no answer within 2s while the agent ran" in str(info.value)
    assert _starts(starts) == 2  # tried once more, not more
    assert time.monotonic() - began < 20
    assert not body.alive


async def test_an_agent_that_dies_in_its_start_fails_at_once_with_its_stderr(
    fake_config: Path, work: Path, tmp_path: Path
) -> None:
    starts = tmp_path / "starts"
    env = {"PATH": "/usr/bin:/bin", "FAKE_DIE_AT": "session/new", "FAKE_STARTS": str(starts)}
    body = open_acp_body("fake", BodyOptions(cwd=work, env=env, start_timeout=60.0))
    began = time.monotonic()
    with pytest.raises(BodyCrashedError) as info:
        await body.start()
    assert time.monotonic() - began < 10  # not the deadline: it died
    assert "fake agent: cannot answer session/new" in info.value.stderr_tail
    assert _starts(starts) == 1  # a dead agent is not started again
