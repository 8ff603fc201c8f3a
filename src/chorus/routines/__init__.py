"""Routines, the heartbeat and file-change triggers: work that starts itself,
exactly once across restarts.

Routine files live in ``CHORUS_HOME/routines/NAME.toml`` (see
:mod:`chorus.routines._model` for the format). The :class:`Scheduler` runs in the
daemon and queues jobs through the supervisor; each firing is a store row keyed
by (routine, scheduled time), written in the transaction that queues its job.
"""

from chorus.routines._api import routine_routes
from chorus.routines._errors import RoutineError, UnknownRoutineError
from chorus.routines._heartbeat import HEARTBEAT, heartbeat_path, unchecked_items
from chorus.routines._load import InvalidRoutine, Loaded, load_routines, routines_dir, workspace_dir
from chorus.routines._mcp_tools import MCP_TOOLS
from chorus.routines._model import Routine, parse_duration
from chorus.routines._ops import create_routine, routine_toml, schedule_routine
from chorus.routines._schedule import (
    ActiveHours,
    At,
    CatchUp,
    Cron,
    Every,
    admit,
    due_firings,
    next_fire,
    plan_catch_up,
)
from chorus.routines._scheduler import FireResult, Scheduler
from chorus.routines._watch import paths_text, quote_path

__all__ = [
    "HEARTBEAT",
    "MCP_TOOLS",
    "ActiveHours",
    "At",
    "CatchUp",
    "Cron",
    "Every",
    "FireResult",
    "InvalidRoutine",
    "Loaded",
    "Routine",
    "RoutineError",
    "Scheduler",
    "UnknownRoutineError",
    "admit",
    "create_routine",
    "due_firings",
    "heartbeat_path",
    "load_routines",
    "next_fire",
    "parse_duration",
    "paths_text",
    "plan_catch_up",
    "quote_path",
    "routine_routes",
    "routine_toml",
    "routines_dir",
    "schedule_routine",
    "unchecked_items",
    "workspace_dir",
]
