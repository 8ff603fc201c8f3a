"""Routines, the heartbeat and file-change triggers: work that starts itself,
exactly once across restarts.

Routine files live in ``CHORUS_HOME/routines/NAME.toml`` (see
:mod:`chorus.routines._model` for the format). The :class:`Scheduler` runs in the
daemon and queues jobs through the supervisor; each firing is a store row keyed
by (routine, scheduled time), written in the transaction that queues its job.
"""

from __future__ import annotations

from chorus._lazy import lazy_names

#: ``typing`` is not imported at run time (the names load on first use).
TYPE_CHECKING = False

if TYPE_CHECKING:
    from chorus.routines._api import routine_routes
    from chorus.routines._errors import RoutineError, UnknownRoutineError
    from chorus.routines._heartbeat import HEARTBEAT, heartbeat_path, unchecked_items
    from chorus.routines._load import (
        InvalidRoutine,
        Loaded,
        load_routines,
        routines_dir,
        workspace_dir,
    )
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

#: Each public name's private module (and its name there): loaded on first use.
_LAZY: dict[str, tuple[str, str]] = {
    "routine_routes": ("chorus.routines._api", "routine_routes"),
    "RoutineError": ("chorus.routines._errors", "RoutineError"),
    "UnknownRoutineError": ("chorus.routines._errors", "UnknownRoutineError"),
    "HEARTBEAT": ("chorus.routines._heartbeat", "HEARTBEAT"),
    "heartbeat_path": ("chorus.routines._heartbeat", "heartbeat_path"),
    "unchecked_items": ("chorus.routines._heartbeat", "unchecked_items"),
    "InvalidRoutine": ("chorus.routines._load", "InvalidRoutine"),
    "Loaded": ("chorus.routines._load", "Loaded"),
    "load_routines": ("chorus.routines._load", "load_routines"),
    "routines_dir": ("chorus.routines._load", "routines_dir"),
    "workspace_dir": ("chorus.routines._load", "workspace_dir"),
    "MCP_TOOLS": ("chorus.routines._mcp_tools", "MCP_TOOLS"),
    "Routine": ("chorus.routines._model", "Routine"),
    "parse_duration": ("chorus.routines._model", "parse_duration"),
    "create_routine": ("chorus.routines._ops", "create_routine"),
    "routine_toml": ("chorus.routines._ops", "routine_toml"),
    "schedule_routine": ("chorus.routines._ops", "schedule_routine"),
    "ActiveHours": ("chorus.routines._schedule", "ActiveHours"),
    "At": ("chorus.routines._schedule", "At"),
    "CatchUp": ("chorus.routines._schedule", "CatchUp"),
    "Cron": ("chorus.routines._schedule", "Cron"),
    "Every": ("chorus.routines._schedule", "Every"),
    "admit": ("chorus.routines._schedule", "admit"),
    "due_firings": ("chorus.routines._schedule", "due_firings"),
    "next_fire": ("chorus.routines._schedule", "next_fire"),
    "plan_catch_up": ("chorus.routines._schedule", "plan_catch_up"),
    "FireResult": ("chorus.routines._scheduler", "FireResult"),
    "Scheduler": ("chorus.routines._scheduler", "Scheduler"),
    "paths_text": ("chorus.routines._watch", "paths_text"),
    "quote_path": ("chorus.routines._watch", "quote_path"),
}


__getattr__, __dir__ = lazy_names(__name__, _LAZY, __all__)
