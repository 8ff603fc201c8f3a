"""``chorus agents install|list``."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from chorus.agents import AgentInfo, agents_dir, describe_agents, install_agents
from chorus.cli._app import app

agents_app = typer.Typer(help="Install and list the pinned agent CLIs.", no_args_is_help=True)
app.add_typer(agents_app, name="agents")
console = Console()


@agents_app.command("install")
def install(force: bool = typer.Option(False, help="Reinstall even if present.")) -> None:
    """Install the pinned agent CLIs into the project-local folder (idempotent)."""
    results = install_agents(force=force)
    for agent, now in results:
        state = "installed" if now else "already present"
        console.print(f"{agent.name:7} {agent.spec:40} {state}")
    console.print(f"folder: {agents_dir()}")


def agent_json(info: AgentInfo) -> dict[str, object]:
    return {
        "name": info.name,
        "found": info.path is not None,
        "version": info.version,
        "pinned": info.pinned,
        "source": info.source,
        "path": str(info.path) if info.path else None,
    }


@agents_app.command("list")
def list_agents(as_json: bool = typer.Option(False, "--json", help="One JSON array.")) -> None:
    """Show each agent CLI: found or not, version, path."""
    infos = describe_agents()
    if as_json:
        typer.echo(json.dumps([agent_json(info) for info in infos]))
        return
    table = Table("agent", "found", "version", "pinned", "source", "path")
    for info in infos:
        table.add_row(
            info.name,
            "yes" if info.path else "[red]no[/red]",
            info.version or "-",
            info.pinned or "-",
            info.source,
            str(info.path) if info.path else "-",
        )
    console.print(table)
