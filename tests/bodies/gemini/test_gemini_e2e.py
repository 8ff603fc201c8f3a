"""The real ``gemini`` CLI (pinned 0.61.0) in both modes, against the fake model server.

ACP starts in about 2 s and one process serves several turns; each headless turn
is its own process (3 to 5 s). ``maxAttempts: 1`` (from ``gemini_env``) makes
quota errors arrive in seconds.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from chorus.bodies import Body, BodyOptions, PermissionAnswer, PermissionAsk
from chorus.bodies.gemini import GeminiAcpBody, GeminiBody
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
from chorus.testing import (
    GEMINI_MODEL,
    ModelServer,
    OfflineCli,
    Scenario,
    error,
    shell,
    slow_text,
    text,
)

pytestmark = pytest.mark.e2e
PRO = "gemini-2.5-pro"
# Distinct words: Gemini's loop detection stops a stream that repeats itself.
SLOW = slow_text(" ".join(f"word{i}" for i in range(40)), chunks=40, delay=0.25)


def _options(cli: OfflineCli, **kw: Any) -> BodyOptions:
    return BodyOptions(
        cwd=cli.cwd, env=cli.env, executable=cli.executable, model=GEMINI_MODEL, **kw
    )


async def _turn(
    body: Body, prompt: str, on_text: Callable[[], Awaitable[None]] | None = None
) -> list[Event]:
    """The turn's events; ``on_text`` runs once, at the first streamed text."""
    events: list[Event] = []
    async for event in body.turn(prompt):
        events.append(event)
        if on_text is not None and isinstance(event, TextDelta):
            action, on_text = on_text, None
            await action()
    return events


def _one(events: list[Event], kind: type) -> Any:
    found = [e for e in events if isinstance(e, kind)]
    assert len(found) == 1, f"expected one {kind.__name__}: {events}"
    return found[0]


def _killer(body: GeminiAcpBody | GeminiBody) -> Callable[[], Awaitable[None]]:
    async def kill() -> None:
        assert body.pid is not None
        os.killpg(body.pid, signal.SIGKILL)

    return kill


async def _deny_nope(ask: PermissionAsk) -> PermissionAnswer:
    if "nope" in str(ask.input.get("command", "")):
        return PermissionAnswer.deny("not that one")
    return PermissionAnswer.allow()


# -- ACP -----------------------------------------------------------------------------


async def test_acp_permissions_cancel_and_set_model(
    model_server: ModelServer, offline_cli: Callable[..., OfflineCli]
) -> None:
    cli = offline_cli("gemini")
    model_server.script(
        Scenario.of(
            shell("echo hello > out.txt", say="Creating out.txt."),
            text("done"),
            shell("echo nope > denied.txt"),
            text("skipped"),
            text("told why"),  # the body's follow-up prompt with the denial reason
            SLOW,
            text("back again"),
            text("from pro"),
        )
    )
    async with GeminiAcpBody(_options(cli, permission_callback=_deny_nope)) as body:
        allowed = await _turn(body, "make out.txt")
        denied = await _turn(body, "make denied.txt")
        cancelled = await _turn(body, "talk slowly", body.interrupt)
        after = await _turn(body, "again")
        await body.set_model(PRO)
        pro = await _turn(body, "use pro")

    started = _one(allowed, SessionStarted)
    assert (started.body, started.model, started.body_version) == ("gemini", GEMINI_MODEL, "0.61.0")
    assert not [e for e in allowed if isinstance(e, Notice)]  # settings are complete
    call = _one(allowed, ToolCall)
    assert (call.tool, call.native_tool) == ("shell", "run_shell_command")
    assert _one(allowed, PermissionRequest).call_id == call.call_id
    assert _one(allowed, PermissionDecision).decision == "allow"
    assert _one(allowed, ToolResult).status == "completed"
    assert (cli.cwd / "out.txt").read_text() == "hello\n"
    assert _one(allowed, TurnCompleted).usage.input_tokens > 0

    assert _one(denied, PermissionDecision).decision == "deny"
    assert _one(denied, ToolResult).status == "denied"
    assert isinstance(denied[-1], TurnCompleted)
    assert not (cli.cwd / "denied.txt").exists()

    failed = _one(cancelled, TurnFailed)
    assert (failed.error.code, failed.terminal_reason) == (ErrorCode.INTERRUPTED, "cancelled")
    assert _one(after, TurnCompleted).result == "back again"

    assert _one(pro, TurnCompleted).result == "from pro"
    last = model_server.turn_requests()[-1]
    assert f"/models/{PRO}:streamGenerateContent" in last.path
    assert all(GEMINI_MODEL in r.path for r in model_server.turn_requests()[:-1])


async def test_acp_tool_output_in_the_log_is_what_the_model_received(
    model_server: ModelServer, offline_cli: Callable[..., OfflineCli]
) -> None:
    cli = offline_cli("gemini")
    model_server.script(Scenario.of(shell("echo visible-output-123"), text("done")))
    async with GeminiAcpBody(_options(cli)) as body:
        events = await _turn(body, "run it")
    result = _one(events, ToolResult)
    assert "visible-output-123" in result.output
    received = model_server.turn_requests()[1].last_tool_result()
    assert received is not None
    # Gemini wraps a tool's output for the model, and sends the rest unchanged.
    assert received.content == f"<untrusted_context>\n{result.output}\n</untrusted_context>"


async def test_acp_quota_fails_fast_then_a_kill_is_a_crash(
    model_server: ModelServer, offline_cli: Callable[..., OfflineCli]
) -> None:
    cli = offline_cli("gemini")
    model_server.script(Scenario.of(error("quota"), SLOW))
    async with GeminiAcpBody(_options(cli)) as body:
        began = time.monotonic()
        quota = await _turn(body, "spend")
        elapsed = time.monotonic() - began
        killed = await _turn(body, "talk slowly", _killer(body))
        ended = await anext(body.stream())

    error_info = _one(quota, TurnFailed).error
    assert (error_info.code, error_info.http_status) == (ErrorCode.QUOTA_EXHAUSTED, 429)
    assert error_info.native["rpc_code"] == 429
    assert elapsed < 10
    crashed = _one(killed, TurnFailed)
    assert crashed.error.code is ErrorCode.BODY_CRASHED
    assert isinstance(ended, SessionEnded)
    assert (ended.reason, ended.exit_code) == ("crashed", -signal.SIGKILL)


# -- headless (one process per turn) ------------------------------------------------


async def test_headless_shell_interrupt_resume_and_set_model(
    model_server: ModelServer, offline_cli: Callable[..., OfflineCli]
) -> None:
    cli = offline_cli("gemini")
    model_server.script(
        Scenario.of(
            shell("echo hello > out.txt", say="Creating out.txt."),
            text("done"),
            SLOW,
            text("back again"),
            text("from pro"),
        )
    )
    async with GeminiBody(_options(cli)) as body:
        made = await _turn(body, "make out.txt")
        cancelled = await _turn(body, "talk slowly", body.interrupt)
        after = await _turn(body, "again")
        await body.set_model(PRO)
        pro = await _turn(body, "use pro")

    started = _one(made, SessionStarted)
    assert _one(made, ToolCall).tool == "shell"
    assert _one(made, ToolResult).status == "success"
    assert _one(made, TurnCompleted).result == "done"
    assert (cli.cwd / "out.txt").read_text() == "hello\n"
    failed = _one(cancelled, TurnFailed)
    assert failed.error.code is ErrorCode.INTERRUPTED
    assert _one(after, TurnCompleted).result == "back again"
    # --resume kept the session: no second SessionStarted, same native id.
    assert not [e for e in after + pro if isinstance(e, SessionStarted)]
    assert after[-1].native_session_id == started.native_session_id
    assert _one(pro, TurnCompleted).result == "from pro"
    assert f"/models/{PRO}:streamGenerateContent" in model_server.turn_requests()[-1].path


async def test_headless_quota_fails_fast_and_a_kill_is_a_crash(
    model_server: ModelServer, offline_cli: Callable[..., OfflineCli]
) -> None:
    cli = offline_cli("gemini")
    model_server.script(Scenario.of(error("quota"), SLOW))
    async with GeminiBody(_options(cli)) as body:
        began = time.monotonic()
        quota = await _turn(body, "spend")
        elapsed = time.monotonic() - began
        killed = await _turn(body, "talk slowly", _killer(body))

    error_info = _one(quota, TurnFailed).error
    assert error_info.code is ErrorCode.QUOTA_EXHAUSTED
    assert "daily quota" in error_info.message
    assert elapsed < 15
    # The failed first turn stored no session: the next run must not --resume it.
    crashed = _one(killed, TurnFailed)
    assert crashed.error.code is ErrorCode.BODY_CRASHED
    assert crashed.error.native["exit_code"] == -signal.SIGKILL


#: 300 KiB: more than the kernel takes in one argv string (128 KiB).
BIG_PROMPT = "BIG-START " + " ".join(f"w{i}" for i in range(60_000))[: 300 << 10] + " BIG-END"


async def test_headless_takes_a_300_kib_prompt_on_stdin(
    model_server: ModelServer, offline_cli: Callable[..., OfflineCli]
) -> None:
    cli = offline_cli("gemini")
    model_server.script(Scenario.of(text("read it all")))
    async with GeminiBody(_options(cli)) as body:
        events = await _turn(body, BIG_PROMPT)
    # The CLI echoes the prompt as one 300 KiB line, then answers: both must arrive.
    assert _one(events, TurnCompleted).result == "read it all"
    sent = json.dumps(model_server.turn_requests()[-1].body)
    assert "BIG-START" in sent
    assert "BIG-END" in sent
