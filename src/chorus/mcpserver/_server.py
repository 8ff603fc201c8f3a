"""``chorus mcp``: Chorus's own MCP server on stdio, one per body, scoped to the
session that started it (``--session`` or ``CHORUS_SESSION_ID``).

Built on the official SDK (``mcp.server.mcpserver.MCPServer``). Every tool call is
appended to the audit chain (kind ``mcp_tool_call``) with the tool, its input and
whether it succeeded; the body's own permission callback has already put the call
through the policy (the server is named :data:`SERVER_NAME`, which the policy
allows as Chorus's own).
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer

from chorus.bodies import McpServer
from chorus.config import chorus_home, load_config
from chorus.mcpserver._registry import ToolContext, ToolFn, registered_tools
from chorus.policy import AuditLog

SERVER_NAME = "chorus"
SESSION_ENV = "CHORUS_SESSION_ID"
JOB_ENV = "CHORUS_JOB_ID"
_INSTRUCTIONS = (
    "Chorus's own tools: what the person's assistant remembers (memory_search, "
    "memory_write) and a way to reach the person (notify_user)."
)


def build_server(ctx: ToolContext, audit: AuditLog | None = None) -> MCPServer:
    """The server with every registered tool bound to ``ctx``."""
    server: MCPServer = MCPServer(SERVER_NAME, instructions=_INSTRUCTIONS, log_level="WARNING")
    for spec in registered_tools():
        fn = _audited(spec.name, spec.factory(ctx), ctx, audit)
        server.add_tool(fn, name=spec.name, description=spec.description, structured_output=False)
    return server


def _audited(name: str, fn: ToolFn, ctx: ToolContext, audit: AuditLog | None) -> ToolFn:
    @functools.wraps(fn)
    async def call(**kwargs: Any) -> str:
        try:
            out = await fn(**kwargs)
        except Exception as exc:
            _record(audit, ctx, name, kwargs, ok=False, error=str(exc))
            raise
        failed = out.startswith("error:")
        _record(audit, ctx, name, kwargs, ok=not failed, error=out if failed else None)
        return out

    return call


def _record(
    audit: AuditLog | None,
    ctx: ToolContext,
    tool: str,
    args: dict[str, Any],
    *,
    ok: bool,
    error: str | None,
) -> None:
    if audit is None:
        return
    data = {"server": SERVER_NAME, "tool": tool, "input": args, "ok": ok, "job_id": ctx.job_id}
    if error:
        data["error"] = error
    audit.append("mcp_tool_call", data, session_id=ctx.session_id)


async def serve_stdio(session_id: str | None, job_id: str | None = None) -> None:
    """Serve on stdin/stdout until the client closes them."""
    session_id = session_id or os.environ.get(SESSION_ENV) or None
    job_id = job_id or os.environ.get(JOB_ENV) or None
    ctx = ToolContext(session_id, job_id, load_config().memory)
    await build_server(ctx, AuditLog()).run_stdio_async()


def server_command(session_id: str | None, job_id: str | None = None) -> McpServer:
    """How a body starts this server for ``session_id`` (same Python, same home)."""
    args = ["-m", "chorus", "mcp"]
    if session_id:
        args += ["--session", session_id]
    env = {"CHORUS_HOME": str(chorus_home())}
    if job_id:
        env[JOB_ENV] = job_id
    return McpServer(command=sys.executable, args=tuple(args), env=env, required=True)
