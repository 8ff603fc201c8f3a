"""ACP agents other than Gemini, end to end and offline, through the generic body.

``codex-acp`` (npm ``@zed-industries/codex-acp``, a Rust binary embedding Codex)
talks to the fake OpenAI Responses endpoint through ``CODEX_HOME/config.toml``;
``claude-code-acp`` (npm ``@zed-industries/claude-code-acp``, with its own
bundled Claude Agent SDK) talks to the fake Anthropic endpoint through
``ANTHROPIC_BASE_URL``. Neither is a pinned Chorus agent: the tests run when
the command is in the project's ``.agents`` folder, on ``PATH``, or under the
npm prefix named by ``CHORUS_ACP_AGENTS_PREFIX``
(``npm install --prefix <dir> @zed-industries/codex-acp @zed-industries/claude-code-acp``).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from chorus import AgentNotFoundError
from chorus.bodies import BodyOptions, PermissionAnswer, PermissionAsk
from chorus.bodies.acp import AcpBody, acp_agent, open_acp_body
from chorus.events import (
    ErrorCode,
    Event,
    Notice,
    PermissionDecision,
    SessionStarted,
    StatusChanged,
    TextDelta,
    ToolCall,
    ToolResult,
    TurnCompleted,
    TurnFailed,
)
from chorus.testing import (
    CODEX_MODEL,
    ModelServer,
    Scenario,
    claude_env,
    codex_env,
    shell,
    slow_text,
    text,
)

pytestmark = pytest.mark.e2e
PREFIX_VAR = "CHORUS_ACP_AGENTS_PREFIX"


def _executable(name: str) -> Path:
    agent = acp_agent(name)
    try:
        return agent.executable()
    except AgentNotFoundError:
        prefix = os.environ.get(PREFIX_VAR)
        candidate = Path(prefix) / "node_modules" / ".bin" / agent.command if prefix else None
        if candidate is not None and candidate.exists():
            return candidate
    if os.environ.get("CHORUS_REQUIRE_AGENTS") == "1":
        pytest.fail(f"{name} is not installed; `chorus agents install` pins it")
    pytest.skip(
        f"{name} is not installed: needs network once for `npm install --prefix <dir> "
        f"{agent.package}`, then {PREFIX_VAR}=<dir> (not a pinned Chorus agent)"
    )


async def _turn(
    body: AcpBody, prompt: str, on_text: Callable[[], Awaitable[None]] | None = None
) -> list[Event]:
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


async def test_codex_acp_shell_cancel_and_model(model_server: ModelServer, tmp_path: Path) -> None:
    executable = _executable("codex-acp")
    work = tmp_path / "work"
    work.mkdir()
    model_server.script(
        Scenario.of(
            shell("echo hello > out.txt", say="Creating out.txt."),
            text("done"),
            slow_text(" ".join(f"w{i}" for i in range(40)), chunks=40, delay=0.2),
            text("back"),
            text("smaller model"),
        )
    )
    env = codex_env(tmp_path / "home", model_server.url)
    # full-access: codex's own sandbox needs bubblewrap, which test machines may lack.
    options = BodyOptions(
        cwd=work, env=env, executable=executable, permission_mode="bypassPermissions"
    )
    async with open_acp_body("codex-acp", options) as body:
        made = await _turn(body, "make out.txt")
        cancelled = await _turn(body, "talk slowly", body.interrupt)
        after = await _turn(body, "again")
        await body.set_model("gpt-5.4")
        smaller = await _turn(body, "use the smaller model")

    started = _one(made, SessionStarted)
    assert (started.body, started.model, started.permission_mode) == (
        "codex-acp",
        CODEX_MODEL,
        "bypassPermissions",
    )
    assert body.codec.state.current_mode == "full-access"
    call = _one(made, ToolCall)
    assert call.tool == "shell"
    assert call.input["command"][-1] == "echo hello > out.txt"
    result = _one(made, ToolResult)
    assert (result.status, result.exit_code) == ("completed", 0)
    assert (work / "out.txt").read_text() == "hello\n"
    assert _one(cancelled, TurnFailed).error.code is ErrorCode.INTERRUPTED
    assert _one(after, TurnCompleted).result == "back"
    assert _one(smaller, TurnCompleted).result == "smaller model"
    assert model_server.turn_requests()[-1].body["model"] == "gpt-5.4"
    assert model_server.turn_requests()[0].body["model"] == CODEX_MODEL


async def test_claude_code_acp_permission_allow_and_deny(
    model_server: ModelServer, tmp_path: Path
) -> None:
    executable = _executable("claude-code-acp")
    work = tmp_path / "work"
    work.mkdir()
    # Claude Code's helper query on the bash output ("Extract any file paths ...") is a
    # side call to the scripted server: it uses up no turn.
    model_server.script(
        Scenario.of(
            shell("echo hello > out.txt"),
            shell("echo nope > denied.txt"),
            text("done"),
            text("spare"),
        )
    )
    asks: list[PermissionAsk] = []

    async def decide(ask: PermissionAsk) -> PermissionAnswer:
        asks.append(ask)
        if "nope" in str(ask.input.get("command")):
            return PermissionAnswer.deny("not that one")
        return PermissionAnswer.allow()

    env = claude_env(tmp_path / "home", model_server.url)
    options = BodyOptions(cwd=work, env=env, executable=executable, permission_callback=decide)
    async with open_acp_body("claude-code-acp", options) as body:
        events = await _turn(body, "make out.txt and denied.txt")

    assert [(a.tool, a.native_tool) for a in asks] == [("shell", "Bash"), ("shell", "Bash")]
    decisions = [e.decision for e in events if isinstance(e, PermissionDecision)]
    assert decisions == ["allow", "deny"]
    results = [e.status for e in events if isinstance(e, ToolResult)]
    assert results == ["completed", "denied"]
    assert isinstance(events[-1], TurnCompleted)
    assert (work / "out.txt").read_text() == "hello\n"
    assert not (work / "denied.txt").exists()


async def test_codex_acp_resumes_with_session_load(
    model_server: ModelServer, tmp_path: Path
) -> None:
    executable = _executable("codex-acp")
    work = tmp_path / "work"
    work.mkdir()
    model_server.script(Scenario.of(text("noted: 42"), text("it was 42")))
    env = codex_env(tmp_path / "home", model_server.url)
    options = BodyOptions(cwd=work, env=env, executable=executable)
    async with open_acp_body("codex-acp", options) as body:
        await _turn(body, "remember the number 42")
        session = body.native_session_id
    assert session is not None
    resumed = open_acp_body("codex-acp", replace(options, resume=session))
    async with resumed:
        assert resumed.codec.can_load_session
        events = await _turn(resumed, "which number?")

    history = [e for e in events if isinstance(e, StatusChanged) and e.state == "history"]
    assert history  # the stored conversation, replayed by session/load
    assert not [e for e in events if isinstance(e, TextDelta) and e.turn_id is None]
    assert _one(events, SessionStarted).native_session_id == session
    assert _one(events, TurnCompleted).result == "it was 42"
    assert "remember the number 42" in str(model_server.turn_requests()[-1].body["input"])


async def test_codex_acp_load_failure_falls_back_to_the_log(
    model_server: ModelServer, tmp_path: Path
) -> None:
    """A session/load of a session the agent no longer has: a new session, with the
    transcript from Chorus's log in front of the first prompt, and a notice saying so."""
    executable = _executable("codex-acp")
    work = tmp_path / "work"
    work.mkdir()
    model_server.script(Scenario.of(text("it was 42")))
    env = codex_env(tmp_path / "home", model_server.url)
    history = "Earlier in this session: the user asked you to remember the number 42."
    options = BodyOptions(
        cwd=work,
        env=env,
        executable=executable,
        resume="0199a213-81c0-7800-8aa1-bbab2a035a53",
        history=history,
    )
    async with open_acp_body("codex-acp", options) as body:
        assert body.codec.can_load_session
        events = await _turn(body, "which number?")

    notices = {e.kind: e.message for e in events if isinstance(e, Notice)}
    assert "session/load of 0199a213" in notices["resume_fallback"]
    assert notices["resume"].startswith("rebuilt from the log")
    assert _one(events, TurnCompleted).result == "it was 42"
    seen = str(model_server.turn_requests()[-1].body["input"])
    assert "remember the number 42" in seen
    assert "which number?" in seen
