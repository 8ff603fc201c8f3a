"""Chorus's own MCP server: the tools every body is given.

Tools now: ``memory_search``, ``memory_write``, ``notify_user``. Other packages
add theirs with :func:`register_tool` (see :mod:`chorus.mcpserver._registry`).

A body reaches them through its session's channel (:func:`channel_running`: the
daemon serves each session at its own URL over streamable HTTP, ``_channel``);
``chorus mcp`` serves them on stdio for a person who runs it by hand. Importing this
package does not import the MCP SDK (building a server does).
"""

from chorus.mcpserver._channel import MAX_SERVED, ChannelApp, SessionRoute
from chorus.mcpserver._listen import (
    bind_channel,
    channel_port_path,
    channel_running,
    channel_url_shape,
)
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
    "MAX_SERVED",
    "SERVER_NAME",
    "SESSION_ENV",
    "TOOL_MODULES",
    "ChannelApp",
    "SessionRoute",
    "ToolContext",
    "ToolFactory",
    "ToolFn",
    "ToolSpec",
    "bind_channel",
    "build_server",
    "channel_port_path",
    "channel_running",
    "channel_url_shape",
    "register_tool",
    "registered_tools",
    "serve_stdio",
    "server_command",
    "tool_routes",
]
