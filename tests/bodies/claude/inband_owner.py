"""Helper for test_claude_inband_e2e: own a detached Claude body that carries an MCP
server in-band, note where its output stood after the start, run a turn whose first
step calls that server's tool (each call appended to a file), hand out events until
some of the answer's text, print the early handle, how many counted events were
handed out after it and how many before the tool call's request, then die by
SIGKILL (as a daemon killed with -9 would).
Arguments: executable, env JSON file, work dir, run dir, calls file, deltas."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from chorus.bodies import BodyOptions, McpServer
from chorus.bodies.claude import ClaudeBody
from chorus.events import ControlRequestEvent, TextDelta
from chorus.store import ORIGIN_CODEC, event_origin

TOOL = {
    "name": "remember",
    "description": "Remember a fact.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}


def server(calls: Path) -> McpServer:
    """A minimal MCP server answered in-band: one tool, each call written to ``calls``."""

    async def answer(message: dict[str, Any]) -> dict[str, Any] | None:
        method, params = message.get("method"), message.get("params") or {}
        if "id" not in message:
            return None
        if method == "initialize":
            info = {"name": "chorus", "version": "1"}
            version = params.get("protocolVersion")
            result = {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}
        elif method == "tools/list":
            result = {"tools": [TOOL]}
        elif method == "tools/call":
            with calls.open("a") as out:
                out.write(json.dumps(params) + "\n")
            n = len(calls.read_text().splitlines())
            result = {"content": [{"type": "text", "text": f"stored-{n}"}], "isError": False}
        else:
            return {
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": {"code": -32601, "message": "no"},
            }
        return {"jsonrpc": "2.0", "id": message["id"], "result": result}

    return McpServer(url="http://127.0.0.1:9/unused", inband=answer)


def _is_call(event: ControlRequestEvent) -> bool:
    message = event.payload.get("message")
    return isinstance(message, dict) and message.get("method") == "tools/call"


async def main() -> None:
    exe, env_file, work, run_dir, calls, deltas = sys.argv[1:7]
    env = json.loads(Path(env_file).read_text())
    options = BodyOptions(
        cwd=Path(work),
        env=env,
        executable=Path(exe),
        run_dir=Path(run_dir),
        permission_mode="bypassPermissions",
        mcp_servers={"chorus": server(Path(calls))},
    )
    body = ClaudeBody(options)
    await body.start()
    early = body.handle()  # a snapshot from before the turn, as a session keeps one
    assert early is not None
    texts: list[str] = []
    handed, before_call = 0, -1
    async for event in body.turn("remember the host, then talk slowly"):
        if isinstance(event, ControlRequestEvent) and _is_call(event):
            before_call = handed  # the counted events before the tool call's request
        handed += event_origin(event) == ORIGIN_CODEC
        if isinstance(event, TextDelta):
            texts.append(event.text)
            if len(texts) == int(deltas):
                break
    report = {"handle": early.as_dict(), "handed": handed, "before_call": before_call}
    report["texts"] = texts
    print(json.dumps(report), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


asyncio.run(main())
