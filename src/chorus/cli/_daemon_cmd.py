"""Everyday commands on the daemon, as typer commands: start/stop/status, ask, task,
steer, jobs, watch, log, interrupt, doctor (talk: ``_talk_cmd``).

The job commands are implemented in ``_jobs`` (shared with the fast argv path);
the daemon validates their input (an unknown body, a missing CLI, a missing
folder: 400, exit 2, nothing written).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table

from chorus.cli._app import app
from chorus.cli._everyday import register_everyday
from chorus.cli._fast import HELP

if TYPE_CHECKING:
    from chorus.config import ChorusConfig

console = Console()


_JSON = typer.Option(False, "--json", help=HELP["as_json"])

# ask, task, steer, jobs, watch, status, start, log, stop, interrupt: built from the command
# table of ``_fast``.
register_everyday(app)


def _client() -> Any:
    from chorus.client import DaemonClient

    return DaemonClient()


@app.command()
def doctor(as_json: bool = typer.Option(False, "--json", help="One JSON object.")) -> None:
    """Show the agent CLIs found, their versions, auth hints, and config validity."""
    from chorus.agents import describe_agents
    from chorus.bodies import body_catalog
    from chorus.cli._agents_cmd import agent_json, bodies_table
    from chorus.client import load_checked_config

    config = load_checked_config()  # a bad config or policy: ConfigError, exit 2, key named
    rows = [{**agent_json(info), **_auth(info.name, config)} for info in describe_agents()]
    bodies = body_catalog()
    sandbox = _sandbox_line(config.sandbox.mode)
    if as_json:
        payload = {"config": "ok", "agents": rows, "bodies": [b.as_dict() for b in bodies]}
        payload["sandbox"] = sandbox
        typer.echo(json.dumps(payload))
        return
    table = Table("agent", "version", "path", "auth")
    for row in rows:
        auth = str(row["auth"])
        auth = f"[yellow]{auth}[/yellow]" if auth.startswith("needs login") else auth
        table.add_row(
            str(row["name"]),
            str(row["version"] or "[red]missing[/red]"),
            str(row["path"] or "-"),
            auth,
        )
    console.print(table)
    console.print(bodies_table(bodies))
    console.print(f"sandbox: {sandbox}")
    console.print("config: ok")


def _sandbox_line(mode: str) -> str:
    """Whether bodies run in bubblewrap or sandbox-exec (the CLIs' own sandbox notes
    are not shown)."""
    from chorus.sandbox import tool_path

    found = tool_path()
    if mode == "off":
        return 'off ([sandbox] mode = "off")'
    if found is None:
        refuse = "bodies are refused" if mode == "enforce" else "bodies run unsandboxed"
        return f"no sandbox tool: {refuse} ({_SANDBOX_HINT.get(sys.platform, _NO_SANDBOX)})"
    name = "bubblewrap" if Path(found).name == "bwrap" else "sandbox-exec"
    return f"{name} {found} (mode {mode})"


_SANDBOX_HINT = {"linux": "install the bubblewrap package", "darwin": "sandbox-exec is missing"}
_NO_SANDBOX = "only Linux and macOS have one"


def _auth(name: str, config: ChorusConfig) -> dict[str, Any]:
    """The login the agent would run with (``[agents.*.env]`` included), never a secret."""
    from chorus.agents import find_login

    agent = config.agents.get(name)
    login = find_login(name, agent.env if agent else {})
    return {"auth": login.describe(), "login": login.as_dict()}
