"""``flag`` on Chorus's MCP server: the body flags a decision and goes on at once.

In the daemon the tool calls the running :class:`~chorus.flags.FlagDesk` (the
daemon installs it with :func:`install_desk`); without a daemon it writes the flag
to the store itself, and the next daemon keeps its deadline.
"""

from __future__ import annotations

import json
import time

from chorus._errors import UserError
from chorus.config import load_config
from chorus.flags._board import running_job_of
from chorus.flags._desk import FlagDesk, check_flag_input, flag_event
from chorus.mcpserver import ToolContext, ToolFn, tool
from chorus.store import ORIGIN_CHORUS, FlagRecord, open_store

_DESK: list[FlagDesk] = []


def install_desk(desk: FlagDesk | None) -> None:
    """The daemon's desk (None: none, e.g. at shutdown)."""
    _DESK.clear()
    if desk is not None:
        _DESK.append(desk)


@tool(
    "flag",
    "Flag a decision you are not sure about WITHOUT waiting: give the question, the "
    "options and the default you go on with now. Continue at once with the default; "
    "if the person decides otherwise, you will be told in a later message.",
)
def flag_tool(ctx: ToolContext) -> ToolFn:
    async def run(question: str, default: str, options: list[str] | None = None) -> str:
        try:
            flag = await _raise(ctx, question, default, options or [])
        except UserError as exc:
            return f"error: {exc}"
        return json.dumps(
            {
                "flag_id": flag.id,
                "proceed_with": flag.default,
                "decide_by": flag.deadline_at,
                "note": "Go on now with the default; a different decision will reach you.",
            }
        )

    return run


async def _raise(ctx: ToolContext, question: str, default: str, options: list[str]) -> FlagRecord:
    if _DESK:
        return await _DESK[0].raise_flag(
            question,
            default=default,
            options=options,
            job_id=ctx.job_id,
            session_id=ctx.session_id,
        )
    chosen = check_flag_input(question, options, default)
    config = load_config()
    async with open_store(config) as store:
        job_id = await running_job_of(store, ctx.session_id) or ctx.job_id
        flag = await store.create_flag(
            question,
            default=default,
            options=chosen,
            deadline_at=time.time() + config.flags.timeout_s,
            job_id=job_id,
            session_id=ctx.session_id,
        )
        if ctx.session_id:
            event = flag_event(flag)
            await store.append(ctx.session_id, event, origin=ORIGIN_CHORUS)
    return flag


#: This package's tools on Chorus's MCP server (the daemon registers them).
MCP_TOOLS = (flag_tool,)
