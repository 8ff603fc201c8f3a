"""Zed's ``claude-code-acp`` (an ACP agent on the TypeScript Claude Agent SDK) with
``CLAUDE_CODE_EXECUTABLE=chorus-claude``: the official ACP client drives a Codex body
through two layers of other people's code."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import acp
import pytest
from acp import schema

from chorus.events import ToolCall
from chorus.testing import shell, text

if TYPE_CHECKING:
    from conftest import FrontHome

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CLAUDE_CODE_ACP = ROOT / ".agents" / "node_modules" / ".bin" / "claude-code-acp"


class Recorder:
    def __init__(self) -> None:
        self.updates: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, options: list[Any], **_: Any) -> Any:
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=options[0].option_id)
        )

    def on_connect(self, conn: Any) -> None:
        pass


async def test_claude_code_acp_on_a_codex_body(front_home: FrontHome) -> None:
    if not CLAUDE_CODE_ACP.exists():
        pytest.skip("claude-code-acp is not installed under .agents")
    front_home.server.script([shell("echo via zed > zed.txt"), text("done via zed")])
    env = front_home.env | {
        "CLAUDE_CODE_EXECUTABLE": str(Path(sys.executable).with_name("chorus-claude")),
        "CHORUS_BODY": "codex",
    }
    client = Recorder()
    async with acp.spawn_agent_process(
        client, str(CLAUDE_CODE_ACP), env=env, cwd=front_home.work
    ) as (conn, _process):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        new = await asyncio.wait_for(
            conn.new_session(cwd=str(front_home.work), mcp_servers=[]), 120
        )
        await conn.set_session_mode(session_id=new.session_id, mode_id="bypassPermissions")
        done = await asyncio.wait_for(
            conn.prompt(session_id=new.session_id, prompt=[acp.text_block("make zed.txt")]), 180
        )
    assert done.stop_reason == "end_turn"
    assert (front_home.work / "zed.txt").read_text().strip() == "via zed"
    chunks = [u for u in client.updates if isinstance(u, schema.AgentMessageChunk)]
    assert "done via zed" in "".join(c.content.text for c in chunks)
    (session_id,) = await front_home.sessions()
    events = await front_home.log(session_id)
    assert {e.body for e in events if e.body} == {"codex"}
    assert any(isinstance(e, ToolCall) and "zed.txt" in str(e.input) for e in events)
