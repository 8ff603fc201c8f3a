"""Chorus's own MCP server (``chorus mcp``), added to every body Chorus starts.

Tools now: ``memory_search``, ``memory_write``, ``notify_user``. Other packages
add theirs with :func:`register_tool` (see :mod:`chorus.mcpserver._registry`).
"""

from chorus.mcpserver._registry import (
    TOOL_MODULES,
    ToolContext,
    ToolFactory,
    ToolFn,
    ToolSpec,
    register_tool,
    registered_tools,
)
from chorus.mcpserver._server import (
    JOB_ENV,
    SERVER_NAME,
    SESSION_ENV,
    build_server,
    serve_stdio,
    server_command,
    tool_routes,
)

__all__ = [
    "JOB_ENV",
    "SERVER_NAME",
    "SESSION_ENV",
    "TOOL_MODULES",
    "ToolContext",
    "ToolFactory",
    "ToolFn",
    "ToolSpec",
    "build_server",
    "register_tool",
    "registered_tools",
    "serve_stdio",
    "server_command",
    "tool_routes",
]
