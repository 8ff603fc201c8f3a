"""``team_send``, ``team_inbox`` and ``team_status`` on Chorus's MCP server: a
member's body reaches its team. Each call is scoped to the member whose session
started the server (a body can only send as itself and read its own inbox). The
tools run in the daemon, which owns the mailboxes."""

from __future__ import annotations

import json
from typing import Any

from chorus._errors import ChorusError
from chorus.mcpserver import ToolContext, ToolFn, tool
from chorus.store import StoreError
from chorus.teams._service import TeamService, active_service

_NOT_MEMBER = "error: this session is not a member of a team (the team tools are for members)"


def _scope(ctx: ToolContext) -> tuple[TeamService, str, str] | str:
    service = active_service()
    if service is None:
        return "error: the team tools need Chorus's daemon (`chorus start`)"
    found = service.member_of(ctx.session_id or "")
    if found is None:
        return _NOT_MEMBER
    return service, found[0], found[1]


async def _answer(call: Any) -> str:
    try:
        return json.dumps(await call)
    except (ChorusError, StoreError) as exc:
        return f"error: {exc}"


@tool(
    "team_send",
    "Send a message to another member of your team, or to 'coordinator'. kind is one of "
    "status, result, handoff, steer, task, idle, shutdown (default status). Returns how it "
    "was delivered.",
)
def team_send(ctx: ToolContext) -> ToolFn:
    async def run(to: str, text: str, kind: str = "status") -> str:
        scope = _scope(ctx)
        if isinstance(scope, str):
            return scope
        service, team, member = scope
        return await _answer(service.send(team, to, text, kind=kind, sender=member))

    return run


@tool(
    "team_inbox",
    "Read your new team messages (oldest first). Each is given to you once; it counts as "
    "handled when your current turn ends.",
)
def team_inbox(ctx: ToolContext) -> ToolFn:
    async def run() -> str:
        scope = _scope(ctx)
        if isinstance(scope, str):
            return scope
        service, team, member = scope
        job = service.current_job(team, member)
        return await _answer(service.inbox(team, member, job_id=job))

    return run


@tool("team_status", "Your team: each member's state and messages waiting, the run.")
def team_status(ctx: ToolContext) -> ToolFn:
    async def run() -> str:
        scope = _scope(ctx)
        if isinstance(scope, str):
            return scope
        service, team, _member = scope
        return await _answer(service.status(team))

    return run


#: This package's tools on Chorus's MCP server (the daemon registers them).
MCP_TOOLS = (
    team_send,
    team_inbox,
    team_status,
)
