"""Codex starts its MCP servers in the background and runs a turn without a server
still starting past a short grace: that turn's model has none of its tools, and a
call to one is an ``unsupported call`` (a slow stdio server on a loaded machine).
:class:`McpStartup` follows ``mcpServer/startupStatus/updated`` so that a turn can
wait until no server is starting any more (ready, failed or cancelled alike), as
Codex's own interface holds the first prompt back."""

from __future__ import annotations

import asyncio
import contextlib
import json

from chorus.events import Event, Unknown

#: The notification that reports one MCP server's startup state.
STARTUP_STATUS = "mcpServer/startupStatus/updated"


class McpStartup:
    """Which of the thread's MCP servers are still starting."""

    def __init__(self) -> None:
        self._starting: set[str] = set()
        self._settled = asyncio.Event()
        self._settled.set()

    def observe(self, event: Event) -> None:
        """Note a startup status among the body's events (others are ignored)."""
        if isinstance(event, Unknown) and event.native_type == STARTUP_STATUS:
            self._note(*_status(event.raw))

    def _note(self, name: str | None, status: str | None) -> None:
        if name is None:
            return
        if status == "starting":
            self._starting.add(name)
            self._settled.clear()
            return
        self._starting.discard(name)
        if not self._starting:
            self._settled.set()

    async def settled(self, timeout: float) -> tuple[str, ...]:  # noqa: ASYNC109
        """Wait until no server is starting, up to ``timeout`` seconds; the servers
        still starting then (none when all settled)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._settled.wait(), timeout)
        return tuple(sorted(self._starting))


def _status(raw: str) -> tuple[str | None, str | None]:
    """The server name and status of a startup-status line (None where absent)."""
    try:
        params = json.loads(raw).get("params")
    except (ValueError, AttributeError):
        return None, None
    if not isinstance(params, dict):
        return None, None
    name, status = params.get("name"), params.get("status")
    return (name if isinstance(name, str) else None), (status if isinstance(status, str) else None)
