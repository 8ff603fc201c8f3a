"""``schedule_routine`` as a tool of Chorus's MCP server (the function the SDK calls)."""

from __future__ import annotations

import json
from pathlib import Path

from chorus.mcpserver import ToolContext
from chorus.routines import MCP_TOOLS


async def _call(**arguments: object) -> str:
    spec = {s.name: s for s in MCP_TOOLS}["schedule_routine"]
    result = await spec.factory(ToolContext(session_id="s1"))(**arguments)
    assert isinstance(result, str)
    return result


async def test_the_tool_writes_a_valid_routine(chorus_home: Path) -> None:
    answer = json.loads(await _call(name="nightly", prompt="check the repos", every="30m"))
    assert answer["name"] == "nightly"
    assert (chorus_home / "routines" / "nightly.toml").is_file()


async def test_a_bad_spec_is_an_error_and_writes_nothing(chorus_home: Path) -> None:
    answer = await _call(name="broken", prompt="x", schedule="not a cron", timezone="UTC")
    assert answer.startswith("error:")
    assert not (chorus_home / "routines" / "broken.toml").exists()
