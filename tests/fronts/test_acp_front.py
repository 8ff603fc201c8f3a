"""``chorus acp`` driven by the official ``agent-client-protocol`` SDK's client side, with
real Claude and Codex bodies behind the daemon (offline, scripted model server)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import acp
import pytest
from acp import schema

from chorus.events import (
    ErrorInfo,
    Plan,
    PlanEntry,
    Text,
    TextDelta,
    ToolCall,
    ToolResult,
    TurnCompleted,
    TurnFailed,
)
from chorus.fronts import AcpRenderer
from chorus.fronts._acp import stop_reason
from chorus.policy import AuditLog
from chorus.testing import shell, slow_text, text

if TYPE_CHECKING:
    from conftest import FrontHome

pytestmark = pytest.mark.e2e


class Recorder:
    """An ACP client that records every ``session/update`` and answers permission asks."""

    def __init__(self, allow: bool = True, refuse: str = "keep") -> None:
        self.updates: list[Any] = []
        self.asked: list[schema.RequestPermissionRequest] = []
        self.allow = allow
        self.refuse = refuse
        self.first_chunk = asyncio.Event()
        #: Per permission request: its tool call had been shown already.
        self.shown_first: list[bool] = []

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update)
        if isinstance(update, schema.AgentMessageChunk):
            self.first_chunk.set()

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **_: Any
    ) -> schema.RequestPermissionResponse:
        self.asked.append(tool_call)
        shown = {u.tool_call_id for u in self.updates if isinstance(u, schema.ToolCallStart)}
        self.shown_first.append(tool_call.tool_call_id in shown)
        refused = self.refuse in str(tool_call.raw_input)
        chosen = "allow" if self.allow and not refused else "reject"
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=chosen)
        )

    def on_connect(self, conn: Any) -> None:
        pass

    def kinds(self) -> list[str]:
        return [update.session_update for update in self.updates]

    def message(self) -> str:
        chunks = [u for u in self.updates if isinstance(u, schema.AgentMessageChunk)]
        return "".join(chunk.content.text for chunk in chunks)


async def _start(conn: acp.ClientSideConnection, work: Path) -> schema.NewSessionResponse:
    init = await conn.initialize(
        protocol_version=acp.PROTOCOL_VERSION,
        client_capabilities=schema.ClientCapabilities(),
        client_info=schema.Implementation(name="test-client", version="0"),
    )
    assert init.protocol_version == acp.PROTOCOL_VERSION
    assert init.agent_capabilities is not None
    assert init.agent_capabilities.load_session
    return await asyncio.wait_for(conn.new_session(cwd=str(work), mcp_servers=[]), 120)


async def test_session_new_mcp_servers_reach_a_claude_body(shared_front: FrontHome) -> None:
    """``session/new``'s ``mcpServers`` go to the body as its own MCP config: Claude
    Code starts the client's server and names its tool to the model."""
    work = shared_front.work
    script = work / "probe_mcp.py"
    script.write_text(Path(__file__).with_name("probe_mcp.py").read_text())
    shared_front.server.script([text("ok")])
    probe = schema.McpServerStdio(name="probe", command=sys.executable, args=[str(script)], env=[])
    remote = schema.HttpMcpServer(
        name="remote", url="http://127.0.0.1:9/mcp", headers=[], type="http"
    )
    client = Recorder()
    async with acp.spawn_agent_process(
        client, *shared_front.chorus, "acp", "--body", "claude", env=shared_front.env, cwd=work
    ) as (conn, _process):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        servers = [probe, remote]
        new = await asyncio.wait_for(conn.new_session(cwd=str(work), mcp_servers=servers), 120)
        done = await asyncio.wait_for(
            conn.prompt(session_id=new.session_id, prompt=[acp.text_block("hello")]), 120
        )
    assert done.stop_reason == "end_turn"
    sent = json.dumps(shared_front.server.turn_requests()[0].body)
    assert "mcp__probe__lookup_code" in sent
    assert "mcp__chorus__memory_write" in sent  # Chorus's own beside it
    assert "MCP server 'remote' (http) not passed" in client.message()  # said, not dropped


@pytest.mark.parametrize("body", ["claude", "codex"])
async def test_a_tool_turn_a_cancel_and_a_load(shared_front: FrontHome, body: str) -> None:
    work = shared_front.work
    shared_front.server.script(
        [
            shell("echo made by acp > made.txt"),
            text("file made"),
            slow_text("one two three four five six seven eight", chunks=40, delay=0.25),
            text("after the cancel"),
            text("after the load"),
        ]
    )
    client = Recorder()
    async with acp.spawn_agent_process(
        client, *shared_front.chorus, "acp", "--body", body, env=shared_front.env, cwd=work
    ) as (conn, _process):
        new = await _start(conn, work)
        assert new.modes is not None
        assert new.modes.current_mode_id
        assert "bypassPermissions" in [mode.id for mode in new.modes.available_modes]
        await conn.set_session_mode(session_id=new.session_id, mode_id="bypassPermissions")
        done = await asyncio.wait_for(
            conn.prompt(session_id=new.session_id, prompt=[acp.text_block("make made.txt")]), 120
        )
        assert done.stop_reason == "end_turn"
        assert (work / "made.txt").read_text().strip() == "made by acp"
        starts = [u for u in client.updates if isinstance(u, schema.ToolCallStart)]
        ends = [u for u in client.updates if isinstance(u, schema.ToolCallProgress)]
        assert starts
        assert starts[0].kind == "execute"
        assert starts[0].status == "in_progress"
        assert any(u.status == "completed" for u in ends)
        assert "file made" in client.message()

        client.updates.clear()
        client.first_chunk.clear()
        slow = asyncio.create_task(
            conn.prompt(session_id=new.session_id, prompt=[acp.text_block("count slowly")])
        )
        await asyncio.wait_for(client.first_chunk.wait(), 60)
        await conn.cancel(session_id=new.session_id)
        cancelled = await asyncio.wait_for(slow, 60)
        assert cancelled.stop_reason == "cancelled"
        assert "eight" not in client.message()

        other = {"claude": "claude-sonnet-4-5", "codex": "gpt-5.4"}[body]
        chosen = await conn.set_config_option(
            config_id="model", session_id=new.session_id, value=other
        )
        assert chosen.config_options[0].current_value == other
        again = await asyncio.wait_for(
            conn.prompt(session_id=new.session_id, prompt=[acp.text_block("still there?")]), 120
        )
        assert again.stop_reason == "end_turn"
        assert shared_front.server.turn_requests()[-1].body["model"] == other
        assert "after the cancel" in client.message()

    events = await shared_front.log(new.session_id)
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert calls
    assert calls[0].tool == "shell"
    assert "made.txt" in str(calls[0].input)
    assert any(isinstance(e, ToolResult) for e in events)
    ends = [e for e in events if isinstance(e, TurnCompleted | TurnFailed)]
    assert len(ends) == 3
    assert all(e.body == body for e in events if e.body)

    client = Recorder()
    async with acp.spawn_agent_process(
        client, *shared_front.chorus, "acp", env=shared_front.env, cwd=work
    ) as (conn, _process):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        await asyncio.wait_for(
            conn.load_session(cwd=str(work), session_id=new.session_id, mcp_servers=[]), 120
        )
        said = [u.content.text for u in client.updates if isinstance(u, schema.UserMessageChunk)]
        assert said == ["make made.txt", "count slowly", "still there?"]  # the replay
        assert "file made" in client.message()
        assert any(isinstance(u, schema.ToolCallStart) for u in client.updates)
        client.updates.clear()
        done = await asyncio.wait_for(
            conn.prompt(session_id=new.session_id, prompt=[acp.text_block("back again")]), 120
        )
        assert done.stop_reason == "end_turn"
        assert client.message() == "after the load"  # the replay is not repeated


@pytest.mark.parametrize("body", ["claude", "codex"])
async def test_the_client_answers_permission_requests(front_home: FrontHome, body: str) -> None:
    front_home.asks_go_to_the_client()
    front_home.server.script(
        [shell("rm -rf keep"), shell("rm -rf junk"), text("kept one, removed one")]
    )
    client = Recorder()  # rejects what mentions "keep", allows the rest
    async with acp.spawn_agent_process(
        client, *front_home.chorus, "acp", "--body", body, env=front_home.env, cwd=front_home.work
    ) as (conn, _process):
        new = await _start(conn, front_home.work)
        done = await asyncio.wait_for(
            conn.prompt(session_id=new.session_id, prompt=[acp.text_block("tidy up")]), 120
        )
    assert done.stop_reason == "end_turn"
    assert [call.kind for call in client.asked] == ["execute", "execute"]
    assert "rm -rf keep" in str(client.asked[0].raw_input)
    starts = {u.tool_call_id for u in client.updates if u.session_update == "tool_call"}
    assert {call.tool_call_id for call in client.asked} <= starts  # a flag: the call's own id
    assert (front_home.work / "keep" / "file.txt").exists()
    assert not (front_home.work / "junk").exists()
    audit = [e.data for e in AuditLog().entries() if e.kind == "permission_decision"]
    assert [a["decision"] for a in audit if a["source"] == "brain"] == ["deny", "allow"]
    assert client.message().endswith("kept one, removed one")


@pytest.mark.parametrize("body", ["claude", "codex", "gemini"])
async def test_the_client_is_asked_where_its_mode_asks(shared_front: FrontHome, body: str) -> None:
    """Default mode, default policy: the client is asked about the shell commands that
    write (not about ``ls``), on every body; its reject stops the call."""
    shared_front.server.script(
        [shell("ls"), shell("echo one > one.txt"), shell("echo two > two.txt"), text("done")]
    )
    client = Recorder(refuse="two")
    async with acp.spawn_agent_process(
        client,
        *shared_front.chorus,
        "acp",
        "--body",
        body,
        env=shared_front.env,
        cwd=shared_front.work,
    ) as (conn, _process):
        new = await _start(conn, shared_front.work)
        assert new.modes is not None
        assert new.modes.current_mode_id == "default"
        done = await asyncio.wait_for(
            conn.prompt(session_id=new.session_id, prompt=[acp.text_block("write")]), 180
        )
    assert done.stop_reason == "end_turn"
    asked = [str(call.raw_input) for call in client.asked]
    assert len(asked) == 2
    assert "echo one > one.txt" in asked[0]
    assert "echo two > two.txt" in asked[1]
    starts = {
        u.tool_call_id: str(u.raw_input) for u in client.updates if u.session_update == "tool_call"
    }
    for call in client.asked:  # asked by the id of the tool call it is about
        assert "echo" in starts[call.tool_call_id]
    assert client.shown_first == [True, True]  # the tool call, then the question
    assert (shared_front.work / "one.txt").read_text().strip() == "one"
    assert not (shared_front.work / "two.txt").exists()


async def test_unknown_session_and_option_are_json_rpc_errors(shared_front: FrontHome) -> None:
    shared_front.server.script([text("fine"), text("still fine")])
    client = Recorder()
    async with acp.spawn_agent_process(
        client,
        *shared_front.chorus,
        "acp",
        "--body",
        "claude",
        env=shared_front.env,
        cwd=shared_front.work,
    ) as (conn, _process):
        new = await _start(conn, shared_front.work)
        with pytest.raises(acp.RequestError) as raised:
            await conn.prompt(session_id="no-such-session", prompt=[acp.text_block("hi")])
        assert raised.value.code == -32602
        with pytest.raises(acp.RequestError):
            await conn.set_config_option(config_id="colour", session_id=new.session_id, value="red")
        done = await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("hi")])
        assert done.stop_reason == "end_turn"  # the agent kept serving
        assert client.message() == "fine"
    env = shared_front.env
    async with acp.spawn_agent_process(
        client, *shared_front.chorus, "acp", "--body", "nosuch", env=env, cwd=shared_front.work
    ) as (conn, _process):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        with pytest.raises(acp.RequestError) as raised:
            await conn.new_session(cwd=str(shared_front.work), mcp_servers=[])
        assert "nosuch" in str(raised.value.data)
        assert "nosuch" in str(raised.value)  # the message names the cause
        assert raised.value.code == -32602  # the request's fault, not Chorus's
        await conn.load_session(cwd=str(shared_front.work), session_id=new.session_id)
        done = await conn.prompt(session_id=new.session_id, prompt=[acp.text_block("hi")])
        assert done.stop_reason == "end_turn"
        assert client.message().endswith("still fine")


def test_the_renderer_streams_deltas_once() -> None:
    renderer = AcpRenderer()
    delta = TextDelta(text="hel", message_id="m1")
    assert [u.content.text for u in renderer.updates(delta)] == ["hel"]  # type: ignore[union-attr]
    assert renderer.updates(Text(text="hello", message_id="m1")) == []
    assert len(renderer.updates(Text(text="whole", message_id="m2"))) == 1


def test_plans_become_plan_updates() -> None:
    plan = Plan(entries=[PlanEntry(content="read", status="completed"), PlanEntry(content="write")])
    (update,) = AcpRenderer().updates(plan)
    assert isinstance(update, schema.AgentPlanUpdate)
    assert [(e.content, e.status) for e in update.entries] == [
        ("read", "completed"),
        ("write", "pending"),
    ]


def test_stop_reasons() -> None:
    failed = TurnFailed(error=ErrorInfo(code="interrupted", message="stop"))
    assert stop_reason(failed, cancelled=False) == "cancelled"
    assert stop_reason(TurnCompleted(), cancelled=True) == "cancelled"
    assert stop_reason(TurnCompleted(), cancelled=False) == "end_turn"
    with pytest.raises(acp.RequestError):
        stop_reason(TurnFailed(error=ErrorInfo(code="auth", message="no key")), cancelled=False)
