"""Native steer on the real ``claude`` CLI: a user message written mid-turn.

What the CLI does (seen on the scripted server): a message written while a tool
runs is added to the next model call of the same turn ("The user sent a new
message while you were working"); one written during the turn's last model call
is answered in a follow-up turn, which the body folds into the same turn.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from chorus import UserError
from chorus.bodies import BodyOptions
from chorus.bodies.claude import ClaudeBody
from chorus.events import Event, Steer, TextDelta, ToolCall, TurnCompleted
from chorus.testing import ModelServer, Scenario, offline_env, shell, slow_text, text

pytestmark = pytest.mark.e2e


def _options(tmp_path: Path, claude: Path, url: str) -> BodyOptions:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = offline_env("claude", tmp_path / "home", url)
    return BodyOptions(cwd=work, env=env, executable=claude)


async def _turn_steering_after(body: ClaudeBody, kind: type[Event], words: str) -> list[Event]:
    events: list[Event] = []
    async for event in body.turn("first prompt"):
        events.append(event)
        if isinstance(event, kind) and not any(isinstance(e, Steer) for e in events):
            await body.steer(words)
    return events


def _mentions(request_body: object, words: str) -> bool:
    return words in json.dumps(request_body)


async def test_steer_while_a_tool_runs_reaches_the_next_model_call(
    tmp_path: Path, claude: Path
) -> None:
    scenario = Scenario.of(shell("sleep 2; echo slept", say="Sleeping."), text("after tool"))
    with ModelServer(scenario) as server:
        async with ClaudeBody(_options(tmp_path, claude, server.url)) as body:
            assert body.alive
            assert body.pid is not None
            events = await _turn_steering_after(body, ToolCall, "STEER: say banana")
            pid = body.pid
        requests = server.turn_requests()
    assert not body.alive
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    assert [e.text for e in events if isinstance(e, Steer)] == ["STEER: say banana"]
    completions = [e for e in events if isinstance(e, TurnCompleted)]
    assert [c.result for c in completions] == ["after tool"]
    assert len(requests) == 2
    assert not _mentions(requests[0].body, "STEER")
    assert _mentions(requests[1].body, "STEER: say banana")


async def test_steer_during_the_last_model_call_is_answered_in_the_same_turn(
    tmp_path: Path, claude: Path
) -> None:
    scenario = Scenario.of(
        slow_text("streaming slowly " * 5, chunks=15, delay=0.2), text("banana"), text("next")
    )
    with ModelServer(scenario) as server:
        async with ClaudeBody(_options(tmp_path, claude, server.url)) as body:
            events = await _turn_steering_after(body, TextDelta, "STEER: say banana")
            follow = [e async for e in body.turn("second prompt")]
        requests = server.turn_requests()
    results = [e.result for e in events if isinstance(e, TurnCompleted)]
    assert results == ["streaming slowly " * 5, "banana"]
    assert _mentions(requests[1].body, "STEER: say banana")
    assert [e.result for e in follow if isinstance(e, TurnCompleted)] == ["next"]
    assert len(requests) == 3


async def test_steer_between_turns_is_refused(tmp_path: Path, claude: Path) -> None:
    with ModelServer(Scenario.of(text("hi"))) as server:
        async with ClaudeBody(_options(tmp_path, claude, server.url)) as body:
            with pytest.raises(UserError, match="no Claude turn"):
                await body.steer("too early")
            await asyncio.sleep(0)
