"""``chorus mcp`` over stdio, driven by the official MCP client: the tools, their
effects in memory and the log, and the audit chain."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from chorus.mcpserver import ToolContext, register_tool, registered_tools, server_command
from chorus.memory import MEMORY_SESSION, Memory
from chorus.policy import AuditLog
from chorus.store import SqliteStore


async def _call(chorus_home: Path, session: str | None, calls: list[tuple[str, dict]]) -> list:  # type: ignore[type-arg]
    cmd = server_command(session)
    params = StdioServerParameters(command=cmd.command, args=list(cmd.args), env=dict(cmd.env))
    out = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        tools = await client.list_tools()
        out.append(sorted(t.name for t in tools.tools))
        for name, args in calls:
            result = await client.call_tool(name, args)
            out.append("".join(getattr(c, "text", "") for c in result.content))
    return out


async def test_the_tools_write_search_and_notify_within_the_session(chorus_home: Path) -> None:
    async with SqliteStore() as store:
        session = await store.create_session("claude", state="active")
    names, written, again, bad, found, notified = await _call(
        chorus_home,
        session.id,
        [
            ("memory_write", {"text": "The user's editor is Helix", "kind": "profile"}),
            ("memory_write", {"text": "the user's editor is helix", "kind": "profile"}),
            ("memory_write", {"text": "x", "kind": "opinion"}),
            ("memory_search", {"query": "which editor"}),
            ("notify_user", {"message": "build finished", "title": "CI"}),
        ],
    )
    # Chorus's own tools, and the features' (registered by `chorus mcp` as by the daemon).
    own = {"memory_search", "memory_write", "notify_user"}
    features = {"schedule_routine", "flag", "team_send", "team_inbox", "team_status"}
    assert own | features <= set(names)
    item_id = json.loads(written)["id"]
    assert json.loads(again) == {"id": item_id, "op": "reinforce", "kind": "profile"}
    assert bad.startswith("error: unknown memory type 'opinion'")
    assert json.loads(found)[0]["ref"] == f"item:{item_id}"
    assert notified.startswith("notified")
    with Memory() as mem:
        item = mem.get(item_id)
    assert item.source_kind == "agent"
    assert item.session_id == session.id
    async with SqliteStore() as store:
        events = await store.read_events(session.id)
    assert [(e.type, getattr(e, "op", None)) for e in events] == [
        ("memory", "add"),
        ("memory", "reinforce"),
        ("notice", None),
    ]
    assert events[2].message == "CI: build finished"  # type: ignore[union-attr]
    audited = [e for e in AuditLog().entries() if e.kind == "mcp_tool_call"]
    assert [(e.data["tool"], e.data["ok"], e.session_id) for e in audited] == [
        ("memory_write", True, session.id),
        ("memory_write", True, session.id),
        ("memory_write", False, session.id),
        ("memory_search", True, session.id),
        ("notify_user", True, session.id),
    ]
    assert AuditLog().verify().ok


async def test_without_a_known_session_writes_go_to_the_memory_session(chorus_home: Path) -> None:
    _, written = await _call(
        chorus_home, "no-such-session", [("memory_write", {"text": "orphan fact"})]
    )
    async with SqliteStore() as store:
        events = await store.read_events(MEMORY_SESSION)
    assert [e.item_id for e in events] == [json.loads(written)["id"]]  # type: ignore[union-attr]


def test_other_packages_register_tools() -> None:
    @register_tool("echo_for_test", "Echo the text back.")
    def echo(ctx: ToolContext):  # type: ignore[no-untyped-def]
        async def run(text: str) -> str:
            return f"{ctx.session_id}:{text}"

        return run

    assert "echo_for_test" in [spec.name for spec in registered_tools()]


def test_the_server_command_is_this_python_with_this_home(chorus_home: Path) -> None:
    cmd = server_command("s1", "j1")
    assert cmd.command == sys.executable
    assert cmd.args == ("-m", "chorus", "mcp", "--session", "s1")
    assert cmd.env == {"CHORUS_HOME": str(chorus_home), "CHORUS_JOB_ID": "j1"}
