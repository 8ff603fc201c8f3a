"""``schedule_routine`` on Chorus's MCP server: an agent schedules follow-up work.

The call reaches Chorus like any tool call of its body (the CLI asks the policy
first); the routine file is validated in full and written atomically, and the
daemon's scheduler picks it up at its next tick.
"""

from __future__ import annotations

import json

from chorus.config import chorus_home
from chorus.mcpserver import ToolContext, ToolFn, tool
from chorus.routines._errors import RoutineError
from chorus.routines._ops import schedule_routine


@tool(
    "schedule_routine",
    "Schedule work that starts itself later: give a name, the prompt, and one of "
    "schedule (cron, with timezone), every (e.g. '30m') or at (an ISO time). "
    "Optional: timezone, model_preference (a body), cwd. Returns what was scheduled.",
)
def schedule_routine_tool(ctx: ToolContext) -> ToolFn:
    async def run(
        name: str,
        prompt: str,
        schedule: str | None = None,
        every: str | None = None,
        at: str | None = None,
        timezone: str | None = None,
        model_preference: str | None = None,
        cwd: str | None = None,
    ) -> str:
        given = {"schedule": schedule, "every": every, "at": at, "timezone": timezone}
        given.update(model_preference=model_preference, cwd=cwd)
        spec = {"name": name, "prompt": prompt, **{k: v for k, v in given.items() if v}}
        try:
            return json.dumps(schedule_routine(chorus_home(), spec))
        except RoutineError as exc:
            return f"error: {exc}"

    return run


#: This package's tools on Chorus's MCP server (the daemon registers them).
MCP_TOOLS = (schedule_routine_tool,)
