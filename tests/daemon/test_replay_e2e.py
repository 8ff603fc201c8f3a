"""Replay of a session the daemon ran on the real Claude CLI: the recorded raw lines
re-normalize to the logged events; an altered codec is caught at the first divergence."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from chorus.testing import shell, text

if TYPE_CHECKING:
    from conftest import Chorus

pytestmark = pytest.mark.e2e


def test_replay_matches_then_catches_an_altered_codec(chorus: Chorus) -> None:
    chorus.server.script([shell("echo replay > r.txt"), text("replayed")])
    result = chorus.run("ask", "make r.txt", "--body", "claude", "--json")
    assert result.returncode == 0, result.stderr
    session = json.loads(result.stdout.splitlines()[0])["session_id"]
    chorus.run("stop")

    replayed = chorus.run("replay", session)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "match" in replayed.stdout.lower()

    # A codec that renames the shell tool must be reported at that event.
    import asyncio

    from chorus.bodies.claude import ClaudeCodec
    from chorus.events import ToolCall
    from chorus.store import SqliteStore, replay

    def altered() -> object:
        codec = ClaudeCodec()

        def feed(line: str) -> list[object]:
            return [
                e.model_copy(update={"tool": "exec"}) if isinstance(e, ToolCall) else e
                for e in codec.feed(line)
            ]

        return feed

    async def run() -> object:
        async with SqliteStore() as store:
            return await replay(store, session, altered)  # type: ignore[arg-type]

    report = asyncio.run(run())
    assert not report.ok  # type: ignore[attr-defined]
    divergence = report.divergence  # type: ignore[attr-defined]
    assert divergence.expected["type"] == "tool_call"
    assert divergence.expected["tool"] == "shell"
    assert divergence.got["tool"] == "exec"
