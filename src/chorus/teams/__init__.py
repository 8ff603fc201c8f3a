"""Teams: several bodies on one task at once, with mailboxes in the store
that never lose a message.

A team is a config file (``CHORUS_HOME/teams/NAME/config.toml``) naming members
(each a Chorus session on a body) and a coordinator body. Messages between them
live in the store (:meth:`chorus.store.Store.post_message` ...), delivered at least
once with an ack; drop folders let any process post one. ``team run`` has the
coordinator split a task, runs the members in parallel as daemon jobs and has the
coordinator synthesize their results. The daemon wires :class:`TeamService` to its
supervisor (``chorus.daemon._teams_api``).
"""

from chorus.teams._config import (
    COORDINATOR,
    USER,
    Member,
    TeamConfig,
    TeamError,
    UnknownTeamError,
    build,
    inbox_dir,
    inbox_view,
    list_teams,
    load_team,
    parse_members,
    team_dir,
    teams_dir,
)
from chorus.teams._drop import ingest, watch_drops
from chorus.teams._lifecycle import STEPS, StopPort, signal_group, stop_member
from chorus.teams._mcp_tools import MCP_TOOLS
from chorus.teams._protocol import (
    BadDropError,
    BadPlanError,
    Dropped,
    member_prompt,
    parse_plan,
    plan_prompt,
    read_drop,
    synthesis_prompt,
)
from chorus.teams._service import RUN_TRANSITIONS, Jobs, Run, TeamService, message_json

__all__ = [
    "COORDINATOR",
    "MCP_TOOLS",
    "RUN_TRANSITIONS",
    "STEPS",
    "USER",
    "BadDropError",
    "BadPlanError",
    "Dropped",
    "Jobs",
    "Member",
    "Run",
    "StopPort",
    "TeamConfig",
    "TeamError",
    "TeamService",
    "UnknownTeamError",
    "build",
    "inbox_dir",
    "inbox_view",
    "ingest",
    "list_teams",
    "load_team",
    "member_prompt",
    "message_json",
    "parse_members",
    "parse_plan",
    "plan_prompt",
    "read_drop",
    "signal_group",
    "stop_member",
    "synthesis_prompt",
    "team_dir",
    "teams_dir",
    "watch_drops",
]
