"""The features' tools on Chorus's MCP server, registered at start-up (the server's
registry sits below the features and never names them)."""

from __future__ import annotations

from chorus import flags, routines, teams
from chorus.mcpserver import register_tools


def install_tools() -> None:
    """Register the flag, routine and team tools (again is a no-op)."""
    register_tools([*flags.MCP_TOOLS, *routines.MCP_TOOLS, *teams.MCP_TOOLS])
