"""``chorus mcp``: Chorus's own MCP server on stdio, scoped to one session
(``--session`` or ``CHORUS_SESSION_ID``), for a person who runs it by hand; bodies
reach the same tools through their session's channel instead (``_channel``).

Built on the official SDK (``mcp.server.mcpserver.MCPServer``), imported only when a
server is built (the SDK takes a second to import: the daemon does not wait for it).
Every tool call is appended to the audit chain (kind ``mcp_tool_call``) with the
tool, its input and whether it succeeded; the body's own permission callback has
already put the call through the policy (the server is named :data:`SERVER_NAME`,
which the policy allows as Chorus's own).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from chorus.bodies import MCP_SERVER_NAME, McpServer
from chorus.config import chorus_home, load_config
from chorus.mcpserver._registry import ToolContext, ToolFn, ToolSpec
from chorus.mcpserver._tools import registered_tools
from chorus.policy import AuditLog

if TYPE_CHECKING:
    import httpx
    from mcp.server.mcpserver import MCPServer

#: The context of the call being served (one server serves every session's channel).
CtxOf = Callable[[], ToolContext]
SERVER_NAME = MCP_SERVER_NAME
SESSION_ENV = "CHORUS_SESSION_ID"
JOB_ENV = "CHORUS_JOB_ID"
_INSTRUCTIONS = (
    "Chorus's own tools: what the person's assistant remembers (memory_search, "
    "memory_write) and a way to reach the person (notify_user)."
)


def build_server(
    ctx: ToolContext | CtxOf, audit: AuditLog | None = None, *, via_daemon: bool = False
) -> MCPServer:
    """The server with every registered tool bound to ``ctx``, or to the context
    ``ctx()`` returns at each call (one server for every session: the SDK builds a
    tool's schema once, ~10 ms a tool, not once a session). ``via_daemon``: each
    call is run by the daemon (:func:`tool_routes`) instead of in this process."""
    from mcp.server.mcpserver import MCPServer

    server: MCPServer = MCPServer(
        SERVER_NAME, instructions=_INSTRUCTIONS, log_level="WARNING", subscriptions=False
    )
    ctx_of = _fixed(ctx) if isinstance(ctx, ToolContext) else ctx
    for spec in registered_tools():
        local = spec.factory(ctx) if isinstance(ctx, ToolContext) else _bound(spec, ctx)
        fn = (
            _proxied(spec.name, local, ctx_of())
            if via_daemon
            else _audited(spec.name, local, ctx_of, audit)
        )
        server.add_tool(fn, name=spec.name, description=spec.description, structured_output=False)
    return server


def _fixed(ctx: ToolContext) -> CtxOf:
    return lambda: ctx


def _bound(spec: ToolSpec, ctx_of: CtxOf) -> ToolFn:
    """The tool made for the context of each call (its signature: one made for none)."""

    @functools.wraps(spec.factory(ToolContext(None)))
    async def call(**kwargs: Any) -> str:
        return await spec.factory(ctx_of())(**kwargs)

    return call


def _audited(name: str, fn: ToolFn, ctx_of: CtxOf, audit: AuditLog | None) -> ToolFn:
    @functools.wraps(fn)
    async def call(**kwargs: Any) -> str:
        try:
            out = await fn(**kwargs)
        except Exception as exc:
            _record(audit, ctx_of(), name, kwargs, ok=False, error=str(exc))
            raise
        failed = out.startswith("error:")
        _record(audit, ctx_of(), name, kwargs, ok=not failed, error=out if failed else None)
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
    """Serve on stdin/stdout until the client closes them. With a daemon listening,
    the tools run in the daemon (a body in the OS sandbox cannot reach the store,
    the audit chain or the memory files; it can reach the daemon's socket)."""
    session_id = session_id or os.environ.get(SESSION_ENV) or None
    job_id = job_id or os.environ.get(JOB_ENV) or None
    via_daemon = await _daemon_answers()
    table = None if via_daemon else load_config().memory
    ctx = ToolContext(session_id, job_id, table)
    await build_server(ctx, AuditLog(), via_daemon=via_daemon).run_stdio_async()


def _socket() -> str:
    return str(chorus_home() / "run" / "chorus.sock")


def _daemon_client() -> httpx.AsyncClient:
    """(httpx is imported here: the daemon, which serves the tools, never needs it.)"""
    import httpx

    transport = httpx.AsyncHTTPTransport(uds=_socket())
    return httpx.AsyncClient(transport=transport, base_url="http://chorus", timeout=60.0)


async def _daemon_answers() -> bool:
    import httpx

    try:
        async with _daemon_client() as client:
            return (await client.get("/status")).status_code == 200
    except httpx.HTTPError:
        return False


def _proxied(name: str, fn: ToolFn, ctx: ToolContext) -> ToolFn:
    """``fn``'s signature (the SDK builds the schema from it), run by the daemon."""

    @functools.wraps(fn)
    async def call(**kwargs: Any) -> str:
        import httpx

        body = {"session_id": ctx.session_id, "job_id": ctx.job_id, "arguments": kwargs}
        try:
            async with _daemon_client() as client:
                resp = await client.post(f"/mcp/tools/{name}", json=body)
        except httpx.HTTPError as exc:
            return f"error: Chorus's daemon did not answer ({exc})"
        data = resp.json()
        return str(data.get("text") if resp.status_code == 200 else f"error: {data.get('error')}")

    return call


def tool_routes(audit: AuditLog | None, memory_table: dict[str, Any] | None) -> list[Route]:
    """The daemon's side of a ``chorus mcp`` run by hand: ``POST /mcp/tools/{name}``
    with ``{session_id, job_id, arguments}`` runs the tool for that session, audited,
    and answers ``{text}``. On the daemon's own socket, which no body reaches."""
    tools = {spec.name: spec for spec in registered_tools()}

    async def run_tool(request: Request) -> Response:
        spec = tools.get(request.path_params["name"])
        if spec is None:
            return JSONResponse({"error": "unknown tool"}, status_code=404)
        try:
            payload = await request.json()
            args = dict(payload.get("arguments") or {})
            ctx = ToolContext(payload.get("session_id"), payload.get("job_id"), memory_table)
        except (ValueError, TypeError, AttributeError) as exc:
            return JSONResponse({"error": f"bad request: {exc}"}, status_code=400)
        try:
            text = await _audited(spec.name, spec.factory(ctx), _fixed(ctx), audit)(**args)
        except TypeError as exc:  # arguments that do not fit the tool
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse({"text": text})

    return [Route("/mcp/tools/{name}", run_tool, methods=["POST"])]


def server_command(session_id: str | None, job_id: str | None = None) -> McpServer:
    """How to start this server by hand for ``session_id`` (same Python, same home).
    Bodies do not: they are given their session's channel."""
    args = ["-m", "chorus", "mcp"]
    if session_id:
        args += ["--session", session_id]
    env = {"CHORUS_HOME": str(chorus_home())}
    if job_id:
        env[JOB_ENV] = job_id
    return McpServer(command=sys.executable, args=tuple(args), env=env, required=True)
