"""The MCP servers a front's client gave, as each protocol reports them (sans-I/O).

Chorus hands a body the client's stdio servers (``--mcp-config``, ACP ``mcpServers``,
Codex ``config.mcp_servers``); any other kind is not passed, with a warning event.
:class:`McpReport` says so to the client: Claude Code's ``system/init``
``mcp_servers`` and ``mcp_status`` answer, the app-server's ``mcpServerStatus/list``.
A body whose CLI reports its servers (a Claude body's ``mcp_status``) is believed;
for the others a passed server is ``pending`` (its CLI started with it and says no
more), one not passed is ``failed``, with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from chorus.events import JsonDict

NOT_PASSED = "not passed to the body: Chorus gives bodies stdio MCP servers only"
UNREPORTED = "handed to the {body} body, whose CLI reports no status"
#: Claude Code's status -> the app-server's ``McpServerConnectionStatus``.
CODEX_STATUS = {"connected": "connected", "pending": "starting", "failed": "failed"}


def is_stdio(spec: Any) -> bool:
    """A server Chorus passes (``type`` stdio or none, and a command)."""
    if not isinstance(spec, Mapping) or spec.get("type", "stdio") != "stdio":
        return False
    return isinstance(spec.get("command"), str) and bool(spec["command"])


@dataclass
class McpReport:
    """The client's servers and what is known of each."""

    given: Mapping[str, Any] = field(default_factory=dict)
    body: str = "chorus"
    #: The body's own report (``{"mcpServers": [...]}``), when its CLI gives one.
    native: list[JsonDict] | None = None

    def entries(self) -> list[JsonDict]:
        """Claude Code's ``McpServerStatus`` list: the body's report where it has
        one, the client's servers it does not name after it."""
        named = [e for e in self.native or [] if isinstance(e, dict) and "name" in e]
        seen = {e["name"] for e in named}
        mine = [self._entry(n, spec) for n, spec in self.given.items() if n not in seen]
        return [*named, *mine]

    def _entry(self, name: str, spec: Any) -> JsonDict:
        if not is_stdio(spec):
            kind = spec.get("type", "?") if isinstance(spec, Mapping) else "?"
            return {"name": name, "status": "failed", "error": f"{NOT_PASSED} ({kind})"}
        config = {"type": "stdio", "command": spec["command"], "args": spec.get("args") or []}
        note = UNREPORTED.format(body=self.body)
        return {"name": name, "status": "pending", "config": config, "chorus": note}

    def init_entries(self) -> list[JsonDict]:
        """``system/init``'s ``mcp_servers``: name and status."""
        return [{"name": e["name"], "status": e.get("status", "pending")} for e in self.entries()]

    def answer(self) -> JsonDict:
        """The ``mcp_status`` answer."""
        return {"mcpServers": self.entries()}

    def codex_list(self) -> list[JsonDict]:
        """``mcpServerStatus/list``'s ``data``."""
        return [_codex_entry(e) for e in self.entries()]


def _codex_entry(entry: JsonDict) -> JsonDict:
    status = str(entry.get("status", "pending"))
    out: JsonDict = {
        "name": entry["name"],
        "authStatus": "unsupported",
        "runtimeStatus": CODEX_STATUS.get(status, "notStarted"),
        "tools": {},
        "resources": [],
        "resourceTemplates": [],
    }
    if "error" in entry:
        out["toolsError"] = entry["error"]
    return out
