"""The tool registry of Chorus's MCP server.

A tool is registered once, at import time, as a *factory*: given the
:class:`ToolContext` of the server (the calling session), it returns the function
the MCP SDK exposes. The SDK builds the tool's input schema from that function's
signature and type hints, and its description from ``description``.

Packages add their tools in their own module::

    from chorus.mcpserver import ToolContext, register_tool

    @register_tool("routine_list", "List the routines and their next run.")
    def routine_list(ctx: ToolContext) -> Callable[..., Awaitable[str]]:
        async def run(limit: int = 20) -> str: ...
        return run

and name that module in :data:`TOOL_MODULES` so the server imports it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

#: Modules whose import registers tools (later issues append theirs).
TOOL_MODULES: list[str] = [
    "chorus.mcpserver._memory_tools",
    "chorus.routines._mcp_tools",
    "chorus.teams._mcp_tools",
    "chorus.flags._tool",
]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Who the server serves: the session (and job) of the body that started it."""

    session_id: str | None
    job_id: str | None = None
    memory_table: dict[str, Any] | None = None


ToolFn = Callable[..., Awaitable[str]]
ToolFactory = Callable[[ToolContext], ToolFn]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    factory: ToolFactory


_TOOLS: dict[str, ToolSpec] = {}


def register_tool(name: str, description: str) -> Callable[[ToolFactory], ToolFactory]:
    """Register a tool factory under ``name`` (a second registration is an error)."""

    def add(factory: ToolFactory) -> ToolFactory:
        if name in _TOOLS and _TOOLS[name].factory is not factory:
            raise ValueError(f"MCP tool {name!r} is already registered")
        _TOOLS[name] = ToolSpec(name, description, factory)
        return factory

    return add


def registered_tools() -> list[ToolSpec]:
    """Every tool, after importing :data:`TOOL_MODULES`."""
    import importlib

    for module in TOOL_MODULES:
        importlib.import_module(module)
    return sorted(_TOOLS.values(), key=lambda spec: spec.name)
