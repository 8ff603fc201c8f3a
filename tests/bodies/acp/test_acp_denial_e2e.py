"""A denial's reason reaches the model in the same turn over ACP (real agents).

ACP's permission answer has no room for a reason: claude-code-acp ends the turn
("User refused permission to run tool"), Gemini tells the model "canceled by
the user". The body then prompts again, inside the same Chorus turn, with the
reason; the scripted server must see it before the turn ends.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from chorus import AgentNotFoundError
from chorus.agents import find_agent
from chorus.bodies import BodyOptions, PermissionAnswer, PermissionAsk
from chorus.bodies.acp import acp_agent, open_acp_body
from chorus.bodies.gemini import GeminiAcpBody
from chorus.events import Event, PermissionDecision, ToolResult, TurnCompleted
from chorus.testing import GEMINI_MODEL, ModelServer, Scenario, claude_env, gemini_env, shell, text

pytestmark = pytest.mark.e2e
REASON = "policy: writing denied.txt is forbidden"


def _or_skip(find: object) -> Path:
    try:
        return find()  # type: ignore[operator,no-any-return]
    except AgentNotFoundError as exc:
        if os.environ.get("CHORUS_REQUIRE_AGENTS") == "1":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


async def _deny(ask: PermissionAsk) -> PermissionAnswer:
    return PermissionAnswer.deny(REASON)


def _check(events: list[Event], server: ModelServer, work: Path) -> None:
    assert [e.decision for e in events if isinstance(e, PermissionDecision)] == ["deny"]
    assert [e.status for e in events if isinstance(e, ToolResult)] == ["denied"]
    assert not (work / "denied.txt").exists()
    # One turn, ending after the model answered the reason.
    assert [e for e in events if isinstance(e, TurnCompleted)][-1].result == "understood"
    assert isinstance(events[-1], TurnCompleted)
    told = [r for r in server.turn_requests() if REASON in json.dumps(r.body)]
    assert told, "no request of the turn carried the denial reason"


async def test_claude_code_acp_tells_the_model_why_in_the_same_turn(tmp_path: Path) -> None:
    executable = _or_skip(acp_agent("claude-code-acp").executable)
    work = tmp_path / "work"
    work.mkdir()
    scenario = Scenario.of(shell("echo nope > denied.txt"), text("understood"), text("spare"))
    with ModelServer(scenario) as server:
        env = claude_env(tmp_path / "home", server.url)
        options = BodyOptions(cwd=work, env=env, executable=executable, permission_callback=_deny)
        async with open_acp_body("claude-code-acp", options) as body:
            events = [e async for e in body.turn("make denied.txt")]
        _check(events, server, work)


async def test_gemini_tells_the_model_why_in_the_same_turn(tmp_path: Path) -> None:
    executable = _or_skip(lambda: find_agent("gemini"))
    work = tmp_path / "work"
    work.mkdir()
    scenario = Scenario.of(shell("echo nope > denied.txt"), text("skipped"), text("understood"))
    with ModelServer(scenario) as server:
        env = gemini_env(tmp_path / "home", server.url)
        options = BodyOptions(
            cwd=work, env=env, executable=executable, model=GEMINI_MODEL, permission_callback=_deny
        )
        async with GeminiAcpBody(options) as body:
            events = [e async for e in body.turn("make denied.txt")]
        _check(events, server, work)
        assert len(server.turn_requests()) == 3
