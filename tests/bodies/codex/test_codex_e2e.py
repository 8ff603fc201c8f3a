"""The real ``codex`` CLI (pinned 0.169.0) driven by the bodies, against the fake model server."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from chorus.bodies import BodyOptions, PermissionAnswer, PermissionAsk, rule_callback
from chorus.bodies.codex import CodexBody, CodexExecBody
from chorus.events import (
    ErrorCode,
    Event,
    FileChange,
    Notice,
    PermissionDecision,
    PermissionRequest,
    SessionEnded,
    SessionStarted,
    Steer,
    TextDelta,
    ToolCall,
    ToolResult,
    TurnCompleted,
    TurnFailed,
)
from chorus.testing import (
    CODEX_MODEL,
    ModelServer,
    OfflineCli,
    Scenario,
    error,
    shell,
    slow_text,
    text,
    write_file,
)

pytestmark = pytest.mark.e2e
T = TypeVar("T")

Factory = Callable[..., OfflineCli]


def _options(cli: OfflineCli, **kw: Any) -> BodyOptions:
    kw.setdefault("permission_mode", "bypassPermissions")
    return BodyOptions(cwd=cli.cwd, env=cli.env, executable=cli.executable, **kw)


async def _turn(body: CodexBody | CodexExecBody, prompt: str) -> list[Event]:
    return [event async for event in body.turn(prompt)]


def _all(events: list[Event], kind: type[T]) -> list[T]:
    return [e for e in events if isinstance(e, kind)]


def _one(events: list[Event], kind: type[T]) -> T:
    found = _all(events, kind)
    assert len(found) == 1, f"expected one {kind.__name__}: {found}"
    return found[0]


def _input_text(request_body: Any) -> str:
    """The whole ``input`` history of a recorded Responses request, as JSON text."""
    return json.dumps(request_body["input"])


# -- app-server ---------------------------------------------------------------------------


async def test_command_runs_and_writes_the_file(
    model_server: ModelServer, offline_cli: Factory
) -> None:
    cli = offline_cli("codex")
    model_server.script(Scenario.of(shell("echo hello > out.txt"), text("done")))
    async with CodexBody(_options(cli)) as body:
        events = await _turn(body, "make out.txt")
    assert (cli.cwd / "out.txt").read_text() == "hello\n"
    started = _one(events, SessionStarted)
    assert (started.model, started.body_version, started.cwd) == (
        CODEX_MODEL,
        "0.169.0",
        str(cli.cwd),
    )
    assert body.native_session_id == started.native_session_id
    call = _one(events, ToolCall)
    assert (call.tool, call.native_tool) == ("shell", "commandExecution")
    assert "echo hello > out.txt" in call.input["command"]
    result = _one(events, ToolResult)
    assert (result.call_id, result.exit_code, result.is_error) == (call.call_id, 0, False)
    done = events[-1]
    assert isinstance(done, TurnCompleted)
    assert done.result == "done"
    assert done.usage is not None
    assert (done.usage.input_tokens, done.usage.output_tokens) == (200, 40)  # 2 calls x 100/20
    assert isinstance(await anext(body.stream()), SessionEnded)  # close() reports the end


async def test_approval_accept_runs_the_command(
    model_server: ModelServer, offline_cli: Factory
) -> None:
    cli = offline_cli("codex")
    model_server.script(Scenario.of(shell("echo yes > approved.txt"), text("done")))
    asks: list[PermissionAsk] = []

    async def allow(ask: PermissionAsk) -> PermissionAnswer:
        asks.append(ask)
        return PermissionAnswer.allow()

    options = _options(cli, permission_mode="default", permission_callback=allow)
    async with CodexBody(options) as body:
        events = await _turn(body, "make approved.txt")
    assert (cli.cwd / "approved.txt").read_text() == "yes\n"
    request = _one(events, PermissionRequest)
    assert (request.tool, request.native_tool) == ("shell", "commandExecution")
    assert asks[0].call_id == request.call_id == _one(events, ToolCall).call_id
    assert _one(events, PermissionDecision).decision == "allow"
    assert _one(events, ToolResult).status == "completed"
    assert isinstance(events[-1], TurnCompleted)


async def test_approval_decline_blocks_the_command_and_the_model_is_told(
    model_server: ModelServer, offline_cli: Factory
) -> None:
    cli = offline_cli("codex")
    model_server.script(Scenario.of(shell("echo no > declined.txt"), text("ok, I won't")))
    deny = rule_callback(deny=("shell",), reason="no shell today")
    options = _options(cli, permission_mode="default", permission_callback=deny)
    async with CodexBody(options) as body:
        events = await _turn(body, "make declined.txt")
    assert not (cli.cwd / "declined.txt").exists()
    decision = _one(events, PermissionDecision)
    assert (decision.decision, decision.reason) == ("deny", "no shell today: shell")
    result = _one(events, ToolResult)
    assert (result.status, result.is_error) == ("declined", True)
    assert isinstance(events[-1], TurnCompleted)
    told = model_server.turn_requests()[1].last_tool_result()
    assert told is not None
    assert "rejected by user" in told.content


async def test_a_declined_patch_is_a_denial_not_its_diff(
    model_server: ModelServer, offline_cli: Factory
) -> None:
    cli = offline_cli("codex")
    model_server.script(
        Scenario.of(write_file("patched.txt", "secret plan\n"), text("ok, no patch"))
    )

    async def deny_all(ask: PermissionAsk) -> PermissionAnswer:
        return PermissionAnswer.deny("no edits today")

    options = _options(cli, permission_mode="default", permission_callback=deny_all)
    async with CodexBody(options) as body:
        events = await _turn(body, "make patched.txt")
    assert not (cli.cwd / "patched.txt").exists()
    assert _one(events, PermissionDecision).decision == "deny"
    result = _one(events, ToolResult)
    assert (result.status, result.is_error) == ("declined", True)
    assert result.output == f"patch declined: {cli.cwd / 'patched.txt'}"
    assert "secret plan" not in result.output
    assert not _all(events, FileChange)
    assert isinstance(events[-1], TurnCompleted)


async def test_steer_mid_turn_reaches_the_model(
    model_server: ModelServer, offline_cli: Factory
) -> None:
    cli = offline_cli("codex")
    model_server.script(
        Scenario.of(slow_text("tick " * 20, chunks=20, delay=0.2), text("steered answer"))
    )
    steer_text = "STEER: answer in French instead"
    events: list[Event] = []
    async with CodexBody(_options(cli)) as body:
        async for event in body.turn("count slowly"):
            events.append(event)
            if isinstance(event, TextDelta) and len(_all(events, TextDelta)) == 1:
                await body.steer(steer_text)
    steer = _one(events, Steer)
    assert (steer.text, steer.native) == (steer_text, True)
    done = events[-1]
    assert isinstance(done, TurnCompleted)
    assert done.result == "steered answer"
    first, second = model_server.turn_requests()
    assert first.last_user_text() == "count slowly"
    assert second.last_user_text() == steer_text  # the same turn's next request carries it


async def test_interrupt_ends_the_turn_and_the_session_goes_on(
    model_server: ModelServer, offline_cli: Factory
) -> None:
    cli = offline_cli("codex")
    model_server.script(Scenario.of(slow_text("tick " * 50, chunks=50, delay=0.2), text("next")))
    events: list[Event] = []
    async with CodexBody(_options(cli)) as body:
        async for event in body.turn("count slowly"):
            events.append(event)
            if isinstance(event, TextDelta):
                await asyncio.wait_for(body.interrupt(), 10)
                await body.interrupt()  # idempotent once the turn is over
        after = await _turn(body, "and now?")
    failed = events[-1]
    assert isinstance(failed, TurnFailed)
    assert failed.error.code == ErrorCode.INTERRUPTED
    assert len(_all(events, TextDelta)) < 50
    done = after[-1]
    assert isinstance(done, TurnCompleted)
    assert done.result == "next"


async def test_resume_in_a_new_process_keeps_thread_and_history(
    model_server: ModelServer, offline_cli: Factory
) -> None:
    cli = offline_cli("codex")
    model_server.script(Scenario.of(text("noted"), text("it was PAPAYA")))
    async with CodexBody(_options(cli)) as first:
        await _turn(first, "the secret word is PAPAYA")
        thread = first.native_session_id
        first_pid = first.pid
    assert thread is not None
    async with CodexBody(_options(cli, resume=thread)) as second:
        assert second.pid != first_pid
        events = await _turn(second, "what was the word?")
    started = _one(events, SessionStarted)
    assert started.native_session_id == thread
    assert second.native_session_id == thread
    done = events[-1]
    assert isinstance(done, TurnCompleted)
    assert done.usage is not None
    assert done.usage.input_tokens == 100  # restored thread totals are not this turn's
    resumed = model_server.turn_requests()[-1]
    assert "the secret word is PAPAYA" in _input_text(resumed.body)
    assert resumed.last_user_text() == "what was the word?"


async def test_resume_of_an_unknown_thread_starts_a_new_one_visibly(
    model_server: ModelServer, offline_cli: Factory
) -> None:
    cli = offline_cli("codex")
    model_server.script(Scenario.of(text("fresh")))
    missing = "01a20000-0000-7000-8000-000000000000"
    async with CodexBody(_options(cli, resume=missing)) as body:
        events = await _turn(body, "hello")
    (notice,) = [n for n in _all(events, Notice) if n.kind == "resume_fallback"]
    assert missing in notice.message
    started = _one(events, SessionStarted)
    assert started.native_session_id not in (None, missing)
    assert isinstance(events[-1], TurnCompleted)


async def test_fork_starts_a_new_thread_with_the_old_history(
    model_server: ModelServer, offline_cli: Factory
) -> None:
    cli = offline_cli("codex")
    model_server.script(Scenario.of(text("noted"), text("forked")))
    async with CodexBody(_options(cli)) as first:
        await _turn(first, "remember MANGO")
        thread = first.native_session_id
    async with CodexBody(_options(cli, resume=thread, extra={"fork": True})) as forked:
        events = await _turn(forked, "what fruit?")
    started = _one(events, SessionStarted)
    assert started.native_session_id not in (None, thread)
    assert "remember MANGO" in _input_text(model_server.turn_requests()[-1].body)


async def test_accept_edits_mode_applies_edits_but_asks_for_commands(
    model_server: ModelServer, offline_cli: Factory
) -> None:
    cli = offline_cli("codex")
    model_server.script(
        Scenario.of(write_file("notes.txt", "edited"), shell("echo x > cmd.txt"), text("done"))
    )
    asked: list[str] = []

    async def deny(ask: PermissionAsk) -> PermissionAnswer:
        asked.append(ask.tool)
        return PermissionAnswer.deny("commands need a human")

    options = _options(cli, permission_mode="acceptEdits", permission_callback=deny)
    async with CodexBody(options) as body:
        events = await _turn(body, "edit and run")
    assert (cli.cwd / "notes.txt").read_text() == "edited\n"
    assert not (cli.cwd / "cmd.txt").exists()
    assert asked == ["shell"]  # the edit never reached the callback
    decisions = {(d.decision, d.source) for d in _all(events, PermissionDecision)}
    assert decisions == {("allow", "mode"), ("deny", "callback")}
    change = _one(events, FileChange)
    assert change.path == str(cli.cwd / "notes.txt")


async def test_set_model_changes_the_model_of_the_next_request(
    model_server: ModelServer, offline_cli: Factory
) -> None:
    cli = offline_cli("codex")
    model_server.script(Scenario.of(text("one"), text("two"), text("three")))
    async with CodexBody(_options(cli)) as body:
        await _turn(body, "first")
        await body.set_model("gpt-5.4")
        await _turn(body, "second")
        await _turn(body, "third")
        assert body.model == "gpt-5.4"
    models = [r.body["model"] for r in model_server.turn_requests()]
    assert models == [CODEX_MODEL, "gpt-5.4", "gpt-5.4"]  # the override sticks


async def test_rate_limit_and_quota_are_different_codes(
    model_server: ModelServer, offline_cli: Factory
) -> None:
    cli = offline_cli("codex", max_retries=0)
    model_server.script(Scenario.of(error("rate_limit"), error("quota")))
    async with CodexBody(_options(cli)) as body:
        rate = (await _turn(body, "one"))[-1]
        quota = (await _turn(body, "two"))[-1]
    assert isinstance(rate, TurnFailed)
    assert isinstance(quota, TurnFailed)
    assert (rate.error.code, rate.error.http_status, rate.error.retryable) == (
        ErrorCode.RATE_LIMITED,
        429,
        True,
    )
    assert (quota.error.code, quota.error.retryable) == (ErrorCode.QUOTA_EXHAUSTED, False)
    assert quota.error.native is not None
    assert quota.error.native["codexErrorInfo"] == "usageLimitExceeded"


async def test_kill_9_is_body_crashed(model_server: ModelServer, offline_cli: Factory) -> None:
    cli = offline_cli("codex")
    model_server.script(Scenario.of(slow_text("tick " * 50, chunks=50, delay=0.2)))
    events: list[Event] = []
    async with CodexBody(_options(cli)) as body:
        async for event in body.turn("count slowly"):
            events.append(event)
            if isinstance(event, TextDelta) and body.pid is not None:
                os.killpg(body.pid, signal.SIGKILL)
        ended = await anext(body.stream())
    failed = events[-1]
    assert isinstance(failed, TurnFailed)
    assert failed.error.code == ErrorCode.BODY_CRASHED
    assert isinstance(ended, SessionEnded)
    assert ended.reason == "crashed"
    assert ended.error is not None
    assert ended.error.code == ErrorCode.BODY_CRASHED


# -- exec one-shot --------------------------------------------------------------------------


async def test_exec_writes_the_file_and_resumes_the_thread(
    model_server: ModelServer, offline_cli: Factory
) -> None:
    cli = offline_cli("codex")
    model_server.script(Scenario.of(shell("echo hi > exec.txt"), text("done"), text("again")))
    async with CodexExecBody(_options(cli)) as body:
        first = await _turn(body, "make exec.txt")
        second = await _turn(body, "-a prompt that looks like a flag")
    assert (cli.cwd / "exec.txt").read_text() == "hi\n"
    thread = _one(first, SessionStarted).native_session_id
    assert thread is not None
    assert body.native_session_id == thread
    assert _all(second, SessionStarted) == []  # the same thread, resumed
    assert _one(first, ToolResult).exit_code == 0
    one, two = first[-1], second[-1]
    assert isinstance(one, TurnCompleted)
    assert isinstance(two, TurnCompleted)
    assert one.usage is not None
    assert two.usage is not None
    assert (one.usage.input_tokens, two.usage.input_tokens) == (200, 100)  # per turn, not totals
    last = model_server.turn_requests()[-1]
    assert last.last_user_text() == "-a prompt that looks like a flag"
    assert "make exec.txt" in _input_text(last.body)


async def test_exec_quota_error(model_server: ModelServer, offline_cli: Factory) -> None:
    cli = offline_cli("codex", max_retries=0)
    model_server.script(Scenario.of(error("quota")))
    async with CodexExecBody(_options(cli)) as body:
        events = await _turn(body, "anything")
    failed = events[-1]
    assert isinstance(failed, TurnFailed)
    assert (failed.error.code, failed.error.retryable) == (ErrorCode.QUOTA_EXHAUSTED, False)


async def test_exec_interrupt(model_server: ModelServer, offline_cli: Factory) -> None:
    cli = offline_cli("codex")
    model_server.script(Scenario.of(slow_text("tick " * 50, chunks=50, delay=0.2)))
    async with CodexExecBody(_options(cli)) as body:
        turn = asyncio.create_task(_turn(body, "count slowly"))
        await asyncio.to_thread(model_server.wait_for, lambda rs: len(rs) >= 1, 20)
        await body.interrupt()
        events = await asyncio.wait_for(turn, 10)
    failed = events[-1]
    assert isinstance(failed, TurnFailed)
    assert failed.error.code == ErrorCode.INTERRUPTED


#: 300 KiB: more than the kernel takes in one argv string (128 KiB).
BIG_PROMPT = "BIG-START " + " ".join(f"w{i}" for i in range(60_000))[: 300 << 10] + " BIG-END"


async def test_exec_takes_a_300_kib_prompt_on_stdin(
    model_server: ModelServer, offline_cli: Factory
) -> None:
    cli = offline_cli("codex")
    model_server.script(Scenario.of(text("read it all"), text("and again")))
    async with CodexExecBody(_options(cli)) as body:
        first = await _turn(body, BIG_PROMPT)
        second = await _turn(body, BIG_PROMPT.replace("BIG-END", "BIG-AGAIN"))  # exec resume
    assert isinstance(first[-1], TurnCompleted)
    assert isinstance(second[-1], TurnCompleted)
    assert second[-1].result == "and again"
    sent = model_server.turn_requests()[-1].last_user_text() or ""
    assert sent.startswith("BIG-START")
    assert sent.endswith("BIG-AGAIN")
