"""The tool registry of Chorus's MCP server.

A tool is a *factory*: given the :class:`ToolContext` of the server (the calling
session), it returns the function the MCP SDK exposes. The SDK builds the tool's
input schema from that function's signature and type hints, and its description
from ``description``.

A package that owns tools declares them with :func:`tool` and exports them::

    from chorus.mcpserver import ToolContext, tool

    @tool("routine_list", "List the routines and their next run.")
    def routine_list(ctx: ToolContext) -> Callable[..., Awaitable[str]]:
        async def run(limit: int = 20) -> str: ...
        return run

    MCP_TOOLS = (routine_list,)

and the daemon registers them at start-up (:func:`register_tools`); the registry
never imports the packages above it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any


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


def tool(name: str, description: str) -> Callable[[ToolFactory], ToolSpec]:
    """Declare a tool: the decorated factory becomes its :class:`ToolSpec`."""

    def make(factory: ToolFactory) -> ToolSpec:
        return ToolSpec(name, description, factory)

    return make


def register_tools(specs: Iterable[ToolSpec]) -> None:
    """Serve ``specs`` from now on (again the same spec is a no-op; another tool under
    a name already taken is an error)."""
    for spec in specs:
        known = _TOOLS.get(spec.name)
        if known is not None and known.factory is not spec.factory:
            raise ValueError(f"MCP tool {spec.name!r} is already registered")
        _TOOLS[spec.name] = spec


def register_tool(name: str, description: str) -> Callable[[ToolFactory], ToolFactory]:
    """Register a tool factory under ``name`` at once (a decorator)."""

    def add(factory: ToolFactory) -> ToolFactory:
        register_tools([ToolSpec(name, description, factory)])
        return factory

    return add


def added_tools() -> list[ToolSpec]:
    """The tools registered so far, by name."""
    return sorted(_TOOLS.values(), key=lambda spec: spec.name)
