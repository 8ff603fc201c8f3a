"""Resume that heals, on the real CLIs: when native resume is impossible or fails, the
body puts ``options.history`` (the transcript from Chorus's log) in front of its
first prompt and says which path it took; a native resume says so too."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from chorus import AgentNotFoundError
from chorus.agents import find_agent
from chorus.bodies import BodyOptions
from chorus.bodies.claude import ClaudeBody
from chorus.bodies.codex import CodexBody
from chorus.bodies.gemini import GeminiAcpBody
from chorus.events import Event, Notice, TurnCompleted
from chorus.testing import (
    GEMINI_MODEL,
    ModelServer,
    Scenario,
    claude_env,
    codex_env,
    gemini_env,
    text,
)

pytestmark = pytest.mark.e2e
HISTORY = "[Chorus] transcript\nuser: remember the word pineapple\nassistant: noted, pineapple"
UNKNOWN = "00000000-0000-4000-8000-000000000000"


def _exe(cli: str) -> Path:
    try:
        return find_agent(cli)
    except AgentNotFoundError as exc:
        if os.environ.get("CHORUS_REQUIRE_AGENTS") == "1":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


def _resume_notices(events: list[Event]) -> list[str]:
    return [e.message for e in events if isinstance(e, Notice) and e.kind == "resume"]


def _saw(server: ModelServer, words: str) -> list[bool]:
    return [words in json.dumps(r.body) for r in server.turn_requests()]


async def _turn(body: ClaudeBody | CodexBody | GeminiAcpBody, prompt: str) -> list[Event]:
    return [e async for e in body.turn(prompt)]


async def test_gemini_unknown_session_rebuilds_from_the_log(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with ModelServer(Scenario.of(text("pineapple, yes"), text("still here"))) as server:
        env = gemini_env(tmp_path / "home", server.url)
        options = BodyOptions(
            cwd=work, env=env, executable=_exe("gemini"), model=GEMINI_MODEL, resume=UNKNOWN
        )
        async with GeminiAcpBody(replace(options, history=HISTORY)) as body:
            first = await _turn(body, "which word?")
            second = await _turn(body, "and now?")
        assert _saw(server, "remember the word pineapple") == [True, True]
        # Only the first prompt carries the transcript (the second has it in context).
        assert "which word?" in json.dumps(server.turn_requests()[0].body)
    notices = _resume_notices(first)
    assert len(notices) == 1
    assert notices[0].startswith(f"rebuilt from the log: session/load of {UNKNOWN} failed")
    assert isinstance(second[-1], TurnCompleted)
    assert not _resume_notices(second)


async def test_claude_unknown_session_rebuilds_and_a_known_one_resumes_natively(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with ModelServer(Scenario.of(text("first"), text("rebuilt"), text("native"))) as server:
        env = claude_env(tmp_path / "home", server.url)
        base = BodyOptions(cwd=work, env=env, executable=_exe("claude"))
        async with ClaudeBody(base) as body:
            await _turn(body, "hello")
            known = body.native_session_id
        async with ClaudeBody(replace(base, resume=UNKNOWN, history=HISTORY)) as body:
            rebuilt = await _turn(body, "which word?")
        async with ClaudeBody(replace(base, resume=known, history=HISTORY)) as body:
            native = await _turn(body, "again")
        assert _saw(server, "remember the word pineapple") == [False, True, False]
    assert _resume_notices(rebuilt) == [
        f"rebuilt from the log: Claude session {UNKNOWN} was not found"
    ]
    assert _resume_notices(native) == [f"resumed natively ({known})"]


async def test_codex_unknown_thread_rebuilds_from_the_log(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with ModelServer(Scenario.of(text("pineapple it is"))) as server:
        env = codex_env(tmp_path / "home", server.url)
        options = BodyOptions(
            cwd=work,
            env=env,
            executable=_exe("codex"),
            permission_mode="bypassPermissions",
            resume=UNKNOWN,
            history=HISTORY,
        )
        async with CodexBody(options) as body:
            events = await _turn(body, "which word?")
        assert _saw(server, "remember the word pineapple") == [True]
    assert _resume_notices(events) == [
        f"rebuilt from the log: Codex thread {UNKNOWN} was not found"
    ]
