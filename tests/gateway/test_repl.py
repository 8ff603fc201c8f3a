"""The REPL over a real session: lines become requests and user messages."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest

from chorus.events import Event, TurnCompleted
from chorus.gateway._outbound import BrainManager
from chorus.gateway._repl import Repl
from chorus.testing import text

if TYPE_CHECKING:
    from conftest import Harness

pytestmark = pytest.mark.e2e


class InProcessBrain:
    """The REPL's :brain commands, straight to the gateway's brain manager."""

    def __init__(self, manager: BrainManager) -> None:
        self._manager = manager

    async def connect(self, url: str) -> dict[str, Any]:
        return await self._manager.connect(url)

    async def disconnect(self) -> dict[str, Any]:
        return await self._manager.disconnect()

    async def status(self) -> dict[str, Any]:
        return self._manager.status()


def _last_json(said: list[str]) -> dict[str, Any]:
    value = json.loads(said[-1])
    assert isinstance(value, dict)
    return value


async def test_commands_map_to_controls(harness: Harness) -> None:
    if "claude" not in harness.clis:
        pytest.skip("claude CLI not installed")
    said: list[str] = []
    async with harness.client() as client:
        await harness.open_session(client, "claude", permission_mode="default")
        repl = Repl(client, InProcessBrain(harness.gateway.brain), said.append)
        assert await repl.handle(":model claude-sonnet-4-5")
        assert _last_json(said) == {"model": "claude-sonnet-4-5"}
        assert await repl.handle(":model default")
        assert _last_json(said) == {"model": None}
        assert await repl.handle(":mode plan")
        assert _last_json(said) == {"mode": "plan"}
        assert await repl.handle(":interrupt")
        assert _last_json(said)["interrupted"] is False
        assert await repl.handle(":status")
        assert _last_json(said)["permission_mode"] == "plan"
        assert await repl.handle(":steer a little left")
        assert said[-1].startswith("error [body_error]: no turn is running")  # steer is native
        assert await repl.handle(":teleport")
        assert said[-1].startswith("unknown command :teleport")
        assert await repl.handle(":model")
        assert said[-1].startswith("usage: :model")
        assert await repl.handle(":brain status")
        assert _last_json(said)["state"] == "none"
        assert await repl.handle(":brain connect ws://127.0.0.1:1/x")
        assert "unencrypted" in said[-1]
        assert await repl.handle(":brain disconnect")
        assert _last_json(said)["state"] == "none"
        assert await repl.handle(":help")
        assert ":brain connect <url>" in said[-1]
        assert not await repl.handle(":quit")


async def test_lines_become_turns_until_quit(harness: Harness) -> None:
    if "claude" not in harness.clis:
        pytest.skip("claude CLI not installed")
    harness.server.script([text("the answer")])
    shown: list[Event] = []
    async with harness.client() as client:
        await harness.open_session(client, "claude")
        repl = Repl(client, None, lambda line: None)

        async def lines() -> AsyncIterator[str]:
            yield "::colons are kept\n"
            while not any(isinstance(e, TurnCompleted) for e in shown):
                await asyncio.sleep(0.05)  # a person typing slowly: the printer runs meanwhile
                yield "\n"  # blank lines are ignored
            yield ":quit\n"
            yield "never read\n"

        await repl.run(lines(), shown.append)
    prompts = [r.body for r in harness.server.turn_requests()]
    assert ":colons are kept" in json.dumps(prompts)
    done = [e for e in shown if isinstance(e, TurnCompleted)]
    assert [e.result for e in done] == ["the answer"]
