"""What Chorus adds to every body it starts, in each CLI's own terms.

``BodyOptions.system_prompt_append`` (the assembled context) and
``BodyOptions.mcp_servers`` (Chorus's MCP server, and any other) map to:

| CLI | context | MCP servers |
|---|---|---|
| Claude Code | ``--append-system-prompt`` | ``--mcp-config`` (JSON) |
|  | (a client's own: ``--system-prompt``) |  |
| Codex | ``-c developer_instructions=…`` | ``-c mcp_servers.<name>={…}`` |
| Gemini headless | before the first prompt | a system-defaults settings file |
|  |  | (``GEMINI_CLI_SYSTEM_DEFAULTS_PATH``; ``mcpServers`` merge with the user's) |
| ACP agents (Gemini ``--acp`` too) | before the first prompt | ``mcpServers`` on ``session/new`` |
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chorus.bodies._body import BodyOptions, McpServer


def claude_args(options: BodyOptions) -> list[str]:
    args: list[str] = []
    if options.system_prompt:
        args += ["--system-prompt", options.system_prompt]
    if options.system_prompt_append:
        args += ["--append-system-prompt", options.system_prompt_append]
    if options.mcp_servers:
        servers = {name: _stdio(s) for name, s in options.mcp_servers.items()}
        args += ["--mcp-config", json.dumps({"mcpServers": servers})]
    return args


def codex_args(options: BodyOptions) -> list[str]:
    """``-c`` overrides (values in TOML; a JSON string is a valid TOML string)."""
    args: list[str] = []
    if options.system_prompt_append:
        args += ["-c", f"developer_instructions={json.dumps(options.system_prompt_append)}"]
    for name, server in options.mcp_servers.items():
        fields = _stdio(server, with_type=False)  # Codex warns about a "type" key
        if server.required:
            fields["required"] = True
        args += ["-c", f"mcp_servers.{_toml_key(name)}={_toml_inline(fields)}"]
    return args


def acp_servers(options: BodyOptions) -> list[dict[str, Any]]:
    """The servers in ACP's ``session/new`` form (``env`` as name/value pairs)."""
    return [
        {
            "name": name,
            "command": server.command,
            "args": list(server.args),
            "env": [{"name": k, "value": v} for k, v in server.env.items()],
        }
        for name, server in options.mcp_servers.items()
    ]


def gemini_env(options: BodyOptions) -> dict[str, str]:
    """Env pointing Gemini CLI at a settings file holding the MCP servers (system
    defaults: the lowest-precedence scope; ``mcpServers`` are merged by name)."""
    if not options.mcp_servers:
        return {}
    servers = {name: _stdio(s, with_type=False) for name, s in options.mcp_servers.items()}
    text = json.dumps({"mcpServers": servers}, sort_keys=True)
    folder = Path(tempfile.gettempdir()) / f"chorus-gemini-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / f"defaults-{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    return {"GEMINI_CLI_SYSTEM_DEFAULTS_PATH": str(path)}


def _stdio(server: McpServer, *, with_type: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "stdio"} if with_type else {}
    out.update(command=server.command, args=list(server.args), env=dict(server.env))
    return out


def _toml_key(key: str) -> str:
    bare = key.replace("-", "").replace("_", "").isalnum() and key.isascii()
    return key if bare else json.dumps(key)


def _toml_inline(value: Any) -> str:
    if isinstance(value, Mapping):
        return (
            "{" + ", ".join(f"{_toml_key(k)} = {_toml_inline(v)}" for k, v in value.items()) + "}"
        )
    if isinstance(value, list):
        return "[" + ", ".join(_toml_inline(v) for v in value) + "]"
    return json.dumps(value)  # strings, numbers and true/false are the same in TOML
