"""What Chorus adds to every body it starts, in each CLI's own terms.

``BodyOptions.system_prompt_append`` (the assembled context) and
``BodyOptions.mcp_servers`` (Chorus's MCP server, and any other) map to:

| CLI | context | MCP servers |
|---|---|---|
| Claude Code | ``--append-system-prompt`` | ``--mcp-config`` (JSON; ``"type": "http"``) |
|  | (a client's own: ``--system-prompt``) | (a live session: Chorus's own is |
|  |  | ``"type": "sdk"``, its messages on the CLI's stdio) |
| Codex | ``-c developer_instructions=…`` | ``-c mcp_servers.<name>={url = …}`` |
| Gemini headless | before the first prompt | a system-defaults settings file |
|  |  | (``GEMINI_CLI_SYSTEM_DEFAULTS_PATH``; ``mcpServers`` merge with the user's; |
|  |  | an HTTP server's ``httpUrl`` is ``$CHORUS_MCP_URL_<n>``, set in its env) |
| ACP agents (Gemini ``--acp`` too) | before the first prompt | ``mcpServers`` on ``session/new`` |
|  |  | (``"type": "http"`` where ``initialize`` says ``mcpCapabilities.http``; |
|  |  | else a stdio relay to the same URL, ``chorus.bodies._relay``) |

Chorus's own server is an HTTP one (its session's channel, ``chorus.bodies._channel``):
no body starts a program for it. A live Claude session has it in-band instead, on
the control protocol it already speaks (``mcp_message``): the CLI reaches its first
model call about 20 ms sooner than with an HTTP server configured.
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
from chorus.bodies._channel import relay_server

#: Gemini reads an HTTP server's URL from this variable (``_<n>``: the server's place).
GEMINI_URL_ENV = "CHORUS_MCP_URL"


def claude_args(options: BodyOptions, *, inband: bool = False) -> list[str]:
    """``inband``: the CLI's MCP messages for servers that answer in-band come over
    its stdio (the control protocol's ``mcp_message``), which the body answers."""
    args: list[str] = []
    if options.system_prompt:
        args += ["--system-prompt", options.system_prompt]
    if options.system_prompt_append:
        args += ["--append-system-prompt", options.system_prompt_append]
    if options.mcp_servers:
        servers = {name: _claude(name, s, inband) for name, s in options.mcp_servers.items()}
        args += ["--mcp-config", json.dumps({"mcpServers": servers})]
    return args


def _claude(name: str, server: McpServer, inband: bool) -> dict[str, Any]:
    if inband and server.inband is not None:
        return {"type": "sdk", "name": name}
    if server.url is None:
        return _stdio(server)
    return {"type": "http", "url": server.url, **_headers(server)}


def codex_args(options: BodyOptions) -> list[str]:
    """``-c`` overrides (values in TOML; a JSON string is a valid TOML string)."""
    args: list[str] = []
    if options.system_prompt_append:
        args += ["-c", f"developer_instructions={json.dumps(options.system_prompt_append)}"]
    for name, server in options.mcp_servers.items():
        fields = _codex(server)
        if server.required:
            fields["required"] = True
        args += ["-c", f"mcp_servers.{_toml_key(name)}={_toml_inline(fields)}"]
    return args


def _codex(server: McpServer) -> dict[str, Any]:
    if server.url is None:
        return _stdio(server, with_type=False)  # Codex warns about a "type" key
    headers = {"http_headers": dict(server.headers)} if server.headers else {}
    return {"url": server.url, **headers}


def acp_servers(options: BodyOptions, *, http: bool = True) -> list[dict[str, Any]]:
    """The servers in ACP's ``session/new`` form (``env`` and ``headers`` as
    name/value pairs). ``http``: the agent takes HTTP servers (its ``initialize``
    said ``mcpCapabilities.http``); else each goes through the stdio relay."""
    out = []
    for name, server in options.mcp_servers.items():
        if server.url is not None and http:
            out.append({"type": "http", "name": name, "url": server.url} | _pairs(server))
        else:
            out.append(_acp_stdio(name, relay_server(server)))
    return out


def _acp_stdio(name: str, server: McpServer) -> dict[str, Any]:
    return {
        "name": name,
        "command": server.command,
        "args": list(server.args),
        "env": [{"name": k, "value": v} for k, v in server.env.items()],
    }


def _pairs(server: McpServer) -> dict[str, Any]:
    return {"headers": [{"name": k, "value": v} for k, v in server.headers.items()]}


def gemini_env(options: BodyOptions) -> dict[str, str]:
    """Env pointing Gemini CLI at a settings file holding the MCP servers (system
    defaults: the lowest-precedence scope; ``mcpServers`` are merged by name). The
    file is shared by every body: an HTTP server's URL (a session's secret) is not
    in it but in the env (``$CHORUS_MCP_URL_<n>``, which Gemini expands)."""
    if not options.mcp_servers:
        return {}
    servers: dict[str, Any] = {}
    env: dict[str, str] = {}
    for index, (name, server) in enumerate(options.mcp_servers.items()):
        servers[name] = _gemini(server, f"{GEMINI_URL_ENV}_{index}", env)
    return {"GEMINI_CLI_SYSTEM_DEFAULTS_PATH": str(_settings_file(servers)), **env}


def _gemini(server: McpServer, var: str, env: dict[str, str]) -> dict[str, Any]:
    if server.url is None:
        return _stdio(server, with_type=False)
    env[var] = server.url
    return {"httpUrl": f"${{{var}}}", **_headers(server)}


def _settings_file(servers: dict[str, Any]) -> Path:
    text = json.dumps({"mcpServers": servers}, sort_keys=True)
    folder = Path(tempfile.gettempdir()) / f"chorus-gemini-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / f"defaults-{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    return path


def _headers(server: McpServer) -> dict[str, Any]:
    return {"headers": dict(server.headers)} if server.headers else {}


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
