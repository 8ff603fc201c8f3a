"""A Codex turn waits while an MCP server is still starting (Codex would run the turn
without its tools past a short grace)."""

from __future__ import annotations

import asyncio
import json

from chorus.bodies.codex._mcp_startup import STARTUP_STATUS, McpStartup
from chorus.events import Text, Unknown


def _status(name: str, status: str) -> Unknown:
    raw = json.dumps({"method": STARTUP_STATUS, "params": {"name": name, "status": status}})
    return Unknown(session_id="s", body="codex", raw=raw, native_type=STARTUP_STATUS)


async def test_a_turn_waits_until_no_server_is_starting() -> None:
    startup = McpStartup()
    for event in (_status("chorus", "starting"), _status("probe", "starting")):
        startup.observe(event)
    startup.observe(_status("chorus", "ready"))
    waiting = asyncio.create_task(startup.settled(60))
    await asyncio.sleep(0.05)
    assert not waiting.done()  # "probe" is still starting
    startup.observe(_status("probe", "failed"))  # failed settles it too
    assert await asyncio.wait_for(waiting, 60) == ()


async def test_a_server_starting_past_the_bound_is_named_and_the_turn_goes_on() -> None:
    startup = McpStartup()
    startup.observe(_status("slow", "starting"))
    assert await startup.settled(0.05) == ("slow",)


async def test_other_events_and_bad_lines_change_nothing() -> None:
    startup = McpStartup()
    startup.observe(Text(session_id="s", body="codex", text="starting"))
    bad = Unknown(session_id="s", body="codex", raw="not json", native_type=STARTUP_STATUS)
    startup.observe(bad)
    assert await startup.settled(0.01) == ()
