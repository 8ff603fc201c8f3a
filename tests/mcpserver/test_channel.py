"""Each session's channel (Chorus's MCP server over streamable HTTP), served on
loopback as the daemon serves it and driven by the official MCP client: the session
comes from the token, a wrong token or path is a bare 404, nothing of the daemon's
API is there, every call is audited; the key and the port outlive the daemon; the
stdio relay for agents without HTTP; and the SDK is not imported by the daemon's start."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from subprocess import PIPE
from typing import Any

import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from chorus.bodies import (
    NO_SESSION,
    Channel,
    McpServer,
    channel_key,
    channel_key_path,
    channel_servers,
    relay_server,
    session_token,
    token_channel,
)
from chorus.mcpserver import ChannelApp, bind_channel, channel_port_path, channel_running
from chorus.memory import Memory
from chorus.policy import AuditLog
from chorus.store import SqliteStore


@pytest.fixture
async def channel(chorus_home: Path) -> AsyncIterator[Channel]:
    async with channel_running(AuditLog(), None) as served:
        yield served


async def _sessions(*bodies: str) -> list[str]:
    async with SqliteStore() as store:
        return [(await store.create_session(b, state="active")).id for b in bodies]


async def _call(url: str, calls: list[tuple[str, dict]]) -> list[str]:  # type: ignore[type-arg]
    out = []
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        out.append(",".join(sorted(t.name for t in (await client.list_tools()).tools)))
        for name, args in calls:
            result = await client.call_tool(name, args)
            out.append("".join(getattr(c, "text", "") for c in result.content))
    return out


async def _log(session_id: str) -> list[object]:
    async with SqliteStore() as store:
        return list(await store.read_events(session_id))


async def test_a_channel_serves_its_own_sessions_tools_audited(channel: Channel) -> None:
    mine, other = await _sessions("claude", "codex")
    url = channel_servers(mine)["chorus"].url
    assert url == f"http://127.0.0.1:{channel.port}/s/{session_token(channel.key, mine)}/mcp"
    names, written, notified = await _call(
        str(url),
        [
            ("memory_write", {"text": "The user prefers tabs", "kind": "profile"}),
            ("notify_user", {"message": "done", "title": "CI"}),
        ],
    )
    assert {"memory_write", "memory_search", "notify_user"} <= set(names.split(","))
    with Memory() as mem:
        assert mem.get(json.loads(written)["id"]).session_id == mine
    assert notified.startswith("notified")
    assert [e.type for e in await _log(mine)] == ["memory", "notice"]
    assert await _log(other) == []  # nothing reached the other session
    audited = [e for e in AuditLog().entries() if e.kind == "mcp_tool_call"]
    assert [(e.data["tool"], e.data["ok"], e.session_id) for e in audited] == [
        ("memory_write", True, mine),
        ("notify_user", True, mine),
    ]
    assert AuditLog().verify().ok


async def test_the_session_comes_from_the_token_never_from_the_request(
    channel: Channel,
) -> None:
    mine, other = await _sessions("claude", "claude")
    url = str(channel_servers(mine)["chorus"].url)
    # A session named in the arguments, the query or a header changes nothing.
    args = {"message": "hello", "session_id": other}
    async with (
        httpx.AsyncClient(headers={"X-Chorus-Session": other}) as http,
        streamable_http_client(f"{url}?session_id={other}", http_client=http) as (r, w),
        ClientSession(r, w) as client,
    ):
        await client.initialize()
        await client.call_tool("notify_user", args)
    assert await _log(other) == []
    assert [e.type for e in await _log(mine)] == ["notice"]


def _wrong_urls(channel: Channel, mine: str, other: str) -> list[str]:
    base = f"http://127.0.0.1:{channel.port}"
    good = session_token(channel.key, mine)
    forged = f"{other}.{good.split('.')[1]}"  # the other session, my mac
    other_key = session_token(b"k" * 32, other)  # the other session, another key
    return [
        f"{base}/s/{forged}/mcp",
        f"{base}/s/{other_key}/mcp",
        f"{base}/s/{other}/mcp",
        f"{base}/s/{good}x/mcp",
        f"{base}/s//mcp",
        f"{base}/s/{good}/jobs",
        f"{base}/s/{good}/mcp/../../jobs",
        f"{base}/mcp",
        f"{base}/jobs",
        f"{base}/status",
        f"{base}/shutdown",
        f"{base}/reload",
        f"{base}/dashboard/login",
        f"{base}/mcp/tools/notify_user",
    ]


async def test_a_wrong_token_or_path_is_a_bare_404_and_creates_nothing(
    channel: Channel,
) -> None:
    mine, other = await _sessions("claude", "codex")
    body = {"prompt": "escape", "cwd": "/", "permission_mode": "bypassPermissions"}
    call = {"session_id": other, "arguments": {"message": "x"}}
    async with httpx.AsyncClient() as http:
        for url in _wrong_urls(channel, mine, other):
            for resp in (
                await http.post(url, json=body),
                await http.post(url, json=call),
                await http.get(url),
            ):
                assert (resp.status_code, resp.text) == (404, "not found"), url
    async with SqliteStore() as store:
        assert await store.list_jobs() == []
    assert await _log(other) == []
    assert [e for e in AuditLog().entries() if e.kind == "mcp_tool_call"] == []


async def test_a_body_without_a_session_gets_a_channel_for_none(channel: Channel) -> None:
    url = channel_servers(None)["chorus"].url
    assert f"/s/{NO_SESSION}." in str(url)
    _, written = await _call(str(url), [("memory_write", {"text": "a spare's fact"})])
    with Memory() as mem:
        assert mem.get(json.loads(written)["id"]).session_id is None


async def test_sessions_share_one_server_and_each_call_is_its_tokens_session(
    channel: Channel,
) -> None:
    """One SDK server serves every channel; calls of several sessions at once each
    act for their own token's session, never a neighbour's."""
    sessions = await _sessions("claude", "codex", "gemini", "claude")
    calls = [
        _call(str(channel_servers(sid)["chorus"].url), [("notify_user", {"message": sid})] * 3)
        for sid in sessions
    ]
    answers = await asyncio.gather(*calls)
    assert all(a[1].startswith("notified") for a in answers)
    for sid in sessions:
        notices = await _log(sid)
        assert [getattr(e, "message", None) for e in notices] == [f"Chorus: {sid}"] * 3
    audited = [e for e in AuditLog().entries() if e.kind == "mcp_tool_call"]
    assert sorted((e.session_id, e.data["input"]["message"]) for e in audited) == sorted(
        (sid, sid) for sid in sessions for _ in range(3)
    )


async def test_the_server_is_built_once_for_every_session(chorus_home: Path) -> None:
    first, second = await _sessions("claude", "claude")
    key = channel_key()
    app = ChannelApp(key, AuditLog(), None)
    transport = httpx.ASGITransport(app=app)
    base = "http://127.0.0.1:8"  # the SDK checks the Host header (DNS rebinding)
    served = []
    try:
        async with httpx.AsyncClient(transport=transport, base_url=base) as http:
            for sid in (first, second, first):
                msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
                headers = {"Accept": "application/json, text/event-stream"}
                resp = await http.post(
                    f"/s/{session_token(key, sid)}/mcp", json=msg, headers=headers
                )
                assert resp.status_code == 200, resp.text
                assert "memory_write" in resp.text
                served.append(app._served)
        assert served[0] is not None
        assert served == [served[0]] * 3
    finally:
        await app.close()


def test_tokens_are_made_with_a_private_key_that_outlives_the_daemon(chorus_home: Path) -> None:
    key = channel_key()
    path = channel_key_path()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.parent.resolve().is_relative_to(chorus_home.resolve())  # hidden in a sandbox
    assert channel_key() == key  # read again, not made again
    token = session_token(key, "abc123")
    assert token_channel(key, token) == "abc123"
    assert token_channel(channel_key(), token) == "abc123"
    assert token_channel(b"x" * 32, token) is None
    assert token_channel(key, "abc123.0000") is None
    assert token_channel(key, token.replace("abc123", "abc124")) is None
    assert token_channel(key, "no-dot") is None
    with pytest.raises(ValueError, match="not a channel id"):
        session_token(key, "../jobs")
    path.write_bytes(b"short")
    with pytest.raises(Exception, match="not a channel key"):
        channel_key()


def test_the_port_is_kept_and_a_taken_one_is_replaced_with_a_log_line(
    chorus_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = bind_channel()
    port = first.getsockname()[1]
    first.close()
    assert channel_port_path().read_text().strip() == str(port)
    again = bind_channel()
    assert again.getsockname()[1] == port  # the next daemon listens where bodies look
    with caplog.at_level(logging.WARNING, logger="chorus.mcpserver"):
        moved = bind_channel()  # the port is taken (by `again`)
    assert moved.getsockname()[1] != port
    assert f"port {port} is taken" in caplog.text
    assert channel_port_path().read_text().strip() == str(moved.getsockname()[1])
    again.close()
    moved.close()


async def test_the_stdio_relay_reaches_the_same_channel(channel: Channel) -> None:
    """For an agent that takes only stdio servers: the relay (standard library only,
    no site packages) speaks MCP on stdio to the session's URL."""
    (mine,) = await _sessions("claude")
    relay = relay_server(channel.server(mine))
    assert relay.command == sys.executable
    assert relay.args[:2] == ("-S", "-I")
    params = StdioServerParameters(command=relay.command, args=list(relay.args))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        assert "memory_write" in [t.name for t in (await client.list_tools()).tools]
        result = await client.call_tool("notify_user", {"message": "over the relay"})
    assert "notified" in "".join(getattr(c, "text", "") for c in result.content)
    assert [e.type for e in await _log(mine)] == ["notice"]


async def test_the_relay_tells_a_wrong_token_as_an_error(channel: Channel) -> None:
    wrong = McpServer(url=f"http://127.0.0.1:{channel.port}/s/{NO_SESSION}.00/mcp")
    relay = relay_server(wrong)
    line = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}) + "\n"
    proc = await asyncio.create_subprocess_exec(
        relay.command, *relay.args, stdin=PIPE, stdout=PIPE, stderr=PIPE
    )
    out, _ = await asyncio.wait_for(proc.communicate(line.encode()), 30)
    answer = json.loads(out)
    assert answer["id"] == 7
    assert answer["error"]["message"] == "Chorus's channel answered HTTP 404"


def test_no_channel_outside_the_daemon() -> None:
    assert channel_servers("abc") == {}


def test_relay_server_leaves_a_stdio_server_alone() -> None:
    stdio = McpServer("/bin/probe", ("a",))
    assert relay_server(stdio) is stdio


@pytest.mark.parametrize(
    "module", ["chorus.daemon._server", "chorus.context", "chorus.mcpserver", "chorus.session"]
)
def test_the_daemon_does_not_import_the_mcp_sdk_to_start(module: str) -> None:
    sdk = "sorted(m for m in sys.modules if m.split('.')[0] == 'mcp')"
    code = f"import {module}, sys; print({sdk})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_channel_listens_on_loopback_only(chorus_home: Path) -> None:
    sock = bind_channel()
    try:
        assert sock.family == socket.AF_INET
        assert sock.getsockname()[0] == "127.0.0.1"
    finally:
        sock.close()


# -- in-band: a CLI that carries MCP on its own stdio (Claude's mcp_message) ----------------

_HELLO: dict[str, Any] = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "claude-code", "version": "2"},
}
_INIT: dict[str, Any] = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": _HELLO}
_SEARCH = {"name": "memory_search", "arguments": {"query": "x"}}


async def test_in_band_messages_are_answered_by_the_same_server_for_the_bound_session(
    channel: Channel,
) -> None:
    mine, other = await _sessions("claude", "claude")
    answer = channel_servers(mine)["chorus"].inband
    assert answer is not None
    init = await answer(_INIT)
    assert init is not None
    assert init["id"] == 0
    assert init["result"]["serverInfo"]["name"] == "chorus"
    assert await answer({"jsonrpc": "2.0", "method": "notifications/initialized"}) is None
    listed = await answer({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert listed is not None
    assert {"memory_write", "notify_user"} <= {t["name"] for t in listed["result"]["tools"]}
    # The session is the one the answer was made for: never one the message names.
    args = {"message": "hello", "session_id": other}
    call = {"name": "notify_user", "arguments": args, "_meta": {"session_id": other}}
    done = await answer({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
    assert done is not None
    assert done["result"]["isError"] is False
    assert [e.type for e in await _log(mine)] == ["notice"]
    assert await _log(other) == []
    audited = [e for e in AuditLog().entries() if e.kind == "mcp_tool_call"]
    assert [(e.data["tool"], e.session_id) for e in audited] == [("notify_user", mine)]


async def test_in_band_bad_messages_get_json_rpc_errors(channel: Channel) -> None:
    answer = channel_servers(None)["chorus"].inband
    assert answer is not None
    unknown = await answer({"jsonrpc": "2.0", "id": 5, "method": "no/such"})
    assert unknown is not None
    assert unknown["id"] == 5
    assert unknown["error"]["code"] == -32601
    malformed = await answer({"jsonrpc": "2.0", "id": 6, "method": 42})
    assert malformed is not None
    assert malformed["id"] == 6  # the SDK's own error carries none: the CLI could not match it
    assert "error" in malformed
    assert "result" not in malformed


async def test_the_same_handshake_is_answered_once_by_the_sdk_then_from_its_answer(
    chorus_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = ChannelApp(channel_key(), AuditLog(), None)
    asked: list[str] = []
    handle = app._handle

    async def counted(channel: str, *rest: Any) -> None:
        asked.append(channel)
        await handle(channel, *rest)

    monkeypatch.setattr(app, "_handle", counted)
    try:
        first = await app.answer("a", _INIT)
        again = await app.answer("b", {**_INIT, "id": 7})
        older = {**_HELLO, "protocolVersion": "2025-03-26"}
        other_version = await app.answer("b", {**_INIT, "params": older})
        call = {"jsonrpc": "2.0", "method": "tools/call", "params": _SEARCH}
        calls = [await app.answer("a", {**call, "id": n}) for n in (1, 2)]
        huge = {**_HELLO, "clientInfo": {"name": "x" * 5000, "version": "1"}}
        bulky = [await app.answer("c", {**_INIT, "params": huge}) for _ in range(2)]
    finally:
        await app.close()
    assert first is not None
    assert again is not None
    assert other_version is not None
    assert again == {**first, "id": 7}
    assert other_version["result"]["protocolVersion"] == "2025-03-26"
    assert all(c is not None and "result" in c for c in calls)
    assert all(b is not None and "result" in b for b in bulky)
    # The repeated initialize did not reach the SDK; a huge one is answered, not kept.
    assert asked == ["a", "b", "a", "a", "c", "c"]
