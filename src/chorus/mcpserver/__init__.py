"""Chorus's own MCP server: the tools every body is given.

Its own tools: ``memory_search``, ``memory_write``, ``notify_user``. The packages
above declare theirs with :func:`tool` and the daemon registers them at start-up
(:func:`register_tools`; see :mod:`chorus.mcpserver._registry`).

A body reaches them through its session's channel (:func:`channel_running`: the
daemon serves each session at its own URL over streamable HTTP, or in-band on the
stdio of a CLI that carries MCP there, ``_channel``);
``chorus mcp`` serves them on stdio for a person who runs it by hand. Importing this
package does not import the MCP SDK (building a server does).
"""

from chorus.mcpserver._channel import ChannelApp, SessionRoute
from chorus.mcpserver._listen import (
    bind_channel,
    channel_port_path,
    channel_running,
    channel_url_shape,
)
from chorus.mcpserver._registry import (
    ToolContext,
    ToolFactory,
    ToolFn,
    ToolSpec,
    register_tool,
    register_tools,
    tool,
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
from chorus.mcpserver._tools import registered_tools

__all__ = [
    "JOB_ENV",
    "SERVER_NAME",
    "SESSION_ENV",
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
    "register_tools",
    "registered_tools",
    "serve_stdio",
    "server_command",
    "tool",
    "tool_routes",
]
